"""CUDA backend: agents are threads, environments are packed into blocks.

A block is ``(agent_threads, envs_per_block)`` threads: ``threadIdx.x`` walks the agents of one
environment (striding when there are more agents than threads) and ``threadIdx.y`` picks the
environment within the block. A single-agent environment therefore gets one thread per environment,
32 environments to a warp, instead of wasting 31 of 32 lanes. Where agents read each other's results
(between phases, before a reset, before observing), ``cuda.syncthreads()`` separates the pieces;
single-agent kernels are compiled without barriers.

Kernels are launched on a given stream (torch's current stream, by default), so they order with
torch's work and can be captured in a CUDA graph.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import cuda

import warpsci._numba_compat  # noqa: F401  (must precede numba-cuda compilation)
from warpsci.backends.kernel_parts import make_kernel_parts
from warpsci.environment import EnvironmentDefinition
from warpsci.kernel_cache import cached_cuda_jit

#: Default threads per block; see ``benchmarks/`` for the block-size search.
DEFAULT_THREADS_PER_BLOCK = 128
_MAX_THREADS_PER_BLOCK = 1024


class CudaKernels:
    """Reset and step of every environment at once, on CUDA arrays (views of CUDA tensors).

    Args:
        definition: The environment.
        num_envs: Number of environments.
        num_agents: Agents per environment.
        threads_per_block: Threads per block (default 128); rounded down to whole environments.
    """

    def __init__(
        self,
        definition: EnvironmentDefinition,
        num_envs: int,
        num_agents: int,
        threads_per_block: int = DEFAULT_THREADS_PER_BLOCK,
    ) -> None:
        if not 1 <= threads_per_block <= _MAX_THREADS_PER_BLOCK:
            raise ValueError(
                f"threads_per_block must be in [1, {_MAX_THREADS_PER_BLOCK}], got {threads_per_block}"
            )
        self._reset_kernel, self._step_kernel, self._random_steps_kernel = _compile(
            definition, num_agents > 1
        )
        agent_threads = min(num_agents, threads_per_block)
        envs_per_block = max(1, threads_per_block // agent_threads)
        self.block = (agent_threads, envs_per_block)
        self.grid = (num_envs + envs_per_block - 1) // envs_per_block

    def reset(self, state: Any, params: Any, buffers: Any, seed: int, stream: Any = 0) -> None:
        """Reset every environment with ``seed`` and write the first observations."""
        self._reset_kernel[self.grid, self.block, stream](state, params, buffers, seed)

    def step(
        self, state: Any, params: Any, buffers: Any, seed: int, max_episode_steps: int, stream: Any = 0
    ) -> None:
        """Apply ``buffers.actions`` to every environment, autoresetting those that finish."""
        self._step_kernel[self.grid, self.block, stream](state, params, buffers, seed, max_episode_steps)

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
    ) -> None:
        """``num_steps`` steps in one launch with uniform random actions drawn in the kernel;
        ``tallies`` (episode count per environment, return sum per agent) accumulate the episodes
        that end."""
        self._random_steps_kernel[self.grid, self.block, stream](
            state, params, buffers, seed, max_episode_steps, num_steps, action_bounds, tallies
        )


@functools.cache
def _compile(definition: EnvironmentDefinition, use_barriers: bool):
    parts = make_kernel_parts(definition)
    step_key_base = parts.step_key_base
    agent_phase = parts.agent_phase
    finish_environment = parts.finish_environment
    close_episode = parts.close_episode
    reset_finished_agent = parts.reset_finished_agent
    reset_agent_fresh = parts.reset_agent_fresh
    observe = parts.observe
    action_key_base = parts.action_key_base
    random_action = parts.random_action
    tally_episode = parts.tally_episode
    num_phases = parts.num_step_phases

    # Two choices below halve a fused step's integer arithmetic on the GPU (profiled with Nsight
    # Compute, see BENCHMARKS.md). The agent loops are while loops: range(first, n, stride) with a
    # run-time stride costs a 64-bit division. Indices are uint32: Numba wraps negative signed
    # indices around (idx += size when idx < 0) on every array access, unsigned ones it need not.

    @cuda.jit
    def barrier():
        if use_barriers:
            cuda.syncthreads()

    @cached_cuda_jit
    def reset_kernel(state, params, buffers, seed):
        num_envs, num_agents = buffers.rewards.shape
        env = np.uint32(cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        active = env < num_envs
        agent = np.uint32(cuda.threadIdx.x)
        while active and agent < num_agents:
            reset_agent_fresh(state, params, buffers, seed, env, agent)
            agent += np.uint32(cuda.blockDim.x)
        barrier()
        agent = np.uint32(cuda.threadIdx.x)
        while active and agent < num_agents:
            observe(state, params, buffers, env, agent)
            agent += np.uint32(cuda.blockDim.x)

    @cached_cuda_jit
    def step_kernel(state, params, buffers, seed, max_episode_steps):
        num_envs, num_agents = buffers.rewards.shape
        env = np.uint32(cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        active = env < num_envs
        first_agent = np.uint32(cuda.threadIdx.x)
        agent_stride = np.uint32(cuda.blockDim.x)
        for phase in range(num_phases):
            agent = first_agent
            while active and agent < num_agents:
                key_base = np.uint64(step_key_base(seed, env, agent))
                agent_phase(state, params, buffers, key_base, env, agent, phase)
                agent += agent_stride
            barrier()
        if active and first_agent == 0:
            finish_environment(state, params, buffers, max_episode_steps, env)
        barrier()
        agent = first_agent
        while active and agent < num_agents:
            close_episode(state, params, buffers, env, agent)
            agent += agent_stride
        barrier()
        agent = first_agent
        while active and agent < num_agents:
            reset_finished_agent(state, params, buffers, seed, env, agent)
            agent += agent_stride
        barrier()
        agent = first_agent
        while active and agent < num_agents:
            observe(state, params, buffers, env, agent)
            agent += agent_stride

    @cached_cuda_jit
    def random_steps_kernel(
        state, params, buffers, seed, max_episode_steps, num_steps, action_bounds, tallies
    ):
        num_envs, num_agents = buffers.rewards.shape
        env = np.uint32(cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        active = env < num_envs
        first_agent = np.uint32(cuda.threadIdx.x)
        agent_stride = np.uint32(cuda.blockDim.x)
        # The first agent's keys are computed once per launch; hashing is costly on the GPU.
        # np.uint64: under Numba's CUDA simulator these are Python ints between compiled functions.
        first_action_base = np.uint64(action_key_base(seed, env, first_agent))
        first_step_base = np.uint64(step_key_base(seed, env, first_agent))
        for _ in range(num_steps):
            agent = first_agent
            while active and agent < num_agents:
                if agent == first_agent:
                    key_base = first_action_base
                else:
                    key_base = np.uint64(action_key_base(seed, env, agent))
                random_action(buffers, key_base, env, agent, action_bounds)
                agent += agent_stride
            barrier()
            for phase in range(num_phases):
                agent = first_agent
                while active and agent < num_agents:
                    if agent == first_agent:
                        key_base = first_step_base
                    else:
                        key_base = np.uint64(step_key_base(seed, env, agent))
                    agent_phase(state, params, buffers, key_base, env, agent, phase)
                    agent += agent_stride
                barrier()
            if active and first_agent == 0:
                finish_environment(state, params, buffers, max_episode_steps, env)
            barrier()
            agent = first_agent
            while active and agent < num_agents:
                close_episode(state, params, buffers, env, agent)
                tally_episode(buffers, env, agent, tallies)
                agent += agent_stride
            barrier()
            agent = first_agent
            while active and agent < num_agents:
                reset_finished_agent(state, params, buffers, seed, env, agent)
                agent += agent_stride
            barrier()
        agent = first_agent
        while active and agent < num_agents:
            observe(state, params, buffers, env, agent)
            agent += agent_stride

    return reset_kernel, step_kernel, random_steps_kernel
