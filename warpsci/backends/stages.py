"""The order of a reset and of a step, written once, and the walker both backends compile from it.

A kernel is a list of :class:`Stage`: a Numba function run either by every agent of an environment
(``per_agent``) or once per environment. Every agent of an environment finishes a stage before any
starts the next one (a barrier), unless the stage says ``sync=False`` (it then only reads what the
same agent wrote just before). The lists:

reset:  reset the environment's fields, then each agent's (``reset_environment``, ``reset_agent``),
        observe (``observe_agent``, ``action_mask``)
step:   begin (rewards cleared, unless the first stage is an agent stage, which sets them), the
        environment's own stages, close each agent (every agent asks ``is_terminal`` and the time
        limit itself: ``is_agent_done``, returns, final observation), finish the environment
        (clock; where the episode ended, the environment's reset), reset the agents of finished
        environments, observe
random step (``WarpVectorEnv.random_rollout``): a uniform random action, then the step without its
        observation (and with episode tallies); the rollout clears the tallies once before its first
        step (``random_begin``) and observes once after its last step.
An environment with a block observation (``EnvironmentDefinition.block_observation``) is observed
on CUDA by its whole block together at the end of the kernel: its lists' observe stage writes the
masks only.

:func:`sequence` composes a list into one function (the CPU backend calls it from a ``prange`` loop,
the CUDA backend from a kernel with ``cuda.syncthreads()`` as the barrier); an environment wider than
a CUDA block runs each stage as its own launch instead (:mod:`warpsci.backends.cuda`).

A stage function is ``function(state, params, buffers, run, env, agent, keys)``: ``run`` holds the
launch's arguments (``(seed, max_episode_steps[, action_bounds, tallies])``), ``keys`` the agent's
precomputed key bases ``(step, action)`` (hashing is most of a fused step's arithmetic on a GPU).
Extra arrays travel in tuples, which is how Numba's CUDA simulator hands them to compiled functions
as plain arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from numba import njit

from warpsci.environment import AgentStage, EnvironmentDefinition, EnvironmentStage, mask_size
from warpsci.random import ACTION_STREAM, RESET_STREAM, STEP_STREAM, integer, make_key, mix64, uniform

#: The agent index in the keys of environment-level draws (no agent has it).
ENVIRONMENT_KEY_AGENT = np.uint32(0xFFFFFFFF)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a kernel: ``function(state, params, buffers, run, env, agent, keys)``.

    Attributes:
        function: Numba function; for environment stages ``agent`` is 0.
        per_agent: Run by every agent (True) or once per environment (False).
        sync: Wait for every agent to finish the previous stage first. Default True.
        bookkeeping: One of the framework's stages around an episode's end (clock, flags,
            returns, resets): branches that rarely go the other way. The CPU backend runs
            consecutive ones together, environment by environment. Default False.
    """

    function: Callable
    per_agent: bool
    sync: bool = True
    bookkeeping: bool = False


@dataclasses.dataclass(frozen=True)
class KernelStages:
    """The stage lists of one environment; see the module docstring."""

    reset: tuple[Stage, ...]
    step: tuple[Stage, ...]
    random_begin: tuple[Stage, ...]
    random_step: tuple[Stage, ...]
    observe: tuple[Stage, ...]


@njit
def agent_keys(seed, env, agent):
    """The parts of an agent's step and random-action keys that do not change between steps."""
    return (make_key(seed, env, agent, 0, STEP_STREAM), make_key(seed, env, agent, 0, ACTION_STREAM))


def _nothing_before(state, params, buffers, run, env, live, first_agent, stride, num_agents, first_keys):
    pass


def sequence(stages: tuple[Stage, ...], device_function: Callable, barrier: Callable) -> Callable:
    """Compose ``stages`` into ``run(state, params, buffers, run_arguments, env, live, first_agent,
    stride, num_agents, first_keys)``.

    The caller's thread handles agents ``first_agent, first_agent + stride, ...`` of environment
    ``env`` (all of them on the CPU: first 0, stride 1); ``live`` is False for the threads of a
    partial last block, which must still reach every barrier. Environment stages run on the thread
    of agent 0. ``device_function`` compiles each level (``numba.njit`` or a CUDA device function).
    """
    composed = device_function(_nothing_before)
    for stage in stages:
        composed = _then(composed, stage, device_function, barrier)
    return composed


