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
()``, elements of up to 8 bytes) and the framework's scalar buffers (:data:`STAGED_BUFFERS`). Fields
with a shape of their own (an observer's hints, a neighbour grid), the observations and final
observations, the actions, the action masks and the final returns stay in global memory, as they
are. As everywhere in a step, a stage reads and writes its own environment's entries only (another
environment's staged values are in another block's shared memory).

The stages index a staged array as the global one, ``state.x[env, agent]``: it is a view of the same
shape, ``(num_envs, num_agents)`` or ``(num_envs,)``, over one row of shared memory, with a stride of
0 between environments (as ``numpy.lib.stride_tricks.as_strided`` makes), so that the block's
environment index lands on its row. Nothing in the stages changes; the same functions compile for
either kind of array.

H100, Tag continuous 2,000 x 110 (k = 10), every step observed, replayed from a CUDA graph, env
steps/s: 17.7M-17.9M -> 20.4M-20.6M; with each value's read and write in turn (the reads then went
out one round trip at a time) 19.2M-19.3M (BENCHMARKS.md, 2026-11-27, fifteenth session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numba import config, cuda

from warpsci.backends.buffers import SCALAR_BUFFERS, EnvBuffers
from warpsci.environment import EnvironmentDefinition

#: The scalar buffers staged: all but the final returns, a row per agent written only where an
#: episode ends (staged, every step would copy the row in and out).
STAGED_BUFFERS = tuple(name for name in SCALAR_BUFFERS if name != "final_return")
#: Each staged row starts on a multiple of this many bytes, the widest element staged (an int64
#: clock); a state field of wider elements stays in global memory.
_ALIGNMENT = 8

if config.ENABLE_CUDASIM:
    _strided_view = np.lib.stride_tricks.as_strided
else:
    # numba-cuda's intrinsic under its ``as_strided``: ``(array, shape, strides)`` -> a view. Its
    # ``as_strided`` is a function that returns an array it did not receive, which the CUDA target
    # refuses to compile; the intrinsic is lowered in place. Its views have layout "A", so that
    # indexing honours the strides (a "C" view would index as if contiguous, past the row).
    from numba.cuda.np.arrayobj import reshape_unchecked as _strided_view


class _Row(NamedTuple):
    """Where one entry of a namedtuple of arrays lies in the shared bytes: ``staged`` False for an
    entry left in global memory; ``offset`` and ``size`` in bytes; ``strides`` the view's, in bytes
    (0 between environments)."""

    staged: bool
    per_agent: bool = False
    offset: int = 0
    size: int = 0
    strides: tuple[int, ...] = ()


def _aligned(size: int) -> int:
    return (size + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT


def _plan(fields: tuple[tuple[Any, bool] | None, ...], width: int, start: int) -> tuple[list[_Row], int]:
    """A :class:`_Row` for each entry of a namedtuple whose ``fields[i]`` is ``(dtype, per_agent)``
    for an entry to stage, None for one left in global memory, the rows laid from byte ``start`` on;
    and the bytes they take."""
    plan, offset = [], start
    for field in fields:
        if field is None:
            plan.append(_Row(staged=False))
            continue
        dtype, per_agent = field
        itemsize = np.dtype(dtype).itemsize
        size = itemsize * (width if per_agent else 1)
        strides = (0, itemsize) if per_agent else (0,)
        plan.append(_Row(True, per_agent, offset, size, strides))
        offset += _aligned(size)
    return plan, offset - start


def _no_views(source, store):
    return ()


def _view_chain(plan: list[_Row]) -> Callable:
    """``views(source, store)``: a tuple with, for each entry of the ``source`` tuple, its staged
    view over the ``store`` bytes or the entry itself."""
    views = cuda.jit(device=True)(_no_views)
    for index, row in enumerate(plan):
        views = cuda.jit(device=True)(_then_view(views, index, row))
    return views


def _then_view(previous: Callable, index: int, row: _Row) -> Callable:
    if not row.staged:

        def kept(source, store):
            return previous(source, store) + (source[index],)

        return kept
    start, end, strides = row.offset, row.offset + row.size, row.strides

    def staged(source, store):
        array = source[index]
        values = store[start:end].view(array.dtype)
        return previous(source, store) + (_strided_view(values, array.shape, strides),)

    return staged


def _copy_chain(plan: list[_Row], per_agent: bool) -> tuple[Callable, Callable]:
    """``(read, write)`` for the staged entries of one kind (``per_agent``: each agent's values, else
    the environment's): ``read(source, env, agent)`` returns their values in the ``source`` tuple,
    ``write(target, values, env, agent)`` writes them into the ``target`` tuple."""
    indices = [index for index, row in enumerate(plan) if row.staged and row.per_agent == per_agent]
    read = cuda.jit(device=True)(_no_reads)
    write = cuda.jit(device=True)(_no_writes)
    for position, index in enumerate(indices):
        read = cuda.jit(device=True)(_then_read(read, index, per_agent))
        write = cuda.jit(device=True)(_then_write(write, index, position, per_agent))
    return read, write


def _no_reads(source, env, agent):
    return ()


def _no_writes(target, values, env, agent):
    pass


def _then_read(previous: Callable, index: int, per_agent: bool) -> Callable:
    if per_agent:

        def read_agent(source, env, agent):
            return previous(source, env, agent) + (source[index][env, agent],)

        return read_agent

    def read_environment(source, env, agent):
        return previous(source, env, agent) + (source[index][env],)

    return read_environment


def _then_write(previous: Callable, index: int, position: int, per_agent: bool) -> Callable:
    if per_agent:

        def write_agent(target, values, env, agent):
            previous(target, values, env, agent)
            target[index][env, agent] = values[position]

        return write_agent

    def write_environment(target, values, env, agent):
        previous(target, values, env, agent)
        target[index][env] = values[position]

    return write_environment


def staged_bytes(definition: EnvironmentDefinition, width: int) -> int:
    """Shared memory that :func:`make_staging` takes a block, in bytes, for ``width`` agents."""
    return _plans(definition, width)[2]


def _plans(definition: EnvironmentDefinition, width: int) -> tuple[list[_Row], list[_Row], int]:
    """The rows of the state's fields and of the buffers, for ``width`` agents, and the bytes they
    take together (the state's first)."""
    state_fields = tuple(
        (field.dtype, field.per_agent)
        if field.shape == () and np.dtype(field.dtype).itemsize <= _ALIGNMENT
        else None
        for field in definition.state_fields
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
    read_agent_state, write_agent_state = _copy_chain(state_plan, True)
    read_agent_buffers, write_agent_buffers = _copy_chain(buffer_plan, True)
    read_environment_state, write_environment_state = _copy_chain(state_plan, False)
    read_environment_buffers, write_environment_buffers = _copy_chain(buffer_plan, False)

    # Every value is read before any is written: a write through a generic pointer (shared memory,
    # as Numba addresses it) may alias a later read of global memory, so that the compiler would
    # otherwise wait for each read's round trip in turn.
    def copy(state, buffers, target_state, target_buffers, env, agent, num_agents, live):
        if live and agent < num_agents:
            state_values = read_agent_state(state, env, agent)
            buffer_values = read_agent_buffers(buffers, env, agent)
            write_agent_state(target_state, state_values, env, agent)
            write_agent_buffers(target_buffers, buffer_values, env, agent)
        if live and agent == 0:
            state_values = read_environment_state(state, env, agent)
            buffer_values = read_environment_buffers(buffers, env, agent)
            write_environment_state(target_state, state_values, env, agent)
            write_environment_buffers(target_buffers, buffer_values, env, agent)

    copy = cuda.jit(device=True)(copy)

    def stage(state, buffers, env, agent, num_agents, live):
        store = cuda.shared.array(words, np.int64).view(np.uint8)
        staged_state = state_type(*state_views(state, store))
        staged_buffers = EnvBuffers(*buffer_views(buffers, store))
        copy(state, buffers, staged_state, staged_buffers, env, agent, num_agents, live)
        cuda.syncthreads()
        return staged_state, staged_buffers

    def unstage(staged_state, staged_buffers, state, buffers, env, agent, num_agents, live):
        cuda.syncthreads()
        copy(staged_state, staged_buffers, state, buffers, env, agent, num_agents, live)

    return cuda.jit(device=True)(stage), cuda.jit(device=True)(unstage)
