"""Run an environment's kernels on plain numpy arrays, through either backend.

Used to compare the CUDA kernels (on a GPU, or under Numba's CUDA simulator when
``NUMBA_ENABLE_CUDASIM=1`` was set before numba was imported) with the CPU backend, step by step,
from the same seed and the same actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from warpsci.backends.buffers import EnvBuffers
from warpsci.backends.stages import agent_action_bounds
from warpsci.environment import EnvironmentDefinition, kernel_param_values, params_to_tuple
from warpsci.multi_agent_env import vector_env_class


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
        threads_per_block: int | None = None,
    ) -> None:
        # Allocate through a CPU vector env so the layout is exactly the one users get.
        params = params if params is not None else definition.default_params()
        template = vector_env_class(definition.agent_groups(params))(
            definition, num_envs, device="cpu", params=params
        )
        self.definition = definition
        self.backend = backend
        self.max_episode_steps = template.max_episode_steps
        self.groups = template.groups
        values = kernel_param_values(definition, template.params, num_envs)
        self.params = params_to_tuple(template.params, definition.params_float_dtype, values)
        # The template's own arrays (the runner keeps it): the fields that a step may stage in shared
        # memory lie in groups, one after another, as the staged kernels expect
        # (warpsci.backends.shared_staging.staged_groups); copied one by one they would not.
        self._template = template
        self.state = definition.state_type(
            *(template.state_tensors[f.name].numpy() for f in definition.state_fields)
        )
        self.buffers = EnvBuffers(*(tensor.numpy() for tensor in template.buffers))
        if backend == "cpu":
            from warpsci.backends.cpu import CpuKernels

            self._kernels = CpuKernels(definition, template.num_agents)
        elif backend == "cuda":
            from warpsci.backends.cuda import CudaKernels

            self._kernels = CudaKernels(definition, num_envs, template.num_agents, threads_per_block)
        else:
            raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")

    def reset(self, seed: int) -> None:
        self._run(lambda state, params, buffers: self._kernels.reset(state, params, buffers, seed))

    def step(self, actions: np.ndarray, seed: int, envs: tuple[int, int] | None = None) -> None:
        """One step with ``actions`` (of every environment); ``envs`` ``(first, count)`` steps those
        environments alone (the backends' ``envs=``)."""
        self.buffers.actions[...] = actions.reshape(self.buffers.actions.shape)
        self._run(
            lambda state, params, buffers: self._kernels.step(
                state, params, buffers, seed, self.max_episode_steps, envs=envs
            )
        )

    def random_steps(
        self, num_steps: int, seed: int, envs: tuple[int, int] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``num_steps`` steps with the kernels' own uniform random actions (one launch), of every
        environment or of ``envs`` ``(first, count)`` alone; returns ``(episodes ended per
        environment, sum of their returns per agent)`` (stale values outside ``envs``)."""
        num_envs, num_agents = self.buffers.rewards.shape
        actions = self.buffers.actions
        low, high = agent_action_bounds(self.groups, num_agents, 1 if actions.ndim == 2 else actions.shape[2])
        # Tallies filled with stale values, other ones on each backend: the kernels must clear
        # them before the first step.
        stale = 7 if self.backend == "cpu" else 11
        extras = [low, high, np.full(num_envs, stale, np.int64), np.full((num_envs, num_agents), np.nan)]

        def launch(state, params, buffers, low, high, episodes, return_sum):
            self._kernels.random_steps(
                state,
                params,
                buffers,
                seed,
                self.max_episode_steps,
                num_steps,
                (low, high),
                (episodes, return_sum),
                envs=envs,
            )

        self._run(launch, extras)
        return extras[2], extras[3]

    def _run(self, launch, extras: list[np.ndarray] | None = None) -> None:
        """Call ``launch(state, params, buffers, *extras)`` on this backend's arrays and copy results back
        into the host arrays."""
        extras = extras or []
        from numba import config

        if self.backend == "cpu" or config.ENABLE_CUDASIM:
            # The simulator hands arrays nested in tuples straight to the compiled functions.
            launch(self.state, self.params, self.buffers, *extras)
            return
        from numba import cuda

        # Each array copied on its own: launched from Python, the step's kernels do not stage.
        state = type(self.state)(*(cuda.to_device(array) for array in self.state))
        params = type(self.params)(
            *(cuda.to_device(value) if isinstance(value, np.ndarray) else value for value in self.params)
        )
        buffers = EnvBuffers(*(cuda.to_device(array) for array in self.buffers))
        device_extras = [cuda.to_device(array) for array in extras]
        launch(state, params, buffers, *device_extras)
        cuda.synchronize()
        hosts = [*self.state, *self.buffers, *extras]
        for host, device in zip(hosts, [*state, *buffers, *device_extras], strict=True):
            device.copy_to_host(host)
