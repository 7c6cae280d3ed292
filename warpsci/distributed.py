"""Training on several processes: ``torch.distributed``, launched by ``torchrun``.

``torchrun --nproc-per-node K -m warpsci train ENV ...`` starts K processes and tells each its
``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` in the environment (across hosts: ``--nnodes`` and a
rendezvous endpoint). Each process owns one GPU (``cuda:LOCAL_RANK``; NCCL) or a share of the CPU
(gloo) and steps its own ``num_envs / K`` environments, seeded by rank. Every process starts from
rank 0's weights; after each backward pass the gradients are averaged over the processes with one
all-reduce of a flat buffer (capturable in a CUDA graph), so every process takes the same optimizer
step and the weights stay bit-identical (checked at the end of training). Observation and reward
statistics are reduced too; metrics are averaged for the logs, which only rank 0 writes, with the
checkpoints.

A run started without torchrun (no ``WORLD_SIZE``, or 1) is one process and none of this applies.
``WARPSCI_DIST_TIMEOUT_S`` (default 600) bounds the wait to join the process group and for every
collective, so that a lost rank or an unreachable rendezvous ends the run with a message, not a hang.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist

from warpsci.graphs import release_all


class DistributedError(RuntimeError):
    """A multi-process launch that cannot work (one line, said to the user)."""


DEFAULT_TIMEOUT_S = 600.0


@dataclasses.dataclass(frozen=True)
class Processes:
    """This process's place among the training processes (one process: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def active(self) -> bool:
        """True when several processes train together."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on rank 0, the process that writes logs and checkpoints."""
        return self.rank == 0

    def device(self, requested: str) -> str:
        """The device this process trains on: ``cuda:LOCAL_RANK`` for a CUDA run of several
        processes, else ``requested``."""
        if not self.active or not requested.startswith("cuda"):
            return requested
        return f"cuda:{self.local_rank}"

    def share(self, count: int, name: str) -> int:
        """This process's share of a global ``count`` (``num_envs``): an equal split, or an error."""
        if count % self.world_size:
            raise DistributedError(
                f"{name} {count} does not split over {self.world_size} processes: give a multiple of "
                f"{self.world_size} (it is the global count; each process steps {name} / processes)"
            )
        return count // self.world_size

    def seed(self, seed: int) -> int:
        """The seed this process uses for its environments and sampling: ``seed`` on rank 0, a
        different stream on every other rank."""
        if self.rank == 0:
            return seed
        import numpy as np

        return int(np.random.SeedSequence([seed, self.rank]).generate_state(1)[0] & 0x7FFFFFFF)

    # ------------------------------------------------------------------------ collectives

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over the processes, in place; returns it."""
        if self.active:
            dist.all_reduce(tensor)
        return tensor

    def average_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Average ``tensor`` over the processes, in place; returns it."""
        if self.active:
            if dist.get_backend() == "nccl":
                dist.all_reduce(tensor, op=dist.ReduceOp.AVG)  # one kernel; gloo has no AVG
            else:
                dist.all_reduce(tensor)
                tensor /= self.world_size
        return tensor

    def average_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Average the gradients of ``parameters`` over the processes with one all-reduce
        (parameters without a gradient are skipped: the same ones on every rank). Gradients that
        lie back to back in one buffer (the fused loss's) are averaged where they are; others are
        gathered into a flat buffer and copied back."""
        if not self.active:
            return
        grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
        if not grads:
            return
        span = contiguous_span(grads)
        if span is not None:
            self.average_(span)
            return
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        self.average_(flat)
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()

    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Copy rank 0's parameters and buffers (normalizer statistics) to every process."""
        if not self.active:
            return
        with torch.no_grad():
            for tensor in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(tensor.data, src=0)

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's ``value`` (any picklable object) on every process."""
        if not self.active:
            return value
        holder = [value]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]

    def barrier(self) -> None:
        """Wait until every process reaches this point."""
        if self.active:
            dist.barrier()

    def modules_in_sync(self, modules: Iterable[torch.nn.Module]) -> bool:
        """True when every process holds bit-identical parameters and buffers of ``modules``
        (an all-reduce of their max and min: equal only where every rank holds the same bits)."""
        if not self.active:
            return True
        tensors = [
            tensor.detach().reshape(-1).double()
            for module in modules
            for tensor in module.state_dict().values()
        ]
        if not tensors:
            return True
        flat = torch.cat(tensors)
        high, low = flat.clone(), flat.clone()
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        return bool(torch.equal(high, low) and torch.equal(high, flat))


