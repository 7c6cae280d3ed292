"""Per-agent and per-environment pieces of the reset and step kernels, shared by both backends.

Each piece is a Numba function closed over the environment's own functions, so it compiles for the
CPU (called from a ``prange`` loop) and for CUDA (called from a kernel). The backends only decide who
runs which piece and where the barriers go; the order of pieces is the same:

step:  ``agent_phase`` for each phase (barrier after each)
       ``finish_environment`` by agent 0 (barrier)
       ``close_episode`` (final observation and episode statistics) (barrier)
       ``reset_finished_agent`` (barrier)
       ``observe``
reset: ``reset_agent_fresh`` (barrier) ``observe``
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from numba import njit

from warpsci.environment import EnvironmentDefinition
from warpsci.random import RESET_STREAM, STEP_STREAM, make_key


@dataclass(frozen=True)
class KernelParts:
    """The compiled pieces; see the module docstring for their order."""

    agent_phase: Callable
    finish_environment: Callable
    close_episode: Callable
    reset_finished_agent: Callable
    reset_agent_fresh: Callable
    observe: Callable
    num_step_phases: int


def make_kernel_parts(definition: EnvironmentDefinition) -> KernelParts:
    """Build the kernel pieces of one environment definition."""
    step_agent = definition.step_agent
    reset_agent = definition.reset_agent
    observe_agent = definition.observe_agent
    is_terminal = definition.is_terminal

    @njit
    def agent_phase(state, params, buffers, seed, env, agent, phase):
        key = make_key(seed, env, agent, buffers.tick[env] + 1, STEP_STREAM)
        reward = step_agent(state, params, buffers.actions, env, agent, phase, key)
        if phase == 0:
            buffers.rewards[env, agent] = reward
        else:
            buffers.rewards[env, agent] += reward

    @njit
    def finish_environment(state, params, buffers, max_episode_steps, env):
        buffers.tick[env] += 1
        elapsed = buffers.elapsed[env] + 1
        terminated = is_terminal(state, params, env)
        truncated = elapsed >= max_episode_steps  # as Gymnasium's TimeLimit: both flags may be set
        buffers.terminated[env] = terminated
        buffers.truncated[env] = truncated
        if terminated or truncated:
            buffers.final_length[env] = elapsed
            buffers.elapsed[env] = 0
        else:
            buffers.elapsed[env] = elapsed

    @njit
    def close_episode(state, params, buffers, env, agent):
        """Accumulate the return; where the episode ended, keep its last observation and return."""
        episode_return = buffers.episode_return[env, agent] + buffers.rewards[env, agent]
        if buffers.terminated[env] or buffers.truncated[env]:
            observe_agent(state, params, buffers.final_obs, env, agent)
            buffers.final_return[env, agent] = episode_return
            buffers.episode_return[env, agent] = 0.0
        else:
            buffers.episode_return[env, agent] = episode_return

    @njit
    def reset_finished_agent(state, params, buffers, seed, env, agent):
        if buffers.terminated[env] or buffers.truncated[env]:
            key = make_key(seed, env, agent, buffers.tick[env], RESET_STREAM)
            reset_agent(state, params, env, agent, key)

    @njit
    def reset_agent_fresh(state, params, buffers, seed, env, agent):
        """Start from scratch after ``reset(seed)``: counters cleared, tick 0."""
        if agent == 0:
            buffers.tick[env] = 0
            buffers.elapsed[env] = 0
            buffers.terminated[env] = False
            buffers.truncated[env] = False
        buffers.episode_return[env, agent] = 0.0
        buffers.rewards[env, agent] = 0.0
        key = make_key(seed, env, agent, 0, RESET_STREAM)
        reset_agent(state, params, env, agent, key)

    @njit
    def observe(state, params, buffers, env, agent):
        observe_agent(state, params, buffers.obs, env, agent)

    return KernelParts(
        agent_phase=agent_phase,
        finish_environment=finish_environment,
        close_episode=close_episode,
        reset_finished_agent=reset_finished_agent,
        reset_agent_fresh=reset_agent_fresh,
        observe=observe,
        num_step_phases=definition.num_step_phases,
    )
