"""Acrobot-v1 in warpsci against Gymnasium's reference implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control.acrobot import AcrobotEnv

import warpsci
from warpsci.envs.acrobot import AcrobotParams

ATOL = 1e-5
RTOL = 1e-5
STATE_NAMES = ("theta1", "theta2", "dtheta1", "dtheta2")
#: Half-widths of the whole state space: angles in [-pi, pi], velocities within Gymnasium's bounds.
STATE_SPACE_HIGH = np.array([math.pi, math.pi, 4 * math.pi, 9 * math.pi])


def _make(num_envs: int, seed: int, **options):
    options.setdefault("copy", True)
    options.setdefault("check_actions", True)
    return warpsci.make("Acrobot-v1", num_envs=num_envs, device="cpu", seed=seed, **options)


def _state(env) -> np.ndarray:
    """``(num_envs, 4)`` float64 copy of (theta1, theta2, dtheta1, dtheta2)."""
    columns = [env.state_tensors[name].reshape(-1) for name in STATE_NAMES]
    return torch.stack(columns, dim=1).to(torch.float64).numpy().copy()


def _write_state(env, rows: np.ndarray, states: np.ndarray) -> None:
    """Overwrite the state of environments ``rows`` with ``states`` (rounded to float32)."""
    rows = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    for column, name in enumerate(STATE_NAMES):
        env.state_tensors[name][rows, 0] = torch.from_numpy(states[:, column].astype(np.float32))


def _observation(states: np.ndarray) -> np.ndarray:
    """The observation of float32 states, computed as Gymnasium's ``_get_ob``."""
    t1, t2, d1, d2 = states.T
    return np.stack([np.cos(t1), np.sin(t1), np.cos(t2), np.sin(t2), d1, d2], axis=1).astype(np.float32)


def _reference_step(reference: AcrobotEnv, state: np.ndarray, action: int):
    """One step of Gymnasium's Acrobot from ``state`` (taken as float64)."""
    reference.state = np.array(state, dtype=np.float64)
    obs, reward, terminated, _, _ = reference.step(int(action))
    return obs, reward, terminated


def _swing_up(obs: np.ndarray) -> np.ndarray:
    """Torque against the first link's velocity: pumps energy and reaches the goal in ~100 steps."""
    return np.where(obs[:, 4] < 0, 2, 0)


@pytest.mark.parametrize("seed, max_episode_steps", [(0, 500), (12345, 25)])
def test_transitions_match_gymnasium(seed, max_episode_steps):
    """Thousands of transitions, through terminations, truncations and autoresets, equal Gymnasium's.

    Half of the environments swing up (and so terminate), half act at random; each step a few
    environments are moved to a random point of the whole state space, which exercises the angle
    wrapping, the velocity bounds and the goal test far from the usual trajectories.
    """
    num_envs, num_steps, jumps_per_step = 64, 100, 6
    env = _make(num_envs, seed, params={"max_episode_steps": max_episode_steps})
    obs, _ = env.reset(seed=seed)
    reference = AcrobotEnv()
    reference.reset(seed=seed)
    rng = np.random.default_rng(seed)
    swinging = np.arange(num_envs) < num_envs // 2
    elapsed = np.zeros(num_envs, dtype=np.int64)

    counts = dict(terminated=0, truncated=0, bounded=0, wrapped=0, jumps=0)
    largest_error = 0.0
    for step in range(num_steps):
        jumped = rng.choice(num_envs, size=jumps_per_step, replace=False)
        _write_state(env, jumped, rng.uniform(-STATE_SPACE_HIGH, STATE_SPACE_HIGH, (jumps_per_step, 4)))
        counts["jumps"] += jumps_per_step
        before = _state(env)
        actions = np.where(swinging, _swing_up(_observation(before)), rng.integers(0, 3, num_envs))
        actions = np.where(rng.random(num_envs) < 0.1, rng.integers(0, 3, num_envs), actions)

        obs, reward, terminated, truncated, info = env.step(torch.from_numpy(actions))
        after = _state(env)
        done = info["_final_obs"].numpy()
        observed = obs.numpy().copy()
        observed[done] = info["final_obs"].numpy()[done]

        expected = np.empty((num_envs, 6), dtype=np.float32)
        expected_reward = np.empty(num_envs)
        expected_terminated = np.empty(num_envs, dtype=bool)
        for i in range(num_envs):
            expected[i], expected_reward[i], expected_terminated[i] = _reference_step(
                reference, before[i], actions[i]
            )
            counts["bounded"] += bool(np.abs(reference.state[2]) == reference.MAX_VEL_1)
            counts["bounded"] += bool(np.abs(reference.state[3]) == reference.MAX_VEL_2)
        np.testing.assert_allclose(observed, expected, rtol=RTOL, atol=ATOL, err_msg=f"step {step}")
        largest_error = max(largest_error, float(np.abs(observed - expected).max()))
        np.testing.assert_array_equal(reward.numpy(), expected_reward, err_msg=f"step {step}")
        np.testing.assert_array_equal(terminated.numpy(), expected_terminated, err_msg=f"step {step}")

        # The time limit counts steps since the last reset, whatever was written into the state.
        elapsed += 1
        np.testing.assert_array_equal(truncated.numpy(), elapsed >= max_episode_steps, err_msg=f"step {step}")
        np.testing.assert_array_equal(done, expected_terminated | (elapsed >= max_episode_steps))
        elapsed[done] = 0

        # Angles stay wrapped; environments that ended start afresh; obs is always the state's.
        kept = after[~done]
        assert np.all(np.abs(kept[:, :2]) <= np.float32(math.pi)), kept
        assert np.all(np.abs(after[done]) <= 0.1), after[done]
        np.testing.assert_allclose(obs.numpy(), _observation(after), rtol=0, atol=1e-6)
        crossed = (np.abs(before[:, 0]) > math.pi / 2) & (np.sign(before[:, 0]) != np.sign(after[:, 0]))
        counts["wrapped"] += int(np.sum(crossed & ~done))
        counts["terminated"] += int(terminated.sum())
        counts["truncated"] += int((truncated & ~terminated).sum())

    print(f"seed {seed}: largest |warpsci - gymnasium| {largest_error:.3g}; {counts}")
    # The comparison went through every path of the step.
    assert counts["terminated"] >= num_envs, counts
    assert counts["bounded"] >= 20 and counts["wrapped"] >= 20, counts
    if max_episode_steps < num_steps:
        assert counts["truncated"] >= num_envs // 4, counts