SINGLE = Processes()
_current = SINGLE


def contiguous_span(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """A 1-D view of exactly the elements of ``tensors`` where they lie back to back, in order, in
    one buffer (each contiguous, of one dtype and device), or None where they do not."""
    first = tensors[0]
    offset = first.storage_offset()
    for tensor in tensors:
        same_buffer = tensor.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
        if not (same_buffer and tensor.dtype == first.dtype and tensor.is_contiguous()):
            return None
        if tensor.storage_offset() != offset:
            return None
        offset += tensor.numel()
    return first.as_strided((offset - first.storage_offset(),), (1,))


def launched() -> bool:
    """True when this process was started by torchrun (or by hand) as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def timeout_s() -> float:
    """``WARPSCI_DIST_TIMEOUT_S`` (seconds), default 600."""
    text = os.environ.get("WARPSCI_DIST_TIMEOUT_S", str(DEFAULT_TIMEOUT_S))
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise DistributedError(f"WARPSCI_DIST_TIMEOUT_S={text!r} is not a positive number of seconds")
    return value


def setup(device: str) -> Processes:
    """Join the process group once (NCCL for CUDA runs, gloo for CPU runs) when launched as one of
    several processes; returns this process's place. Without torchrun: one process, nothing joined."""
    global _current
    if not launched():
        return SINGLE
    if dist.is_initialized():
        return _current
    try:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    except (KeyError, ValueError) as error:
        raise DistributedError(
            f"WORLD_SIZE is set but RANK or LOCAL_RANK is missing or not a number ({error}): launch "
            "with torchrun, which sets all three"
        ) from None
    if not 0 <= rank < world_size:
        raise DistributedError(f"RANK {rank} is outside WORLD_SIZE {world_size}: launch with torchrun")
    cuda = device.startswith("cuda")
    if cuda:
        available = torch.cuda.device_count()
        if local_rank >= available:
            raise DistributedError(
                f"process {local_rank} on this host has no GPU of its own: the host has {available} "
                f"GPU(s); start at most {available} processes per host (--nproc-per-node {max(available, 1)})"
            )
        torch.cuda.set_device(local_rank)
    wait = timeout_s()
    address = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    try:
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            timeout=datetime.timedelta(seconds=wait),
            **({"device_id": torch.device("cuda", local_rank)} if cuda else {}),
        )
    except (RuntimeError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DistributedError(
            f"rank {rank} of {world_size} could not join the process group at {address} within "
            f"{wait:.0f} s ({first_line}); check the rendezvous endpoint (--rdzv-endpoint / "
            "MASTER_ADDR:MASTER_PORT) is reachable from every host, or raise WARPSCI_DIST_TIMEOUT_S"
        ) from None
    if dist.get_world_size() != world_size:
        raise DistributedError(
            f"the process group has {dist.get_world_size()} processes, WORLD_SIZE says {world_size}"
        )
    _current = Processes(rank, world_size, local_rank)
    return _current


def current() -> Processes:
    """The place set by :func:`setup` (one process before it, or without torchrun)."""
    return _current


def shutdown() -> None:
    """Leave the process group (at the end of a multi-process command)."""
    global _current
    if dist.is_available() and dist.is_initialized():
        release_all()
        dist.destroy_process_group()
    _current = SINGLE
