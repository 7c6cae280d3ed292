"""The examples run and the user-written environment learns."""

import importlib.util
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_custom_environment_example_learns_to_walk_to_the_goal():
    spec = importlib.util.spec_from_file_location("custom_environment", EXAMPLES / "custom_environment.py")
    module = importlib.util.module_from_spec(spec)
    # Importable by name, as a user's own module is: Numba's disk cache of the environment's
    # functions refers to their module by name, and a module missing from sys.modules cannot be
    # found again when a later run loads that cache.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    mean_return = module.main("cpu", total_timesteps=40_000)
    # Optimal return from a uniform start in a 10-cell corridor is about 0.96; a random walk is negative.
    assert mean_return > 0.85
