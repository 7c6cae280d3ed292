"""Run an environment's kernels on plain numpy arrays, through either backend.

Used to compare the CUDA kernels (on a GPU, or under Numba's CUDA simulator when
``NUMBA_ENABLE_CUDASIM=1`` was set before numba was imported) with the CPU backend, step by step,
from the same seed and the same actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from warpsci.backends.buffers import EnvBuffers
from warpsci.environment import EnvironmentDefinition, params_to_tuple
from warpsci.vector_env import WarpVectorEnv


class HostKernelRunner:
    """Holds numpy copies of an environment's arrays and runs one backend's kernels on them.

    Args:
        definition: The environment.
        num_envs: Number of environments.
        backend: ``"cpu"`` or ``"cuda"``.
        params: Params dataclass; default the definition's defaults.
        threads_per_block: CUDA threads per block.
    """

    def __init__(
        self,
        definition: EnvironmentDefinition,
        num_envs: int,
        backend: str,
        params: Any | None = None,
        threads_per_block: int = 128,
    ) -> None:
        # Allocate through a CPU vector env so the layout is exactly the one users get.
        template = WarpVectorEnv(definition, num_envs, device="cpu", params=params)
        self.definition = definition
        self.backend = backend
        self.max_episode_steps = template.max_episode_steps
        self.params = params_to_tuple(template.params, definition.params_float_dtype)
        self.state = definition.state_type(
            *(template.state_tensors[f.name].numpy().copy() for f in definition.state_fields)
        )
        self.buffers = EnvBuffers(*(tensor.numpy().copy() for tensor in template.buffers))
        if backend == "cpu":
            from warpsci.backends.cpu import CpuKernels

            self._kernels = CpuKernels(definition)
        elif backend == "cuda":
            from warpsci.backends.cuda import CudaKernels

            self._kernels = CudaKernels(definition, num_envs, template.num_agents, threads_per_block)
        else:
            raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")

    def reset(self, seed: int) -> None:
        self._run(lambda state, buffers: self._kernels.reset(state, self.params, buffers, seed))

    def step(self, actions: np.ndarray, seed: int) -> None:
        self.buffers.actions[...] = actions.reshape(self.buffers.actions.shape)
        self._run(
            lambda state, buffers: self._kernels.step(
                state, self.params, buffers, seed, self.max_episode_steps
            )
        )

    def _run(self, launch) -> None:
        if self.backend == "cpu":
            launch(self.state, self.buffers)
            return
        from numba import config, cuda

        if config.ENABLE_CUDASIM:
            # The simulator hands arrays nested in tuples straight to the compiled functions.
            launch(self.state, self.buffers)
            return
        state = type(self.state)(*(cuda.to_device(array) for array in self.state))
        buffers = EnvBuffers(*(cuda.to_device(array) for array in self.buffers))
        launch(state, buffers)
        cuda.synchronize()
        for host, device in zip(self.state, state, strict=True):
            device.copy_to_host(host)
        for host, device in zip(self.buffers, buffers, strict=True):
            device.copy_to_host(host)
