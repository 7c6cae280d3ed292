"""Sub-batches of a vector environment stepped as chains of their own (pipelining).

A step of the whole batch ends with its slowest block: each kernel's last blocks run on a GPU
partly empty, and the next step's kernels wait for all of them. Where the work between two steps
belongs to each environment alone (random actions; a policy applied to a sub-batch's own
observations), sub-batches need not wait for one another: each runs as a chain on a stream of its
own, and one chain's kernels fill the GPU while another's end. EnvPool's asynchronous mode and
PufferLib's double-buffered pools step their environments in parts for the same reason.

:meth:`warpsci.vector_env.WarpVectorEnv.pipeline` opens such chains::

    with env.pipeline(parts=2) as chains:
        for _ in range(num_steps):
            for chain in chains:
                with torch.cuda.stream(chain.stream):
                    env.actions_buffer[chain.envs] = policy(env.buffers.obs[chain.envs])
                    env.step_in_place(envs=chain.envs)
    # here every chain has joined torch's current stream again

Results equal those of whole-batch steps bit for bit: each environment's blocks compute the same,
only the order of launches between sub-batches differs. Tag continuous, 2,000 x 110, every step
observed, 100 steps replayed from a CUDA graph (one H200, 2026-11-28, BENCHMARKS.md): 28.8M env
steps/s joined after every step, 30.9M in two chains joined at the end, 31.1M in four.

The module imports torch only when chains are opened on a CUDA device: the CUDA backend takes
:func:`sub_batches` from it without torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any


@dataclasses.dataclass(frozen=True)
class SubBatch:
    """One chain of :meth:`~warpsci.vector_env.WarpVectorEnv.pipeline`.

    Attributes:
        envs: The chain's environments, ``slice(start, stop)`` (pass it as ``envs=`` to the
            environment's ``step_in_place`` and ``random_rollout``, and index its buffers with it).
        stream: The ``torch.cuda.Stream`` that the chain's work must be queued on (``with
            torch.cuda.stream(chain.stream):``): the first chain's is torch's current stream, the
            others' side streams forked from it (from torch's pool of 32 streams a device: more
            chains share them). None on the CPU backend, where that ``with`` does nothing and the
            chains run one after another.
    """

    envs: slice
    stream: Any


def sub_batches(num_envs: int, parts: int, alignment: int = 1) -> list[tuple[int, int]]:
    """``(first environment, environments)`` of ``parts`` sub-batches of ``num_envs``, in order, as
    equal as can be (the first ones larger), each starting at a multiple of ``alignment``
    environments (a CUDA block's); fewer where there are fewer ``alignment``-sized groups than
    parts, and one where ``parts`` is below 1."""
    groups = -(-num_envs // alignment)
    parts = max(1, min(parts, groups))
    size, larger = divmod(groups, parts)
    batches, first = [], 0
    for part in range(parts):
        stop = min(num_envs, first + (size + (part < larger)) * alignment)
        batches.append((first, stop - first))
        first = stop
    return batches


@contextlib.contextmanager
def pipelined(num_envs: int, parts: int, alignment: int, device: Any) -> Iterator[list[SubBatch]]:
    """The chains of :meth:`~warpsci.vector_env.WarpVectorEnv.pipeline` (see there): on CUDA, the
    first on torch's current stream and the others on side streams forked from it, joined back
    into it on leaving (on an error too)."""
    batches = sub_batches(num_envs, parts, alignment)
    if device.type != "cuda":
        yield [SubBatch(slice(first, first + count), None) for first, count in batches]
        return
    import torch

    from warpsci.backends.torch_interop import forked_torch_streams

    with torch.cuda.device(device), forked_torch_streams(len(batches) - 1, pool="pipeline") as sides:
        streams = [torch.cuda.current_stream(device), *sides]
        yield [
            SubBatch(slice(first, first + count), stream)
            for (first, count), stream in zip(batches, streams, strict=True)
        ]
