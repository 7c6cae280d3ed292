"""CPU backend: a ``numba.njit(parallel=True)`` loop over environments; agents and stages in order.

Each environment walks the stage lists of :mod:`warpsci.backends.stages` with one thread doing every
agent (no barriers needed). The parallel loop runs over chunks of :data:`CHUNK_SIZE` environments;
each chunk is one call of a serial function into which every stage and environment function is
inlined, compiled without reference counting where the environment allocates nothing.
Environment and agent indices are ``uint32``, as on the CUDA backend, so
that environment code compiles to the same arithmetic on both.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
from numba import njit, prange
from numba.core.errors import NumbaError

from warpsci.backends.stages import agent_keys, make_kernel_stages, sequence
from warpsci.environment import EnvironmentDefinition
from warpsci.kernel_cache import cached_njit


class CpuKernels:
    """Reset and step of every environment at once, on numpy arrays (views of CPU tensors)."""

    def __init__(self, definition: EnvironmentDefinition) -> None:
        self._definition = definition
        self._counted = False
        self._reset_all, self._step_all, self._random_steps_all = _compile(definition, False)

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
            self._reset_all, self._step_all, self._random_steps_all = _compile(self._definition, True)
            getattr(self, name)(*arguments)

    def reset(self, state: Any, params: Any, buffers: Any, seed: int) -> None:
        """Reset every environment with ``seed`` and write the first observations."""
        self._call("_reset_all", state, params, buffers, (np.int64(seed),))

    def step(self, state: Any, params: Any, buffers: Any, seed: int, max_episode_steps: int) -> None:
        """Apply ``buffers.actions`` to every environment, autoresetting those that finish."""
        self._call("_step_all", state, params, buffers, (np.int64(seed), np.int64(max_episode_steps)))

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
        self._call(
            "_random_steps_all",
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


#: Environments per chunk of the parallel loop (a thread walks a chunk's environments in order).
CHUNK_SIZE = 1024


@njit
def _num_chunks(num_envs):
    return max(1, (num_envs + CHUNK_SIZE - 1) // CHUNK_SIZE)


@njit
def _chunk_bounds(chunk, num_chunks, num_envs):
    start = chunk * num_envs // num_chunks
    return start, (chunk + 1) * num_envs // num_chunks


_INLINE = njit(inline="always")
#: The per-chunk loops run without Numba's reference counting where the environment allocates
#: nothing: every namedtuple field read of an inlined function otherwise increments and decrements
#: the array's shared (atomic) count, per environment, which dominated the step (about 110 atomic
#: operations per Cartpole environment step) and slowed down as threads were added.
_NO_NRT = njit(_nrt=False)


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


@functools.cache
def _compile(definition: EnvironmentDefinition, reference_counting: bool):
    chunk_jit = njit if reference_counting else _NO_NRT
    stages = make_kernel_stages(_inlined(definition), _INLINE)
    reset_sequence = sequence(stages.reset, _INLINE, _no_barrier)
    step_sequence = sequence(stages.step, _INLINE, _no_barrier)
    random_step_sequence = sequence(stages.random_step, _INLINE, _no_barrier)
    observe_sequence = sequence(stages.observe, _INLINE, _no_barrier)

    @chunk_jit
    def reset_range(state, params, buffers, run, start, stop, num_agents):
        for env_index in range(start, stop):
            env = np.uint32(env_index)
            keys = agent_keys(run[0], env, np.uint32(0))
            reset_sequence(
                state, params, buffers, run, env, True, np.uint32(0), np.uint32(1), num_agents, keys
            )

    @chunk_jit
    def step_range(state, params, buffers, run, start, stop, num_agents):
        for env_index in range(start, stop):
            env = np.uint32(env_index)
            keys = agent_keys(run[0], env, np.uint32(0))
            step_sequence(
                state, params, buffers, run, env, True, np.uint32(0), np.uint32(1), num_agents, keys
            )

    @chunk_jit
    def random_steps_range(state, params, buffers, run, start, stop, num_agents, num_steps):
        first, stride = np.uint32(0), np.uint32(1)
        for env_index in range(start, stop):
            env = np.uint32(env_index)
            keys = agent_keys(run[0], env, np.uint32(0))
            for _ in range(num_steps):
                random_step_sequence(state, params, buffers, run, env, True, first, stride, num_agents, keys)
            observe_sequence(state, params, buffers, run, env, True, first, stride, num_agents, keys)

    @cached_njit(parallel=True)
    def reset_all(state, params, buffers, run):
        num_envs, num_agents = buffers.rewards.shape
        num_chunks = _num_chunks(num_envs)
        for chunk in prange(num_chunks):
            start, stop = _chunk_bounds(chunk, num_chunks, num_envs)
            reset_range(state, params, buffers, run, start, stop, num_agents)

    @cached_njit(parallel=True)
    def step_all(state, params, buffers, run):
        num_envs, num_agents = buffers.rewards.shape
        num_chunks = _num_chunks(num_envs)
        for chunk in prange(num_chunks):
            start, stop = _chunk_bounds(chunk, num_chunks, num_envs)
            step_range(state, params, buffers, run, start, stop, num_agents)

    @cached_njit(parallel=True)
    def random_steps_all(state, params, buffers, seed, max_episode_steps, action_bounds, tallies, num_steps):
        num_envs, num_agents = buffers.rewards.shape
        num_chunks = _num_chunks(num_envs)
        for chunk in prange(num_chunks):
            # Built inside the loop: a parallel loop cannot take a tuple that nests arrays in tuples.
            run = (seed, max_episode_steps, action_bounds, tallies)
            start, stop = _chunk_bounds(chunk, num_chunks, num_envs)
            random_steps_range(state, params, buffers, run, start, stop, num_agents, num_steps)

    return reset_all, step_all, random_steps_all
