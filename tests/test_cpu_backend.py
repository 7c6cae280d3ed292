"""The CPU backend's two orders of work give the same trajectories, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import warpsci
from warpsci.backends.cpu import CHUNK_SIZE, CpuKernels


def _arrays(env) -> dict[str, np.ndarray]:
    arrays = {f"state.{name}": tensor.numpy().copy() for name, tensor in env.state_tensors.items()}
    buffers = env.buffers._asdict().items()
    arrays.update({f"buffers.{name}": tensor.numpy().copy() for name, tensor in buffers})
    return arrays


def _assert_same(staged, walked, where: str) -> None:
    left, right = _arrays(staged), _arrays(walked)
    for name in left:
        np.testing.assert_array_equal(left[name], right[name], err_msg=f"{name} {where}")


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0", "Acrobot-v1"])
def test_stage_by_stage_equals_environment_by_environment(env_id):
    """One-agent environments run stage by stage over a chunk (vectorised stages), environments of
    several agents environment by environment; a one-agent environment forced into the second
    order must step exactly as in the first, resets and episode ends included."""
    num_envs = CHUNK_SIZE + 477  # two chunks, neither a multiple of the vector width
    short = {"max_episode_steps": 40}  # time limits within the 60 steps, whatever the dynamics
    staged = warpsci.make(env_id, num_envs=num_envs, seed=4, params=short)
    walked = warpsci.make(env_id, num_envs=num_envs, seed=4, params=short)
    walked._kernels = CpuKernels(walked.definition, num_agents=2)  # the order of several agents
    staged.reset()
    walked.reset()
    _assert_same(staged, walked, "after reset")
    staged.action_space.seed(0)
    ended = 0
    for step in range(60):
        actions = torch.as_tensor(np.asarray(staged.action_space.sample()))
        staged.step(actions)
        walked.step(actions)
        _assert_same(staged, walked, f"after step {step}")
        ended += int((staged.buffers.terminated | staged.buffers.truncated).sum())
    staged_stats = staged.random_rollout(300)
    walked_stats = walked.random_rollout(300)
    _assert_same(staged, walked, "after random_rollout")
    assert torch.equal(staged_stats.episodes, walked_stats.episodes)
    assert torch.equal(staged_stats.return_sum, walked_stats.return_sum)
    # The comparison covers the bookkeeping of episode ends only if episodes ended.
    assert ended + int(staged_stats.episodes.sum()) > 0
