"""Numba's CUDA simulator, made faster and safe for warpsci's block kernels: :func:`install` gives
it a block runner whose threads wait at ``syncthreads`` without a poll, and static shared arrays
allocated under a lock. warpsci installs both before it builds a kernel under the simulator
(``NUMBA_ENABLE_CUDASIM=1``, :func:`warpsci.kernel_cache.cached_cuda_jit`); what a kernel computes
is unchanged, only how the simulator's threads take turns.

The simulator runs each CUDA thread of a block as a Python thread, one block at a time:

- **Barriers.** Its own manager finds the threads waiting at a ``syncthreads`` by polling every
  thread in a loop, and that loop holds Python's interpreter lock for much of the time the
  threads need it to reach the barrier. Here a block's threads meet at a condition variable that
  counts them (a thread that has returned counts as arrived, as on a GPU), and the launching thread
  sleeps until they are done. Tag continuous's simulated parity test with the observation launched
  apart took 41 s with the poll and 16 s with this (medians of three runs, 2026-11-27, 2-core AMD
  EPYC).
- **Shared arrays.** The simulator allocates a static ``cuda.shared.array`` when the first thread
  of a launch reaches its line, by a look-up and a store without a lock: threads that reach a
  declaration together (after a ``syncthreads``, as the block observation's) could each allocate an
  array of their own, and the block then read memory nobody wrote. A CI run on 2026-11-27 saw
  ``-7.3e-42`` in an observation, once in many launches.
- **A failing thread** stops its block: the threads waiting at a barrier (this module's or a
  warp's, :mod:`warpsci.simulated_warps`) raise, and the launch raises the failing thread's error
  once every thread of the block has returned (the simulator raised at once and left the others
  running: a thread that spins on a flag the failed one never sets now holds the launch).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

#: Seconds a thread waits at a ``syncthreads`` (or a lane at a warp intrinsic,
#: :mod:`warpsci.simulated_warps`) for the rest of its block (or warp) before the kernel fails.
BARRIER_TIMEOUT_S = 300.0

_lock = threading.Lock()
_simulator_shared_array: Any = None


class BlockFailed(RuntimeError):
    """Raised at a barrier in the threads of a block in which another thread failed."""


class SimulatedBlock:
    """What the threads of one simulated block share: the ``syncthreads`` barrier, the warps' meeting
    places (filled by :mod:`warpsci.simulated_warps`) and the thread that failed, if one did."""

    def __init__(self, threads: int) -> None:
        self.condition = threading.Condition()
        self.running = threads
        self.waiting = 0
        self.generation = 0
        self.failure: threading.Thread | None = None
        #: A meeting place a warp, by warp index (:mod:`warpsci.simulated_warps`).
        self.warps: dict[int, Any] = {}

    def sync(self) -> None:
        """Wait until every thread of the block still running has reached a barrier."""
        with self.condition:
            self.raise_if_failed()
            self.waiting += 1
            generation = self.generation
            if self.waiting == self.running:
                self._release()
                return
            while generation == self.generation and self.failure is None:
                if not self.condition.wait(BARRIER_TIMEOUT_S):
                    raise BlockFailed(f"a thread waited {BARRIER_TIMEOUT_S} s at syncthreads for its block")
            if generation == self.generation:
                self.raise_if_failed()

    def finish(self, failed: bool) -> None:
        """The calling thread has returned (``failed``: by an exception)."""
        with self.condition:
            self.running -= 1
            if failed and self.failure is None:
                self.failure = threading.current_thread()
                for warp in self.warps.values():
                    warp.barrier.abort()
                self.condition.notify_all()
            elif self.waiting and self.waiting == self.running:
                self._release()

    def _release(self) -> None:
        self.waiting = 0
        self.generation += 1
        self.condition.notify_all()

    def raise_if_failed(self) -> None:
        """Raise :class:`BlockFailed` where a thread of the block has failed."""
        if self.failure is not None:
            raise BlockFailed(f"another thread of the block failed ({self.failure.threadIdx})")


def current_block() -> SimulatedBlock:
    """The :class:`SimulatedBlock` of the calling simulated CUDA thread."""
    return threading.current_thread()._manager._warpsci_block


def _run_block(manager: Any, grid_point: tuple[int, ...], *args: Any) -> None:
    """``BlockManager.run``: the block's threads, started and joined, meeting at
    :meth:`SimulatedBlock.sync`; raises the error of the thread that failed first."""
    from numba.cuda.simulator.kernel import BlockThread

    points = list(np.ndindex(*manager._block_dim))
    block = SimulatedBlock(len(points))
    manager._warpsci_block = block

    def run_thread() -> None:
        failed = True
        try:
            manager._f(*args)
            failed = False
        finally:
            block.finish(failed)

    threads = [BlockThread(run_thread, manager, grid_point, point, manager._debug) for point in points]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [thread for thread in threads if thread.exception]
    if block.failure in failed:
        failed.insert(0, block.failure)
    if failed:
        error, traceback = failed[0].exception
        raise error.with_traceback(traceback)
    if block.failure is not None:
        raise BlockFailed(f"thread {block.failure.threadIdx} of the block failed")


def _syncthreads(thread: Any) -> None:
    """``BlockThread.syncthreads``."""
    thread._manager._warpsci_block.sync()


def _shared_array(shared: Any, shape: Any, dtype: Any, alignment: Any = None) -> np.ndarray:
    """``FakeCUDAShared.array``, its static arrays allocated under a lock: one array a declaration
    (file and line, as the simulator keys them) a launch."""
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


def install() -> None:
    """Give Numba's CUDA simulator this module's block runner, barrier and shared arrays (once; a
    later call does nothing)."""
    global _simulator_shared_array
    from numba.cuda.simulator.kernel import BlockManager, BlockThread
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    with _lock:
        if FakeCUDAShared.array is _shared_array:
            return
        _simulator_shared_array = FakeCUDAShared.array
        FakeCUDAShared.array = _shared_array
        BlockManager.run = _run_block
        BlockThread.syncthreads = _syncthreads


def installed() -> bool:
    """Whether :func:`install` was called in this process."""
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    return FakeCUDAShared.array is _shared_array
