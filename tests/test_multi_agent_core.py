"""The multi-agent core: environments wider than a block equal one block, array params per instance,
per-group tensors of the multi-agent vector environment, and where compiled kernels are kept."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from fresh_interpreter import run_script
from multi_group_toy import TOY_GROUPS

import warpsci
from warpsci.kernel_cache import kernel_cache_dir
from warpsci.multi_agent_env import MultiAgentVectorEnv

TESTS = Path(__file__).resolve().parent


def test_several_blocks_per_environment_equal_one_block_under_the_simulator():
    """Five agents on one block, on two blocks of three threads and on three of two: the CUDA kernels
    (simulated) equal the CPU kernels exactly after every step, autoresets and agents leaving included;
    Tag gridworld with full and partial observations."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from multi_group_toy import TOY_GROUPS
        from warpsci.testing import check_parity
        for threads in (None, 3, 2):
            report = check_parity(TOY_GROUPS, num_envs=3, steps=20, threads_per_block=threads, atol=0.0)
            print("toy", threads, report.ok, report.episodes_ended)
            # Partial observations: the runner's nearest tagger is an atomic min over the taggers.
            full = threads == 3
            tag = {{"num_taggers": 4, "grid_length": 3, "episode_length": 6, "use_full_observation": full}}
            report = check_parity("TagGridworld-v0", num_envs=3, steps=20, threads_per_block=threads,
                                  atol=0.0, params=tag)
            print("tag", threads, report.ok, report.episodes_ended)
        """
    )
    completed = run_script(script, simulator=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = [line.split() for line in completed.stdout.splitlines() if line.startswith(("toy", "tag"))]
    assert len(lines) == 6
    for name, threads, ok, episodes in lines:
        assert ok == "True", (name, threads)
        assert int(episodes) >= 3, (name, threads, episodes)


def test_array_params_are_per_instance():
    """Two instances with different arrays run side by side on one compiled kernel."""
    default = warpsci.vector_env.dataclass_replace(TOY_GROUPS.default_params())
    heavy = warpsci.vector_env.dataclass_replace(default, weights=(5.0, 5.0, 5.0, 5.0, 5.0))
    first = MultiAgentVectorEnv(TOY_GROUPS, num_envs=2, params=default)
    second = MultiAgentVectorEnv(TOY_GROUPS, num_envs=2, params=heavy)
    assert not torch.equal(first.param_tensors["weights"], second.param_tensors["weights"])
    assert first._kernels._step_all is second._kernels._step_all
    actions = {"even": np.ones((2, 3), np.int64), "odd": np.ones((2, 2), np.int64)}
    first.reset(seed=1)
    second.reset(seed=1)
    obs_first = first.step(actions)[0]
    obs_second = second.step(actions)[0]
    # The odd agents observe weight x counter: equal counters, different weights.
    assert torch.allclose(
        obs_second["odd"][..., 1], torch.tensor([5.0 / 1.5, 5.0 / 2.5]) * obs_first["odd"][..., 1]
    )


def test_multi_agent_vector_env_tensors_per_group():
    env = warpsci.make("TagGridworld-v0", num_envs=3, params={"num_taggers": 3, "grid_length": 4})
    assert isinstance(env, MultiAgentVectorEnv)
    obs, info = env.reset(seed=0)
    assert obs["tagger"].shape == (3, 3, 17) and obs["runner"].shape == (3, 1, 17)
    assert info["active"]["tagger"].all()
    actions = {"tagger": torch.zeros(3, 3, dtype=torch.int64), "runner": torch.zeros(3, 1, dtype=torch.int64)}
    obs, rewards, terminated, truncated, info = env.step(actions)
    assert rewards["tagger"].shape == (3, 3) and rewards["runner"].shape == (3, 1)
    assert torch.allclose(rewards["runner"], torch.full((3, 1), 0.01))
    with pytest.raises(ValueError, match="missing"):
        env.step({"tagger": actions["tagger"]})
    with pytest.raises(ValueError, match="outside"):
        env.step({"tagger": actions["tagger"] + 7, "runner": actions["runner"]})


def test_kernel_cache_is_outside_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPSCI_CACHE_DIR", str(tmp_path))
    assert kernel_cache_dir() == tmp_path
    monkeypatch.delenv("WARPSCI_CACHE_DIR")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache_dir() == tmp_path / "xdg" / "warpsci" / "kernels"
    assert Path(warpsci.__file__).parent not in kernel_cache_dir().parents


def test_state_fields_lay_out_agents_first_or_last():
    """A per-agent field is ``(envs, agents, *shape)``, or with ``agents_last`` ``(envs, *shape,
    agents)``; a per-environment field ``(envs, *shape)``. ``agents_last`` asks for a per-agent
    field with entries."""
    assert warpsci.StateField("a", np.int32, shape=(4,)).full_shape(2, 3) == (2, 3, 4)
    assert warpsci.StateField("a", np.int32, shape=(4,), agents_last=True).full_shape(2, 3) == (2, 4, 3)
    assert warpsci.StateField("a", np.int32, shape=(4,), per_agent=False).full_shape(2, 3) == (2, 4)
    for settings in ({"shape": (4,), "per_agent": False}, {"shape": ()}):
        with pytest.raises(ValueError, match="'a': agents_last needs a per-agent field with a shape"):
            warpsci.StateField("a", np.int32, agents_last=True, **settings)


def test_an_environment_may_set_the_register_cap_of_its_wide_kernels():
    """``wide_max_registers``: None (the backend's cap) or registers per thread in [16, 255];
    Tag continuous asks for 96."""
    import dataclasses

    definition = warpsci.registry.get_definition("TagContinuous-v0")
    assert definition.wide_max_registers == 96
    assert warpsci.registry.get_definition("TagGridworld-v0").wide_max_registers is None
    for wrong in (0, 8, 300, 96.0, True):
        with pytest.raises(ValueError, match=r"wide_max_registers must be None .* or an int in \[16, 255\]"):
            dataclasses.replace(definition, wide_max_registers=wrong)


def test_a_block_observation_takes_whole_warps():
    """``block_observation``: a :class:`warpsci.BlockObservation` of 32 to 1,024 threads, whole
    warps, a register cap of None or 16 to 255, at most 4,096 agents and no fewer than its threads,
    or a tuple of them, of which an environment takes the first it fits. Tag continuous gives one of
    128 threads (a thread or a warp per observer) capped at 64 for up to 128 agents, and one for grid
    games of up to 2,048 agents, with dynamic shared memory and a cap chosen by the params."""
    import dataclasses

    definition = warpsci.registry.get_definition("TagContinuous-v0")
    narrow, wide = definition.block_observation
    assert narrow.threads == 128 and narrow.agent_limit == 128 and narrow.shared_bytes(128) == 0
    assert wide.threads == 128 and wide.agent_limit == 2048
    assert 0 < wide.shared_bytes(2048) <= 48 * 1024
    assert [definition.block_observation_for(n) for n in (1, 128, 129, 2048, 2049)] == [
        narrow, narrow, wide, wide, None
    ]  # fmt: skip
    function = narrow.function
    for wrong in (0, 16, 100, 2048, 64.0, True):
        with pytest.raises(ValueError, match=r"threads must be a multiple of 32 in \[32, 1024\]"):
            warpsci.BlockObservation(function, threads=wrong)
    for wrong in (64, 5000, 300.0, True):
        with pytest.raises(
            ValueError, match=r"max_agents must be None \(threads\) or an int in \[threads, 4096\]"
        ):
            warpsci.BlockObservation(function, max_agents=wrong)
    with pytest.raises(ValueError, match="shared_bytes must be a function of the agent count"):
        warpsci.BlockObservation(function, shared_bytes=1024)
    message = "block_observation must be a BlockObservation, a tuple of them or None"
    for wrong in (function, (narrow, function)):
        with pytest.raises(TypeError, match=message):
            dataclasses.replace(definition, block_observation=wrong)
    with pytest.raises(
        TypeError, match=r"block_observation must be a non-empty tuple \(or one, or None\), got \(\)"
    ):
        dataclasses.replace(definition, block_observation=())
    for wrong in ((wide, narrow), (narrow, narrow)):
        with pytest.raises(
            ValueError, match=r"must go from narrow to wide .* got agent limits \[(2048, 128|128, 128)\]"
        ):
            dataclasses.replace(definition, block_observation=wrong)
    assert narrow.max_registers == 64
    with pytest.raises(ValueError, match="block_observation must be True or False, got 'no'"):
        warpsci.make("TagContinuous-v0", num_envs=1, block_observation="no")
    for wrong in (8, 300, 56.0, True):
        with pytest.raises(ValueError, match=r"max_registers must be None .* or an int in \[16, 255\]"):
            warpsci.BlockObservation(function, max_registers=wrong)
    # A cap chosen by the params: the grid's thread per observer (up to 10 others) at 96, its warps
    # at 64; an observation without registers_for keeps max_registers.
    grid = {"use_full_observation": False, "num_runners": 990, "neighbour_search": "grid"}
    params = warpsci.envs.tag_continuous.TagContinuousParams
    assert wide.registers(params(**grid, num_other_agents_observed=10)) == 96
    assert wide.registers(params(**grid, num_other_agents_observed=11)) == 64
    assert narrow.registers(params(**grid)) == narrow.max_registers == 64
    with pytest.raises(ValueError, match="registers_for must be None or a function of the params"):
        warpsci.BlockObservation(function, registers_for=80)
    for wrong in (8, 300, 80.0):
        observation = warpsci.BlockObservation(function, registers_for=lambda _, wrong=wrong: wrong)
        with pytest.raises(
            ValueError, match=r"registers_for\(params\) must be None .* an int in \[16, 255\]"
        ):
            observation.registers(params())
