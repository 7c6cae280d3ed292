"""What an environment's arrays take in memory, checked before they are allocated.

A vector environment holds its state fields and the framework's buffers (observations twice: the
current ones and those that ended an episode; actions, rewards, flags, masks). Their sizes follow
from the shapes alone, so :func:`memory_plan` says what a configuration needs before anything is
allocated, and :func:`check_fits` refuses one that cannot fit in the memory free on its device with
a message that names the largest arrays and what to change, instead of an allocator's traceback
half-way through."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch


def nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    """Bytes of an array of ``shape`` and ``dtype`` (NumPy or torch)."""
    size = (
        torch.empty((), dtype=dtype).element_size()
        if isinstance(dtype, torch.dtype)
        else np.dtype(dtype).itemsize
    )
    return math.prod(shape) * size


def free_bytes(device: torch.device) -> int | None:
    """Memory free on ``device``: the GPU's free memory, or the host's available memory (Linux's
    ``MemAvailable``); None where it cannot be read."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def human(size: float) -> str:
    """``size`` bytes as ``"55.9 GB"``, ``"3.2 MB"`` or ``"12 KB"``."""
    if size >= 1e9:
        return f"{size / 1e9:.1f} GB"
    if size >= 1e6:
        return f"{size / 1e6:.1f} MB"
    return f"{math.ceil(size / 1e3)} KB"


def describe(plan: dict[str, int], count: int = 3) -> str:
    """The largest arrays of ``plan``, e.g. ``obs 55.9 GB, final_obs 55.9 GB, x 8.0 MB``."""
    largest = sorted(plan.items(), key=lambda item: -item[1])[:count]
    return ", ".join(f"{name} {human(size)}" for name, size in largest)


def check_fits(what: str, plan: dict[str, int], device: torch.device, advice: str) -> None:
    """Raise MemoryError when ``plan`` (bytes by array) needs more than the memory free on
    ``device``; ``advice`` says what to change."""
    free = free_bytes(device)
    total = sum(plan.values())
    if free is None or total <= free:
        return
    where = "GPU" if device.type == "cuda" else "host"
    raise MemoryError(
        f"{what} needs {human(total)} of {where} memory ({describe(plan)}) and {human(free)} "
        f"are free on {device}: {advice}"
    )
