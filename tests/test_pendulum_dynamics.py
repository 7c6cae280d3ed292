"""Pendulum-v1 in warpsci against Gymnasium's reference implementation."""

from __future__ import annotations

import math

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
from gymnasium.envs.classic_control import PendulumEnv

import warpsci
from warpsci.envs.pendulum import PendulumParams

ENV_ID = "Pendulum-v1"
NAMES = ("th", "thdot")


def _edit_states(rng: np.random.Generator):
    """Every step, give a few environments angles of several turns and speeds beyond the limit."""

    def edit(step: int, env) -> None:
        rows = rng.choice(env.num_envs, size=4, replace=False)
        values = np.stack([rng.uniform(-20.0, 20.0, 4), rng.uniform(-10.0, 10.0, 4)], axis=1)
        write_state(env, NAMES, rows, values)

    return edit


@pytest.mark.parametrize("seed", [0, 2024])
def test_transitions_match_gymnasium(seed):
    num_envs, num_steps = 64, 100
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=seed, params={"max_episode_steps": 30})
    env.reset(seed=seed)
    reference = PendulumEnv()
    reference.reset(seed=seed)
    rng = np.random.default_rng(seed)

    def choose(step: int, state: np.ndarray) -> np.ndarray:
        # Torques up to twice the limit, so they are clipped; a quarter of the envs push at full torque
        # with the motion, so they spin up to the speed limit.
        actions = rng.uniform(-4.0, 4.0, size=(num_envs, 1))
        quarter = num_envs // 4
        actions[:quarter, 0] = np.where(state[:quarter, 1] >= 0.0, 3.0, -3.0)
        return actions.astype(np.float32)

    result = compare_with_reference(env, reference, NAMES, choose, num_steps, _edit_states(rng))

    assert result.transitions == num_envs * num_steps
    assert not result.terminated.any()
    assert result.truncated.sum() == num_envs * (num_steps // 30)
    assert (np.abs(result.actions) > 2.0).mean() > 0.4
    # The speed limit was reached, and angles far outside [-pi, pi] were compared.
    assert np.any(np.abs(result.final_obs[..., 2]) == np.float32(8.0))
    assert np.any(np.abs(result.before[..., 0]) > 3 * math.pi)
    starts = result.next_obs[result.done]
    assert np.all(np.abs(starts[:, 2]) <= 1.0)


def test_spaces_constants_and_state_layout_match_gymnasium():
    env = warpsci.make(ENV_ID, num_envs=4, device="cpu")
    reference = gymnasium.make(ENV_ID)
    assert env.single_observation_space == reference.observation_space
    assert env.single_action_space == reference.action_space
    assert env.single_action_space.dtype == np.float32 and env.single_action_space.shape == (1,)
    assert env.max_episode_steps == reference.spec.max_episode_steps == 200
    params, unwrapped = PendulumParams(), reference.unwrapped
    assert (params.max_speed, params.max_torque, params.dt) == (
        unwrapped.max_speed,
        unwrapped.max_torque,
        unwrapped.dt,
    )
    assert (params.g, params.mass, params.length) == (unwrapped.g, unwrapped.m, unwrapped.l)
    obs, _ = env.reset()
    for name in NAMES:
        assert env.state_tensors[name].dtype == torch.float32
    th, thdot = state_matrix(env, NAMES).T
    expected = np.stack([np.cos(th), np.sin(th), thdot], axis=1).astype(np.float32)
    np.testing.assert_allclose(obs.numpy(), expected, atol=1e-7)


def test_initial_state_distribution():
    num_envs = 8192
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=0)
    env.reset(seed=77)
    th, thdot = state_matrix(env, NAMES).T
    assert_roughly_uniform(th, -math.pi, math.pi, "th")
    assert_roughly_uniform(thdot, -1.0, 1.0, "thdot")
    assert abs(np.corrcoef(th, thdot)[0, 1]) < 0.05
    reference = reference_initial_states(PendulumEnv(), 2000, seed=7)
    assert_same_distribution(th, reference[:, 0], "th")
    assert_same_distribution(thdot, reference[:, 1], "thdot")


def test_time_limit_truncates_at_exactly_200_steps():
    num_envs = 16
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=3)
    env.reset()
    returns = torch.zeros(num_envs)
    for step in range(1, 201):
        _, reward, terminated, truncated, info = env.step(torch.zeros((num_envs, 1)))
        returns += reward
        assert not terminated.any()
        assert bool(truncated.all()) == (step == 200) and bool(truncated.any()) == (step == 200), step
    assert torch.all(info["episode"]["l"] == 200)
    torch.testing.assert_close(info["episode"]["r"], returns)


def test_time_limit_from_params():
    env = warpsci.make(ENV_ID, num_envs=8, device="cpu", seed=4, params={"max_episode_steps": 25})
    assert env.max_episode_steps == 25
    env.reset()
    for step in range(1, 76):
        _, _, _, truncated, info = env.step(torch.zeros((8, 1)))
        assert bool(truncated.all()) == (step % 25 == 0) and bool(truncated.any()) == (step % 25 == 0), step
    assert torch.all(info["episode"]["l"] == 25)


def test_params_reach_the_kernel():
    """Non-default constants against Gymnasium's Pendulum set alike."""
    params = PendulumParams(g=9.81, max_torque=1.0, max_speed=6.0, dt=0.04, mass=1.5, length=0.8)
    num_envs = 32
    env = warpsci.make(ENV_ID, num_envs=num_envs, device="cpu", seed=8, params=params)
    assert env.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    high = np.array([1.0, 1.0, 6.0], np.float32)
    assert env.single_observation_space == gymnasium.spaces.Box(-high, high, dtype=np.float32)
    env.reset()
    reference = PendulumEnv(g=9.81)
    reference.max_torque, reference.max_speed, reference.dt = 1.0, 6.0, 0.04
    reference.m, reference.l = 1.5, 0.8
    rng = np.random.default_rng(1)

    def choose(step: int, state: np.ndarray) -> np.ndarray:
        return rng.uniform(-2.0, 2.0, size=(num_envs, 1)).astype(np.float32)

    result = compare_with_reference(env, reference, NAMES, choose, 40, _edit_states(rng))
    assert np.any(np.abs(result.final_obs[..., 2]) == np.float32(6.0))


def test_reset_ranges_from_params():
    env = warpsci.make(
        ENV_ID, num_envs=512, device="cpu", seed=2, params={"reset_max_angle": 0.1, "reset_max_speed": 0.5}
    )
    env.reset()
    th, thdot = state_matrix(env, NAMES).T
    assert np.all(np.abs(th) <= 0.1 + 1e-7) and np.all(np.abs(thdot) <= 0.5)
    assert np.abs(th).max() > 0.09 and np.abs(thdot).max() > 0.45
