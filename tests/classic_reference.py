"""Helpers shared by the tests that compare classic-control environments with Gymnasium's.

The comparison copies each warpsci environment's state (float32) into Gymnasium's environment as
float64, takes one step in both, and compares observation, reward and the terminated flag; the
time limit is checked against a step counter kept here, since Gymnasium's own ``step`` never
truncates (its ``TimeLimit`` wrapper does).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import gymnasium
import numpy as np
import torch

ATOL = 1e-5
RTOL = 1e-5


def state_matrix(env, names: tuple[str, ...]) -> np.ndarray:
    """``(num_envs, len(names))`` float64 copy of the named single-agent state fields."""
    columns = [env.state_tensors[name].reshape(-1) for name in names]
    return torch.stack(columns, dim=1).to(torch.float64).numpy().copy()


def write_state(env, names: tuple[str, ...], rows: np.ndarray, values: np.ndarray) -> None:
    """Overwrite the state of environments ``rows`` with ``values`` (``(len(rows), len(names))``)."""
    index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    for column, name in enumerate(names):
        env.state_tensors[name][index, 0] = torch.from_numpy(values[:, column].astype(np.float32))


@dataclasses.dataclass(repr=False)
class Comparison:
    """What a :func:`compare_with_reference` run saw, step by step (first axis)."""

    before: np.ndarray  #: state before each step, (steps, envs, fields)
    actions: np.ndarray  #: actions applied, (steps, envs, ...)
    final_obs: np.ndarray  #: observation the step produced (final one where an episode ended)
    next_obs: np.ndarray  #: observation returned by step (a fresh start where an episode ended)
    rewards: np.ndarray  #: (steps, envs)
    terminated: np.ndarray  #: (steps, envs) bool
    truncated: np.ndarray  #: (steps, envs) bool
    max_obs_diff: float  #: largest |warpsci - Gymnasium| over every observation component
    max_reward_diff: float  #: largest |warpsci - Gymnasium| over every reward

    def __repr__(self) -> str:
        return (
            f"Comparison({self.transitions} transitions, {int(self.terminated.sum())} terminated, "
            f"{int(self.truncated.sum())} truncated, max |obs diff| {self.max_obs_diff:.3g}, "
            f"max |reward diff| {self.max_reward_diff:.3g})"
        )

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated

    @property
    def transitions(self) -> int:
        return self.rewards.size


def compare_with_reference(
    env,
    reference: gymnasium.Env,
    names: tuple[str, ...],
    choose_actions: Callable[[int, np.ndarray], np.ndarray],
    num_steps: int,
    edit_state: Callable[[int, object], None] | None = None,
) -> Comparison:
    """Step ``env`` (just reset) ``num_steps`` times and check every transition against ``reference``.

    ``choose_actions(step, state)`` returns the actions for ``env.step`` (int64 ``(num_envs,)`` for
    Discrete spaces, float32 ``(num_envs, 1)`` for Box ones); ``edit_state(step, env)`` may write
    into ``env.state_tensors`` before the state is read. Gymnasium's unwrapped ``reference`` gets
    ``.state`` set to the float64 state before each step. Observations, rewards and terminated flags
    must agree to ``ATOL``/``RTOL``; truncation must happen exactly when an episode reaches
    ``env.max_episode_steps``.
    """
    num_envs = env.num_envs
    discrete = isinstance(reference.action_space, gymnasium.spaces.Discrete)
    elapsed = np.zeros(num_envs, dtype=np.int64)
    keys = ("before", "actions", "final_obs", "next_obs", "rewards", "terminated", "truncated")
    record: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    max_obs_diff = max_reward_diff = 0.0
    for step in range(num_steps):
        if edit_state is not None:
            edit_state(step, env)
        before = state_matrix(env, names)
        actions = choose_actions(step, before)
        obs, reward, terminated, truncated, info = env.step(torch.from_numpy(actions))
        obs, reward = obs.numpy(), reward.numpy()
        terminated, truncated = terminated.numpy(), truncated.numpy()
        done = info["_final_obs"].numpy()
        observed = obs.copy()
        observed[done] = info["final_obs"].numpy()[done]

        expected_obs = np.empty_like(observed, dtype=np.float64)
        expected_reward = np.empty(num_envs, dtype=np.float64)
        expected_terminated = np.empty(num_envs, dtype=bool)
        for i in range(num_envs):
            reference.state = before[i].copy()
            action = int(actions[i]) if discrete else actions[i].copy()
            ref_obs, ref_reward, ref_terminated, _, _ = reference.step(action)
            expected_obs[i] = ref_obs
            expected_reward[i] = ref_reward
            expected_terminated[i] = ref_terminated

        np.testing.assert_allclose(observed, expected_obs, rtol=RTOL, atol=ATOL, err_msg=f"obs, step {step}")
        np.testing.assert_allclose(
            reward, expected_reward, rtol=RTOL, atol=ATOL, err_msg=f"reward, step {step}"
        )
        mismatch = np.flatnonzero(terminated != expected_terminated)
        assert mismatch.size == 0, f"step {step}: terminated differs for envs {mismatch} ({before[mismatch]})"
        elapsed += 1
        expected_truncated = elapsed >= env.max_episode_steps
        assert np.array_equal(truncated, expected_truncated), f"step {step}: truncation at the wrong step"
        assert np.array_equal(done, terminated | truncated)
        elapsed[done] = 0

        max_obs_diff = max(max_obs_diff, float(np.max(np.abs(observed - expected_obs))))
        max_reward_diff = max(max_reward_diff, float(np.max(np.abs(reward - expected_reward))))
        for key, value in (
            ("before", before),
            ("actions", actions),
            ("final_obs", observed),
            ("next_obs", obs),
            ("rewards", reward),
            ("terminated", terminated),
            ("truncated", truncated),
        ):
            record[key].append(np.array(value))
    return Comparison(
        **{key: np.stack(values) for key, values in record.items()},
        max_obs_diff=max_obs_diff,
        max_reward_diff=max_reward_diff,
    )


def reference_initial_states(reference: gymnasium.Env, count: int, seed: int) -> np.ndarray:
    """``(count, fields)`` float64 initial states drawn by Gymnasium's ``reset``."""
    reference.reset(seed=seed)
    states = []
    for _ in range(count):
        reference.reset()
        states.append(np.array(reference.state, dtype=np.float64))
    return np.stack(states)


