"""CPU backend: a ``numba.njit(parallel=True)`` loop over environments; agents and phases in order.

Environment and agent indices are ``uint32``, as on the CUDA backend, so that environment code
compiles to the same arithmetic on both.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import prange

from warpsci.backends.kernel_parts import make_kernel_parts
from warpsci.environment import EnvironmentDefinition
from warpsci.kernel_cache import cached_njit


class CpuKernels:
    """Reset and step of every environment at once, on numpy arrays (views of CPU tensors)."""

    def __init__(self, definition: EnvironmentDefinition) -> None:
        self._reset_all, self._step_all, self._random_steps_all = _compile(definition)

    def reset(self, state: Any, params: Any, buffers: Any, seed: int) -> None:
        """Reset every environment with ``seed`` and write the first observations."""
        self._reset_all(state, params, buffers, seed)

    def step(self, state: Any, params: Any, buffers: Any, seed: int, max_episode_steps: int) -> None:
        """Apply ``buffers.actions`` to every environment, autoresetting those that finish."""
        self._step_all(state, params, buffers, seed, max_episode_steps)

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
            state, params, buffers, seed, max_episode_steps, num_steps, action_bounds, tallies
        )


@functools.cache
def _compile(definition: EnvironmentDefinition):
    parts = make_kernel_parts(definition)
    step_key_base = parts.step_key_base
    agent_phase = parts.agent_phase
    finish_environment = parts.finish_environment
    close_episode = parts.close_episode
    reset_finished_agent = parts.reset_finished_agent
    reset_agent_fresh = parts.reset_agent_fresh
    observe = parts.observe
    action_key_base = parts.action_key_base
    random_action = parts.random_action
    tally_episode = parts.tally_episode
    num_phases = parts.num_step_phases

    @cached_njit(parallel=True)
    def reset_all(state, params, buffers, seed):
        num_envs, num_agents = buffers.rewards.shape
        for env_index in prange(num_envs):
            env = np.uint32(env_index)
            for agent_index in range(num_agents):
                agent = np.uint32(agent_index)
                reset_agent_fresh(state, params, buffers, seed, env, agent)
            for agent_index in range(num_agents):
                agent = np.uint32(agent_index)
                observe(state, params, buffers, env, agent)

    @cached_njit(parallel=True)
    def step_all(state, params, buffers, seed, max_episode_steps):
        num_envs, num_agents = buffers.rewards.shape
        for env_index in prange(num_envs):
            env = np.uint32(env_index)
            for phase in range(num_phases):
                for agent_index in range(num_agents):
                    agent = np.uint32(agent_index)
                    key_base = step_key_base(seed, env, agent)
                    agent_phase(state, params, buffers, key_base, env, agent, phase)
            finish_environment(state, params, buffers, max_episode_steps, env)
            for agent_index in range(num_agents):
                agent = np.uint32(agent_index)
                close_episode(state, params, buffers, env, agent)
            for agent_index in range(num_agents):
                agent = np.uint32(agent_index)
                reset_finished_agent(state, params, buffers, seed, env, agent)
            for agent_index in range(num_agents):
                agent = np.uint32(agent_index)
                observe(state, params, buffers, env, agent)

    @cached_njit(parallel=True)
    def random_steps_all(state, params, buffers, seed, max_episode_steps, num_steps, action_bounds, tallies):
        num_envs, num_agents = buffers.rewards.shape
        for env_index in prange(num_envs):
            env = np.uint32(env_index)
            first_action_base = action_key_base(seed, env, np.uint32(0))
            first_step_base = step_key_base(seed, env, np.uint32(0))
            for _ in range(num_steps):
                for agent_index in range(num_agents):
                    agent = np.uint32(agent_index)
                    if agent == 0:
                        key_base = first_action_base
                    else:
                        key_base = action_key_base(seed, env, agent)
                    random_action(buffers, key_base, env, agent, action_bounds)
                for phase in range(num_phases):
                    for agent_index in range(num_agents):
                        agent = np.uint32(agent_index)
                        if agent == 0:
                            key_base = first_step_base
                        else:
                            key_base = step_key_base(seed, env, agent)
                        agent_phase(state, params, buffers, key_base, env, agent, phase)
                finish_environment(state, params, buffers, max_episode_steps, env)
                for agent_index in range(num_agents):
                    agent = np.uint32(agent_index)
                    close_episode(state, params, buffers, env, agent)
                    tally_episode(buffers, env, agent, tallies)
                for agent_index in range(num_agents):
                    agent = np.uint32(agent_index)
                    reset_finished_agent(state, params, buffers, seed, env, agent)
            for agent_index in range(num_agents):
                agent = np.uint32(agent_index)
                observe(state, params, buffers, env, agent)

    return reset_all, step_all, random_steps_all