def test_state_is_float32_and_obs_mirrors_state():
    env = _make(16, seed=3)
    assert env.single_observation_space == AcrobotEnv().observation_space
    assert env.single_action_space.n == 3
    assert env.max_episode_steps == 500
    obs, _ = env.reset()
    for name in STATE_NAMES:
        tensor = env.state_tensors[name]
        assert tensor.dtype == torch.float32
        assert tuple(tensor.shape) == (16, 1)
    np.testing.assert_allclose(obs.numpy(), _observation(_state(env)), rtol=0, atol=1e-7)
    obs, *_ = env.step(torch.full((16,), 2, dtype=torch.int64))
    np.testing.assert_allclose(obs.numpy(), _observation(_state(env)), rtol=0, atol=1e-7)


def test_initial_state_distribution():
    num_envs = 8192
    env = _make(num_envs, seed=0)
    env.reset(seed=2024)
    values = _state(env)

    assert np.all(values >= -0.1) and np.all(values <= 0.1)
    uniform_std = 0.2 / math.sqrt(12)
    np.testing.assert_allclose(values.std(axis=0), uniform_std, rtol=0.03)
    np.testing.assert_allclose(values.mean(axis=0), 0.0, atol=4 * uniform_std / math.sqrt(num_envs))
    # The extremes of the interval are reached (within 1% of its width).
    assert np.all(values.min(axis=0) < -0.098) and np.all(values.max(axis=0) > 0.098)
    # Each variable is drawn independently of the others.
    correlation = np.corrcoef(values.T)
    off_diagonal = correlation[~np.eye(4, dtype=bool)]
    assert np.all(np.abs(off_diagonal) < 0.05), correlation
    # Roughly uniform: each tenth of the interval holds about a tenth of the samples.
    for column in values.T:
        counts, _ = np.histogram(column, bins=10, range=(-0.1, 0.1))
        assert np.all(np.abs(counts / num_envs - 0.1) < 0.02), counts


def test_reset_bound_from_params():
    env = _make(1024, seed=0, params={"reset_bound": 0.5})
    env.reset(seed=1)
    values = _state(env)
    assert np.all(np.abs(values) <= 0.5) and np.all(np.abs(values).max(axis=0) > 0.45)


def test_time_limit_truncates_at_exactly_500_steps():
    num_envs = 16
    env = _make(num_envs, seed=5)
    env.reset()
    no_torque = torch.ones(num_envs, dtype=torch.int64)  # hanging down without torque: never terminates
    for step in range(1, 501):
        obs, reward, terminated, truncated, info = env.step(no_torque)
        assert not terminated.any(), f"terminated at step {step}"
        assert torch.all(reward == -1.0)
        if step < 500:
            assert not truncated.any(), f"truncated early at step {step}"
    assert truncated.all()
    assert info["_episode"].all() and info["_final_obs"].all()
    assert torch.all(info["episode"]["l"] == 500)
    assert torch.all(info["episode"]["r"] == -500.0)
    assert torch.all(env.buffers.elapsed == 0)
    assert np.all(np.abs(_state(env)) <= 0.1)  # the returned observation starts the next episode
    assert not torch.equal(info["final_obs"], obs)


