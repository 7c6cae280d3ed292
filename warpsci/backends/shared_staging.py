"""A step's scalar arrays in shared memory, for a block that holds one environment whose agents fit
its threads.

The stages of a step (:mod:`warpsci.backends.stages`) read what other agents of the environment wrote
in the stage before: a tagger's reward that the runners added, the episode's clock, the flags that
agent 0 wrote. In global memory each such read waits for a round trip to the L2 cache after the
barrier, and a step of Tag continuous makes a dozen of them in a row, so that its stages' kernel
spends most of its time waiting (H100, 2,000 x 110: 61% of its stall samples on global memory,
BENCHMARKS.md, 2026-11-27, fourteenth session). Staged, the block copies its environment's scalar
arrays into shared memory once at the start of the kernel (all the reads go out together), runs the
stages there, and copies them back at the end.

What is staged: every state field of one value per agent or per environment (``StateField.shape ==
()``) and the framework's scalar buffers (:data:`STAGED_BUFFERS`). Fields with a shape of their own
(an observer's hints, a neighbour grid), the observations, the actions and the final returns (written
only where an episode ends) stay in global memory, as they are.

The stages index a staged array as the global one, ``state.x[env, agent]``: it is a view of the same
shape, ``(num_envs, num_agents)`` or ``(num_envs,)``, over one row of shared memory, with a stride of
0 between environments (as ``numpy.lib.stride_tricks.as_strided`` makes), so that the block's environment
index lands on its row. Nothing in the stages changes; the same functions compile for either kind of
array.

H100, Tag continuous 2,000 x 110 (k = 10), every step observed, replayed from a CUDA graph: 17.8M-17.9M
env steps/s -> 19.8M (BENCHMARKS.md, 2026-11-27, fifteenth session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import config, cuda

from warpsci.backends.buffers import SCALAR_BUFFERS, EnvBuffers
from warpsci.environment import EnvironmentDefinition

#: The scalar buffers that a step reads or writes every time (the final returns, written only where
#: an episode ends, stay in global memory).
STAGED_BUFFERS = tuple(name for name in SCALAR_BUFFERS if name != "final_return")
#: Each staged row starts on a multiple of this many bytes (the widest element, an int64 clock).
_ALIGNMENT = 8

if config.ENABLE_CUDASIM:
    _strided_view = np.lib.stride_tricks.as_strided
else:
    # numba-cuda's intrinsic under its ``as_strided``: ``(array, shape, strides)`` -> a view. Its
    # ``as_strided`` is a function that returns an array it did not receive, which the CUDA target
    # refuses to compile; the intrinsic is lowered in place.
    from numba.cuda.np.arrayobj import reshape_unchecked as _strided_view


def _aligned(size: int) -> int:
    return (size + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT


def _plan(fields: tuple[tuple[Any, bool] | None, ...], width: int, start: int) -> tuple[list, int]:
    """``(staged, offset, size, per_agent)`` for each entry of a tuple whose ``fields[i]`` is
    ``(dtype, per_agent)`` for a staged entry, None for one left in global memory; and the bytes
    used from ``start`` on."""
    plan, offset = [], start
    for field in fields:
        if field is None:
            plan.append((False, 0, 0, False))
            continue
        dtype, per_agent = field
        size = np.dtype(dtype).itemsize * (width if per_agent else 1)
        plan.append((True, offset, size, per_agent))
        offset += _aligned(size)
    return plan, offset - start


def _no_views(source, store):
    return ()


def _no_copies(source, target, env, agent, num_agents):
    pass


def _view_chain(plan: list) -> Callable:
    """``views(source, store)``: a tuple with, for each entry of the ``source`` tuple, its staged
    view over the ``store`` bytes or the entry itself."""
    views = cuda.jit(device=True)(_no_views)
    for index, (staged, offset, size, per_agent) in enumerate(plan):
        views = cuda.jit(device=True)(_then_view(views, index, staged, offset, size, per_agent))
    return views


def _then_view(previous: Callable, index: int, staged: bool, offset: int, size: int, per_agent: bool):
    if not staged:

        def kept(source, store):
            return previous(source, store) + (source[index],)

        return kept
    if per_agent:

        def agent_row(source, store):
            array = source[index]
            row = store[offset : offset + size].view(array.dtype)
            return previous(source, store) + (_strided_view(row, array.shape, (0, row.strides[0])),)

        return agent_row

    def environment_value(source, store):
        array = source[index]
        row = store[offset : offset + size].view(array.dtype)
        return previous(source, store) + (_strided_view(row, array.shape, (0,)),)

    return environment_value


def _copy_chain(plan: list) -> Callable:
    """``copy(source, target, env, agent, num_agents)``: each staged entry's value of ``agent`` (and,
    by agent 0, each per-environment value) from the ``source`` tuple into the ``target`` tuple."""
    copy = cuda.jit(device=True)(_no_copies)
    for index, (staged, _, _, per_agent) in enumerate(plan):
        if staged:
            copy = cuda.jit(device=True)(_then_copy(copy, index, per_agent))
    return copy


def _then_copy(previous: Callable, index: int, per_agent: bool):
    if per_agent:

        def copy_agent(source, target, env, agent, num_agents):
            previous(source, target, env, agent, num_agents)
            if agent < num_agents:
                target[index][env, agent] = source[index][env, agent]

        return copy_agent

    def copy_environment(source, target, env, agent, num_agents):
        previous(source, target, env, agent, num_agents)
        if agent == 0:
            target[index][env] = source[index][env]

    return copy_environment


def staged_bytes(definition: EnvironmentDefinition, width: int) -> int:
    """Shared memory that :func:`make_staging` takes a block, in bytes, for ``width`` agents."""
    return _plans(definition, width)[2]


def _plans(definition: EnvironmentDefinition, width: int) -> tuple[list, list, int]:
    state_fields = tuple(
        (field.dtype, field.per_agent) if field.shape == () else None for field in definition.state_fields
    )
    buffer_fields = tuple(
        SCALAR_BUFFERS[name] if name in STAGED_BUFFERS else None for name in EnvBuffers._fields
    )
    state_plan, state_bytes = _plan(state_fields, width, 0)
    buffer_plan, buffer_bytes = _plan(buffer_fields, width, state_bytes)
    return state_plan, buffer_plan, state_bytes + buffer_bytes


def make_staging(definition: EnvironmentDefinition, width: int) -> tuple[Callable, Callable]:
    """``(stage, unstage)`` CUDA device functions for a block of at least ``width`` threads that
    holds one environment ``env`` of up to ``width`` agents, thread ``agent`` of which calls both:

    - ``stage(state, buffers, env, agent, num_agents, live)`` returns ``(state, buffers)`` staged
      (namedtuples of the same types' fields, see the module docstring), their values copied in,
      after a barrier;
    - ``unstage(staged_state, staged_buffers, state, buffers, env, agent, num_agents, live)`` copies
      the staged values back, after a barrier.

    ``live``: whether the block's environment exists (False for blocks past the last; they still
    reach the barriers)."""
    state_plan, buffer_plan, size = _plans(definition, width)
    words = max(1, size // _ALIGNMENT)
    state_type = definition.state_type
    state_views, buffer_views = _view_chain(state_plan), _view_chain(buffer_plan)
    copy_state, copy_buffers = _copy_chain(state_plan), _copy_chain(buffer_plan)

    def stage(state, buffers, env, agent, num_agents, live):
        store = cuda.shared.array(words, np.int64).view(np.uint8)
        staged_state = state_type(*state_views(state, store))
        staged_buffers = EnvBuffers(*buffer_views(buffers, store))
        if live:
            copy_state(state, staged_state, env, agent, num_agents)
            copy_buffers(buffers, staged_buffers, env, agent, num_agents)
        cuda.syncthreads()
        return staged_state, staged_buffers

    def unstage(staged_state, staged_buffers, state, buffers, env, agent, num_agents, live):
        cuda.syncthreads()
        if live:
            copy_state(staged_state, state, env, agent, num_agents)
            copy_buffers(staged_buffers, buffers, env, agent, num_agents)

    return cuda.jit(device=True)(stage), cuda.jit(device=True)(unstage)