def _then(previous: Callable, stage: Stage, device_function: Callable, barrier: Callable) -> Callable:
    function, sync = stage.function, stage.sync
    if stage.per_agent:

        def run_agents(state, params, buffers, run, env, live, first_agent, stride, num_agents, first_keys):
            previous(state, params, buffers, run, env, live, first_agent, stride, num_agents, first_keys)
            if sync:
                barrier()
            agent = first_agent
            while live and agent < num_agents:
                if agent == first_agent:
                    keys = first_keys
                else:
                    computed = agent_keys(run[0], env, agent)
                    # np.uint64: under Numba's CUDA simulator keys are Python ints between functions.
                    keys = (np.uint64(computed[0]), np.uint64(computed[1]))
                function(state, params, buffers, run, env, agent, keys)
                agent += stride

        return device_function(run_agents)

    def run_environment(state, params, buffers, run, env, live, first_agent, stride, num_agents, first_keys):
        previous(state, params, buffers, run, env, live, first_agent, stride, num_agents, first_keys)
        if sync:
            barrier()
        if live and first_agent == 0:
            function(state, params, buffers, run, env, np.uint32(0), first_keys)

    return device_function(run_environment)


def make_kernel_stages(
    definition: EnvironmentDefinition, jit: Callable = njit, observe_agents: bool = True
) -> KernelStages:
    """The reset, step, random-begin, random-step and observe stage lists of one environment; ``jit`` compiles
    the framework's stage functions (the CPU backend asks for ``njit(inline="always")``). Without
    ``observe_agents`` the lists end with the action masks only (or nothing): the CUDA backend
    then observes by the block observation after them (``EnvironmentDefinition.block_observation``)."""
    reset_agent = definition.reset_agent
    observe_agent = definition.observe_agent
    is_terminal = definition.is_terminal
    reset_environment = definition.reset_environment or _no_environment_reset
    is_agent_done = definition.is_agent_done or _never_done
    params = definition.default_params()
    groups = definition.agent_groups(params)
    has_masks = definition.action_mask is not None and any(mask_size(g.action_space) for g in groups)
    action_mask = definition.action_mask if has_masks else _no_mask
    # Without is_agent_done every agent stays in the game: the step then neither reads nor writes
    # the activity flags (a step of a single-agent environment moves a few bytes less per agent).
    tracks_agents = definition.is_agent_done is not None

    @jit
    def begin_step(state, params, buffers, run, env, agent, keys):
        buffers.rewards[env, agent] = 0.0

    @jit
    def close_agent(state, params, buffers, run, env, agent, keys):
        """Whether the episode ended (every agent asks ``is_terminal`` and the time limit itself;
        agent 0 writes the environment's flags, which no agent reads in this stage); who leaves
        the game; accumulate the return; where the episode ended, keep the last observation and
        the return."""
        elapsed = buffers.elapsed[env] + 1
        terminated = is_terminal(state, params, env)
        truncated = elapsed >= run[1]  # as Gymnasium's TimeLimit: both flags may be set
        ended = terminated or truncated
        if agent == 0:
            buffers.terminated[env] = terminated
            buffers.truncated[env] = truncated
            if ended:
                buffers.final_length[env] = elapsed
        if tracks_agents:
            was_active = buffers.active[env, agent]
            if not was_active:
                buffers.rewards[env, agent] = 0.0  # also what environment stages may have added
            leaves = False
            if was_active:
                leaves = is_agent_done(state, params, env, agent)
                if leaves:
                    buffers.active[env, agent] = False
            buffers.agent_terminated[env, agent] = was_active and (leaves or terminated)
        else:
            buffers.agent_terminated[env, agent] = terminated
        episode_return = buffers.episode_return[env, agent] + buffers.rewards[env, agent]
        if ended:
            observe_agent(state, params, buffers.final_obs, env, agent)
            buffers.final_return[env, agent] = episode_return
            buffers.episode_return[env, agent] = 0.0
        else:
            buffers.episode_return[env, agent] = episode_return

    @jit
    def finish_environment(state, params, buffers, run, env, agent, keys):
        """The clock (after every agent has read it in ``close_agent``); where the episode ended,
        the environment's own reset."""
        tick = buffers.tick[env] + 1
        buffers.tick[env] = tick
        if buffers.terminated[env] or buffers.truncated[env]:
            buffers.elapsed[env] = 0
            key = make_key(run[0], env, ENVIRONMENT_KEY_AGENT, tick, RESET_STREAM)
            reset_environment(state, params, env, key)
        else:
            buffers.elapsed[env] += 1

    @jit
    def reset_finished_agent(state, params, buffers, run, env, agent, keys):
        if buffers.terminated[env] or buffers.truncated[env]:
            key = make_key(run[0], env, agent, buffers.tick[env], RESET_STREAM)
            reset_agent(state, params, env, agent, key)
            if tracks_agents:
                buffers.active[env, agent] = True

    @jit
    def fresh_environment(state, params, buffers, run, env, agent, keys):
        """Start from scratch after ``reset(seed)``: counters cleared, tick 0."""
        buffers.tick[env] = 0
        buffers.elapsed[env] = 0
        buffers.terminated[env] = False
        buffers.truncated[env] = False
        key = make_key(run[0], env, ENVIRONMENT_KEY_AGENT, 0, RESET_STREAM)
        reset_environment(state, params, env, key)

    @jit
    def fresh_agent(state, params, buffers, run, env, agent, keys):
        buffers.episode_return[env, agent] = 0.0
        buffers.rewards[env, agent] = 0.0
        buffers.active[env, agent] = True
        buffers.agent_terminated[env, agent] = False
        key = make_key(run[0], env, agent, 0, RESET_STREAM)
        reset_agent(state, params, env, agent, key)

    @jit
    def observe(state, params, buffers, run, env, agent, keys):
        observe_agent(state, params, buffers.obs, env, agent)
        action_mask(state, params, buffers.action_mask, env, agent)

    @jit
    def write_mask(state, params, buffers, run, env, agent, keys):
        action_mask(state, params, buffers.action_mask, env, agent)

    draw_action = _uniform_action_function(definition, jit)

    @jit
    def random_action(state, params, buffers, run, env, agent, keys):
        """A uniform random action for the coming step (keyed by the tick it will have); ``run[2]``
        is ``(low, high)`` from :func:`random_action_bounds`."""
        key = mix64(keys[1] ^ np.uint64(buffers.tick[env] + 1))
        bounds = run[2]
        draw_action(buffers.actions, key, env, agent, bounds[0], bounds[1])

    @jit
    def clear_tallies(state, params, buffers, run, env, agent, keys):
        """Zero the rollout's tallies before its first step: each agent its return sum, agent 0 the
        environment's episode count (the thread that adds to them in ``tally_episode``). Cleared
        in the kernel rather than by the caller: in a CUDA graph two memsets a rollout step cost
        5% of Tag continuous's step at 2,000 x 110 (BENCHMARKS.md, twenty-second session)."""
        tallies = run[3]
        tallies[1][env, agent] = 0.0
        if agent == 0:
            tallies[0][env] = 0

    @jit
    def tally_episode(state, params, buffers, run, env, agent, keys):
        """Count an episode that just ended and add its return (agent 0 counts); ``run[3]`` is
        ``(episode count per environment, return sum per agent)``."""
        if buffers.terminated[env] or buffers.truncated[env]:
            tallies = run[3]
            tallies[1][env, agent] += buffers.final_return[env, agent]
            if agent == 0:
                tallies[0][env] += 1

    own_stages = definition.stages()
    # The first stage sets the rewards when it is an agent stage; otherwise they are cleared first.
    environment_stages = tuple(
        _framework_stage(stage, first=index == 0, tracks_agents=tracks_agents, jit=jit)
        for index, stage in enumerate(own_stages)
    )
    clear = () if isinstance(own_stages[0], AgentStage) else (Stage(begin_step, per_agent=True),)
    step_body = (
        *clear,
        *environment_stages,
        Stage(close_agent, per_agent=True, bookkeeping=True),
        Stage(finish_environment, per_agent=False, bookkeeping=True),
    )
    reset_agents = (Stage(reset_finished_agent, per_agent=True, bookkeeping=True),)
    if observe_agents:
        observe_stages: tuple[Stage, ...] = (Stage(observe, per_agent=True),)
    else:
        observe_stages = (Stage(write_mask, per_agent=True),) if has_masks else ()
    fresh = (Stage(fresh_environment, per_agent=False), Stage(fresh_agent, per_agent=True))
    return KernelStages(
        reset=fresh + observe_stages,
        step=step_body + reset_agents + observe_stages,
        random_begin=(Stage(clear_tallies, per_agent=True, sync=False, bookkeeping=True),),
        random_step=(
            Stage(random_action, per_agent=True),
            *step_body,
            Stage(tally_episode, per_agent=True, sync=False, bookkeeping=True),
            *reset_agents,
        ),
        observe=observe_stages,
    )


