"""Sub-batches: the CUDA backend's split of a step observed apart (``SUB_BATCHES_APART``), and the
chains of ``WarpVectorEnv.pipeline`` (:mod:`warpsci.pipelines`), whose environments step apart
(``envs=``) and must end exactly where whole-batch steps end.

The backend's sub-batch launches run under Numba's CUDA simulator in
``tests/test_tag_continuous_simulator.py`` and on a GPU in ``tests/test_tag_continuous_gpu.py``
(graph-replayed steps on two streams equal to launched ones, bit for bit); a pipeline's chains on
streams of their own, captured in a graph, in the GPU test there too.
"""

from __future__ import annotations

import re
import textwrap

import pytest
import torch
from fresh_interpreter import run_script

import warpsci
from warpsci.pipelines import sub_batches

ENV_IDS = warpsci.registered_ids()


@pytest.mark.parametrize("num_envs", [1, 2, 3, 7, 64, 2000, 2001])
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_sub_batches_cover_every_environment_once_in_order_and_differ_by_at_most_one(num_envs, parts):
    batches = sub_batches(num_envs, parts)
    assert len(batches) == min(parts, num_envs)
    covered = [env for first, count in batches for env in range(first, first + count)]
    assert covered == list(range(num_envs))
    counts = [count for _, count in batches]
    assert min(counts) >= 1 and max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)  # the larger ones first


def test_no_more_sub_batches_than_environments_and_at_least_one():
    assert sub_batches(3, 8) == [(0, 1), (1, 1), (2, 1)]
    assert sub_batches(5, 0) == [(0, 5)]


