"""How Numba sees torch's memory and streams: zero-copy array views, torch's current stream and side
streams forked from it.

Both are needed wherever a Numba kernel works on torch tensors (the environments' kernels, the
trainer's rollout kernels). numba-cuda is imported only when a CUDA tensor or stream is asked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

_STREAMS: dict[int, Any] = {}
#: Side streams of each device and pool, made once (see :func:`forked_torch_streams`).
_SIDE_STREAMS: dict[tuple[int, str], list[torch.cuda.Stream]] = {}


def numba_view(tensor: torch.Tensor) -> Any:
    """The tensor's memory as Numba sees it: a numpy array (CPU) or a CUDA array (no copy).

    The CUDA view does not synchronise with the tensor's stream (``sync=False``): warpsci launches
    its kernels on torch's current stream, which orders them already, and a synchronisation while a
    CUDA graph is being captured would invalidate the capture.
    """
    tensor = tensor.detach()
    if tensor.device.type == "cpu":
        return tensor.numpy()
    from numba import cuda

    return cuda.as_cuda_array(tensor, sync=False)


def current_numba_stream(device: torch.device) -> Any:
    """Numba's handle of torch's current stream on ``device``, so kernels order with torch's work
    (and are captured with it in a CUDA graph). Handles are made once per stream."""
    return _numba_stream(torch.cuda.current_stream(device))


def _numba_stream(stream: torch.cuda.Stream) -> Any:
    if stream.cuda_stream not in _STREAMS:
        from numba import cuda

        _STREAMS[stream.cuda_stream] = cuda.external_stream(stream.cuda_stream)
    return _STREAMS[stream.cuda_stream]


@contextlib.contextmanager
def forked_torch_streams(count: int, pool: str = "sub-batches") -> Iterator[list[torch.cuda.Stream]]:
    """``count`` side streams of the current device that start after the work queued so far on
    torch's current stream; on leaving (on an error too), the current stream waits for all that was
    queued on them. Captured in a CUDA graph this forks the graph into branches and joins them.

    The same side streams serve every call with the same ``pool`` (a name: the backend's
    sub-batches and :mod:`warpsci.pipelines`' chains keep lists of their own). They come from
    torch's stream pool, which ``torch.cuda.graph`` fills before it starts capturing; it hands out
    32 streams a device in turn, so a stream may serve two lists, which orders their work but
    never breaks it."""
    device = torch.cuda.current_device()
    sides = _SIDE_STREAMS.setdefault((device, pool), [])
    while len(sides) < count:
        sides.append(torch.cuda.Stream(device))
    current = torch.cuda.current_stream(device)
    for side in sides[:count]:
        side.wait_stream(current)
    try:
        yield sides[:count]
    finally:
        # Joined on an error too: a capture left with branches unjoined would report that, not
        # the error.
        for side in sides[:count]:
            current.wait_stream(side)


@contextlib.contextmanager
def forked_streams(count: int) -> Iterator[list[Any]]:
    """Numba handles of :func:`forked_torch_streams`' side streams (the backend's sub-batches)."""
    with forked_torch_streams(count) as sides:
        yield [_numba_stream(side) for side in sides]
