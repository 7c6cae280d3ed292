"""Per-agent and per-environment pieces of the reset and step kernels, shared by both backends.

Each piece is a Numba function closed over the environment's own functions, so it compiles for the
CPU (called from a ``prange`` loop) and for CUDA (called from a kernel). The backends only decide who
runs which piece and where the barriers go; the order of pieces is the same:

step:  ``agent_phase`` for each phase (barrier after each), keyed by ``step_key_base``
       ``finish_environment`` by agent 0 (barrier)
       ``close_episode`` (final observation and episode statistics) (barrier)
       ``reset_finished_agent`` (barrier)
       ``observe``
reset: ``reset_agent_fresh`` (barrier) ``observe``

A random rollout (``WarpVectorEnv.random_rollout``) repeats the step with ``random_action`` drawn
by every agent first (barrier), ``tally_episode`` after ``close_episode``, and ``observe`` only
after the last step. Extra arrays travel in tuples (``action_bounds``, ``tallies``), which is how
Numba's CUDA simulator hands them to compiled functions as plain arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium
import numpy as np
from numba import njit

from warpsci.environment import EnvironmentDefinition
from warpsci.random import ACTION_STREAM, RESET_STREAM, STEP_STREAM, integer, make_key, mix64, uniform


@dataclass(frozen=True)
class KernelParts:
    """The compiled pieces; see the module docstring for their order."""

    step_key_base: Callable
    agent_phase: Callable
    finish_environment: Callable
    close_episode: Callable
    reset_finished_agent: Callable
    reset_agent_fresh: Callable
    observe: Callable
    action_key_base: Callable
    random_action: Callable
    tally_episode: Callable
    num_step_phases: int


def make_kernel_parts(definition: EnvironmentDefinition) -> KernelParts:
    """Build the kernel pieces of one environment definition."""
    step_agent = definition.step_agent
    reset_agent = definition.reset_agent
    observe_agent = definition.observe_agent
    is_terminal = definition.is_terminal

    @njit
    def step_key_base(seed, env, agent):
        """The part of an agent's step key that does not change between steps (kernels that take
        many steps compute it once)."""
        return make_key(seed, env, agent, 0, STEP_STREAM)

    @njit
    def agent_phase(state, params, buffers, key_base, env, agent, phase):
        key = mix64(key_base ^ np.uint64(buffers.tick[env] + 1))
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

    draw_action = _uniform_action_function(definition)

    @njit
    def action_key_base(seed, env, agent):
        """The part of an agent's random-action key that does not change between steps: kernels
        compute it once per launch, since hashing is most of a fused step's arithmetic."""
        return make_key(seed, env, agent, 0, ACTION_STREAM)

    @njit
    def random_action(buffers, key_base, env, agent, action_bounds):
        """Write a uniform random action for the coming step (keyed by the tick it will have);
        ``action_bounds`` is ``(low, high)`` from :func:`random_action_bounds`."""
        key = mix64(key_base ^ np.uint64(buffers.tick[env] + 1))
        draw_action(buffers.actions, key, env, agent, action_bounds[0], action_bounds[1])

    @njit
    def tally_episode(buffers, env, agent, tallies):
        """Count an episode that just ended and add its return (agent 0 counts); ``tallies`` is
        ``(episode count per environment, return sum per agent)``."""
        if buffers.terminated[env] or buffers.truncated[env]:
            tallies[1][env, agent] += buffers.final_return[env, agent]
            if agent == 0:
                tallies[0][env] += 1

    return KernelParts(
        step_key_base=step_key_base,
        agent_phase=agent_phase,
        finish_environment=finish_environment,
        close_episode=close_episode,
        reset_finished_agent=reset_finished_agent,
        reset_agent_fresh=reset_agent_fresh,
        observe=observe,
        action_key_base=action_key_base,
        random_action=random_action,
        tally_episode=tally_episode,
        num_step_phases=definition.num_step_phases,
    )


def _uniform_action_function(definition: EnvironmentDefinition) -> Callable:
    """``draw(actions, key, env, agent, low, high)``: a uniform action of the definition's kind of
    action space, from the bounds a vector environment passes (``random_action_bounds``)."""
    space = definition.action_space(definition.default_params())
    if isinstance(space, gymnasium.spaces.Discrete):

        @njit
        def draw_discrete(actions, key, env, agent, low, high):
            actions[env, agent] = integer(key, 0, np.int64(high[0]))

        return draw_discrete
    if isinstance(space, gymnasium.spaces.MultiDiscrete):

        @njit
        def draw_multi_discrete(actions, key, env, agent, low, high):
            for component in range(high.shape[0]):
                actions[env, agent, component] = integer(key, component, np.int64(high[component]))

        return draw_multi_discrete

    @njit
    def draw_box(actions, key, env, agent, low, high):
        for component in range(high.shape[0]):
            width = high[component] - low[component]
            actions[env, agent, component] = low[component] + width * uniform(key, component)

    return draw_box


def random_action_bounds(space: gymnasium.Space) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` float32 arrays describing uniform random actions of one agent's ``space``:
    ``high`` holds ``n`` (Discrete) or ``nvec`` (MultiDiscrete, actions in ``[0, nvec)``), or the
    Box's bounds. Raises ValueError for spaces that have no uniform distribution on the device."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return np.zeros(1, np.float32), np.array([space.n], np.float32)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        if len(space.shape) != 1:
            raise ValueError(f"random actions need a 1-D MultiDiscrete space, got shape {space.shape}")
        nvec = np.asarray(space.nvec, np.float32)
        return np.zeros_like(nvec), nvec
    if isinstance(space, gymnasium.spaces.Box):
        if len(space.shape) != 1:
            raise ValueError(f"random actions need a 1-D Box space, got shape {space.shape}")
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ValueError(f"random actions need finite Box bounds, got {space}")
        return np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    raise TypeError(f"no uniform random actions for action space {space!r}")
