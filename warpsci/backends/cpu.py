"""CPU backend: a ``numba.njit(parallel=True)`` loop over environments; agents and stages in order.

Each environment walks the stage lists of :mod:`warpsci.backends.stages` with one thread doing every
agent (no barriers needed). Environment and agent indices are ``uint32``, as on the CUDA backend, so
that environment code compiles to the same arithmetic on both.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit, prange

from warpsci.backends.stages import agent_keys, make_kernel_stages, sequence
from warpsci.environment import EnvironmentDefinition
from warpsci.kernel_cache import cached_njit


class CpuKernels:
    """Reset and step of every environment at once, on numpy arrays (views of CPU tensors)."""

    def __init__(self, definition: EnvironmentDefinition) -> None:
        self._reset_all, self._step_all, self._random_steps_all = _compile(definition)

    def reset(self, state: Any, params: Any, buffers: Any, seed: int) -> None:
        """Reset every environment with ``seed`` and write the first observations."""
        self._reset_all(state, params, buffers, (np.int64(seed),))

    def step(self, state: Any, params: Any, buffers: Any, seed: int, max_episode_steps: int) -> None:
        """Apply ``buffers.actions`` to every environment, autoresetting those that finish."""
        self._step_all(state, params, buffers, (np.int64(seed), np.int64(max_episode_steps)))

    def random_steps(
        self,
        state: Any,
        params: Any,
        buffers: Any,
        seed: int,
        max_episode_steps: int,
        num_steps: int,
        action_bounds: tuple[Any, Any],
        tallies: tuple[Any, Any],
    ) -> None:
        """``num_steps`` steps with uniform random actions drawn in the loop; ``tallies`` (episode
        count per environment, return sum per agent) accumulate the episodes that end."""
        self._random_steps_all(
            state,
            params,
            buffers,
            np.int64(seed),
            np.int64(max_episode_steps),
            action_bounds,
            tallies,
            num_steps,
        )


@njit
def _no_barrier():
    pass


@functools.cache
def _compile(definition: EnvironmentDefinition):
    stages = make_kernel_stages(definition)
    reset_sequence = sequence(stages.reset, njit, _no_barrier)
    step_sequence = sequence(stages.step, njit, _no_barrier)
    random_step_sequence = sequence(stages.random_step, njit, _no_barrier)
    observe_sequence = sequence(stages.observe, njit, _no_barrier)

    @cached_njit(parallel=True)
    def reset_all(state, params, buffers, run):
        num_envs, num_agents = buffers.rewards.shape
        for env_index in prange(num_envs):
            env = np.uint32(env_index)
            keys = agent_keys(run[0], env, np.uint32(0))
            reset_sequence(
                state, params, buffers, run, env, True, np.uint32(0), np.uint32(1), num_agents, keys
            )

    @cached_njit(parallel=True)
    def step_all(state, params, buffers, run):
        num_envs, num_agents = buffers.rewards.shape
        for env_index in prange(num_envs):
            env = np.uint32(env_index)
            keys = agent_keys(run[0], env, np.uint32(0))
            step_sequence(
                state, params, buffers, run, env, True, np.uint32(0), np.uint32(1), num_agents, keys
            )

    @cached_njit(parallel=True)
    def random_steps_all(state, params, buffers, seed, max_episode_steps, action_bounds, tallies, num_steps):
        num_envs, num_agents = buffers.rewards.shape
        for env_index in prange(num_envs):
            # Built inside the loop: a parallel loop cannot take a tuple that nests arrays in tuples.
            run = (seed, max_episode_steps, action_bounds, tallies)
            env = np.uint32(env_index)
            keys = agent_keys(run[0], env, np.uint32(0))
            first, stride = np.uint32(0), np.uint32(1)
            for _ in range(num_steps):
                random_step_sequence(state, params, buffers, run, env, True, first, stride, num_agents, keys)
            observe_sequence(state, params, buffers, run, env, True, first, stride, num_agents, keys)

    return reset_all, step_all, random_steps_all
