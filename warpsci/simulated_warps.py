"""Warp intrinsics for Numba's CUDA simulator, which has none: ``shfl_sync``, ``shfl_xor_sync``,
``ballot_sync``, ``match_any_sync`` and ``syncwarp``, so that kernels that use them (Tag
continuous's block observation) run under ``NUMBA_ENABLE_CUDASIM=1`` and are tested on machines
without a GPU. Opt in with :func:`enable` before building kernels: the CUDA backend then uses block
observations under the simulator too (slowly: the simulator runs a Python thread per CUDA thread,
and every intrinsic is a barrier).

The simulator runs a block's threads together, one block at a time. The 32 threads of a warp meet
at a ``threading.Barrier`` of their own, put their values side by side, and each takes what the
intrinsic gives it. Every lane of the warp must take part (a full mask), as on a GPU the kernels
here do; a warp whose lanes diverge waits until the barrier's timeout and then fails. A ballot (or a
match) is returned unsigned, where Numba's on a GPU is signed (test it against 0, not against
``0xFFFFFFFF``).

:func:`enable` also installs :mod:`warpsci.simulated_blocks` (a block's barriers without a poll,
its shared arrays allocated under a lock), where a lane that fails stops its warps' barriers.
"""

from __future__ import annotations

import threading
from typing import Any

from warpsci import simulated_blocks

_enabled = False


class _Warp:
    """The meeting place of one warp of a simulated block: a barrier, and two rows of values that
    the warp's exchanges take in turn (a lane's count of its exchanges says which)."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(32, timeout=simulated_blocks.BARRIER_TIMEOUT_S)
        self.rows: tuple[list[Any], list[Any]] = ([None] * 32, [None] * 32)
        self.exchanges = [0] * 32


def _exchange(value: Any) -> tuple[list[Any], int]:
    """Every lane's ``value`` (after all 32 have given theirs) and the caller's lane.

    One barrier an exchange: a lane writes the next exchange's value into the other row, and the
    one after that (into this row again) only after the next barrier, which every lane reaches
    after it has read this row. (Two barriers an exchange, one row, took a simulated Tag
    continuous test from 41 s to 51 s: medians of three, 2026-11-27, 2-core AMD EPYC.)"""
    index, lane = divmod(threading.current_thread().thread_id, 32)
    block = simulated_blocks.current_block()
    warp = block.warps.get(index)
    if warp is None:
        with block.condition:  # a lane that failed first would never come: give up with it
            block.raise_if_failed()
            warp = block.warps.setdefault(index, _Warp())
    row = warp.rows[warp.exchanges[lane] & 1]
    warp.exchanges[lane] += 1
    row[lane] = value
    warp.barrier.wait()
    return list(row), lane


def _shfl_sync(module: Any, mask: int, value: Any, source_lane: int) -> Any:
    values, _ = _exchange(value)
    return values[int(source_lane) & 31]


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


def enable() -> None:
    """Give the simulator's ``cuda`` module the five intrinsics (where it has none of its own),
    install :mod:`warpsci.simulated_blocks`, and let the CUDA backend built after this use
    block observations under the simulator."""
    global _enabled
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    simulated_blocks.install()

    for name, function in (
        ("shfl_sync", _shfl_sync),
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
