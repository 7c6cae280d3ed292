"""Warp intrinsics for Numba's CUDA simulator, which has none: ``shfl_xor_sync``, ``ballot_sync``,
``match_any_sync`` and ``syncwarp``, so that kernels that use them (Tag continuous's block
observation) run under ``NUMBA_ENABLE_CUDASIM=1`` and are tested on machines without a GPU. Opt
in with :func:`enable` before building kernels: the CUDA backend then uses block observations
under the simulator too (slowly: the simulator runs a Python thread per CUDA thread, and every
intrinsic is two barriers).

The simulator runs a block's threads together, one block at a time. The 32 threads of a warp meet
at a ``threading.Barrier`` of their own, put their values side by side, and each takes what the
intrinsic gives it. Every lane of the warp must take part (a full mask), as on a GPU the kernels
here do; a warp whose lanes diverge waits until the barrier's timeout and then fails. A ballot (or a
match) is returned unsigned, where Numba's on a GPU is signed (test it against 0, not against
``0xFFFFFFFF``).

:func:`enable` also makes the simulator's static shared arrays safe for threads that reach their
declaration together. The simulator allocates a ``cuda.shared.array`` when the first thread of a
launch reaches its line, by a look-up and a store without a lock: two threads there at once (as
after a ``syncthreads``, where the block observation declares its arrays) could each allocate an
array of their own, and the block then read memory nobody wrote (a CI run on 2026-11-27 saw
``-7.3e-42`` in an observation, once in many launches).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

#: Seconds a lane waits for the rest of its warp before the simulated kernel fails.
BARRIER_TIMEOUT_S = 300.0

_lock = threading.Lock()
_enabled = False


class _Warp:
    """The meeting place of one warp of a simulated block."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(32, timeout=BARRIER_TIMEOUT_S)
        self.values: list[Any] = [None] * 32


def _exchange(value: Any) -> tuple[list[Any], int]:
    """Every lane's ``value`` (after all 32 have given theirs) and the caller's lane."""
    thread = threading.current_thread()
    manager = thread._manager  # the simulator's BlockManager of this block
    index, lane = divmod(thread.thread_id, 32)
    with _lock:
        warps = manager.__dict__.setdefault("_simulated_warps", {})
        warp = warps.setdefault(index, _Warp())
    warp.values[lane] = value
    warp.barrier.wait()
    values = list(warp.values)
    warp.barrier.wait()  # nobody writes the next exchange before every lane has read this one
    return values, lane


def _shfl_xor_sync(module: Any, mask: int, value: Any, lane_mask: int) -> Any:
    values, lane = _exchange(value)
    return values[lane ^ int(lane_mask)]


def _ballot_sync(module: Any, mask: int, predicate: Any) -> int:
    values, _ = _exchange(bool(predicate))
    return sum(1 << lane for lane, vote in enumerate(values) if vote)


def _match_any_sync(module: Any, mask: int, value: Any) -> int:
    values, lane = _exchange(value)
    return sum(1 << other for other, theirs in enumerate(values) if theirs == values[lane])


def _syncwarp(module: Any, mask: int = 0xFFFFFFFF) -> None:
    _exchange(None)


def _shared_array(shared: Any, shape: Any, dtype: Any, alignment: Any = None) -> np.ndarray:
    """The simulator's ``FakeCUDAShared.array``, its static arrays allocated under a lock: one
    array a declaration (file and line, as the simulator keys them) a launch."""
    if shape == 0 or alignment is not None:
        return _simulator_shared_array(shared, shape, dtype, alignment)
    from numba.core import types
    from numba.np import numpy_support

    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    caller = sys._getframe(1)
    line = (caller.f_code.co_filename, caller.f_lineno)
    with _lock:
        array = shared._allocations.get(line)
        if array is None:
            array = shared._allocations[line] = np.empty(shape, dtype)
    return array


_simulator_shared_array: Any = None


def enable() -> None:
    """Give the simulator's ``cuda`` module the four intrinsics (where it has none of its own),
    allocate its static shared arrays under a lock, and let the CUDA backend built after this use
    block observations under the simulator."""
    global _enabled, _simulator_shared_array
    from numba.cuda.simulator.kernelapi import FakeCUDAModule, FakeCUDAShared

    if FakeCUDAShared.array is not _shared_array:
        _simulator_shared_array = FakeCUDAShared.array
        FakeCUDAShared.array = _shared_array

    for name, function in (
        ("shfl_xor_sync", _shfl_xor_sync),
        ("ballot_sync", _ballot_sync),
        ("match_any_sync", _match_any_sync),
        ("syncwarp", _syncwarp),
    ):
        if not hasattr(FakeCUDAModule, name):
            setattr(FakeCUDAModule, name, function)
    _enabled = True


def enabled() -> bool:
    """Whether :func:`enable` was called in this process."""
    return _enabled
