"""CPU backend: a ``numba.njit(parallel=True)`` loop over chunks of environments.

The parallel loop runs over chunks of :data:`CHUNK_SIZE` environments; each chunk is one call of a
serial function that walks the stage lists of :mod:`warpsci.backends.stages`. For environments of
one agent it goes stage by stage: a stage runs for every environment of the chunk before the next
one starts (the order of the CUDA backend's one-launch-per-stage layout), so that each stage is a
plain loop over environments that LLVM vectorises where the stage's code allows (Cartpole's
dynamics and random actions: 8 environments per AVX2 instruction); the framework's bookkeeping
stages around an episode's end, which branch, run together environment by environment. Loop
variables are ``uint32``: converted inside the loop, LLVM could not tell that consecutive
environments lie at consecutive addresses. Environments of several agents go environment by
environment, every stage over one environment before the next.

Every stage and environment function is inlined into the serial function, compiled without
reference counting where the environment allocates nothing. Environment and agent indices are
``uint32``, as on the CUDA backend, so that environment code compiles to the same arithmetic on
both, and trajectories do not depend on the order.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit, prange
from numba.core.errors import NumbaError

from warpsci.backends.stages import Stage, agent_keys, make_kernel_stages
from warpsci.environment import EnvironmentDefinition
from warpsci.kernel_cache import cached_njit


class CpuKernels:
    """Reset and step of every environment at once, on numpy arrays (views of CPU tensors), for
    environments of ``num_agents`` agents."""

    def __init__(self, definition: EnvironmentDefinition, num_agents: int) -> None:
        self._definition = definition
        self._one_agent = num_agents == 1
        self._counted = False
        self._reset_all, self._step_all, self._random_steps_all = _compile(definition, self._one_agent, False)
        self._keys = np.empty((0, 0, 2), np.uint64)
        self._keys_seed: int | None = None

    def _call(self, name: str, *arguments: Any) -> None:
        """Run kernel ``name``; environment code that allocates arrays cannot compile without
        reference counting, so the first failure to compile retries with it (and raises if that
        fails too). A kernel cache entry is only ever written by the variant that compiled."""
        try:
            getattr(self, name)(*arguments)
        except NumbaError:
            if self._counted:
                raise
            self._counted = True
            kernels = _compile(self._definition, self._one_agent, True)
            self._reset_all, self._step_all, self._random_steps_all = kernels
            getattr(self, name)(*arguments)

    def _agent_keys(self, buffers: Any, seed: int) -> np.ndarray:
        """Every agent's key bases for ``seed`` (:func:`~warpsci.backends.stages.agent_keys`),
        ``(num_envs, num_agents, 2)``: computed when the seed or the number of environments or
        agents changes, not at every step."""
        shape = (*buffers.rewards.shape, 2)
        if seed != self._keys_seed or self._keys.shape != shape:
            self._keys = np.empty(shape, np.uint64)
            _fill_keys(self._keys, np.int64(seed))
            self._keys_seed = seed
        return self._keys

    #: A range of environments stepped on its own (``envs=`` of :meth:`step`, :meth:`random_steps`)
    #: may start and stop anywhere (the CUDA backend's ranges follow its blocks).
    range_alignment = 1

    def reset(self, state: Any, params: Any, buffers: Any, seed: int) -> None:
        """Reset every environment with ``seed`` and write the first observations."""
        keys = self._agent_keys(buffers, seed)
        self._call("_reset_all", state, params, buffers, (np.int64(seed),), keys, *_range(buffers, None))

    def step(
        self,
        state: Any,
        params: Any,
        buffers: Any,
        seed: int,
        max_episode_steps: int,
        envs: tuple[int, int] | None = None,
    ) -> None:
        """Apply ``buffers.actions`` to every environment (or to ``envs``, ``(first, count)``,
        alone), autoresetting those that finish."""
        keys = self._agent_keys(buffers, seed)
        run = (np.int64(seed), np.int64(max_episode_steps))
        self._call("_step_all", state, params, buffers, run, keys, *_range(buffers, envs))

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
        envs: tuple[int, int] | None = None,
    ) -> None:
        """``num_steps`` steps with uniform random actions drawn in the loop, of every environment
        or of ``envs`` alone (as in :meth:`step`); ``tallies`` (episode count per environment,
        return sum per agent) are zeroed at the start of the call, then count the episodes that
        end during it."""
        self._call(
            "_random_steps_all",
            state,
            params,
            buffers,
            np.int64(seed),
            np.int64(max_episode_steps),
            action_bounds,
            tallies,
            self._agent_keys(buffers, seed),
            num_steps,
            *_range(buffers, envs),
        )


def _range(buffers: Any, envs: tuple[int, int] | None) -> tuple[np.uint32, np.uint32]:
    """``(first, count)`` of the environments a call steps (``envs``, or every one where it is
    None), as the parallel loops take them."""
    first, count = (0, buffers.rewards.shape[0]) if envs is None else envs
    return np.uint32(first), np.uint32(count)


@njit(parallel=True, cache=True)
def _fill_keys(keys, seed):
    num_envs, num_agents, _ = keys.shape
    for env in prange(num_envs):
        for agent in range(num_agents):
            step_key, action_key = agent_keys(seed, np.uint32(env), np.uint32(agent))
            keys[env, agent, 0] = step_key
            keys[env, agent, 1] = action_key


#: Environments per chunk of the parallel loop (each stage runs over a chunk before the next).
CHUNK_SIZE = 1024


@njit
def _num_chunks(count):
    return max(1, (count + CHUNK_SIZE - 1) // CHUNK_SIZE)


@njit
def _chunk_bounds(chunk, num_chunks, first, count):
    """The ``uint32`` bounds of environments of ``chunk`` of ``count`` environments from ``first``."""
    start = first + chunk * count // num_chunks
    return np.uint32(start), np.uint32(first + (chunk + 1) * count // num_chunks)


_INLINE = njit(inline="always")
#: The per-chunk loops run without Numba's reference counting where the environment allocates
#: nothing: every namedtuple field read of an inlined function otherwise increments and decrements
#: the array's shared (atomic) count, per environment, which dominated the step (about 110 atomic
#: operations per Cartpole environment step) and slowed down as threads were added. Division by
#: zero follows IEEE (no exception check per division), as on the CUDA backend.
_NO_NRT = njit(_nrt=False, error_model="numpy")


def _inline(function):
    """``function`` (a Numba dispatcher) compiled again to be inlined into its callers."""
    py_func = getattr(function, "py_func", None)
    return function if py_func is None else _INLINE(py_func)


def _inlined(definition: EnvironmentDefinition) -> EnvironmentDefinition:
    """``definition`` with every environment function inlined into the per-chunk loops (Numba IR
    inlining; the parallel loop itself only calls a chunk function, out of reach of the parfor
    pass, which drops writes made through namedtuple fields of inlined functions)."""
    functions = {
        name: _inline(getattr(definition, name))
        for name in ("reset_environment", "reset_agent", "observe_agent", "is_terminal", "is_agent_done",
                     "action_mask")
        if getattr(definition, name) is not None
    }  # fmt: skip
    with_inlined_step = dataclasses.replace(
        definition, step_agent=definition.step_agent and _inline(definition.step_agent)
    )
    step_stages = tuple(
        dataclasses.replace(stage, function=_inline(stage.function)) for stage in with_inlined_step.stages()
    )
    return dataclasses.replace(
        definition, step_agent=None, step_stages=step_stages, num_step_phases=1, **functions
    )


def _stage_pass(stage: Stage, one_agent: bool) -> Callable:
    """``stage`` over the environments ``start`` to ``stop`` (``uint32``) of a chunk, agent after
    agent for agent stages: ``run_pass(state, params, buffers, run, start, stop, num_agents, keys)``
    with ``keys`` the key bases of :meth:`CpuKernels._agent_keys`. With ``one_agent`` (every
    environment has one agent) agent stages are compiled for agent 0 alone, without an agent loop,
    which LLVM would otherwise keep around every fused bookkeeping stage."""
    function = stage.function
    if stage.per_agent and not one_agent:

        def agents_pass(state, params, buffers, run, start, stop, num_agents, keys):
            for agent in range(np.uint32(0), num_agents):
                for env in range(start, stop):
                    agent_key_bases = (keys[env, agent, 0], keys[env, agent, 1])
                    function(state, params, buffers, run, env, agent, agent_key_bases)

        return _INLINE(agents_pass)

    def first_agent_pass(state, params, buffers, run, start, stop, num_agents, keys):
        agent = np.uint32(0)
        for env in range(start, stop):
            agent_key_bases = (keys[env, agent, 0], keys[env, agent, 1])
            function(state, params, buffers, run, env, agent, agent_key_bases)

    return _INLINE(first_agent_pass)


def _passes(stages: tuple[Stage, ...], one_agent: bool) -> Callable:
    """``stages`` composed into one function of a chunk, in runs (:func:`_runs`): a run of one
    stage of a one-agent environment is a pass over the chunk, any other run goes environment
    after environment, every stage of the run over one environment before the next."""
    composed = _no_pass
    for run in _runs(stages, one_agent):
        in_turn = _no_pass
        for stage in run:
            in_turn = _then(in_turn, _stage_pass(stage, one_agent))
        whole_chunk = one_agent and len(run) == 1
        composed = _then(composed, in_turn if whole_chunk else _one_environment_at_a_time(in_turn))
    return composed


def _runs(stages: tuple[Stage, ...], one_agent: bool) -> list[tuple[Stage, ...]]:
    """``stages`` in order, in runs. Environments of one agent: every run of consecutive bookkeeping
    stages (their branches do not vectorise; together they cost 15% less on Cartpole's random
    step), every other stage alone (Cartpole's dynamics vectorise). Environments of several agents:
    one run (environment after environment, as an environment's agents stay in the cache: stage
    after stage over a chunk cost Tag continuous and CovidEconomy about 25%)."""
    if not one_agent:
        return [stages]
    runs: list[tuple[Stage, ...]] = []
    for stage in stages:
        if runs and stage.bookkeeping and runs[-1][-1].bookkeeping:
            runs[-1] = (*runs[-1], stage)
        else:
            runs.append((stage,))
    return runs


def _one_environment_at_a_time(passes: Callable) -> Callable:
    """``passes`` over a chunk, run environment after environment (all of them over one)."""

    def one_at_a_time(state, params, buffers, run, start, stop, num_agents, keys):
        for env in range(start, stop):
            passes(state, params, buffers, run, env, env + np.uint32(1), num_agents, keys)

    return _INLINE(one_at_a_time)


@_INLINE
def _no_pass(state, params, buffers, run, start, stop, num_agents, keys):
    pass


def _then(previous: Callable, stage_pass: Callable) -> Callable:
    def both(state, params, buffers, run, start, stop, num_agents, keys):
        previous(state, params, buffers, run, start, stop, num_agents, keys)
        stage_pass(state, params, buffers, run, start, stop, num_agents, keys)

    return _INLINE(both)


@functools.cache
def _compile(definition: EnvironmentDefinition, one_agent: bool, reference_counting: bool):
    chunk_jit = njit(error_model="numpy") if reference_counting else _NO_NRT
    stages = make_kernel_stages(_inlined(definition), _INLINE)
    reset_passes = _passes(stages.reset, one_agent)
    step_passes = _passes(stages.step, one_agent)
    random_begin_passes = _passes(stages.random_begin, one_agent)
    random_step_passes = _passes(stages.random_step, one_agent)
    observe_passes = _passes(stages.observe, one_agent)

    @chunk_jit
    def reset_range(state, params, buffers, run, start, stop, num_agents, keys):
        reset_passes(state, params, buffers, run, start, stop, num_agents, keys)

    @chunk_jit
    def step_range(state, params, buffers, run, start, stop, num_agents, keys):
        step_passes(state, params, buffers, run, start, stop, num_agents, keys)

    @chunk_jit
    def random_steps_range(state, params, buffers, run, start, stop, num_agents, keys, num_steps):
        random_begin_passes(state, params, buffers, run, start, stop, num_agents, keys)
        for _ in range(num_steps):
            random_step_passes(state, params, buffers, run, start, stop, num_agents, keys)
        observe_passes(state, params, buffers, run, start, stop, num_agents, keys)

    @cached_njit(label=f"{definition.name} reset", parallel=True)
    def reset_all(state, params, buffers, run, keys, first, count):
        num_agents = buffers.rewards.shape[1]
        num_chunks = _num_chunks(count)
        for chunk in prange(num_chunks):
            start, stop = _chunk_bounds(chunk, num_chunks, first, count)
            reset_range(state, params, buffers, run, start, stop, np.uint32(num_agents), keys)

    @cached_njit(label=f"{definition.name} step", parallel=True)
    def step_all(state, params, buffers, run, keys, first, count):
        num_agents = buffers.rewards.shape[1]
        num_chunks = _num_chunks(count)
        for chunk in prange(num_chunks):
            start, stop = _chunk_bounds(chunk, num_chunks, first, count)
            step_range(state, params, buffers, run, start, stop, np.uint32(num_agents), keys)

    @cached_njit(label=f"{definition.name} random steps", parallel=True)
    def random_steps_all(
        state, params, buffers, seed, max_episode_steps, action_bounds, tallies, keys, num_steps, first, count
    ):
        num_agents = buffers.rewards.shape[1]
        num_chunks = _num_chunks(count)
        for chunk in prange(num_chunks):
            # Built inside the loop: a parallel loop cannot take a tuple that nests arrays in tuples.
            run = (seed, max_episode_steps, action_bounds, tallies)
            start, stop = _chunk_bounds(chunk, num_chunks, first, count)
            random_steps_range(
                state, params, buffers, run, start, stop, np.uint32(num_agents), keys, num_steps
            )

    return reset_all, step_all, random_steps_all
