"""CartPole-v1 in warpsci against Gymnasium's reference implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control import CartPoleEnv

import warpsci

ATOL = 1e-5
RTOL = 1e-5


def _reference_step(reference: CartPoleEnv, state: np.ndarray, action: int):
    """One step of Gymnasium's CartPole from ``state`` (float64), as a fresh episode."""
    reference.state = np.array(state, dtype=np.float64)
    reference.steps_beyond_terminated = None
    obs, reward, terminated, truncated, _ = reference.step(int(action))
    return obs, reward, terminated, truncated


@pytest.mark.parametrize("seed", [0, 12345])
def test_transitions_match_gymnasium(make_cartpole, state_matrix, seed):
    num_envs, num_steps = 64, 120
    env = make_cartpole(num_envs=num_envs, seed=seed)
    env.reset(seed=seed)
    reference = CartPoleEnv()
    reference.reset(seed=seed)
    rng = np.random.default_rng(seed)

    episodes_ended = 0
    for step in range(num_steps):
        before = state_matrix(env)
        # Mix random stretches with all-left / all-right stretches so episodes also end fast.
        if step % 40 < 10:
            actions = np.full(num_envs, step // 40 % 2, dtype=np.int64)
        else:
            actions = rng.integers(0, 2, size=num_envs)
        obs, reward, terminated, truncated, info = env.step(torch.from_numpy(actions))

        done = info["_final_obs"].numpy()
        observed = obs.numpy().copy()
        observed[done] = info["final_obs"].numpy()[done]
        for i in range(num_envs):
            expected_obs, expected_reward, expected_terminated, _ = _reference_step(
                reference, before[i], actions[i]
            )
            np.testing.assert_allclose(
                observed[i], expected_obs, rtol=RTOL, atol=ATOL, err_msg=f"step {step}, env {i}"
            )
            assert float(reward[i]) == expected_reward, (step, i)
            assert bool(terminated[i]) == expected_terminated, (step, i)
        # No time limit is reached in 120 steps.
        assert not truncated.any()
        episodes_ended += int(terminated.sum())

    # The comparison must have gone through many terminations and autoresets.
    assert episodes_ended >= num_envs


def test_state_is_float32_and_obs_mirrors_state(make_cartpole, state_matrix):
    env = make_cartpole(num_envs=16, seed=3)
    obs, _ = env.reset()
    for name in ("x", "x_dot", "theta", "theta_dot"):
        tensor = env.state_tensors[name]
        assert tensor.dtype == torch.float32
        assert tuple(tensor.shape) == (16, 1)
    np.testing.assert_array_equal(obs.numpy(), state_matrix(env).astype(np.float32))
    obs, *_ = env.step(torch.ones(16, dtype=torch.int64))
    np.testing.assert_array_equal(obs.numpy(), state_matrix(env).astype(np.float32))


def test_initial_state_distribution(make_cartpole):
    num_envs = 8192
    env = make_cartpole(num_envs=num_envs, seed=0)
    obs, _ = env.reset(seed=2024)
    values = obs.numpy().astype(np.float64)

    assert values.shape == (num_envs, 4)
    assert np.all(values >= -0.05) and np.all(values <= 0.05)
    uniform_std = 0.1 / math.sqrt(12)
    np.testing.assert_allclose(values.std(axis=0), uniform_std, rtol=0.03)
    np.testing.assert_allclose(values.mean(axis=0), 0.0, atol=4 * uniform_std / math.sqrt(num_envs))
    # The extremes of the interval are reached (within 1% of its width).
    assert np.all(values.min(axis=0) < -0.049) and np.all(values.max(axis=0) > 0.049)
    # Each variable is drawn independently of the others.
    correlation = np.corrcoef(values.T)
    off_diagonal = correlation[~np.eye(4, dtype=bool)]
    assert np.all(np.abs(off_diagonal) < 0.05), correlation
    # Roughly uniform: each tenth of the interval holds about a tenth of the samples.
    for column in values.T:
        counts, _ = np.histogram(column, bins=10, range=(-0.05, 0.05))
        assert np.all(np.abs(counts / num_envs - 0.1) < 0.02), counts


def test_autoreset_states_are_fresh_and_differ_between_episodes(make_cartpole):
    num_envs = 8
    env = make_cartpole(num_envs=num_envs, seed=11)
    env.reset()
    reset_states: list[list[np.ndarray]] = [[] for _ in range(num_envs)]
    for step in range(200):
        # Alternate directions so that every environment keeps falling over quickly.
        actions = torch.full((num_envs,), (step // 25) % 2, dtype=torch.int64)
        obs, _, terminated, truncated, info = env.step(actions)
        done = (terminated | truncated).numpy()
        for i in np.flatnonzero(done):
            start = obs[i].numpy().copy()
            assert np.all(np.abs(start) <= 0.05), start
            reset_states[i].append(start)

    for i, starts in enumerate(reset_states):
        assert len(starts) >= 3, f"env {i} ended only {len(starts)} episodes"
        # A new episode gets a new random start, not a replay of the previous one.
        assert len({tuple(s) for s in starts}) == len(starts), f"env {i} repeated a start state"


def test_time_limit_truncates_at_exactly_500_steps(make_cartpole, balancing_policy):
    num_envs = 32
    env = make_cartpole(num_envs=num_envs, seed=5)
    assert env.max_episode_steps == 500
    obs, _ = env.reset()
    for step in range(1, 501):
        obs, reward, terminated, truncated, info = env.step(balancing_policy(obs))
        assert not terminated.any(), f"the controller dropped the pole at step {step}"
        if step < 500:
            assert not truncated.any(), f"truncated early at step {step}"
    assert truncated.all()
    assert info["_episode"].all() and info["_final_obs"].all()
    assert torch.equal(info["episode"]["l"], torch.full((num_envs,), 500, dtype=info["episode"]["l"].dtype))
    assert torch.equal(info["episode"]["r"], torch.full((num_envs,), 500.0))
    assert torch.all(env.buffers.elapsed == 0)
    # The returned observation starts the next episode; the final one is the balanced last state.
    assert torch.all(obs.abs() <= 0.05)
    assert not torch.equal(info["final_obs"], obs)


def test_time_limit_from_params(make_cartpole, balancing_policy):
    num_envs = 16
    env = make_cartpole(num_envs=num_envs, seed=9, params={"max_episode_steps": 20})
    assert env.max_episode_steps == 20
    obs, _ = env.reset()
    for step in range(1, 61):
        obs, reward, terminated, truncated, info = env.step(balancing_policy(obs))
        assert not terminated.any()
        assert torch.all(reward == 1.0)
        if step % 20 == 0:
            # Every episode, including the ones after an autoreset, is cut at 20 steps.
            assert truncated.all(), step
            assert info["_episode"].all()
            assert torch.all(info["episode"]["l"] == 20)
            assert torch.all(info["episode"]["r"] == 20.0)
            assert torch.all(env.buffers.elapsed == 0)
        else:
            assert not truncated.any(), step
            assert not info["_episode"].any()
            assert torch.all(env.buffers.elapsed == step % 20)


def test_params_change_the_dynamics(make_cartpole, state_matrix):
    """Non-default physical constants reach the kernel (compared with Gymnasium set the same way)."""
    params = warpsci.get_definition("CartPole-v1").params_type(gravity=20.0, force_mag=5.0, length=0.8)
    env = make_cartpole(num_envs=8, seed=1, params=params)
    env.reset()
    reference = CartPoleEnv()
    reference.reset(seed=0)
    reference.gravity, reference.force_mag, reference.length = 20.0, 5.0, 0.8
    reference.polemass_length = reference.masspole * reference.length
    actions = np.array([0, 1, 0, 1, 1, 1, 0, 0])
    for _ in range(5):
        before = state_matrix(env)
        obs, _, terminated, _, _ = env.step(torch.from_numpy(actions))
        assert not terminated.any()
        for i in range(8):
            expected, *_ = _reference_step(reference, before[i], actions[i])
            np.testing.assert_allclose(obs[i].numpy(), expected, rtol=RTOL, atol=ATOL)


def test_a_fall_on_the_last_allowed_step_is_both_terminated_and_truncated():
    """Gymnasium's TimeLimit sets truncated whenever the limit is reached, terminated or not."""
    env = warpsci.make("CartPole-v1", num_envs=1, params={"max_episode_steps": 3})
    env.reset(seed=0)
    env.step(torch.tensor([1]))
    env.step(torch.tensor([1]))
    env.state_tensors["theta"][0, 0] = 0.5  # past the threshold: the third step terminates
    _, _, terminated, truncated, info = env.step(torch.tensor([1]))
    assert bool(terminated[0]) and bool(truncated[0])
    assert int(info["episode"]["l"][0]) == 3
