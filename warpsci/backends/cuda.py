"""CUDA backend: agents are threads; an environment is one block, or several when it is wider.

**One block per environment** (the agents fit one block): a block is ``(agent_threads,
envs_per_block)`` threads, ``threadIdx.x`` walks the agents of one environment and ``threadIdx.y``
picks the environment within the block. A single-agent environment therefore gets one thread per
environment, 32 environments to a warp. The whole reset or step is one kernel that walks the stage
list of :mod:`warpsci.backends.stages` with ``cuda.syncthreads()`` between stages (compiled out for
single-agent environments).

**Several blocks per environment** (more than ``MAX_FUSED_AGENTS`` agents, or fewer threads per block
than agents asked for explicitly): ``cuda.syncthreads()``
cannot wait for another block, so each stage is its own launch over ``num_envs * blocks_per_env``
blocks, and the kernel boundary is the environment-wide barrier. Results equal the one-block
kernels' exactly: every agent computes the same thing, only the barrier differs. A grid-wide
synchronisation (cooperative launch) would save the launches, but it caps the grid at what is
resident on the GPU at once and cannot be captured in a CUDA graph with Numba; replayed from a graph
a launch costs a microsecond or two.

**Block observation**: an environment that gives one (``EnvironmentDefinition.block_observation``;
of several, the first whose ``max_agents`` it fits) gets a block of the observation's width to
itself (the threads past its agents skip the agent stages; with more agents than threads, each
takes several), launched with the dynamic shared memory the observation asks for, and the reset,
step and random-step kernels end with the observation written by the whole block together (Tag
continuous: a warp per observer, with the environment in shared memory) in place of each agent's
``observe_agent``. Launched from Python it stays in the same launch: such a launch costs about as
much CPU time as the whole step's GPU time (H100 host, Tag continuous 2,000 x 110: about 0.4-0.5
ms), and as a launch of its own it made a step launched from Python about three times as slow
(BENCHMARKS.md; twice as slow in 2026-11-27's eleventh session). Captured in a CUDA graph, where a
launch costs a microsecond or two, the observation is a launch of its own (**observed apart**):
the stages before it then run at :data:`STAGES_APART_MAX_REGISTERS` registers, with more blocks to
an SM to hide their waits on memory and on each other, instead of at the observation's cap (H100,
Tag continuous, every step observed, graph-replayed, env steps/s: 2,000 x 110 16.4M -> 17.1M,
2,000 x 1,000 1.01M -> 1.03M). Both give the same results: only the launches differ. There, where
the environment's agents fit the block, the step's kernels also run their stages on the scalar
arrays staged in shared memory (:mod:`warpsci.backends.shared_staging`; Tag continuous 2,000 x 110:
17.8M -> 20.5M). Observed apart, the environments run as :data:`SUB_BATCHES_APART` sub-batches, each on a
stream of its own (its stages, then its observation): a kernel's last blocks leave an SM's slots empty, and
another sub-batch's blocks fill them.

Kernels are launched on a given stream (torch's current stream, by default), so they order with
torch's work and can be captured in a CUDA graph.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
from numba import config, cuda

import warpsci._numba_compat  # noqa: F401  (must precede numba-cuda compilation)
from warpsci import simulated_warps
from warpsci.backends.shared_staging import make_staging, staged_bytes
from warpsci.backends.stages import KernelStages, Stage, agent_keys, make_kernel_stages, sequence
from warpsci.environment import (
    MAX_AGENTS_IN_ONE_BLOCK,
    MAX_BLOCK_SHARED_BYTES,
    BlockObservation,
    EnvironmentDefinition,
)
from warpsci.kernel_cache import cached_cuda_jit
from warpsci.pipelines import sub_batches

#: Default threads per block; see ``benchmarks/`` for the block-size search.
DEFAULT_THREADS_PER_BLOCK = 128
#: The most threads a CUDA block can have.
MAX_THREADS_PER_BLOCK = 1024
#: The block of an environment wider than :data:`DEFAULT_THREADS_PER_BLOCK` agents: its threads take
#: several agents each. Small blocks with few registers win: a stage waits for the slowest agent of
#: its block, and the more blocks an SM holds at once, the more of that wait other blocks fill
#: (H100, Tag gridworld 2,000 x 1,000, env steps/s: 256 threads 6.4M, 256 capped at 64 registers
#: 9.9M, 128 capped at 64 registers 13.4M, 512 or 1,024 threads 4.7M; BENCHMARKS.md).
MAX_FUSED_THREADS = 128
#: Register cap of the one-block kernels of such wide environments, unless the environment gives its
#: own (``EnvironmentDefinition.wide_max_registers``; uncapped, the compiler takes about 90 for Tag
#: gridworld; narrow environments are faster uncapped).
WIDE_MAX_REGISTERS: int | None = 64
#: The most agents an environment has in one block by default (32 per thread of 128); wider
#: environments span several blocks, one launch per stage.
MAX_FUSED_AGENTS = MAX_AGENTS_IN_ONE_BLOCK
#: Register cap of the step's kernels that leave the block observation to a launch of its own (in
#: a CUDA graph; see the module docstring). H100, Tag continuous, env steps/s: 2,000 x 110 uncapped
#: 16.8M-16.9M, 32 17.2M-17.3M, 40 17.4M, 48 17.3M-17.4M; 2,000 x 1,000 40 1.04M, 64 1.05M, 96
#: 1.04M (BENCHMARKS.md, 2026-11-27, eleventh session). With the scalar arrays staged in shared
#: memory the kernel spills more at 40 (292 bytes of spill stores, 184 at 48): 2,000 x 110 22.7M at
#: 40, 23.25M at 48, 23.1M at 56 (seventeenth session). One cap for narrow and wide games (it
#: replaces ``wide_max_registers`` there): at 1,000 agents 64 was under 1% ahead of 40. The first
#: capture compiles these kernels (tens of seconds where the kernel cache has none), inside the
#: capture.
STAGES_APART_MAX_REGISTERS = 48
#: The most shared memory, in bytes, that the step's kernels observed apart stage their scalar arrays
#: in (:mod:`warpsci.backends.shared_staging`); an environment whose staging would take more keeps
#: them in global memory. Tag continuous takes 6,968 bytes at 128 agents; 16 KB leaves an H100's SM
#: room for its 10 blocks at 48 registers.
MAX_STAGED_BYTES = 16 * 1024
#: Sub-batches of the environments observed apart (in a CUDA graph), each launched on a stream of its own
#: (:func:`warpsci.backends.torch_interop.forked_streams`; one stream under Numba's CUDA simulator) and
#: joined at the end of every step. A block of Tag continuous's stages or observation runs for
#: microseconds and an H100 holds 8 to 10 of them an SM, so 2,000 environments take each kernel in
#: about two rounds, and the last blocks of each run with the SM half empty: a step costs about
#: 23 us plus 31 ns an environment (2,000 x 110: 86 us). On two streams, one sub-batch's
#: observation starts beside the other's last stages. H100, every step observed, graph-replayed,
#: env steps/s (2026-11-27, eighteenth session): 2,000 x 110 23.1M in one batch, 24.1M in 2, 23.4M
#: in 3, 22.5M in 4, 18.5M in 8; 2,000 x 1,000 1.037M -> 1.055M; 8,000 x 110 29.0M -> 29.5M.
#: Results do not depend on it: each environment's blocks compute the same.
SUB_BATCHES_APART = 2


def default_threads_per_block(num_agents: int) -> int:
    """:data:`DEFAULT_THREADS_PER_BLOCK` (several narrow environments share a block), or
    :data:`MAX_FUSED_THREADS` for wider environments, whose threads take several agents each (up
    to :data:`MAX_FUSED_AGENTS`; wider ones span several blocks of this size)."""
    if num_agents <= DEFAULT_THREADS_PER_BLOCK:
        return DEFAULT_THREADS_PER_BLOCK
    return MAX_FUSED_THREADS


class CudaKernels:
    """Reset and step of every environment at once, on CUDA arrays (views of CUDA tensors).

    Args:
        definition: The environment.
        num_envs: Number of environments.
        num_agents: Agents per environment.
        threads_per_block: Threads per block; default :func:`default_threads_per_block`, with
            environments of up to ``MAX_FUSED_AGENTS`` agents in one block (threads take several
            agents). Given explicitly and smaller than the agent count, environments span several
            blocks.
        block_observation: Observe by the environment's block observation
            (``EnvironmentDefinition.block_observation``) where it can: an environment in one
            block (its block then has the observation's own width, whatever ``threads_per_block``
            says), with at most its ``max_agents``, not under Numba's CUDA simulator (unless
            :func:`warpsci.simulated_warps.enable` was called). Default True; False observes by
            ``observe_agent`` (the two write the same observations). The observation's
            ``applies(params)`` is for the caller to ask (:class:`WarpVectorEnv` does).
        block_registers: The register cap of the block observation's kernels for the caller's
            params (``BlockObservation.registers(params)``); default None: the observation's
            ``max_registers``.
    """

    def __init__(
        self,
        definition: EnvironmentDefinition,
        num_envs: int,
        num_agents: int,
        threads_per_block: int | None = None,
        block_observation: bool = True,
        block_registers: int | None = None,
    ) -> None:
        self.definition = definition
        explicit = threads_per_block is not None
        if threads_per_block is None:
            threads_per_block = default_threads_per_block(num_agents)
        if not 1 <= threads_per_block <= MAX_THREADS_PER_BLOCK:
            raise ValueError(
                f"threads_per_block must be in [1, {MAX_THREADS_PER_BLOCK}], got {threads_per_block}"
            )
        self.num_envs = num_envs
        # By default an environment of up to MAX_FUSED_AGENTS agents is one block whose threads take
        # several agents each (one launch per step); a block size given smaller than the agent count
        # asks for several blocks.
        spans = explicit or num_agents > MAX_FUSED_AGENTS
        self.blocks_per_env = (num_agents + threads_per_block - 1) // threads_per_block if spans else 1
        observation = definition.block_observation_for(num_agents)
        #: Whether the kernels end with the environment's block observation (see the module doc).
        self.observes_by_block = (
            block_observation
            and observation is not None
            and self.blocks_per_env == 1
            and (not config.ENABLE_CUDASIM or simulated_warps.enabled())
        )
        #: Dynamic shared memory per block of the fused kernels, in bytes (a block observation's).
        self.shared_bytes = 0
        #: The width that the step's kernels observed apart stage their scalar arrays in shared
        #: memory for (:mod:`warpsci.backends.shared_staging`); None where they are not staged.
        self.staged_width: int | None = None
        if self.blocks_per_env == 1:
            agent_threads = (
                observation.threads if self.observes_by_block else min(num_agents, threads_per_block)
            )
            registers = None
            if num_agents > agent_threads:
                registers = definition.wide_max_registers or WIDE_MAX_REGISTERS
            if self.observes_by_block:
                cap = observation.max_registers if block_registers is None else block_registers
                if cap is not None:
                    registers = cap
                self.shared_bytes = int(observation.shared_bytes(num_agents))
                if not 0 <= self.shared_bytes <= MAX_BLOCK_SHARED_BYTES:
                    raise ValueError(
                        f"{definition.name}: the block observation asks for {self.shared_bytes} bytes of "
                        f"shared memory at {num_agents} agents; it may ask for 0 to {MAX_BLOCK_SHARED_BYTES} "
                        f"(lower its max_agents)"
                    )
            by_block = observation if self.observes_by_block else None
            self._fused = _compile_fused(definition, num_agents > 1, registers, by_block)
            if self.observes_by_block:
                self.staged_width = _staged_width(definition, num_agents, observation.threads)
                self._stages_apart = _compile_fused(
                    definition,
                    num_agents > 1,
                    STAGES_APART_MAX_REGISTERS,
                    by_block,
                    observe_apart=True,
                    staged_width=self.staged_width,
                )
                self._observe_apart = _compile_block_observation(definition, by_block, registers)
            envs_per_block = 1 if self.observes_by_block else max(1, threads_per_block // agent_threads)
            self.block: tuple[int, ...] = (agent_threads, envs_per_block)
            self.grid = (num_envs + envs_per_block - 1) // envs_per_block
        else:
            self._staged = _compile_staged(definition)
            self.block = (threads_per_block,)
            self.grid = num_envs * self.blocks_per_env

    @property
    def multi_block(self) -> bool:
        """Whether an environment spans several blocks (one launch per stage)."""
        return self.blocks_per_env > 1

    def observes_apart(self) -> bool:
        """Whether the next launch leaves the block observation to a launch of its own: where it
        observes by block and torch's current stream is being captured in a CUDA graph (see the
        module docstring)."""
        return self.observes_by_block and _capturing()

    @property
    def range_alignment(self) -> int | None:
        """The environments of one block: a range of environments stepped on its own
        (``envs=`` of :meth:`step`, :meth:`random_steps`) must start at a multiple of it and stop
        at one or at the last environment. None where environments span several blocks, whose
        stage launches step every environment."""
        return None if self.multi_block else self.block[-1]

    def _launch_one_block(
        self, kernel: int, stream: Any, envs: tuple[int, int] | None, *arguments: Any
    ) -> None:
        """Fused kernel ``kernel`` (0 reset, 1 step, 2 random steps) of environments in one block
        each: every environment, or ``envs`` ``(first, count)`` alone (aligned as
        :attr:`range_alignment` says). Observed apart where :meth:`observes_apart` says so; every
        environment then runs in :data:`SUB_BATCHES_APART` sub-batches on streams of their own
        (``stream`` must then be torch's current stream, as :class:`WarpVectorEnv` passes), a
        range as one sub-batch on ``stream`` (its caller's chain)."""
        first, count = (0, self.num_envs) if envs is None else envs
        if not self.observes_apart():
            grid = -(-count // self.block[-1])
            self._fused[kernel][grid, self.block, stream, self.shared_bytes](np.uint32(first), *arguments)
            return
        batches = sub_batches(self.num_envs, SUB_BATCHES_APART) if envs is None else [envs]
        with _forked_streams(stream, len(batches)) as streams:
            for (first, count), batch_stream in zip(batches, streams, strict=True):
                first_env = np.uint32(first)
                self._stages_apart[kernel][count, self.block, batch_stream](first_env, *arguments)
                self._observe_apart[count, self.block, batch_stream, self.shared_bytes](
                    first_env, *arguments[:3]
                )

    def reset(self, state: Any, params: Any, buffers: Any, seed: int, stream: Any = 0) -> None:
        """Reset every environment with ``seed`` and write the first observations."""
        run = (np.int64(seed),)
        if self.multi_block:
            self._launch_stages(self._staged.reset, state, params, buffers, run, stream)
        else:
            self._launch_one_block(0, stream, None, state, params, buffers, run)

    def step(
        self,
        state: Any,
        params: Any,
        buffers: Any,
        seed: int,
        max_episode_steps: int,
        stream: Any = 0,
        envs: tuple[int, int] | None = None,
    ) -> None:
        """Apply ``buffers.actions`` to every environment (or to ``envs``, ``(first, count)``, alone;
        see :attr:`range_alignment`), autoresetting those that finish."""
        run = (np.int64(seed), np.int64(max_episode_steps))
        if self.multi_block:
            _check_whole(envs)
            self._launch_stages(self._staged.step, state, params, buffers, run, stream)
        else:
            self._launch_one_block(1, stream, envs, state, params, buffers, run)

    @property
    def fuses_policy_step(self) -> bool:
        """Whether :meth:`policy_step` applies: environments of one agent, one block each."""
        return not self.multi_block and self.block[0] == 1

    def policy_step(
        self,
        sampler: Any,
        sample_arguments: tuple,
        recorder: Any,
        record_arguments: tuple,
        state: Any,
        params: Any,
        buffers: Any,
        seed: int,
        max_episode_steps: int,
        stream: Any = 0,
    ) -> None:
        """A trainer's rollout step in one launch, for environments of one agent: each thread runs
        ``sampler(env, sample_arguments)`` (the policy's action into ``buffers.actions``), the step,
        then ``recorder(env, record_arguments)`` (its results into the rollout buffer), for its own
        environment. The same as the three launched apart: with one agent, no thread reads another
        environment's arrays. :mod:`warpsci.rollout_kernels` holds the samplers and the recorder."""
        if not self.fuses_policy_step:
            raise ValueError("policy_step takes environments of one agent, each in one block")
        kernel = _compile_policy_step(self.definition, sampler, recorder)
        run = (np.int64(seed), np.int64(max_episode_steps))
        kernel[self.grid, self.block, stream](state, params, buffers, run, sample_arguments, record_arguments)

    def random_steps(
        self,
        state: Any,
        params: Any,
        buffers: Any,
        seed: int,
        max_episode_steps: int,
        num_steps: int,
        action_bounds: tuple[Any, Any],
        tallies: tuple[Any, Any],
        stream: Any = 0,
        envs: tuple[int, int] | None = None,
    ) -> None:
        """``num_steps`` steps with uniform random actions drawn in the kernel (one launch when an
        environment fits a block), of every environment or of ``envs`` alone (as in :meth:`step`);
        ``tallies`` (episode count per environment, return sum per agent) are zeroed at the start
        of the call, then count the episodes that end during it."""
        run = (np.int64(seed), np.int64(max_episode_steps), action_bounds, tallies)
        if self.multi_block:
            _check_whole(envs)
            self._launch_stages(self._staged.random_begin, state, params, buffers, run, stream)
            for _ in range(num_steps):
                self._launch_stages(self._staged.random_step, state, params, buffers, run, stream)
            self._launch_stages(self._staged.observe, state, params, buffers, run, stream)
        else:
            self._launch_one_block(2, stream, envs, state, params, buffers, run, num_steps)

    def _launch_stages(self, kernels: tuple, state, params, buffers, run, stream) -> None:
        env_blocks = (self.num_envs + 127) // 128
        blocks_per_env = np.uint32(self.blocks_per_env)
        for per_agent, kernel in kernels:
            if per_agent:
                kernel[self.grid, self.block, stream](state, params, buffers, run, blocks_per_env)
            else:
                kernel[env_blocks, 128, stream](state, params, buffers, run, blocks_per_env)


@cuda.jit(device=True)
def _block_barrier():
    cuda.syncthreads()


@cuda.jit(device=True)
def _no_barrier():
    pass


@cuda.jit(device=True)
def _no_block_observation(state, params, obs, env):
    pass


@cuda.jit(device=True)
def _stage_nothing(state, buffers, env, agent, num_envs, num_agents, live):
    return state, buffers


@cuda.jit(device=True)
def _unstage_nothing(staged_state, staged_buffers, state, buffers, env, agent, num_envs, num_agents, live):
    pass


def _staged_width(definition: EnvironmentDefinition, num_agents: int, threads: int) -> int | None:
    """The width that the step's kernels observed apart stage their scalar arrays for
    (:mod:`warpsci.backends.shared_staging`): the block's ``threads``, where the environment's
    agents fit them and the staging takes at most :data:`MAX_STAGED_BYTES`; else None (not staged)."""
    if num_agents > threads or staged_bytes(definition, threads) > MAX_STAGED_BYTES:
        return None
    return threads


def _check_whole(envs: tuple[int, int] | None) -> None:
    if envs is not None:
        raise ValueError(
            "environments that span several CUDA blocks step all at once (one launch per stage); "
            "step them without envs="
        )


@contextlib.contextmanager
def _forked_streams(stream: Any, count: int) -> Iterator[list[Any]]:
    """``count`` streams for sub-batches: ``stream`` and side streams forked from torch's current
    stream and joined back into it on leaving; under Numba's CUDA simulator (which runs launches
    in order) ``stream`` ``count`` times."""
    if config.ENABLE_CUDASIM or count == 1:
        yield [stream] * count
        return
    from warpsci.backends.torch_interop import forked_streams

    with forked_streams(count - 1) as sides:
        yield [stream, *sides]


def _capturing() -> bool:
    """Whether torch's current CUDA stream is being captured in a CUDA graph (never where torch is
    not imported or has not initialised CUDA)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()


@cuda.jit(device=True)
def _keys(seed, env, agent):
    """``agent_keys`` as ``uint64`` values also under Numba's CUDA simulator (which hands Python
    ints between functions)."""
    computed = agent_keys(seed, env, agent)
    return (np.uint64(computed[0]), np.uint64(computed[1]))


def _device_function(function):
    return cuda.jit(device=True)(function)


@functools.cache
def _compile_fused(
    definition: EnvironmentDefinition,
    use_barriers: bool,
    max_registers: int | None = None,
    by_block: BlockObservation | None = None,
    observe_apart: bool = False,
    staged_width: int | None = None,
):
    """The reset, step and random-step kernels of environments in one block each (their first
    argument, ``first_env``, is the environment of the first block: a sub-batch's); ``by_block``: a
    block observation (the definition's) that each ends with, in place of each agent's
    ``observe_agent``, or, ``observe_apart``, that each leaves to the kernel of
    :func:`_compile_block_observation`. ``staged_width``: the step and random-step kernels run
    their stages on the scalar arrays staged in shared memory for that many agents
    (:mod:`warpsci.backends.shared_staging`; one environment a block); None: in global memory."""
    stages = make_kernel_stages(definition, observe_agents=by_block is None)
    barrier = _block_barrier if use_barriers else _no_barrier
    in_kernel = by_block is not None and not observe_apart
    observe_block = by_block.function if in_kernel else _no_block_observation
    before_observing = _block_barrier if in_kernel else _no_barrier
    reset_sequence = sequence(stages.reset, _device_function, barrier)
    step_sequence = sequence(stages.step, _device_function, barrier)
    random_begin_sequence = sequence(stages.random_begin, _device_function, barrier)
    random_step_sequence = sequence(stages.random_step, _device_function, barrier)
    observe_sequence = sequence(stages.observe, _device_function, barrier)
    if staged_width is None:
        stage, unstage = _stage_nothing, _unstage_nothing
    elif by_block is None or not observe_apart:
        raise ValueError("staged_width applies to the kernels observed apart, one environment a block")
    else:
        stage, unstage = make_staging(definition, staged_width)

    # The agent loops are while loops: range(first, n, stride) with a run-time stride costs a 64-bit
    # division. Indices are uint32: Numba wraps negative signed indices around (idx += size when
    # idx < 0) on every array access, unsigned ones it need not (profiled, see BENCHMARKS.md).

    def jit(kernel):
        label = f"{definition.name} {kernel.__name__.removesuffix('_kernel').replace('_', ' ')}"
        if observe_apart:
            label += " (observed apart)"
        if staged_width is not None and kernel.__name__ != "reset_kernel":
            label += " (staged in shared memory)"
        return cached_cuda_jit(kernel, max_registers=max_registers, label=label)

    @jit
    def reset_kernel(first_env, state, params, buffers, run):
        num_envs, num_agents = buffers.rewards.shape
        env = np.uint32(first_env + cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        live = env < num_envs
        first = np.uint32(cuda.threadIdx.x)
        keys = _keys(run[0], env, first)
        reset_sequence(
            state, params, buffers, run, env, live, first, np.uint32(cuda.blockDim.x), num_agents, keys
        )
        before_observing()
        observe_block(state, params, buffers.obs, env)

    @jit
    def step_kernel(first_env, state, params, buffers, run):
        num_envs, num_agents = buffers.rewards.shape
        env = np.uint32(first_env + cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        live = env < num_envs
        first = np.uint32(cuda.threadIdx.x)
        keys = _keys(run[0], env, first)
        # The scalar arrays staged in shared memory, or the arrays themselves where nothing is staged.
        staged_state, staged_buffers = stage(state, buffers, env, first, num_envs, num_agents, live)
        step_sequence(
            staged_state,
            params,
            staged_buffers,
            run,
            env,
            live,
            first,
            np.uint32(cuda.blockDim.x),
            num_agents,
            keys,
        )
        unstage(staged_state, staged_buffers, state, buffers, env, first, num_envs, num_agents, live)
        before_observing()
        observe_block(state, params, buffers.obs, env)

    @jit
    def random_steps_kernel(first_env, state, params, buffers, run, num_steps):
        num_envs, num_agents = buffers.rewards.shape
        env = np.uint32(first_env + cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        live = env < num_envs
        first = np.uint32(cuda.threadIdx.x)
        stride = np.uint32(cuda.blockDim.x)
        # The first agent's key bases are computed once per launch; hashing is costly on the GPU.
        keys = _keys(run[0], env, first)
        staged_state, staged_buffers = stage(state, buffers, env, first, num_envs, num_agents, live)
        random_begin_sequence(
            staged_state, params, staged_buffers, run, env, live, first, stride, num_agents, keys
        )
        for _ in range(num_steps):
            random_step_sequence(
                staged_state, params, staged_buffers, run, env, live, first, stride, num_agents, keys
            )
        observe_sequence(
            staged_state, params, staged_buffers, run, env, live, first, stride, num_agents, keys
        )
        unstage(staged_state, staged_buffers, state, buffers, env, first, num_envs, num_agents, live)
        before_observing()
        observe_block(state, params, buffers.obs, env)

    return reset_kernel, step_kernel, random_steps_kernel


@functools.cache
def _compile_block_observation(
    definition: EnvironmentDefinition, by_block: BlockObservation, max_registers: int | None
):
    """The kernel that writes ``by_block`` (the definition's block observation) after the step
    kernels of ``_compile_fused(..., observe_apart=True)``, a block per environment, capped at
    ``max_registers`` registers a thread (None: the compiler's choice), from environment
    ``first_env`` (its first argument) on."""

    observe_block = by_block.function

    def observe_kernel(first_env, state, params, buffers):
        observe_block(state, params, buffers.obs, np.uint32(first_env + cuda.blockIdx.x))

    label = f"{definition.name} block observation"
    return cached_cuda_jit(observe_kernel, max_registers=max_registers, label=label)


@functools.cache
def _compile_policy_step(definition: EnvironmentDefinition, sampler: Any, recorder: Any):
    """The kernel of :meth:`CudaKernels.policy_step` (one thread per environment, no barriers)."""
    step_sequence = sequence(make_kernel_stages(definition).step, _device_function, _no_barrier)

    def policy_step_kernel(state, params, buffers, run, sample_arguments, record_arguments):
        num_envs, num_agents = buffers.rewards.shape
        env = np.uint32(cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        live = env < num_envs
        if live:
            sampler(env, sample_arguments)
        first = np.uint32(cuda.threadIdx.x)
        keys = _keys(run[0], env, first)
        step_sequence(
            state, params, buffers, run, env, live, first, np.uint32(cuda.blockDim.x), num_agents, keys
        )
        if live:
            recorder(env, record_arguments)

    label = f"{definition.name} step with the trainer's {sampler.__name__} and {recorder.__name__}"
    return cached_cuda_jit(policy_step_kernel, label=label)


@functools.cache
def _compile_staged(definition: EnvironmentDefinition):
    """One kernel per stage, for environments that span several blocks."""
    stages = make_kernel_stages(definition)

    def kernels(stage_list: tuple[Stage, ...]) -> tuple:
        return tuple(
            (stage.per_agent, _stage_kernel(stage.function, stage.per_agent)) for stage in stage_list
        )

    # The same five lists, each stage now a ``(per_agent, kernel)`` pair.
    return KernelStages(
        reset=kernels(stages.reset),
        step=kernels(stages.step),
        random_begin=kernels(stages.random_begin),
        random_step=kernels(stages.random_step),
        observe=kernels(stages.observe),
    )


@functools.cache
def _stage_kernel(function, per_agent: bool):
    if per_agent:

        def agent_stage_kernel(state, params, buffers, run, blocks_per_env):
            num_envs, num_agents = buffers.rewards.shape
            block = np.uint32(cuda.blockIdx.x)
            env = block // blocks_per_env
            agent = (block % blocks_per_env) * np.uint32(cuda.blockDim.x) + np.uint32(cuda.threadIdx.x)
            if env < num_envs and agent < num_agents:
                function(state, params, buffers, run, env, agent, _keys(run[0], env, agent))

        return cached_cuda_jit(agent_stage_kernel, label=f"{function.__name__} (per agent)")

    def environment_stage_kernel(state, params, buffers, run, blocks_per_env):
        num_envs = buffers.rewards.shape[0]
        env = np.uint32(cuda.grid(1))
        if env < num_envs:
            function(state, params, buffers, run, env, np.uint32(0), _keys(run[0], env, np.uint32(0)))

    return cached_cuda_jit(environment_stage_kernel, label=f"{function.__name__} (per environment)")
