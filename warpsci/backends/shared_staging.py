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

The staged arrays are copied in groups of one element size and kind (per agent or per environment):
the vector environments place each group as one tensor, its arrays one after another
(:func:`staged_groups`), and the copy reaches a group's arrays through a view of that tensor made
from its first array, with shapes and strides from the kernel's own sizes. Each array that a kernel
reads costs loads of its pointer and shape from the kernel's parameters, which Numba lays out as a
struct of 56-72 bytes an array; Tag continuous's 22 staged arrays in 7 groups took the copy's
parameter loads from 80 to 28 (sm_90, offline), where the constant-cache misses were 15.5% of the
stages' stall samples (BENCHMARKS.md, 2026-11-28, twentieth session).

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


class _Group(NamedTuple):
    """Staged entries of a namedtuple with elements of one size, all per agent or all per
    environment: ``members`` their indices in the namedtuple."""

    members: tuple[int, ...]
    itemsize: int
    per_agent: bool


def _aligned(size: int) -> int:
    return (size + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT


def _groups(fields: tuple[tuple[Any, bool] | None, ...]) -> list[_Group]:
    """The entries to stage (``fields[i]`` is ``(dtype, per_agent)``, None for one left in global
    memory) grouped by element size and kind, in the order of each group's first entry."""
    members: dict[tuple[int, bool], list[int]] = {}
    for index, field in enumerate(fields):
        if field is not None:
            dtype, per_agent = field
            members.setdefault((np.dtype(dtype).itemsize, per_agent), []).append(index)
    return [_Group(tuple(indices), itemsize, per_agent) for (itemsize, per_agent), indices in members.items()]


def _plan(fields: tuple[tuple[Any, bool] | None, ...], width: int, start: int) -> tuple[list[_Row], int]:
    """A :class:`_Row` for each entry of a namedtuple whose ``fields[i]`` is ``(dtype, per_agent)``
    for an entry to stage, None for one left in global memory, the rows laid from byte ``start`` on
    a group after another (:func:`_groups`: a group's rows are consecutive, each as long); and the
    bytes they take."""
    plan = [_Row(staged=False)] * len(fields)
    offset = start
    for group in _groups(fields):
        size = group.itemsize * (width if group.per_agent else 1)
        strides = (0, group.itemsize) if group.per_agent else (0,)
        for index in group.members:
            plan[index] = _Row(True, group.per_agent, offset, size, strides)
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


def _group_views(groups: list[tuple[bool, _Group]], row_strides: list[int] | None) -> Callable:
    """``views(state, buffers, num_envs, num_agents)``: for each group (``(of the buffers,
    group)``), its entries as one array, made from the group's first entry.

    - In global memory (``row_strides`` None), the group's tensor as rows: entry ``member`` of
      environment ``env`` is row ``member * num_envs + env`` (its entries are C-contiguous, one
      after another, as :func:`staged_groups` places them). On a GPU that is the first entry itself,
      indexed past its own rows (Numba checks no bounds there): its loads and stores then stay global
      ones (``LDG``/``STG``; a strided view would make them generic). The simulator's numpy
      checks bounds, so it gets a view of all the rows.
    - In shared memory, ``view[member, env(, agent)]``: the group's rows, ``row_strides[i]`` bytes
      apart, 0 between environments.

    A group then costs the load of one pointer from the kernel's parameters; each array a kernel
    reads costs loads of its pointer and shape, which missed the constant cache."""
    views = cuda.jit(device=True)(_no_group_views)
    for position, (of_buffers, group) in enumerate(groups):
        row_stride = None if row_strides is None else row_strides[position]
        views = cuda.jit(device=True)(_then_group_view(views, of_buffers, group, row_stride))
    return views


def _no_group_views(state, buffers, num_envs, num_agents):
    return ()


def _then_group_view(previous: Callable, of_buffers: bool, group: _Group, row_stride: int | None) -> Callable:
    first, count, item = group.members[0], np.intp(len(group.members)), np.intp(group.itemsize)
    per_agent = group.per_agent

    if row_stride is None and not config.ENABLE_CUDASIM:

        def view_of(array, num_envs, num_agents):
            return (array,)

    elif row_stride is None:

        def view_of(array, num_envs, num_agents):
            return (_strided_view(array, (count * array.shape[0],) + array.shape[1:], array.strides),)

    else:

        def view_of(array, num_envs, num_agents):
            envs, agents, rows = np.intp(num_envs), np.intp(num_agents), np.intp(row_stride)
            if per_agent:
                return (_strided_view(array, (count, envs, agents), (rows, np.intp(0), item)),)
            return (_strided_view(array, (count, envs), (rows, np.intp(0))),)

    view_of = cuda.jit(device=True)(view_of)
    # A CUDA device function may return a new view only inside a tuple.
    if of_buffers:

        def buffer_group_view(state, buffers, num_envs, num_agents):
            return previous(state, buffers, num_envs, num_agents) + view_of(
                buffers[first], num_envs, num_agents
            )

        return buffer_group_view

    def state_group_view(state, buffers, num_envs, num_agents):
        return previous(state, buffers, num_envs, num_agents) + view_of(state[first], num_envs, num_agents)

    return state_group_view


def _copy_chain(
    groups: list[tuple[bool, _Group]], per_agent: bool, in_global: bool
) -> tuple[Callable, Callable]:
    """``(read, write)`` for the staged entries of one kind (``per_agent``: each agent's values, else
    the environment's) through the group views of one memory (:func:`_group_views`; ``in_global``:
    the global rows): ``read(source, env, agent, num_envs)`` returns their values,
    ``write(target, values, env, agent, num_envs)`` writes them."""
    entries = [
        (position, member)
        for position, (_, group) in enumerate(groups)
        if group.per_agent == per_agent
        for member in range(len(group.members))
    ]
    read = cuda.jit(device=True)(_no_reads)
    write = cuda.jit(device=True)(_no_writes)
    for value, (position, member) in enumerate(entries):
        read = cuda.jit(device=True)(_then_read(read, position, member, per_agent, in_global))
        write = cuda.jit(device=True)(_then_write(write, position, member, value, per_agent, in_global))
    return read, write


def _no_reads(source, env, agent, num_envs):
    return ()


def _no_writes(target, values, env, agent, num_envs):
    pass


def _then_read(previous: Callable, position: int, member: int, per_agent: bool, in_global: bool) -> Callable:
    member = np.uint32(member)
    if in_global and per_agent:

        def read_global_agent(source, env, agent, num_envs):
            row = member * np.uint32(num_envs) + env
            return previous(source, env, agent, num_envs) + (source[position][row, agent],)

        return read_global_agent
    if in_global:

        def read_global_environment(source, env, agent, num_envs):
            row = member * np.uint32(num_envs) + env
            return previous(source, env, agent, num_envs) + (source[position][row],)

        return read_global_environment
    if per_agent:

        def read_agent(source, env, agent, num_envs):
            return previous(source, env, agent, num_envs) + (source[position][member, env, agent],)

        return read_agent

    def read_environment(source, env, agent, num_envs):
        return previous(source, env, agent, num_envs) + (source[position][member, env],)

    return read_environment


def _then_write(
    previous: Callable, position: int, member: int, value: int, per_agent: bool, in_global: bool
) -> Callable:
    member = np.uint32(member)
    if in_global and per_agent:

        def write_global_agent(target, values, env, agent, num_envs):
            previous(target, values, env, agent, num_envs)
            target[position][member * np.uint32(num_envs) + env, agent] = values[value]

        return write_global_agent
    if in_global:

        def write_global_environment(target, values, env, agent, num_envs):
            previous(target, values, env, agent, num_envs)
            target[position][member * np.uint32(num_envs) + env] = values[value]

        return write_global_environment
    if per_agent:

        def write_agent(target, values, env, agent, num_envs):
            previous(target, values, env, agent, num_envs)
            target[position][member, env, agent] = values[value]

        return write_agent

    def write_environment(target, values, env, agent, num_envs):
        previous(target, values, env, agent, num_envs)
        target[position][member, env] = values[value]

    return write_environment


def _copier(
    read_agents: Callable, write_agents: Callable, read_environment: Callable, write_environment: Callable
):
    """``copy(source, target, env, agent, num_envs, num_agents, live)``: the agent's values (and,
    for agent 0, the environment's) read through ``read_*`` from ``source`` and written through
    ``write_*`` into ``target`` (:func:`_copy_chain`)."""

    # Every value is read before any is written: a write through a generic pointer (shared memory,
    # as Numba addresses it) may alias a later read of global memory, so that the compiler would
    # otherwise wait for each read's round trip in turn.
    def copy(source, target, env, agent, num_envs, num_agents, live):
        if live and agent < num_agents:
            write_agents(target, read_agents(source, env, agent, num_envs), env, agent, num_envs)
        if live and agent == 0:
            write_environment(target, read_environment(source, env, agent, num_envs), env, agent, num_envs)

    return cuda.jit(device=True)(copy)


def staged_bytes(definition: EnvironmentDefinition, width: int) -> int:
    """Shared memory that :func:`make_staging` takes a block, in bytes, for ``width`` agents."""
    return _plans(definition, width)[2]


def _staged_fields(definition: EnvironmentDefinition) -> tuple[tuple, tuple]:
    """``(dtype, per_agent)`` of each state field and buffer staged, None for the others."""
    state_fields = tuple(
        (field.dtype, field.per_agent)
        if field.shape == () and np.dtype(field.dtype).itemsize <= _ALIGNMENT
        else None
        for field in definition.state_fields
    )
    buffer_fields = tuple(
        SCALAR_BUFFERS[name] if name in STAGED_BUFFERS else None for name in EnvBuffers._fields
    )
    return state_fields, buffer_fields


def staged_groups(definition: EnvironmentDefinition) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The names of the state fields and of the buffers that are staged, in groups of one element
    size and kind (per agent or per environment). The vector environments place each group as one
    tensor, its entries one after another (``group[i]`` the i-th name's), so that the staging
    reaches a group through one array: each array a kernel is given costs loads of its pointer and
    shape from the kernel's parameters, which missed the constant cache (BENCHMARKS.md,
    2026-11-28, twentieth session)."""
    state_fields, buffer_fields = _staged_fields(definition)
    names = [field.name for field in definition.state_fields]
    return (
        [tuple(names[index] for index in group.members) for group in _groups(state_fields)],
        [tuple(EnvBuffers._fields[index] for index in group.members) for group in _groups(buffer_fields)],
    )


def _plans(definition: EnvironmentDefinition, width: int) -> tuple[list[_Row], list[_Row], int]:
    """The rows of the state's fields and of the buffers, for ``width`` agents, and the bytes they
    take together (the state's first)."""
    state_fields, buffer_fields = _staged_fields(definition)
    state_plan, state_bytes = _plan(state_fields, width, 0)
    buffer_plan, buffer_bytes = _plan(buffer_fields, width, state_bytes)
    return state_plan, buffer_plan, state_bytes + buffer_bytes


def make_staging(definition: EnvironmentDefinition, width: int) -> tuple[Callable, Callable]:
    """``(stage, unstage)`` CUDA device functions for a block of at least ``width`` threads that
    holds one environment ``env`` of up to ``width`` agents, thread ``agent`` of which calls both:

    - ``stage(state, buffers, env, agent, num_envs, num_agents, live)`` returns ``(state, buffers)`` staged
      (namedtuples of the same types' fields, see the module docstring), their values copied in,
      after a barrier;
    - ``unstage(staged_state, staged_buffers, state, buffers, env, agent, num_envs, num_agents, live)`` copies
      the staged values back, after a barrier.

    The global arrays must be placed as :func:`staged_groups` says (the vector environments do).
    ``live``: whether the block's environment exists (False for blocks past the last; they still
    reach the barriers)."""
    state_plan, buffer_plan, size = _plans(definition, width)
    words = max(1, size // _ALIGNMENT)
    state_type = definition.state_type
    state_views, buffer_views = _view_chain(state_plan), _view_chain(buffer_plan)
    state_fields, buffer_fields = _staged_fields(definition)
    groups = [(False, group) for group in _groups(state_fields)] + [
        (True, group) for group in _groups(buffer_fields)
    ]
    row_strides = [_aligned(group.itemsize * (width if group.per_agent else 1)) for _, group in groups]
    global_groups = _group_views(groups, None)
    shared_groups = _group_views(groups, row_strides)
    read_global_agents, write_global_agents = _copy_chain(groups, True, in_global=True)
    read_global_environment, write_global_environment = _copy_chain(groups, False, in_global=True)
    read_shared_agents, write_shared_agents = _copy_chain(groups, True, in_global=False)
    read_shared_environment, write_shared_environment = _copy_chain(groups, False, in_global=False)

    copy_in = _copier(
        read_global_agents, write_shared_agents, read_global_environment, write_shared_environment
    )
    copy_back = _copier(
        read_shared_agents, write_global_agents, read_shared_environment, write_global_environment
    )

    def stage(state, buffers, env, agent, num_envs, num_agents, live):
        store = cuda.shared.array(words, np.int64).view(np.uint8)
        staged_state = state_type(*state_views(state, store))
        staged_buffers = EnvBuffers(*buffer_views(buffers, store))
        global_rows = global_groups(state, buffers, num_envs, num_agents)
        shared_rows = shared_groups(staged_state, staged_buffers, num_envs, num_agents)
        copy_in(global_rows, shared_rows, env, agent, num_envs, num_agents, live)
        cuda.syncthreads()
        return staged_state, staged_buffers

    def unstage(staged_state, staged_buffers, state, buffers, env, agent, num_envs, num_agents, live):
        cuda.syncthreads()
        shared_rows = shared_groups(staged_state, staged_buffers, num_envs, num_agents)
        global_rows = global_groups(state, buffers, num_envs, num_agents)
        copy_back(shared_rows, global_rows, env, agent, num_envs, num_agents, live)

    return cuda.jit(device=True)(stage), cuda.jit(device=True)(unstage)
