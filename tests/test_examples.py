"""The examples run and the user-written environment learns."""

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_custom_environment_example_learns_to_walk_to_the_goal():
    spec = importlib.util.spec_from_file_location("custom_environment", EXAMPLES / "custom_environment.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mean_return = module.main("cpu", total_timesteps=40_000)
    # Optimal return from a uniform start in a 10-cell corridor is about 0.96; a random walk is negative.
    assert mean_return > 0.85
