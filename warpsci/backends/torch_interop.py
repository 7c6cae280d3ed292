"""How Numba sees torch's memory and streams: zero-copy array views and torch's current stream.

Both are needed wherever a Numba kernel works on torch tensors (the environments' kernels, the
trainer's rollout kernels). numba-cuda is imported only when a CUDA tensor or stream is asked for.
"""

from __future__ import annotations

from typing import Any

import torch

_STREAMS: dict[int, Any] = {}


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
    handle = torch.cuda.current_stream(device).cuda_stream
    if handle not in _STREAMS:
        from numba import cuda

        _STREAMS[handle] = cuda.external_stream(handle)
    return _STREAMS[handle]
