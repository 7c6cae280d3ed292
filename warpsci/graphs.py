"""Replaying fixed sequences of GPU work as CUDA graphs.

A Numba kernel launched from Python costs about 41 us and every eager torch operation several
microseconds, so a rollout of T steps (policy forward, sampling, step kernel, copies: about 15
launches per step) is bound by launches, not by work. Numba kernels launched on torch's current
stream are captured by ``torch.cuda.graph`` like torch's own kernels, and a replayed launch costs
about 1.25 us (DESIGN.md). :class:`GraphReplay` captures a function's GPU work once and replays it.

The captured function must only launch work on tensors that live as long as the graph (buffers
allocated once, as warpsci's are), take no decisions on device values (no ``.item()``, no host
copies), and have fixed shapes. Python scalars it passes to kernels (the environment's seed, say)
are frozen into the graph: ``key`` says when they changed, and the graph is then captured again.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable

import torch
from numba import cuda as numba_cuda

#: Every GraphReplay alive, so that :func:`release_all` can free their graphs.
_live: weakref.WeakSet[GraphReplay] = weakref.WeakSet()


class GraphReplay:
    """Calls ``function`` eagerly once (a warm-up on a side stream, as torch requires), captures it as
    a CUDA graph on the second call, and replays the graph from then on.

    Every call does the function's work exactly once: the warm-up call runs it, the capturing call
    captures and then replays it.

    Args:
        function: The work, taking no arguments.
        device: The CUDA device.
        generators: ``torch.Generator`` objects the function draws from; registered with the graph
            so that each replay draws new numbers (as eager calls would).
        key: Returns a value that changes when Python-side inputs frozen into the graph change;
            a new key triggers a new capture. Default: never changes.
    """

    def __init__(
        self,
        function: Callable[[], None],
        device: torch.device,
        generators: tuple[torch.Generator, ...] = (),
        key: Callable[[], Hashable] = lambda: None,
    ) -> None:
        if device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, got {device}")
        self.function = function
        self.device = device
        self.generators = generators
        self.key = key
        self.graph: torch.cuda.CUDAGraph | None = None
        self.captured_key: Hashable = None
        self.warmed_up = False
        self.captures = 0
        _live.add(self)

    def __call__(self) -> None:
        key = self.key()
        if self.graph is not None and key == self.captured_key:
            self.graph.replay()
        elif not self.warmed_up:
            self._warm_up()
        else:
            self._capture(key)

    def _warm_up(self) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.function()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.warmed_up = True

    def _capture(self, key: Hashable) -> None:
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        for generator in self.generators:
            graph.register_generator_state(generator)
        # Numba frees device memory and unloads modules in batches, whenever a finalizer queues one
        # past its limit: a batch freed while capturing (a cuMemFree, say) would invalidate the
        # capture, so the frees wait until it ends.
        with numba_cuda.defer_cleanup(), torch.cuda.graph(graph):
            self.function()
        self.graph, self.captured_key = graph, key
        self.captures += 1
        graph.replay()

    def release(self) -> None:
        """Free the captured graph (the next call captures it again)."""
        if self.graph is not None:
            torch.cuda.synchronize(self.device)
            self.graph.reset()
            self.graph, self.captured_key = None, None


def release_all() -> None:
    """Free every captured graph. A graph that holds NCCL collectives must be freed before its
    process group is destroyed, or ``destroy_process_group`` never returns (pytorch issue 115388)."""
    for replay in list(_live):
        replay.release()