@pytest.mark.parametrize("num_envs", [1, 5, 8, 9, 31, 2000])
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
@pytest.mark.parametrize("alignment", [1, 2, 4])
def test_aligned_sub_batches_start_at_whole_blocks_and_cover_every_environment(num_envs, parts, alignment):
    batches = sub_batches(num_envs, parts, alignment)
    blocks = -(-num_envs // alignment)
    assert len(batches) == min(parts, blocks)
    assert [env for first, count in batches for env in range(first, first + count)] == list(range(num_envs))
    assert all(first % alignment == 0 for first, _ in batches)
    block_counts = [-(-count // alignment) for _, count in batches]
    assert max(block_counts) - min(block_counts) <= 1


def make_env(env_id: str, num_envs: int) -> warpsci.WarpVectorEnv:
    """Short episodes (autoresets within the test) and a fixed set-up seed where there is one."""
    params = warpsci.get_definition(env_id).default_params()
    changes = {name: 9 for name in ("max_episode_steps", "episode_length") if hasattr(params, name)}
    if hasattr(params, "seed"):
        changes["seed"] = 5
    return warpsci.make(env_id, num_envs=num_envs, seed=3, params=changes, copy=False, check_actions=False)


def assert_same_arrays(env: warpsci.WarpVectorEnv, reference: warpsci.WarpVectorEnv) -> None:
    for name in reference.buffers._fields:
        assert torch.equal(getattr(env.buffers, name), getattr(reference.buffers, name)), name
    for name, tensor in reference.state_tensors.items():
        assert torch.equal(env.state_tensors[name], tensor), name


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_random_rollouts_in_chains_end_where_whole_batch_rollouts_end(env_id):
    num_envs, num_steps = 7, 25
    whole, chained = make_env(env_id, num_envs), make_env(env_id, num_envs)
    whole.reset()
    chained.reset()
    episodes = 0
    for _ in range(num_steps):
        stats = whole.random_rollout(1)
        with chained.pipeline(parts=3) as chains:
            assert [chain.envs for chain in chains] == [slice(0, 3), slice(3, 5), slice(5, 7)]
            parts = []
            for chain in chains:
                with torch.cuda.stream(chain.stream):
                    part = chained.random_rollout(1, envs=chain.envs)
                    parts.append((part.episodes.clone(), part.return_sum.clone()))
        assert torch.equal(torch.cat([episodes for episodes, _ in parts]), stats.episodes)
        assert torch.equal(torch.cat([returns for _, returns in parts]), stats.return_sum)
        episodes += int(stats.episodes.sum())
    assert_same_arrays(chained, whole)
    assert episodes >= num_envs  # every environment's episodes end within the steps: autoresets compared


@pytest.mark.parametrize("env_id", ["CartPole-v1", "TagGridworld-v0", "TagContinuous-v0"])
def test_steps_in_place_of_ranges_equal_a_step_of_every_environment(env_id):
    num_envs = 6
    whole, ranged = make_env(env_id, num_envs), make_env(env_id, num_envs)
    whole.reset()
    ranged.reset()
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        whole.random_rollout(1)  # draws this step's actions into actions_buffer
        actions = whole.actions_buffer.clone()
        ranged.actions_buffer.copy_(actions)
        cut = int(torch.randint(1, num_envs, (), generator=generator))
        ranged.step_in_place(envs=slice(cut, None))
        ranged.step_in_place(envs=slice(0, cut))
        assert_same_arrays(ranged, whole)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "TagContinuous-v0"])
def test_a_range_leaves_the_other_environments_as_they_were(env_id):
    env = make_env(env_id, 5)
    env.reset()
    env.random_rollout(2)  # rewards, actions and flags of every environment set
    arrays = {
        **env.state_tensors,
        **{f"buffers.{name}": getattr(env.buffers, name) for name in env.buffers._fields},
    }
    before = {name: tensor.clone() for name, tensor in arrays.items()}
    env.random_rollout(3, envs=slice(1, 3))
    for name, tensor in arrays.items():
        if tensor.shape[:1] == (5,):
            assert torch.equal(tensor[[0, 3, 4]], before[name][[0, 3, 4]]), name
    assert not torch.equal(env.buffers.obs[1:3], before["buffers.obs"][1:3])


@pytest.mark.parametrize(
    ("envs", "message"),
    [
        (slice(0, 4, 2), "envs must be a slice of consecutive environments"),
        ([0, 1], "envs must be a slice of consecutive environments"),
        (slice(3, 3), "names no environment of 5"),
        (slice(7, 9), "names no environment of 5"),
        (slice(0, 2.5), "with integer bounds"),
        (slice(True, 3), "with integer bounds"),
    ],
)
def test_a_bad_range_is_refused_in_one_line(envs, message):
    env = make_env("CartPole-v1", 5)
    env.reset()
    with pytest.raises(ValueError, match=message):
        env.step_in_place(envs=envs)
    with pytest.raises(ValueError, match=message):
        env.random_rollout(1, envs=envs)


@pytest.mark.parametrize("parts", [0, -1, True, 1.5, "2"])
def test_pipeline_refuses_parts_that_are_not_a_positive_integer(parts):
    env = make_env("CartPole-v1", 5)
    with pytest.raises(ValueError, match="parts must be a positive integer"):
        env.pipeline(parts)


SIMULATOR_SCRIPT = textwrap.dedent(
    """
    import dataclasses
    import sys

    import numpy as np
    from numba import config

    if not config.ENABLE_CUDASIM:
        sys.exit("the CUDA simulator is not enabled")

    sys.path.insert(0, "tests")
    import multi_agent_toy

    from warpsci.envs.cartpole import CARTPOLE
    from warpsci.pipelines import sub_batches
    from warpsci.testing.kernel_runner import HostKernelRunner

    cases = [
        (CARTPOLE, 9, 4, 4),  # four environments a block: ranges of 4, 4 and 1
        (multi_agent_toy.TOY, 5, 8, 2),  # three agents, two environments a block: 2, 2 and 1
    ]
    for definition, num_envs, threads, alignment in cases:
        params = dataclasses.replace(definition.default_params(), max_episode_steps=6)
        cpu = HostKernelRunner(definition, num_envs, "cpu", params=params)
        cuda = HostKernelRunner(definition, num_envs, "cuda", params=params, threads_per_block=threads)
        assert cuda._kernels.range_alignment == alignment, cuda._kernels.range_alignment
        ranges = sub_batches(num_envs, 3, alignment)
        cpu.reset(7)
        cuda.reset(7)
        whole = cpu.random_steps(15, 7)
        parts = [cuda.random_steps(15, 7, envs=envs) for envs in ranges]
        tallies = [np.concatenate([part[i][f:f + n] for part, (f, n) in zip(parts, ranges)]) for i in (0, 1)]
        rng = np.random.default_rng(0)
        for step in range(12):
            actions = rng.integers(0, 2, cpu.buffers.actions.shape).astype(cpu.buffers.actions.dtype)
            cpu.step(actions, 7)
            for envs in reversed(ranges):
                cuda.step(actions, 7, envs=envs)
        pairs = [
            *zip(cpu.buffers._fields, cpu.buffers, cuda.buffers),
            *zip(cpu.state._fields, cpu.state, cuda.state),
            *zip(["episodes", "return_sum"], whole, tallies),
        ]
        for name, host, simulated in pairs:
            if not np.array_equal(host, simulated):
                sys.exit(f"{definition.name}: {name}\\ncpu: {host.tolist()}\\nsim: {simulated.tolist()}")
        if np.any(whole[0] == 0):
            sys.exit(f"{definition.name}: an environment ended no episode, the comparison proves little")
        print(definition.name, ranges, "episodes", whole[0].tolist())

    wide = HostKernelRunner(multi_agent_toy.TOY, 3, "cuda", threads_per_block=2)
    assert wide._kernels.range_alignment is None
    try:
        wide.random_steps(1, 7, envs=(0, 1))
    except ValueError as error:
        print("several blocks:", error)
    else:
        sys.exit("a range of environments that span several blocks was stepped")
    print("ranges agree")
    """
)


def test_ranges_of_blocks_under_the_simulator_equal_whole_batch_steps_on_the_cpu():
    result = run_script(SIMULATOR_SCRIPT, simulator=True)
    assert result.returncode == 0, f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert "ranges agree" in result.stdout
    assert "step them without envs=" in result.stdout


def test_ranges_must_follow_the_kernels_blocks():
    """On CUDA a block steps several environments of one agent (``range_alignment``); a range that
    would cut a block is refused, and the pipeline's chains follow the blocks."""
    env = make_env("CartPole-v1", 10)
    env.reset()
    env._kernels.range_alignment = 4  # as a CUDA backend with four environments a block
    for envs in (slice(1, 4), slice(0, 5), slice(4, 9)):
        with pytest.raises(ValueError, match="must start at a multiple of 4 and stop at one or at 10"):
            env.step_in_place(envs=envs)
    env.step_in_place(envs=slice(8, 10))  # stops at the last environment
    env.step_in_place(envs=slice(4, 8))
    with env.pipeline(parts=3) as chains:
        assert [chain.envs for chain in chains] == [slice(0, 4), slice(4, 8), slice(8, 10)]


def test_environments_that_span_several_blocks_step_whole():
    env = make_env("CartPole-v1", 4)
    env.reset()
    env._kernels.range_alignment = None  # as a CUDA backend whose environments span several blocks
    with pytest.raises(ValueError, match="span several CUDA blocks and step all at once"):
        env.step_in_place(envs=slice(0, 2))
    with pytest.raises(ValueError, match="span several CUDA blocks and step all at once"):
        env.pipeline(2)
    env.step_in_place(envs=slice(0, 4))  # every environment: allowed


def test_inside_a_pipeline_only_a_chains_own_environments_step():
    env = make_env("TagGridworld-v0", 6)
    env.reset()
    actions = {group.name: torch.zeros(6, group.size, dtype=torch.int64) for group in env.groups}
    whole_calls = [
        (lambda: env.reset(), "reset()"),
        (lambda: env.step_in_place(), "a call without envs="),
        (lambda: env.random_rollout(1), "a call without envs="),
        (lambda: env.step(actions), "a call without envs="),
        (lambda: env.pipeline(2), "pipeline()"),
    ]
    with env.pipeline(parts=2) as chains:
        for call, refused in whole_calls:
            with pytest.raises(RuntimeError, match=re.escape(refused) + " takes every environment"):
                call()
        with pytest.raises(
            ValueError, match=r"envs 2:4 lie in no one chain of the open pipeline \(0:3, 3:6\)"
        ):
            env.step_in_place(envs=slice(2, 4))
        env.random_rollout(1, envs=slice(1, 3))  # within the first chain
        env.random_rollout(1, envs=chains[1].envs)
    env.random_rollout(1)  # after the with: every environment again
    with pytest.raises(KeyError), env.pipeline(2):
        raise KeyError("an error inside the with")
    env.step_in_place()  # the pipeline closed on the error too


TAG_APART_SCRIPT = textwrap.dedent(
    """
    import sys

    import numpy as np
    from numba import config

    if not config.ENABLE_CUDASIM:
        sys.exit("the CUDA simulator is not enabled")

    sys.path.insert(0, "tests")
    from test_tag_continuous import TEST5

    import warpsci.backends.cuda as backend
    from warpsci import simulated_warps
    from warpsci.envs.tag_continuous import TAG_CONTINUOUS, TagContinuousParams
    from warpsci.testing.kernel_runner import HostKernelRunner

    simulated_warps.enable()
    backend._capturing = lambda: True  # as in a CUDA graph: the stages and the observation apart
    crowded = {"num_taggers": 3, "num_runners": 9, "grid_length": 1.0, "num_other_agents_observed": 4,
               "tagging_distance": 0.1, "episode_length": 3}
    params = TagContinuousParams(**{**TEST5, **crowded})
    cpu = HostKernelRunner(TAG_CONTINUOUS, 3, "cpu", params=params)
    cuda = HostKernelRunner(TAG_CONTINUOUS, 3, "cuda", params=params, threads_per_block=128)
    assert cuda._kernels.observes_apart() and cuda._kernels.range_alignment == 1
    cpu.reset(7)
    cuda.reset(7)
    def arrays(runner):
        return [*zip(runner.buffers._fields, runner.buffers), *zip(runner.state._fields, runner.state)]

    before = {name: array.copy() for name, array in arrays(cuda)}
    cuda.random_steps(4, 7, envs=(1, 2))
    for name, array in arrays(cuda):
        if array.shape[:1] == (3,) and not np.array_equal(array[0], before[name][0]):
            sys.exit(f"environment 0 changed by a range of 1 and 2: {name}")
    if np.array_equal(cuda.buffers.obs[1:], before["obs"][1:]):
        sys.exit("the range's observations did not change")
    cuda.random_steps(4, 7, envs=(0, 1))
    cpu.random_steps(4, 7)
    for (name, host), (_, simulated) in zip(arrays(cpu), arrays(cuda)):
        if not np.allclose(host, simulated, atol=1e-5, equal_nan=True):
            sys.exit(f"{name} differs\\ncpu: {host.tolist()}\\nsim: {simulated.tolist()}")
    if cpu.buffers.tick.max() >= 8:
        sys.exit("no episode ended in 8 steps: resets were not compared")
    print("apart ranges agree")
    """
)


def test_ranges_observed_apart_under_the_simulator_leave_the_rest_and_equal_the_cpu():
    """The captured path of a chain's step (a range's stages and block observation as launches of
    their own, forced here): it leaves the environments outside the range as they were, and the
    ranges together end where the CPU's whole-batch steps end (crowded: tags, and resets after 3)."""
    result = run_script(TAG_APART_SCRIPT, simulator=True)
    assert result.returncode == 0, f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert "apart ranges agree" in result.stdout
