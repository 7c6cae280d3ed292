"""MountainCar-v0 in warpsci against Gymnasium's reference implementation."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from classic_reference import (
    assert_roughly_uniform,
    assert_same_distribution,
    compare_with_reference,
    reference_initial_states,
    state_matrix,
    write_state,
)
from gymnasium.envs.classic_control import MountainCarEnv

import warpsci
from warpsci.envs.mountain_car import MountainCarParams

ENV_ID = "MountainCar-v0"
NAMES = ("position", "velocity")


def _pump(state: np.ndarray) -> np.ndarray:
    """Push in the direction of motion: reaches the goal from the valley in about 100-150 steps."""
    return np.where(state[:, 1] >= 0.0, 2, 0).astype(np.int64)


def _edit_near_goal_and_wall(rng: np.random.Generator, goal: float = 0.5):
    """Every step, move a few environments next to the goal, and a few against the left wall."""

    def edit(step: int, env) -> None:
        rows = rng.choice(env.num_envs, size=6, replace=False)
        near_goal = np.stack([rng.uniform(goal - 0.15, 0.6, 3), rng.uniform(-0.03, 0.07, 3)], axis=1)
        near_wall = np.stack([rng.uniform(-1.2, -1.15, 3), rng.uniform(-0.07, 0.01, 3)], axis=1)
        if step % 10 == 0:  # exactly on the boundaries
            near_goal[0] = (goal, 0.0)
            near_goal[1] = (0.6, 0.07)
            near_wall[0] = (-1.2, -0.07)
        write_state(env, NAMES, rows, np.concatenate([near_goal, near_wall]))

    return edit


@pytest.mark.parametrize("seed", [0, 2024])
def test_transitions_match_gymnasium(seed):
    num_envs, num_steps = 64, 100
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=seed, params={"max_episode_steps": 40})
    env.reset(seed=seed)
    reference = MountainCarEnv()
    reference.reset(seed=seed)
    rng = np.random.default_rng(seed)

    def choose(step: int, state: np.ndarray) -> np.ndarray:
        actions = rng.integers(0, 3, size=num_envs)
        actions[: num_envs // 2] = _pump(state[: num_envs // 2])
        return actions

    result = compare_with_reference(env, reference, NAMES, choose, num_steps, _edit_near_goal_and_wall(rng))

    assert result.transitions == num_envs * num_steps
    # The comparison went through many goals and time limits.
    assert result.terminated.sum() >= 100
    assert result.truncated.sum() >= 50
    # The wall was hit: a clipped position with its velocity zeroed.
    at_wall = result.final_obs[..., 0] == np.float32(-1.2)
    assert np.any(at_wall & (result.final_obs[..., 1] == 0.0))
    # Every autoreset starts a fresh episode from Gymnasium's initial distribution.
    starts = result.next_obs[result.done]
    assert np.all((starts[:, 0] >= -0.6) & (starts[:, 0] < -0.4)) and np.all(starts[:, 1] == 0.0)
    assert np.all(result.rewards == -1.0)


def test_spaces_constants_and_state_layout_match_gymnasium():
    env = warpsci.make(ENV_ID, num_envs=4, device="cpu")
    reference = gymnasium.make(ENV_ID)
    assert env.single_observation_space == reference.observation_space
    assert env.single_action_space == reference.action_space
    assert env.max_episode_steps == reference.spec.max_episode_steps == 200
    params, unwrapped = MountainCarParams(), reference.unwrapped
    for name in ("min_position", "max_position", "max_speed", "goal_position", "goal_velocity", "force"):
        assert getattr(params, name) == getattr(unwrapped, name), name
    assert params.gravity == unwrapped.gravity
    obs, _ = env.reset()
    for name in NAMES:
        assert env.state_tensors[name].dtype == torch.float32
        assert tuple(env.state_tensors[name].shape) == (4, 1)
    np.testing.assert_array_equal(obs.numpy(), state_matrix(env, NAMES).astype(np.float32))


def test_initial_state_distribution():
    num_envs = 8192
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=0)
    obs, _ = env.reset(seed=99)
    positions, velocities = obs[:, 0].numpy().astype(np.float64), obs[:, 1].numpy()
    assert np.all(velocities == 0.0)
    assert np.all(positions < -0.4)
    assert_roughly_uniform(positions, -0.6, -0.4, "position")
    reference = reference_initial_states(MountainCarEnv(), 2000, seed=5)
    assert np.all(reference[:, 1] == 0.0)
    assert_same_distribution(positions, reference[:, 0], "position")


def test_time_limit_truncates_at_exactly_200_steps():
    num_envs = 16
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=3)
    env.reset()
    coast = torch.ones(num_envs, dtype=torch.int64)  # no push: the car never leaves the valley
    for step in range(1, 201):
        obs, reward, terminated, truncated, info = env.step(coast)
        assert not terminated.any()
        assert torch.all(reward == -1.0)
        assert bool(truncated.all()) == (step == 200) and bool(truncated.any()) == (step == 200), step
    assert torch.all(info["episode"]["l"] == 200)
    assert torch.all(info["episode"]["r"] == -200.0)
    assert torch.all(env.buffers.elapsed == 0)


def test_time_limit_from_params():
    env = warpsci.make(ENV_ID, num_envs=8, device="cpu", seed=4, params={"max_episode_steps": 25})
    assert env.max_episode_steps == 25
    env.reset()
    for step in range(1, 76):
        _, _, _, truncated, info = env.step(torch.ones(8, dtype=torch.int64))
        assert bool(truncated.all()) == (step % 25 == 0) and bool(truncated.any()) == (step % 25 == 0), step
    assert torch.all(info["episode"]["l"] == 25)


def test_params_reach_the_kernel():
    """Non-default constants (goal velocity, force, gravity, reset range) against Gymnasium set alike."""
    params = MountainCarParams(
        goal_velocity=0.03, force=0.0016, gravity=0.002, reset_low=-0.3, reset_high=-0.2
    )
    num_envs = 32
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=8, params=params)
    obs, _ = env.reset()
    assert np.all((obs[:, 0].numpy() >= -0.3) & (obs[:, 0].numpy() < -0.2))
    reference = MountainCarEnv(goal_velocity=0.03)
    reference.force, reference.gravity = 0.0016, 0.002
    rng = np.random.default_rng(1)

    def choose(step: int, state: np.ndarray) -> np.ndarray:
        return rng.integers(0, 3, size=num_envs)

    result = compare_with_reference(env, reference, NAMES, choose, 40, _edit_near_goal_and_wall(rng))
    # Some steps reached the goal position too slowly to terminate: goal_velocity took effect.
    slow_at_goal = (result.final_obs[..., 0] >= 0.5) & (result.final_obs[..., 1] < 0.03)
    assert np.any(slow_at_goal & ~result.terminated)
    assert result.terminated.any()
