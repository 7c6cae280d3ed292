"""Kernels cached on disk under a source fingerprint: a second process loads instead of compiling,
and any change to the source reached by a kernel compiles afresh."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from fresh_interpreter import run_script
from numba import njit

from warpsci.kernel_cache import describe_signature, source_fingerprint

RUN_TWICE_SCRIPT = textwrap.dedent(
    """
    import json

    import torch

    import warpsci
    from warpsci.backends.cpu import _compile
    from warpsci.envs.cartpole import CARTPOLE

    env = warpsci.make("CartPole-v1", num_envs=8, seed=1)
    env.reset()
    for _ in range(5):
        env.step(torch.ones(8, dtype=torch.int64))
    stats = env.random_rollout(50)
    env.random_rollout(3)
    hits = misses = 0
    # One agent; Cartpole allocates nothing: no reference counting.
    for kernel in _compile(CARTPOLE, True, False):
        hits += sum(kernel.stats.cache_hits.values())
        misses += sum(kernel.stats.cache_misses.values())
    print(json.dumps({"hits": hits, "misses": misses, "obs": env.buffers.obs.flatten().tolist(),
                      "episodes": int(stats.episodes.sum())}))
    """
)


def _run(cache_dir: Path, **extra_env: str) -> dict:
    # WARPSCI_CACHE_DIR, where set, takes precedence over NUMBA_CACHE_DIR: both point at the folder.
    folder = str(cache_dir)
    result = run_script(
        RUN_TWICE_SCRIPT, timeout=300, NUMBA_CACHE_DIR=folder, WARPSCI_CACHE_DIR=folder, **extra_env
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_second_process_loads_kernels_from_disk(tmp_path):
    first = _run(tmp_path)
    second = _run(tmp_path)
    assert (first["hits"], first["misses"]) == (0, 3)  # reset, step and random-steps kernels
    # One load per kernel: a loaded kernel must serve every later call from memory.
    assert (second["hits"], second["misses"]) == (3, 0)
    assert second["obs"] == first["obs"] and second["episodes"] == first["episodes"]
    assert any(tmp_path.rglob("*.nbi")), "the cache index was not written where NUMBA_CACHE_DIR says"


def test_cache_can_be_switched_off(tmp_path):
    _run(tmp_path)
    again = _run(tmp_path, WARPSCI_KERNEL_CACHE="0")
    assert again["hits"] == 0


def test_fingerprint_follows_the_source(tmp_path):
    module = tmp_path / "user_env_module.py"
    module.write_text("def step(x):\n    return x + 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import user_env_module

        def kernel(x):
            return user_env_module_step(x)

        user_env_module_step = njit(user_env_module.step)
        before = source_fingerprint(kernel)
        assert before is not None and before == source_fingerprint(kernel)

        module.write_text("def step(x):\n    return x + 2\n")
        assert source_fingerprint(kernel) != before  # the reached file changed
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("user_env_module", None)


def test_fingerprint_tells_closures_apart_and_refuses_unknown_cells():
    def make(scale):
        def scaled(x):
            return scale * x

        return scaled

    assert source_fingerprint(make(2)) != source_fingerprint(make(3))
    assert source_fingerprint(make(object())) is None  # not a plain constant: never cached


def test_every_registered_environment_can_be_cached():
    """Every function a registered environment's kernels call has a fingerprint: none holds a
    closure cell the cache cannot read (a local array's dtype, say), which would make every process
    compile it again."""

    from warpsci.registry import get_definition, registered_ids

    for env_id in registered_ids():
        definition = get_definition(env_id)
        functions = [definition.reset_environment, definition.reset_agent, definition.observe_agent]
        functions += [definition.is_terminal, definition.is_agent_done]
        functions += [stage.function for stage in definition.step_stages]
        for function in functions:
            if function is not None:
                assert source_fingerprint(function) is not None, (env_id, function)


def test_signature_description_names_named_tuple_fields():
    import numpy as np
    from numba import typeof

    import warpsci

    env = warpsci.make("CartPole-v1", num_envs=2)
    state = env._state_view
    described = describe_signature((typeof(state), typeof(np.int64(3))))
    assert "x: array(float32, 2d, C)" in described and "theta_dot" in described
    assert described.endswith("int64)")


def test_functions_of_an_unnamed_module_are_not_cached(tmp_path):
    """A module executed from a path without an entry in sys.modules cannot be found again by a
    process that loads the cache, so kernels reaching it compile in memory instead."""
    import importlib.util

    from warpsci.kernel_cache import source_fingerprint

    source = tmp_path / "unnamed_env.py"
    source.write_text("def step(x):\n    return x + 1\n")
    spec = importlib.util.spec_from_file_location("unnamed_env", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert source_fingerprint(module.step) is None
    import sys

    sys.modules["unnamed_env"] = module
    try:
        assert source_fingerprint(module.step) is not None
    finally:
        del sys.modules["unnamed_env"]


TRAIN_SCRIPT = textwrap.dedent(
    """
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig
    from warpsci.kernel_cache import cache_counts

    config = TrainConfig(num_envs=4, num_steps=8, total_timesteps=64, checkpoint_every=0)
    make_trainer(config).train(progress_bar=True)
    print(cache_counts())
    """
)


def test_a_cold_first_run_says_what_it_compiles_and_a_warm_one_says_nothing(tmp_path):
    folder = str(tmp_path)
    cold = run_script(TRAIN_SCRIPT, timeout=300, NUMBA_CACHE_DIR=folder, WARPSCI_CACHE_DIR=folder)
    assert cold.returncode == 0, cold.stderr
    for kernel in (
        "CartPole-v1 reset",
        "CartPole-v1 step",
        "trainer's sample_discrete",
        "trainer's record_step",
        "trainer's shuffled_row",
    ):
        assert f"compiling {kernel} (CPU)" in cold.stderr
    assert f"6 kernels compiled and cached in {folder}" in cold.stderr
    assert "{'loaded': 0, 'compiled': 6}" in cold.stdout
    warm = run_script(TRAIN_SCRIPT, timeout=300, NUMBA_CACHE_DIR=folder, WARPSCI_CACHE_DIR=folder)
    assert warm.returncode == 0, warm.stderr
    assert "compiling" not in warm.stderr and "compiled and cached" not in warm.stderr
    assert "{'loaded': 6, 'compiled': 0}" in warm.stdout