def assert_same_distribution(samples: np.ndarray, reference_samples: np.ndarray, what: str) -> None:
    """Two-sample Kolmogorov-Smirnov test at significance 0.001 (deterministic seeds: not flaky)."""
    both = np.sort(np.concatenate([samples, reference_samples]))
    cdf = np.searchsorted(np.sort(samples), both, side="right") / samples.size
    reference_cdf = np.searchsorted(np.sort(reference_samples), both, side="right") / reference_samples.size
    statistic = float(np.max(np.abs(cdf - reference_cdf)))
    n, m = samples.size, reference_samples.size
    critical = 1.949 * math.sqrt((n + m) / (n * m))
    assert statistic < critical, f"{what}: KS statistic {statistic:.4f} >= {critical:.4f}"


def assert_roughly_uniform(samples: np.ndarray, low: float, high: float, what: str) -> None:
    """In ``[low, high]`` (float32 rounding allowed), reaching both ends, each tenth holding ~10%."""
    width = high - low
    slack = 1e-6 * max(1.0, abs(low), abs(high))
    smallest, largest = samples.min(), samples.max()
    assert smallest >= low - slack and largest <= high + slack, (what, smallest, largest)
    assert smallest < low + 0.01 * width and largest > high - 0.01 * width, what
    counts, _ = np.histogram(samples, bins=10, range=(low - slack, high + slack))
    assert np.all(np.abs(counts / samples.size - 0.1) < 0.02), (what, counts)
    np.testing.assert_allclose(samples.std(), width / math.sqrt(12), rtol=0.03, err_msg=what)