def _framework_stage(
    stage: AgentStage | EnvironmentStage, first: bool, tracks_agents: bool, jit: Callable = njit
) -> Stage:
    """An environment's own stage as a framework stage: agents out of the game skip agent stages and
    get reward 0; agent stages' rewards add up (the ``first`` stage sets them); environment stages
    see the rewards array."""
    function = stage.function
    if isinstance(stage, AgentStage):
        all_agents = stage.all_agents

        @jit
        def agent_stage(state, params, buffers, run, env, agent, keys):
            # The rewards so far are read before the stage runs (it cannot change them): on a GPU
            # a read placed after the stage's writes would wait for them.
            before = np.float32(0.0) if first else buffers.rewards[env, agent]
            reward = np.float32(0.0)
            if not tracks_agents or all_agents or buffers.active[env, agent]:
                key = mix64(keys[0] ^ np.uint64(buffers.tick[env] + 1))
                reward = function(state, params, buffers.actions, env, agent, key)
            buffers.rewards[env, agent] = reward if first else before + reward

        return Stage(agent_stage, per_agent=True)

    @jit
    def environment_stage(state, params, buffers, run, env, agent, keys):
        base = make_key(run[0], env, ENVIRONMENT_KEY_AGENT, 0, STEP_STREAM)
        key = mix64(base ^ np.uint64(buffers.tick[env] + 1))
        function(state, params, buffers.actions, buffers.rewards, env, key)

    return Stage(environment_stage, per_agent=False)


