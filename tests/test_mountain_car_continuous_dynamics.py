"""MountainCarContinuous-v0 in warpsci against Gymnasium's reference implementation."""

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
from gymnasium.envs.classic_control import Continuous_MountainCarEnv

import warpsci
from warpsci.envs.mountain_car_continuous import MountainCarContinuousParams

ENV_ID = "MountainCarContinuous-v0"
NAMES = ("position", "velocity")


def _edit_near_goal_and_wall(rng: np.random.Generator, goal: float = 0.45):
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
    reference = Continuous_MountainCarEnv()
    reference.reset(seed=seed)
    rng = np.random.default_rng(seed)

    def choose(step: int, state: np.ndarray) -> np.ndarray:
        # Actions far outside [-1, 1], so the force is clipped but the reward uses the raw action.
        actions = rng.uniform(-3.0, 3.0, size=(num_envs, 1))
        pump = state[: num_envs // 2, 1] >= 0.0
        actions[: num_envs // 2, 0] = np.where(pump, 1.0, -1.0) * rng.uniform(0.5, 3.0, num_envs // 2)
        return actions.astype(np.float32)

    result = compare_with_reference(env, reference, NAMES, choose, num_steps, _edit_near_goal_and_wall(rng))

    assert result.transitions == num_envs * num_steps
    assert result.terminated.sum() >= 100
    assert result.truncated.sum() >= 50
    assert (np.abs(result.actions) > 1.0).mean() > 0.5
    # The goal bonus is paid exactly on the terminating steps.
    np.testing.assert_array_equal(result.rewards > 50.0, result.terminated)
    # The wall was hit: a clipped position with its velocity zeroed.
    at_wall = result.final_obs[..., 0] == np.float32(-1.2)
    assert np.any(at_wall & (result.final_obs[..., 1] == 0.0))
    starts = result.next_obs[result.done]
    assert np.all((starts[:, 0] >= -0.6) & (starts[:, 0] < -0.4)) and np.all(starts[:, 1] == 0.0)


def test_out_of_range_actions_are_clipped_for_the_force_but_not_for_the_reward():
    """As in Gymnasium: force = clip(action, -1, 1), reward = -0.1 * action**2 (unclipped)."""
    env = warpsci.make(ENV_ID, num_envs=4, device="cpu", seed=0)
    env.reset()
    start = np.array([[-0.5, 0.01]] * 4)
    write_state(env, NAMES, np.arange(4), start)
    obs, reward, *_ = env.step(torch.tensor([[1.0], [3.0], [-1.0], [-3.0]]))
    np.testing.assert_array_equal(obs[0].numpy(), obs[1].numpy())
    np.testing.assert_array_equal(obs[2].numpy(), obs[3].numpy())
    np.testing.assert_allclose(reward.numpy(), [-0.1, -0.9, -0.1, -0.9], rtol=1e-6)


def test_spaces_constants_and_state_layout_match_gymnasium():
    env = warpsci.make(ENV_ID, num_envs=4, device="cpu")
    reference = gymnasium.make(ENV_ID)
    assert env.single_observation_space == reference.observation_space
    assert env.single_action_space == reference.action_space
    assert env.single_action_space.dtype == np.float32 and env.single_action_space.shape == (1,)
    assert env.max_episode_steps == reference.spec.max_episode_steps == 999
    params, unwrapped = MountainCarContinuousParams(), reference.unwrapped
    names = ("min_action", "max_action", "min_position", "max_position", "max_speed", "goal_position")
    for name in (*names, "goal_velocity", "power"):
        assert getattr(params, name) == getattr(unwrapped, name), name
    obs, _ = env.reset()
    for name in NAMES:
        assert env.state_tensors[name].dtype == torch.float32
    np.testing.assert_array_equal(obs.numpy(), state_matrix(env, NAMES).astype(np.float32))


def test_initial_state_distribution():
    num_envs = 8192
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=0)
    obs, _ = env.reset(seed=31)
    positions, velocities = obs[:, 0].numpy().astype(np.float64), obs[:, 1].numpy()
    assert np.all(velocities == 0.0)
    assert np.all(positions < -0.4)
    assert_roughly_uniform(positions, -0.6, -0.4, "position")
    reference = reference_initial_states(Continuous_MountainCarEnv(), 2000, seed=6)
    assert np.all(reference[:, 1] == 0.0)
    assert_same_distribution(positions, reference[:, 0], "position")


def test_time_limit_truncates_at_exactly_999_steps():
    num_envs = 8
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=3)
    env.reset()
    coast = torch.zeros((num_envs, 1))  # no force: the car never leaves the valley
    for step in range(1, 1000):
        _, reward, terminated, truncated, info = env.step(coast)
        assert not terminated.any()
        assert bool(truncated.all()) == (step == 999) and bool(truncated.any()) == (step == 999), step
    assert torch.all(reward == 0.0)
    assert torch.all(info["episode"]["l"] == 999)
    assert torch.all(info["episode"]["r"] == 0.0)


def test_time_limit_from_params():
    env = warpsci.make(ENV_ID, num_envs=8, device="cpu", seed=4, params={"max_episode_steps": 25})
    assert env.max_episode_steps == 25
    env.reset()
    for step in range(1, 76):
        _, _, _, truncated, info = env.step(torch.zeros((8, 1)))
        assert bool(truncated.all()) == (step % 25 == 0) and bool(truncated.any()) == (step % 25 == 0), step
    assert torch.all(info["episode"]["l"] == 25)


def test_params_reach_the_kernel():
    """Non-default constants (action bounds, power, goal velocity) against Gymnasium set alike."""
    params = MountainCarContinuousParams(min_action=-0.5, max_action=0.5, power=0.003, goal_velocity=0.02)
    num_envs = 32
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=8, params=params)
    assert env.single_action_space == gymnasium.spaces.Box(-0.5, 0.5, (1,), np.float32)
    env.reset()
    reference = Continuous_MountainCarEnv(goal_velocity=0.02)
    reference.min_action, reference.max_action, reference.power = -0.5, 0.5, 0.003
    rng = np.random.default_rng(1)

    def choose(step: int, state: np.ndarray) -> np.ndarray:
        return rng.uniform(-1.5, 1.5, size=(num_envs, 1)).astype(np.float32)

    result = compare_with_reference(env, reference, NAMES, choose, 40, _edit_near_goal_and_wall(rng))
    slow_at_goal = (result.final_obs[..., 0] >= 0.45) & (result.final_obs[..., 1] < 0.02)
    assert np.any(slow_at_goal & ~result.terminated)
    assert result.terminated.any()
