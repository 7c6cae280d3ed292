"""A device-resident vector environment with the Gymnasium ``VectorEnv`` API.

Every array (environment state, observations, actions, rewards, flags, episode statistics) is a
torch tensor allocated once on the environment's device; the kernels see the same memory through
Numba (``tensor.numpy()`` on the CPU, ``numba.cuda.as_cuda_array`` on CUDA) and update it in place.
``step`` moves nothing to or from the host unless ``check_actions`` asks for a range check.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from warpsci.backends.buffers import SCALAR_BUFFERS, EnvBuffers
from warpsci.backends.shared_staging import staged_groups
from warpsci.backends.torch_interop import current_numba_stream, numba_view
from warpsci.environment import (
    AgentGroup,
    EnvironmentDefinition,
    flat_size,
    kernel_param_values,
    mask_size,
    params_to_tuple,
)
from warpsci.environment_checks import raise_named
from warpsci.memory import check_fits, nbytes
from warpsci.pipelines import SubBatch, pipelined

_NUMPY_TO_TORCH = {
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.bool_): torch.bool,
}
#: The tensor type in which a group of fields of one element size is placed (each field a view).
_SAME_SIZE_INTEGER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclasses.dataclass(frozen=True)
class RandomRolloutStats:
    """The episodes that ended during one :meth:`WarpVectorEnv.random_rollout` call.

    The tensors live on the environment's device and are overwritten by the next call.

    Attributes:
        episodes: ``(num_envs,)`` int64, episodes that ended in each environment.
        return_sum: ``(num_envs,)`` float64 (``(num_envs, num_agents)`` with several agents), the
            sum of their returns.
    """

    episodes: torch.Tensor
    return_sum: torch.Tensor

    def mean_return(self) -> float:
        """Mean return of the episodes that ended (over agents too); NaN if none did."""
        count = int(self.episodes.sum())
        if count == 0:
            return math.nan
        per_agent = self.return_sum.shape[1] if self.return_sum.dim() == 2 else 1
        return float(self.return_sum.sum()) / (count * per_agent)


def resolve_device(device: str | torch.device) -> torch.device:
    """Check that ``device`` is ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` and usable on this machine."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from error
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device={str(device)!r} was requested but no CUDA GPU is available "
                "(torch.cuda.is_available() is False); use device='cpu' (--device cpu on the command line)"
            )
        index = resolved.index if resolved.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"device={str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
        return torch.device("cuda", index)
    if resolved.type != "cpu":
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return resolved


class WarpVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` copies of one environment, stepped together on ``device``.

    Args:
        definition: The environment (see :mod:`warpsci.environment`).
        num_envs: Number of environments, >= 1.
        device: ``"cpu"`` (Numba CPU backend) or ``"cuda"``/``"cuda:N"`` (Numba CUDA backend).
        seed: Seed of the first ``reset()`` when it is given none. Default 0.
        params: Params dataclass instance; default the definition's defaults.
        copy: If True (default, as in Gymnasium), ``reset``/``step`` return copies of the
            observation, reward and flag tensors. If False they return the environment's own
            buffers, which the next ``step`` overwrites: faster, for trainers that consume them
            at once.
        check_actions: If True (default), ``step`` checks that actions lie in the action space,
            which costs one device-to-host transfer of a flag. Trainers that sample valid actions
            turn it off.
        threads_per_block: CUDA threads per block (CUDA backend only). Default 128 (an
            environment with a block observation in use gets a block of the observation's width).
        block_observation: Observe by the environment's block observation where the CUDA backend
            can and it applies to ``params`` (``EnvironmentDefinition.block_observation``; the same
            observations as ``observe_agent``, written by a block together). Default True; False
            to compare.

    Single-agent environments have observations ``(num_envs, *obs_shape)`` and actions
    ``(num_envs, *action_shape)``; multi-agent ones add an agent axis after the environment axis.
    Finished environments are reset inside ``step`` (same-step autoreset): the returned
    observation is the first of the new episode, and ``info["final_obs"]`` holds the one that ended
    the episode where ``info["_final_obs"]`` is True. ``info["episode"]`` holds ``"r"`` (return)
    and ``"l"`` (length) of episodes that ended, where ``info["_episode"]`` is True.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        definition: EnvironmentDefinition,
        num_envs: int,
        device: str | torch.device = "cpu",
        seed: int | None = 0,
        params: Any | None = None,
        copy: bool = True,
        check_actions: bool = True,
        threads_per_block: int | None = None,
        block_observation: bool = True,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs <= 0:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if not isinstance(block_observation, bool):
            raise ValueError(f"block_observation must be True or False, got {block_observation!r}")
        self.definition = definition
        self.params = params if params is not None else definition.default_params()
        if not isinstance(self.params, definition.params_type):
            raise TypeError(
                f"params must be a {definition.params_type.__name__}, got {type(self.params).__name__}"
            )
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.copy = copy
        self.check_actions = check_actions
        self.groups = definition.agent_groups(self.params)
        self.num_agents = sum(group.size for group in self.groups)
        self.max_episode_steps = int(definition.max_episode_steps(self.params))
        if self.max_episode_steps < 1:
            raise ValueError(
                f"{definition.name}: the time limit (max_episode_steps) must be at least 1 step, "
                f"got {self.max_episode_steps}"
            )
        self._next_seed = _seed_to_int(0 if seed is None else seed)
        self._seed = self._next_seed
        layout = self._layout()
        self._check_memory(layout)  # before anything sized by num_envs (the batched spaces too)

        if len(self.groups) == 1:
            agent_observation_space = self.groups[0].observation_space
            agent_action_space = self.groups[0].action_space
        elif type(self) is WarpVectorEnv:
            raise TypeError(
                f"{definition.name} has agent groups {[g.name for g in self.groups]}: use "
                "warpsci.make, or warpsci.multi_agent_env.MultiAgentVectorEnv (tensors per group)"
            )
        else:
            agent_observation_space = agent_action_space = None
        self._agent_action_space = agent_action_space
        self._set_spaces(agent_observation_space, agent_action_space)

        self._allocate(layout)
        self._place_params()
        self._build_backend(threads_per_block, block_observation)
        self._has_reset = False
        #: The chains of the open :meth:`pipeline`, None outside one.
        self._chains: list[SubBatch] | None = None

    def _set_spaces(
        self, observation_space: gymnasium.Space | None, action_space: gymnasium.Space | None
    ) -> None:
        """Gymnasium's spaces of one environment and of the batch (one group: the group's spaces
        with an agent axis when it has several agents)."""
        self.single_observation_space = _with_agents(observation_space, self.num_agents)
        self.single_action_space = _with_agents(action_space, self.num_agents)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    # ----------------------------------------------------------------------------- set-up

    def _layout(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Shape and dtype of every state field and buffer (``state.<name>``, ``buffers.<name>``)."""
        self.action_mask_width = max(mask_size(group.action_space) for group in self.groups)
        return array_layout(self.definition, self.groups, self.num_envs)

    def memory_plan(self) -> dict[str, int]:
        """Bytes of every state field and buffer (what :meth:`_allocate` places on the device)."""
        return {name: nbytes(shape, dtype) for name, (shape, dtype) in self._layout().items()}

    def _check_memory(self, layout: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> None:
        """Refuse, in one line, state fields and buffers that cannot fit in the free memory."""
        plan = {name: nbytes(shape, dtype) for name, (shape, dtype) in layout.items()}
        advice = "use fewer environments (--num-envs)"
        if self.num_agents > 1 and max(plan, key=plan.get) == "buffers.obs":
            advice += (
                ", or smaller observations (a partial view, such as Tag continuous's k nearest, "
                "grows with k, not with the number of agents)"
            )
        agents = "agent" if self.num_agents == 1 else "agents"
        what = f"{self.definition.name} with {self.num_envs:,} environments of {self.num_agents:,} {agents}"
        check_fits(what, plan, self.device, advice)

    def _allocate(self, layout: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> None:
        """Place the state fields and buffers: those that a step may stage in shared memory in
        groups (:func:`~warpsci.backends.shared_staging.staged_groups`), each group one tensor whose
        entries are the fields, each field a contiguous view of it; the others each on its own."""
        placed: dict[str, torch.Tensor] = {}
        state_groups, buffer_groups = staged_groups(self.definition)
        for prefix, groups in (("state.", state_groups), ("buffers.", buffer_groups)):
            for group in groups:
                names = [prefix + name for name in group]
                shape, dtype = layout[names[0]]
                whole = torch.zeros(
                    (len(names), *shape), dtype=_SAME_SIZE_INTEGER[dtype.itemsize], device=self.device
                )
                placed |= {name: whole[index].view(layout[name][1]) for index, name in enumerate(names)}

        def place(name: str) -> torch.Tensor:
            if name in placed:
                return placed[name]
            shape, dtype = layout[name]
            if name == "buffers.action_mask":  # every action allowed until a mask says otherwise
                return torch.ones(shape, dtype=dtype, device=self.device)
            return torch.zeros(shape, dtype=dtype, device=self.device)

        self.state_tensors = {
            field.name: place(f"state.{field.name}") for field in self.definition.state_fields
        }
        self.buffers = EnvBuffers(**{name: place(f"buffers.{name}") for name in EnvBuffers._fields})
        # The buffers as step() hands them out (views made once: a view costs microseconds a call).
        self._buffer_outputs = EnvBuffers(*(self._agents_out(tensor) for tensor in self.buffers))

    def _place_params(self) -> None:
        """The kernel params: numbers as they are, arrays placed on the device once (the tensors are
        kept in ``param_tensors`` so that the kernels' views stay valid)."""
        values = kernel_param_values(self.definition, self.params, self.num_envs)
        host = params_to_tuple(self.params, self.definition.params_float_dtype, values)
        self.param_tensors: dict[str, torch.Tensor] = {}
        placed = []
        for name, value in zip(host._fields, host, strict=True):
            if isinstance(value, np.ndarray):
                tensor = torch.from_numpy(value).to(self.device)
                self.param_tensors[name] = tensor
                value = numba_view(tensor)
            placed.append(value)
        self._params_tuple = type(host)(*placed)

    def _build_backend(self, threads_per_block: int | None, block_observation: bool) -> None:
        state_type = self.definition.state_type
        if self.device.type == "cpu":
            from warpsci.backends.cpu import CpuKernels

            self._kernels = CpuKernels(self.definition, self.num_agents)
        else:
            from warpsci.backends.cuda import CudaKernels

            with torch.cuda.device(self.device):
                observation = self.definition.block_observation_for(self.num_agents)
                by_block = block_observation and observation is not None and observation.applies(self.params)
                registers = observation.registers(self.params) if by_block else None
                self._kernels = CudaKernels(
                    self.definition, self.num_envs, self.num_agents, threads_per_block, by_block, registers
                )
        self._random_rollout_arrays: tuple[tuple[torch.Tensor, ...], list[Any]] | None = None
        self._state_view = state_type(
            *(numba_view(self.state_tensors[f.name]) for f in self.definition.state_fields)
        )
        self._buffer_view = EnvBuffers(*(numba_view(tensor) for tensor in self.buffers))

    def _stream(self) -> Any:
        """Numba handle of torch's current stream, so kernels order with torch's work."""
        return current_numba_stream(self.device)

    # ----------------------------------------------------------------------------- Gymnasium API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every environment; ``seed`` fixes the whole trajectory that follows.

        Without a seed, the first reset uses the constructor's seed and later ones a new seed
        derived from it, so repeated resets start different episodes.
        """
        if options:
            raise ValueError(f"reset options are not supported, got {options!r}")
        self._refuse_in_pipeline("reset()")
        if seed is not None:
            self._next_seed = _seed_to_int(seed)
        self._seed = self._next_seed
        self._next_seed = (self._next_seed * 6364136223846793005 + 1442695040888963407) % 2**63
        try:
            if self.device.type == "cpu":
                self._kernels.reset(self._state_view, self._params_tuple, self._buffer_view, self._seed)
            else:
                self._kernels.reset(
                    self._state_view, self._params_tuple, self._buffer_view, self._seed, self._stream()
                )
        except Exception as error:  # the first call compiles: Numba's errors said in one paragraph
            raise_named(self.definition.name, error)
        self._has_reset = True
        return self._output(self.buffers.obs), {}

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Apply one action per environment (and agent); see the class docstring for outputs."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        self._write_actions(actions)
        self.step_in_place()
        views = self._buffer_outputs
        done = views.terminated | views.truncated
        info = {
            "final_obs": self._copied(views.final_obs),
            "_final_obs": done,
            "episode": {"r": views.final_return.clone(), "l": views.final_length.clone()},
            "_episode": done,
        }
        return (
            self._copied(views.obs),
            self._copied(views.rewards),
            self._copied(views.terminated),
            self._copied(views.truncated),
            info,
        )

    def step_in_place(self, envs: slice | None = None) -> None:
        """Step with the actions already in ``buffers.actions``; results stay in ``buffers``.

        The fast path for trainers: no validation, no copies, no info dictionary. ``envs``, a
        :class:`~warpsci.pipelines.SubBatch`'s ``envs`` (see :meth:`pipeline`), steps those
        environments alone; default every one. Raises ValueError for a range that is not a
        non-empty slice of consecutive environments, that the kernels cannot step alone (see
        :meth:`pipeline`), or that lies outside one chain of an open pipeline; RuntimeError inside
        a pipeline for a call without ``envs`` or one on another stream than its chain's.
        """
        first_count = self._env_range(envs)
        try:
            if self.device.type == "cpu":
                self._kernels.step(*self._step_arguments(), envs=first_count)
            else:
                self._kernels.step(*self._step_arguments(), self._stream(), envs=first_count)
        except Exception as error:
            raise_named(self.definition.name, error)

    def pipeline(self, parts: int = 2) -> contextlib.AbstractContextManager[list[SubBatch]]:
        """Chains of sub-batches (:mod:`warpsci.pipelines`), for loops whose work between steps
        belongs to each environment alone: ``parts`` sub-batches (default 2; fewer where there
        are fewer blocks of environments). The first chain runs on torch's current stream, the
        others on side streams forked from it (from torch's pool of 32 streams a device: more
        chains share them), joined back into it when the ``with`` ends.

        Inside the ``with``, queue each chain's work on its stream (``with
        torch.cuda.stream(chain.stream):``) and step it with ``envs=chain.envs``. A chain's work
        must read and write only its own environments' rows: the chains are not ordered with one
        another until the ``with`` ends. The environment refuses what would break that: a step or
        reset of every environment, a range outside one chain, a range stepped on another stream
        than its chain's. On the CPU backend the chains run one after another.

        Raises ValueError for ``parts`` below 1, and on CUDA for environments that span several
        blocks (they step all at once); RuntimeError inside a pipeline of this environment.
        """
        if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 1:
            raise ValueError(f"parts must be a positive integer (sub-batches), got {parts!r}")
        self._refuse_in_pipeline("pipeline()")
        return self._open_chains(pipelined(self.num_envs, int(parts), self._range_alignment(), self.device))

    @contextlib.contextmanager
    def _open_chains(
        self, chains_context: contextlib.AbstractContextManager[list[SubBatch]]
    ) -> Iterator[list[SubBatch]]:
        with chains_context as chains:
            self._chains = chains
            try:
                yield chains
            finally:
                self._chains = None

    def _refuse_in_pipeline(self, call: str) -> None:
        if self._chains is not None:
            raise RuntimeError(
                f"{call} takes every environment, and the chains of env.pipeline() are not ordered with one "
                "another; step each chain with envs=chain.envs inside the with, the rest after it"
            )

    def _check_in_chain(self, start: int, stop: int) -> None:
        """Inside a pipeline: ``start:stop`` must lie within one chain, stepped on its stream."""
        for chain in self._chains or ():
            if chain.envs.start <= start and stop <= chain.envs.stop:
                if chain.stream is not None and torch.cuda.current_stream(self.device) != chain.stream:
                    raise RuntimeError(
                        f"envs {start}:{stop} were stepped on another stream than their chain's; queue a "
                        "chain's work inside `with torch.cuda.stream(chain.stream):`"
                    )
                return
        chains = ", ".join(f"{chain.envs.start}:{chain.envs.stop}" for chain in self._chains or ())
        raise ValueError(
            f"envs {start}:{stop} lie in no one chain of the open pipeline ({chains}); step a chain's envs"
        )

    def _range_alignment(self) -> int:
        alignment = self._kernels.range_alignment
        if alignment is None:
            raise ValueError(
                f"{self.definition.name}: its environments span several CUDA blocks and step all at "
                "once; step them without envs= or pipeline()"
            )
        return alignment

    def _env_range(self, envs: slice | None) -> tuple[int, int] | None:
        """``(first, count)`` of the environments ``envs`` names, or None for every environment."""
        if envs is None:
            self._refuse_in_pipeline("a call without envs=")
            return None
        if not _is_consecutive_slice(envs):
            raise ValueError(
                "envs must be a slice of consecutive environments with integer bounds, such as a "
                f"pipeline() chain's envs, got {envs!r}"
            )
        start, stop, _ = envs.indices(self.num_envs)
        if stop <= start:
            raise ValueError(f"envs {envs!r} names no environment of {self.num_envs}; give a non-empty slice")
        if self._chains is not None:
            self._check_in_chain(start, stop)
        if (start, stop) == (0, self.num_envs):
            return None
        alignment = self._range_alignment()
        if start % alignment or (stop % alignment and stop != self.num_envs):
            raise ValueError(
                f"envs {start}:{stop}: a CUDA block steps {alignment} environments, so a range must start"
                f" at a multiple of {alignment} and stop at one or at {self.num_envs}; use pipeline() chains"
            )
        return start, stop - start

    def _step_arguments(self) -> tuple:
        """What a step kernel is given: state, params, buffers, reset seed and time limit."""
        return (self._state_view, self._params_tuple, self._buffer_view, self._seed, self.max_episode_steps)

    @property
    def fuses_policy_step(self) -> bool:
        """Whether :meth:`policy_step_in_place` applies: on CUDA, environments of one agent, each in
        one block."""
        return self.device.type == "cuda" and self._kernels.fuses_policy_step

    def policy_step_in_place(
        self, sampler: Any, sample_arguments: tuple, recorder: Any, record_arguments: tuple
    ) -> None:
        """A trainer's rollout step in one launch (where :attr:`fuses_policy_step`): per
        environment, ``sampler(env, sample_arguments)`` writes the policy's action into
        ``actions_buffer``, the environment steps as in :meth:`step_in_place`, and
        ``recorder(env, record_arguments)`` copies the results into the rollout buffer (the Numba
        functions of :mod:`warpsci.rollout_kernels`)."""
        self._refuse_in_pipeline("policy_step_in_place()")
        try:
            self._kernels.policy_step(
                sampler, sample_arguments, recorder, record_arguments, *self._step_arguments(), self._stream()
            )
        except Exception as error:
            raise_named(self.definition.name, error)

    def random_rollout(self, num_steps: int, envs: slice | None = None) -> RandomRolloutStats:
        """Advance every environment ``num_steps`` steps with uniform random actions, drawn inside
        the kernel: one launch for all the steps, nothing but the kernel's own work per step.
        ``envs`` (as in :meth:`step_in_place`) advances those environments alone; the stats then
        cover them alone.

        Each action is a pure function of (reset seed, environment, agent, tick), like every other
        draw (:mod:`warpsci.random`): the same on every backend, and the same actions that
        ``step`` would be given by reading ``actions_buffer`` after ``random_rollout(1)``.
        Finished environments are reset as in ``step``. Afterwards ``buffers`` hold the last step's
        results (observations, rewards, flags, ``final_*`` where an episode ended at the last
        step) and ``actions_buffer`` its actions.

        Use it for random-policy baselines, exploration warm-up, and env-only throughput. Raises
        ValueError for a ``num_steps`` below 1, for Box spaces with infinite bounds and for
        ``envs`` as :meth:`step_in_place` does; RuntimeError as :meth:`step_in_place` does.
        """
        if not self._has_reset:
            raise RuntimeError("call reset() before random_rollout()")
        if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
            raise ValueError(f"num_steps must be a positive integer, got {num_steps!r}")
        first_count = self._env_range(envs)
        if self._random_rollout_arrays is None:
            from warpsci.backends.stages import agent_action_bounds

            width = 1 if self.buffers.actions.dim() == 2 else self.buffers.actions.shape[2]
            low, high = agent_action_bounds(self.groups, self.num_agents, width)
            tensors = (
                torch.from_numpy(low).to(self.device),
                torch.from_numpy(high).to(self.device),
                torch.zeros(self.num_envs, dtype=torch.int64, device=self.device),
                torch.zeros(self.num_envs, self.num_agents, dtype=torch.float64, device=self.device),
            )
            self._random_rollout_arrays = (tensors, [numba_view(tensor) for tensor in tensors])
        # The kernels clear the tallies themselves (no memsets between a graph's kernels).
        (_, _, episodes, return_sum), views = self._random_rollout_arrays
        arguments = (
            self._state_view,
            self._params_tuple,
            self._buffer_view,
            self._seed,
            self.max_episode_steps,
            int(num_steps),
            (views[0], views[1]),
            (views[2], views[3]),
        )
        try:
            if self.device.type == "cpu":
                self._kernels.random_steps(*arguments, envs=first_count)
            else:
                self._kernels.random_steps(*arguments, self._stream(), envs=first_count)
        except Exception as error:
            raise_named(self.definition.name, error)
        rows = slice(None) if first_count is None else slice(first_count[0], sum(first_count))
        return RandomRolloutStats(episodes=episodes[rows], return_sum=self._agents_out(return_sum[rows]))

    def close(self, **kwargs: Any) -> None:
        """Release nothing: tensors are freed with the object."""
        self.closed = True

    # ----------------------------------------------------------------------------- helpers

    @property
    def current_seed(self) -> int:
        """The seed of the last reset, which the kernels combine with each environment's tick."""
        return self._seed

    @property
    def actions_buffer(self) -> torch.Tensor:
        """The action tensor the next ``step_in_place`` reads, shaped like ``action_space``."""
        return self._buffer_outputs.actions

    def state(self) -> dict[str, torch.Tensor]:
        """The environment state tensors by field name (the live buffers, not copies)."""
        return dict(self.state_tensors)

    def _agents_out(self, tensor: torch.Tensor) -> torch.Tensor:
        """Drop the agent axis of single-agent environments."""
        return tensor.squeeze(1) if self.num_agents == 1 and tensor.dim() >= 2 else tensor

    def _output(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._copied(self._agents_out(tensor))

    def _copied(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.clone() if self.copy else tensor

    def _write_actions(self, actions: torch.Tensor | np.ndarray) -> None:
        target = self.actions_buffer
        detail = f"num_envs={self.num_envs}" + (
            f", num_agents={self.num_agents}" if self.num_agents > 1 else ""
        )
        actions = self._checked_actions(actions, target, self._agent_action_space, detail)
        target.copy_(actions)

    def _checked_actions(
        self, actions: Any, target: torch.Tensor, space: gymnasium.Space, detail: str
    ) -> torch.Tensor:
        """``actions`` as a tensor that fits ``target``, checked against ``space`` when
        ``check_actions`` is on; ``detail`` explains the expected shape in error messages."""
        if isinstance(actions, np.ndarray):
            actions = torch.from_numpy(actions)
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a torch.Tensor or numpy array, got {type(actions).__name__}")
        if tuple(actions.shape) != tuple(target.shape):
            raise ValueError(
                f"actions must have shape {tuple(target.shape)} ({detail}), got {tuple(actions.shape)}"
            )
        discrete = not target.dtype.is_floating_point
        if discrete and (
            actions.dtype.is_floating_point or actions.dtype.is_complex or actions.dtype == torch.bool
        ):
            raise TypeError(
                f"actions of {self.definition.name} must have an integer dtype, got {actions.dtype}"
            )
        if not discrete and not (actions.dtype.is_floating_point):
            raise TypeError(
                f"actions of {self.definition.name} must have a floating-point dtype, got {actions.dtype}"
            )
        if discrete and actions.dtype in (torch.uint16, torch.uint32, torch.uint64):
            actions = actions.to(torch.int64)  # torch has no comparisons for these types
        # Host actions are copied in; actions on another GPU are a mistake.
        if actions.device != self.device and "cpu" not in (actions.device.type, self.device.type):
            raise ValueError(f"actions are on {actions.device}, the environment on {self.device}")
        if self.check_actions:
            check_action_range(actions, space)
        return actions


def check_action_range(actions: torch.Tensor, space: gymnasium.Space) -> None:
    """Raise ValueError naming the first action outside ``space`` (NaN for Box spaces)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        low, high = int(space.start), int(space.start + space.n - 1)
        if actions.numel() == 0:
            return
        smallest, largest = torch.aminmax(actions)  # one pass: the check runs at every step
        if int(smallest) < low or int(largest) > high:
            value = actions[(actions < low) | (actions > high)].flatten()[0].item()
            raise ValueError(f"action {value} is outside the action space {space} (accepted: {low}..{high})")
    elif isinstance(space, gymnasium.spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, device=actions.device)
        bad = (actions < 0) | (actions >= nvec)
        if bool(bad.any()):
            raise ValueError(f"an action lies outside the action space {space}")
    elif isinstance(space, gymnasium.spaces.Box):
        if bool(torch.isnan(actions).any()):
            raise ValueError("actions contain NaN")


def _action_layout(spaces: list[gymnasium.Space]) -> tuple[tuple[int, ...], torch.dtype]:
    """Trailing shape and dtype of the action array: ``()`` int32 when every space is Discrete,
    else ``(width,)`` with the most components (int32 for MultiDiscrete, float32 for Box)."""
    for space in spaces:
        if not isinstance(
            space, (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete, gymnasium.spaces.Box)
        ):
            raise TypeError(f"unsupported action space {space!r}: use Discrete, MultiDiscrete or Box")
        if isinstance(space, gymnasium.spaces.Discrete) and space.start != 0:
            raise ValueError(f"Discrete action spaces must start at 0, got start={space.start}")
    if len(spaces) == 1 and not isinstance(spaces[0], gymnasium.spaces.Discrete):
        return tuple(spaces[0].shape), torch.int32 if isinstance(
            spaces[0], gymnasium.spaces.MultiDiscrete
        ) else torch.float32
    if all(isinstance(space, gymnasium.spaces.Discrete) for space in spaces):
        return (), torch.int32
    boxes = [isinstance(space, gymnasium.spaces.Box) for space in spaces]
    if any(boxes) and not all(boxes):
        raise TypeError("groups must all have continuous (Box) or all discrete action spaces")
    width = max(flat_size(space) for space in spaces)
    return (width,), torch.float32 if all(boxes) else torch.int32


def _with_agents(space: gymnasium.Space | None, num_agents: int) -> gymnasium.Space | None:
    """The space of one environment: the agent's space, or ``num_agents`` of them stacked."""
    if space is None or num_agents == 1:
        return space
    return batch_space(space, num_agents)


def _is_consecutive_slice(envs: object) -> bool:
    """Whether ``envs`` is a slice of step 1 whose bounds are integers or absent."""
    if not isinstance(envs, slice) or envs.step not in (None, 1):
        return False
    return all(
        bound is None or (isinstance(bound, (int, np.integer)) and not isinstance(bound, bool))
        for bound in (envs.start, envs.stop)
    )


def _seed_to_int(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed) % 2**63


def dataclass_replace(params: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` with an error that lists the accepted field names."""
    names = {field.name for field in dataclasses.fields(params)}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {unknown} for {type(params).__name__}; accepted: {sorted(names)}"
        )
    return dataclasses.replace(params, **changes)


def array_layout(
    definition: EnvironmentDefinition, groups: tuple[AgentGroup, ...], num_envs: int
) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Shape and dtype of every state field (``state.<name>``) and framework buffer
    (``buffers.<name>``) of ``num_envs`` environments with agent ``groups``."""
    n, a = num_envs, sum(group.size for group in groups)
    layout = {
        f"state.{field.name}": (field.full_shape(n, a), _NUMPY_TO_TORCH[np.dtype(field.dtype)])
        for field in definition.state_fields
    }
    if len(groups) == 1:
        obs_shape = (n, a) + tuple(groups[0].observation_space.shape)
    else:
        obs_shape = (n, a, max(flat_size(group.observation_space) for group in groups))
    action_shape, action_dtype = _action_layout([group.action_space for group in groups])
    mask_width = max(mask_size(group.action_space) for group in groups)
    buffers = {
        "obs": (obs_shape, torch.float32),
        "final_obs": (obs_shape, torch.float32),
        "actions": ((n, a) + action_shape, action_dtype),
        **{
            name: ((n, a) if per_agent else (n,), _NUMPY_TO_TORCH[np.dtype(dtype)])
            for name, (dtype, per_agent) in SCALAR_BUFFERS.items()
        },
        "action_mask": ((n, a, max(1, mask_width)), torch.bool),
    }
    return layout | {f"buffers.{name}": spec for name, spec in buffers.items()}