@njit
def _no_environment_reset(state, params, env, key):
    pass


@njit
def _never_done(state, params, env, agent):
    return False


@njit
def _no_mask(state, params, mask, env, agent):
    pass


def _uniform_action_function(definition: EnvironmentDefinition, jit: Callable = njit) -> Callable:
    """``draw(actions, key, env, agent, low, high)``: a uniform action of the agent's own action
    space, from per-agent bounds (:func:`random_action_bounds`)."""
    groups = definition.agent_groups(definition.default_params())
    spaces = [group.action_space for group in groups]
    if all(isinstance(space, gymnasium.spaces.Discrete) for space in spaces):

        @jit
        def draw_discrete(actions, key, env, agent, low, high):
            actions[env, agent] = integer(key, 0, np.int64(high[agent, 0]))

        return draw_discrete
    if not any(isinstance(space, gymnasium.spaces.Box) for space in spaces):

        @jit
        def draw_multi_discrete(actions, key, env, agent, low, high):
            for component in range(high.shape[1]):
                if high[agent, component] > 0:
                    actions[env, agent, component] = integer(key, component, np.int64(high[agent, component]))

        return draw_multi_discrete

    @jit
    def draw_box(actions, key, env, agent, low, high):
        for component in range(high.shape[1]):
            width = high[agent, component] - low[agent, component]
            actions[env, agent, component] = low[agent, component] + width * uniform(key, component)

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


def agent_action_bounds(groups: Any, num_agents: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-agent ``(low, high)`` arrays ``(num_agents, width)`` for uniform random actions; unused
    components (an agent with fewer components than ``width``) have ``high`` 0."""
    low = np.zeros((num_agents, width), np.float32)
    high = np.zeros((num_agents, width), np.float32)
    for group in groups:
        group_low, group_high = random_action_bounds(group.action_space)
        for agent in group.agents:
            low[agent, : group_low.shape[0]] = group_low
            high[agent, : group_high.shape[0]] = group_high
    return low, high