def test_time_limit_from_params():
    num_envs = 8
    env = _make(num_envs, seed=9, params={"max_episode_steps": 20})
    assert env.max_episode_steps == 20
    env.reset()
    for step in range(1, 61):
        _, reward, terminated, truncated, info = env.step(torch.ones(num_envs, dtype=torch.int64))
        assert not terminated.any()
        if step % 20 == 0:
            assert truncated.all(), step
            assert torch.all(info["episode"]["l"] == 20)
            assert torch.all(info["episode"]["r"] == -20.0)
        else:
            assert not truncated.any(), step


def test_reaching_the_goal_on_the_last_allowed_step_is_terminated_and_truncated():
    env = _make(1, seed=0, params={"max_episode_steps": 3})
    env.reset(seed=0)
    env.step(torch.tensor([1]))
    env.step(torch.tensor([1]))
    _write_state(env, [0], np.array([[math.pi, 0.0, 0.0, 0.0]]))  # upright: still above the line after 0.2 s
    _, reward, terminated, truncated, info = env.step(torch.tensor([1]))
    assert bool(terminated[0]) and bool(truncated[0])
    assert float(reward[0]) == 0.0
    assert int(info["episode"]["l"][0]) == 3 and float(info["episode"]["r"][0]) == -2.0


def test_params_change_the_dynamics():
    """Non-default constants reach the kernel (compared with Gymnasium set the same way).

    The values are exact in float32, the precision in which params reach the kernel.
    """
    params = AcrobotParams(
        link_length_1=1.25,
        link_mass_1=0.75,
        link_mass_2=1.5,
        link_com_pos_1=0.25,
        link_com_pos_2=0.625,
        link_moi=0.75,
        max_vel_1=2.0,
        max_vel_2=16.0,
        dt=0.125,
        book_dynamics=False,
    )
    num_envs = 32
    env = _make(num_envs, seed=1, params=params)
    high = env.single_observation_space.high
    np.testing.assert_array_equal(high, np.array([1, 1, 1, 1, 2.0, 16.0], dtype=np.float32))
    env.reset()
    reference = AcrobotEnv()
    reference.reset(seed=0)
    reference.LINK_LENGTH_1, reference.LINK_MASS_1, reference.LINK_MASS_2 = 1.25, 0.75, 1.5
    reference.LINK_COM_POS_1, reference.LINK_COM_POS_2, reference.LINK_MOI = 0.25, 0.625, 0.75
    reference.MAX_VEL_1, reference.MAX_VEL_2, reference.dt = 2.0, 16.0, 0.125
    reference.book_or_nips = "nips"
    default = AcrobotEnv()
    default.reset(seed=0)

    rng = np.random.default_rng(1)
    differs_from_default = 0
    for step in range(10):
        _write_state(
            env, np.arange(num_envs), rng.uniform(-STATE_SPACE_HIGH, STATE_SPACE_HIGH, (num_envs, 4))
        )
        before = _state(env)
        actions = rng.integers(0, 3, num_envs)
        obs, reward, terminated, _, info = env.step(torch.from_numpy(actions))
        observed = obs.numpy().copy()
        done = info["_final_obs"].numpy()
        observed[done] = info["final_obs"].numpy()[done]
        for i in range(num_envs):
            expected, expected_reward, expected_terminated = _reference_step(reference, before[i], actions[i])
            np.testing.assert_allclose(observed[i], expected, rtol=RTOL, atol=ATOL, err_msg=f"{step}, {i}")
            assert (float(reward[i]), bool(terminated[i])) == (expected_reward, expected_terminated)
            unchanged, *_ = _reference_step(default, before[i], actions[i])
            differs_from_default += not np.allclose(unchanged, expected, rtol=RTOL, atol=ATOL)
    assert differs_from_default == 10 * num_envs


def test_torque_noise_is_seeded_and_changes_the_step():
    num_envs = 64
    start = np.random.default_rng(2).uniform(-0.5, 0.5, (num_envs, 4))
    actions = torch.from_numpy(np.random.default_rng(3).integers(0, 3, num_envs))
    results = []
    for noise, seed in [(0.0, 7), (0.5, 7), (0.5, 7), (0.5, 8)]:
        env = _make(num_envs, seed=seed, params={"torque_noise_max": noise})
        env.reset(seed=seed)
        _write_state(env, np.arange(num_envs), start)
        obs, *_ = env.step(actions)
        results.append(obs.numpy().copy())
    noiseless, noisy, noisy_again, other_seed = results
    np.testing.assert_array_equal(noisy, noisy_again)
    assert np.all(np.any(noisy != noiseless, axis=1))
    assert np.all(np.any(noisy != other_seed, axis=1))
    # Torque noise of at most 0.5 N m over 0.2 s moves the velocities by a bounded amount.
    assert np.abs(noisy - noiseless)[:, 4:].max() < 2.0
