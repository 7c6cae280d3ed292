"""How an environment is described to warpsci (environment model, version 2).

An environment is one Python module holding

* a **params** dataclass (frozen) with the environment's constants. Fields are numbers, bools or
  arrays (lists, tuples or NumPy arrays of numbers: a table of start positions, an energy grid).
  Arrays are placed in device memory once per vector environment and reach the kernels as arguments
  (``params.start_x[agent]``), never as module globals, so two instances with different arrays run
  side by side and the kernel cache never depends on data values. ``kernel_params`` may derive the
  values the kernels see from the params (defaults for optional fields, tables drawn from a seed);
  fields named in ``replica_params`` hold one value per environment replica (domain randomisation:
  a scalar is broadcast, a sequence of ``num_envs`` values is taken as is) and are read as
  ``params.<name>[env]``.
* its **state layout**: a tuple of :class:`StateField`, each a named array shaped
  ``(num_envs, num_agents, *shape)`` (or ``(num_envs, *shape)`` for fields of the whole environment);
* its **agent groups** (:class:`AgentGroup`): named sets of agent indices, each with its own
  observation and action space and trained by its own policy. A single-agent environment is one
  group named ``"agent"`` of one agent, declared through ``observation_space`` and ``action_space``;
* plain, Numba-compilable functions (decorate them with :func:`warpsci.agent_function`):

  ``reset_environment(state, params, env, key) -> None`` (optional)
      Reset the fields of the whole environment; runs once per environment, before any agent resets.
  ``reset_agent(state, params, env, agent, key) -> None``
      Write the agent's initial state.
  the **step**, either as ``step_stages``, a tuple of stages run in order with every agent (of the
  whole environment, across blocks) finished with one stage before the next begins:

      :class:`AgentStage` ``function(state, params, actions, env, agent, key) -> float``
          Run for each agent still in the game; the returned reward is added to the agent's reward.
      :class:`EnvironmentStage` ``function(state, params, actions, rewards, env, key) -> None``
          Run once per environment: clocks, reductions over agents (a planner's reward from every
          agent's result of this step), collisions. May add to ``rewards[env, agent]`` of any agent.

      or, for the common case, ``step_agent(state, params, actions, env, agent, phase, key) -> float``
      with ``num_step_phases`` (default 1): one agent stage per phase.
  ``observe_agent(state, params, obs, env, agent) -> None``
      Write the agent's observation into ``obs[env, agent, :]``. In an environment whose agents
      do not leave early, an agent may also write entries of another agent's row that nobody else
      writes (CovidEconomy's governors fill in their part of the planner's view, in parallel):
      every agent of an environment observes in the same stage, final observations included.
  ``is_terminal(state, params, env) -> bool``
      Whether the environment's episode has ended, after the step's stages. Every agent of the
      environment asks it (at once, in the stage that closes the agents), so it must only read,
      and cheaply: a counter or a few values, not a loop over the agents.
  ``is_agent_done(state, params, env, agent) -> bool`` (optional)
      Whether the agent leaves the game with this step (a tagged runner). From the next step on it
      acts no more: its stages are skipped, its reward is 0, and trainers mask it out of the loss.
      Everyone returns at the next reset.
  ``action_mask(state, params, mask, env, agent) -> None`` (optional)
      Write which actions the agent may take next into ``mask[env, agent, :]`` (bool): one entry
      per action for ``Discrete(n)``, ``sum(nvec)`` entries (component after component) for
      ``MultiDiscrete``. Runs after every reset and step, with ``observe_agent``. Masks are advice
      for the policy (sampling and the loss use masked logits); the environment applies whatever
      action it is given.
  ``block_observation`` (optional, CUDA only): a :class:`BlockObservation`, the observation of
      every agent of an environment written by one CUDA block together (shared memory, warp
      shuffles), for environments in one block, or a tuple of them for different widths;
      ``observe_agent`` stays the definition, which the CPU backend, Numba's CUDA simulator (unless
      :func:`warpsci.simulated_warps.enable` emulates the warp intrinsics), final observations and
      environments wider than every block observation's ``max_agents`` use.

  ``actions`` is the whole action array, ``(num_envs, num_agents)`` when every group's action space
  is ``Discrete``, else ``(num_envs, num_agents, width)`` with ``width`` the largest number of
  components; an agent may read the others' actions. ``obs`` is ``(num_envs, num_agents, width)``
  with ``width`` the largest observation size of the groups (a single group keeps its own shape).
  ``state`` is a namedtuple of the state arrays (``state.x[env, agent]``), ``params`` a namedtuple
  of the kernel params, ``key`` the ``uint64`` key of a counter-based generator (see
  :mod:`warpsci.random`). ``env`` and ``agent`` are ``uint32`` indices on both backends (unsigned
  indices spare the GPU Numba's negative-index wrap-around on every access): arithmetic with an
  integer literal gives ``int64``, but the difference of two indices wraps around below zero, so
  convert with ``np.int64(agent)`` before subtracting another index.

The framework compiles these once for the CPU (``numba.njit(parallel=True)``, environments in
parallel, agents and stages in order) and once for CUDA (one thread per agent; a barrier between
stages, which is ``cuda.syncthreads()`` when an environment fits one block and a kernel boundary
when it spans several). The order of a reset and of a step is written once, in
:mod:`warpsci.backends.stages`. The functions must not keep state of their own.
"""

from __future__ import annotations

import dataclasses
import math
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from numba import njit

from warpsci.environment_checks import check_function

#: Name of the one group of a single-group environment declared through ``observation_space``.
SINGLE_GROUP = "agent"


def agent_function(function: Callable) -> Callable:
    """Compile an environment function with Numba so that both backends can call it.

    ``inline="always"`` is deliberately not used: with ``parallel=True`` callers, numba 0.68 drops
    writes made through namedtuple fields of an inlined function. The CPU backend compiles the
    functions again (from ``py_func``) inlined into serial per-chunk loops that the parallel loop
    calls, out of that bug's reach (:mod:`warpsci.backends.cpu`).
    """
    return njit(cache=True)(function)


@dataclasses.dataclass(frozen=True)
class StateField:
    """One named state array.

    Attributes:
        name: Field name, used as ``state.<name>`` in environment code.
        dtype: Element type (``np.float32``, ``np.int32``, ...).
        shape: Trailing shape per agent (or per environment); ``()`` for a scalar. Default ``()``.
        per_agent: If True (default) the array is ``(num_envs, num_agents, *shape)``, else
            ``(num_envs, *shape)``.
        agents_last: A per-agent array laid out ``(num_envs, *shape, num_agents)``: entry ``i``
            of every agent side by side (``state.hints[env, i, agent]``), so that a warp of agents
            reading or writing entry ``i`` at once touches consecutive words, where with the
            agents first each thread touches a cache line of its own. Default False.
    """

    name: str
    dtype: Any
    shape: tuple[int, ...] = ()
    per_agent: bool = True
    agents_last: bool = False

    def __post_init__(self) -> None:
        if self.agents_last and not (self.per_agent and self.shape):
            raise ValueError(
                f"state field {self.name!r}: agents_last needs a per-agent field with a shape "
                f"(an agent's entries), got per_agent={self.per_agent}, shape={self.shape}"
            )

    def full_shape(self, num_envs: int, num_agents: int) -> tuple[int, ...]:
        """Array shape for ``num_envs`` environments of ``num_agents`` agents."""
        if not self.per_agent:
            return (num_envs, *self.shape)
        if self.agents_last:
            return (num_envs, *self.shape, num_agents)
        return (num_envs, num_agents, *self.shape)


@dataclasses.dataclass(frozen=True)
class AgentGroup:
    """Agents that share an observation space, an action space and (when trained) a policy.

    Attributes:
        name: Group name (``"tagger"``); agents are named ``f"{name}_{k}"`` in the PettingZoo adapter.
        agents: Agent indices in increasing order, not necessarily contiguous.
        observation_space: One agent's observation (a 1-D ``Box`` when there are several groups).
        action_space: One agent's action: ``Discrete``, 1-D ``MultiDiscrete`` or 1-D ``Box``.
    """

    name: str
    agents: tuple[int, ...]
    observation_space: gymnasium.spaces.Box
    action_space: gymnasium.Space

    def __post_init__(self) -> None:
        agents = tuple(int(agent) for agent in self.agents)
        object.__setattr__(self, "agents", agents)
        if not agents:
            raise ValueError(f"group {self.name!r} has no agents")
        if any(b <= a for a, b in zip(agents, agents[1:], strict=False)) or agents[0] < 0:
            raise ValueError(f"group {self.name!r}: agents must be increasing non-negative indices")

    @property
    def size(self) -> int:
        """Number of agents in the group."""
        return len(self.agents)

    @property
    def contiguous(self) -> bool:
        """Whether the agents are ``first, first + 1, ...`` (their rows are then a view)."""
        return self.agents[-1] - self.agents[0] + 1 == len(self.agents)


@dataclasses.dataclass(frozen=True)
class AgentStage:
    """A stage of the step run by every agent still in the game:
    ``function(state, params, actions, env, agent, key) -> reward`` (added to the agent's reward).

    ``all_agents=True`` runs it for agents that left the game too (their reward stays 0): for
    bookkeeping the environment keeps on them, such as Tag continuous stopping a tagged runner."""

    function: Callable
    all_agents: bool = False


@dataclasses.dataclass(frozen=True)
class EnvironmentStage:
    """A stage of the step run once per environment, after every agent finished the previous stage:
    ``function(state, params, actions, rewards, env, key) -> None``."""

    function: Callable


def _always(params: Any) -> bool:
    return True


def _no_shared_memory(num_agents: int) -> int:
    return 0


#: The most dynamic shared memory a block observation may ask for, in bytes: what a CUDA block
#: gets without opting in to more (its function's static shared arrays count against it too).
MAX_BLOCK_SHARED_BYTES = 48 * 1024
#: The most agents an environment has in one CUDA block (its threads take several each); wider
#: ones span several blocks.
MAX_AGENTS_IN_ONE_BLOCK = 4096


def _check_registers(name: str, registers: Any, none_means: str) -> None:
    """A register cap is None or registers per thread in [16, 255]."""
    if registers is not None and (isinstance(registers, bool) or not isinstance(registers, int)
                                  or not 16 <= registers <= 255):  # fmt: skip
        raise ValueError(
            f"{name} must be None ({none_means}) or an int in [16, 255] (registers per thread), "
            f"got {registers!r}"
        )


@dataclasses.dataclass(frozen=True)
class BlockObservation:
    """An environment's observations written by a CUDA block together.

    Where ``applies(params)`` holds and an environment of at most ``max_agents`` agents fits one
    block (``threads_per_block`` is then the observation's: an explicit one smaller than the agents
    splits the environment and keeps ``observe_agent``), the CUDA backend gives each environment a
    block of ``threads`` threads (with more agents than threads, each thread takes several in the
    step's stages), and its reset, step and random-step kernels end with
    ``function(state, params, obs, env)`` (a CUDA device function) in place of every agent's
    ``observe_agent``, after a barrier (captured in a CUDA graph, in a launch of its own after
    them: see :mod:`warpsci.backends.cuda`). Every thread of
    the block calls it (it may use ``cuda.syncthreads()``, shared memory and warp intrinsics). It
    must write exactly what ``observe_agent`` writes for every agent, bit for bit, and may update
    state that only speeds the observation up (search hints); test it against ``observe_agent`` on
    a GPU, or under Numba's CUDA simulator after :func:`warpsci.simulated_warps.enable` (which
    emulates the warp intrinsics the simulator lacks; otherwise it runs ``observe_agent``). Final
    observations, the CPU backend and environments wider than ``max_agents`` use
    ``observe_agent``.

    Attributes:
        function: ``function(state, params, obs, env) -> None``, compiled with
            ``numba.cuda.jit(device=True)``.
        threads: Threads per block, a multiple of 32 up to 1024. Default 128.
        applies: ``params -> bool`` (the params dataclass): whether to use it for these params,
            where it is faster; default always. (Tag continuous: partial observations.)
        max_registers: Registers per thread of the kernels that end with it (the step's stages
            and the observation share them; in a CUDA graph the observation is its own launch at
            this cap, and the stages' kernel is capped at
            ``warpsci.backends.cuda.STAGES_APART_MAX_REGISTERS``); default None: the compiler's choice (for
            environments wider than ``threads``, the cap of wide kernels: the definition's
            ``wide_max_registers``, else the backend's). A cap lets
            more blocks share an SM (Tag continuous: 64).
        registers_for: ``params -> int | None``: the cap for these params, in place of
            ``max_registers``, where the caller knows the params (:class:`WarpVectorEnv` does);
            default None: ``max_registers``. For an observation whose paths want different caps
            (Tag continuous's grid: 96 for a thread per observer, 64 for a warp per observer).
        max_agents: The most agents an environment may have for it; default None: ``threads``.
            At most :data:`MAX_AGENTS_IN_ONE_BLOCK`.
        shared_bytes: ``num_agents -> int``: dynamic shared memory per block, in bytes, that the
            kernels are launched with (``cuda.shared.array(0, dtype)`` in ``function``); with
            ``function``'s static shared arrays at most :data:`MAX_BLOCK_SHARED_BYTES` for
            ``max_agents``; default none.
    """

    function: Callable
    threads: int = 128
    applies: Callable[[Any], bool] = _always
    max_registers: int | None = None
    max_agents: int | None = None
    shared_bytes: Callable[[int], int] = _no_shared_memory
    registers_for: Callable[[Any], int | None] | None = None

    def __post_init__(self) -> None:
        threads = self.threads
        if (
            isinstance(threads, bool)
            or not isinstance(threads, int)
            or not 32 <= threads <= 1024
            or threads % 32
        ):
            raise ValueError(
                f"BlockObservation.threads must be a multiple of 32 in [32, 1024], got {threads!r}"
            )
        _check_registers("BlockObservation.max_registers", self.max_registers, "the compiler's choice")
        agents = self.max_agents
        if agents is not None and (
            isinstance(agents, bool)
            or not isinstance(agents, int)
            or not threads <= agents <= MAX_AGENTS_IN_ONE_BLOCK
        ):
            raise ValueError(
                f"BlockObservation.max_agents must be None (threads) or an int in "
                f"[threads, {MAX_AGENTS_IN_ONE_BLOCK}] "
                f"(threads = {threads}), got {agents!r}"
            )
        if self.registers_for is not None and not callable(self.registers_for):
            raise ValueError(
                "BlockObservation.registers_for must be None or a function of the params, "
                f"got {self.registers_for!r}"
            )
        if not callable(self.shared_bytes):
            raise ValueError(
                "BlockObservation.shared_bytes must be a function of the agent count, "
                f"got {self.shared_bytes!r}"
            )

    @property
    def agent_limit(self) -> int:
        """The most agents an environment may have for it: ``max_agents``, else ``threads``."""
        return self.threads if self.max_agents is None else self.max_agents

    def registers(self, params: Any) -> int | None:
        """The register cap of its kernels for ``params``: ``registers_for(params)`` (checked) when
        given, else ``max_registers``."""
        if self.registers_for is None:
            return self.max_registers
        registers = self.registers_for(params)
        _check_registers("BlockObservation.registers_for(params)", registers, "the compiler's choice")
        return registers


@dataclasses.dataclass(frozen=True)
class EnvironmentDefinition:
    """Everything warpsci needs to build, compile and run an environment.

    Attributes:
        name: Registered id, e.g. ``"CartPole-v1"``.
        params_type: The frozen params dataclass; its defaults are the environment's defaults.
        state_fields: Layout of the state arrays.
        reset_agent, observe_agent, is_terminal: Compiled functions (see module doc).
        max_episode_steps: ``params -> int``, the time limit after which an episode is truncated.
        step_agent: Per-agent step with a ``phase`` argument (see module doc); give this or
            ``step_stages``.
        step_stages: The step as :class:`AgentStage` and :class:`EnvironmentStage` in order.
        observation_space: ``params -> gymnasium.spaces.Box``, one agent's observation, for
            environments of one group (give this or ``groups``).
        action_space: ``params -> gymnasium.Space``, one agent's action, for one group.
        groups: ``params -> tuple[AgentGroup, ...]``, for environments of several groups. Every
            agent belongs to exactly one group.
        num_agents: ``params -> int`` for one group; default one agent. With ``groups`` the number
            of agents is the groups' total.
        num_step_phases: Phases of ``step_agent``; agents synchronise between phases. Default 1.
        reset_environment, is_agent_done, action_mask: Optional compiled functions (module doc).
        kernel_params: ``params -> dict`` of the values the kernels see by name (numbers, bools,
            arrays); default every field of the params. Lets an environment fill in defaults or
            derive tables from the params on the host.
        replica_params: Kernel params given per environment replica (read as ``params.name[env]``).
        reference: Where the dynamics come from (for documentation).
        params_float_dtype: Precision in which float params reach the kernels: ``np.float32``
            (default, the precision of most state) or ``np.float64`` for dynamics so sensitive that a
            constant rounded to float32 changes the result (Acrobot's 0.2 s Runge-Kutta step).
        finite_state_fields: State fields the trainer checks for NaN and infinity every iteration
            (with the observations, rewards and weights it always checks); default none.
        draw: ``draw(ax, state, params)``, one environment's state drawn on a matplotlib ``Axes``
            for ``warpsci render`` (see :mod:`warpsci.render`); default none (the built-in
            environments' are in :mod:`warpsci.drawings`).
        wide_max_registers: Registers per thread that the CUDA kernels may use when the
            environment is wider than its block (threads take several agents each); default
            None: the CUDA backend's cap (``WIDE_MAX_REGISTERS``, 64: a stage waits for the
            slowest agent of its block, and more blocks an SM fill that wait). Longer per-agent
            work may run faster with more (Tag continuous: 96).
        block_observation: The observations written by a CUDA block together
            (:class:`BlockObservation`), or several for different widths (a tuple: an environment
            takes the first whose ``max_agents`` it fits, :meth:`block_observation_for`); default
            None: ``observe_agent`` everywhere.
    """

    name: str
    params_type: type
    state_fields: tuple[StateField, ...]
    reset_agent: Callable
    observe_agent: Callable
    is_terminal: Callable
    max_episode_steps: Callable[[Any], int]
    step_agent: Callable | None = None
    step_stages: tuple[AgentStage | EnvironmentStage, ...] = ()
    observation_space: Callable[[Any], gymnasium.spaces.Box] | None = None
    action_space: Callable[[Any], gymnasium.Space] | None = None
    groups: Callable[[Any], tuple[AgentGroup, ...]] | None = None
    num_agents: Callable[[Any], int] | None = None
    num_step_phases: int = 1
    reset_environment: Callable | None = None
    is_agent_done: Callable | None = None
    action_mask: Callable | None = None
    kernel_params: Callable[[Any], dict[str, Any]] | None = None
    replica_params: tuple[str, ...] = ()
    reference: str = ""
    params_float_dtype: Any = np.float32
    finite_state_fields: tuple[str, ...] = ()
    draw: Callable | None = None
    wide_max_registers: int | None = None
    block_observation: BlockObservation | tuple[BlockObservation, ...] | None = None

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.params_type):
            raise TypeError(f"params_type must be a dataclass, got {self.params_type!r}")
        _check_registers("wide_max_registers", self.wide_max_registers, "the backend's cap")
        observations = self.block_observations
        if isinstance(self.block_observation, tuple) and not observations:
            raise TypeError(
                f"{self.name}: block_observation must be a non-empty tuple (or one, or None), got ()"
            )
        if not all(isinstance(observation, BlockObservation) for observation in observations):
            raise TypeError(
                f"{self.name}: block_observation must be a BlockObservation, a tuple of them or None, "
                f"got {self.block_observation!r}"
            )
        limits = [observation.agent_limit for observation in observations]
        if limits != sorted(set(limits)):
            raise ValueError(
                f"{self.name}: a tuple of block observations must go from narrow to wide (increasing "
                f"agent limits, max_agents or else threads, none twice), got agent limits {limits}"
            )
        names = [field.name for field in self.state_fields]
        if len(set(names)) != len(names):
            raise ValueError(f"state field names must be unique, got {names}")
        unknown = sorted(set(self.finite_state_fields) - set(names))
        if unknown:
            raise ValueError(f"finite_state_fields names {unknown}, which are not state fields {names}")
        if np.dtype(self.params_float_dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(
                f"params_float_dtype must be np.float32 or np.float64, got {self.params_float_dtype!r}"
            )
        if self.num_step_phases < 1:
            raise ValueError(f"num_step_phases must be >= 1, got {self.num_step_phases}")
        if (self.step_agent is None) == (not self.step_stages):
            raise ValueError(f"{self.name}: give exactly one of step_agent and step_stages")
        for stage in self.step_stages:
            if not isinstance(stage, (AgentStage, EnvironmentStage)):
                raise TypeError(
                    f"{self.name}: step_stages must be AgentStage or EnvironmentStage, got {stage!r}"
                )
        single = self.observation_space is not None and self.action_space is not None
        if single == (self.groups is not None):
            raise ValueError(f"{self.name}: give observation_space and action_space, or groups")
        if self.groups is not None and self.num_agents is not None:
            raise ValueError(f"{self.name}: with groups, the number of agents is the groups' total")
        for kind, function in self._functions():
            check_function(self.name, kind, function)

    def _functions(self) -> list[tuple[str, Callable]]:
        """Each environment function given, with its kind (``environment_checks.SIGNATURES``)."""
        named = [
            (kind, getattr(self, kind))
            for kind in ("reset_environment", "reset_agent", "step_agent", "observe_agent", "is_terminal",
                         "is_agent_done", "action_mask")
            if getattr(self, kind) is not None
        ]  # fmt: skip
        return named + [(type(stage).__name__, stage.function) for stage in self.step_stages]

    @property
    def state_type(self) -> type:
        """The namedtuple type that holds the state arrays."""
        return _state_tuple_type(self.name, tuple(field.name for field in self.state_fields))

    def default_params(self) -> Any:
        """The params dataclass with its default values."""
        return self.params_type()

    def stages(self) -> tuple[AgentStage | EnvironmentStage, ...]:
        """The step's stages: ``step_stages``, or one agent stage per phase of ``step_agent``."""
        if self.step_stages:
            return tuple(self.step_stages)
        return tuple(AgentStage(_phase_of(self.step_agent, phase)) for phase in range(self.num_step_phases))

    @property
    def block_observations(self) -> tuple:
        """``block_observation`` as a tuple, narrow to wide (empty for none)."""
        observations = self.block_observation
        if isinstance(observations, tuple):
            return observations
        return () if observations is None else (observations,)

    def block_observation_for(self, num_agents: int) -> BlockObservation | None:
        """The block observation of environments of ``num_agents`` agents: the first (of a tuple)
        whose ``max_agents`` they fit, else None. Its ``applies(params)`` is for the caller to ask
        (an environment that it does not apply to is observed by ``observe_agent``)."""
        for observation in self.block_observations:
            if num_agents <= observation.agent_limit:
                return observation
        return None

    def agent_groups(self, params: Any) -> tuple[AgentGroup, ...]:
        """The groups for ``params``, checked: every agent in exactly one group, names unique."""
        if self.groups is None:
            count = 1 if self.num_agents is None else int(self.num_agents(params))
            if count < 1:
                raise ValueError(f"{self.name}: num_agents must be >= 1, got {count}")
            return (
                AgentGroup(
                    SINGLE_GROUP,
                    tuple(range(count)),
                    self.observation_space(params),
                    self.action_space(params),
                ),
            )
        groups = tuple(self.groups(params))
        names = [group.name for group in groups]
        if not groups or len(set(names)) != len(names):
            raise ValueError(f"{self.name}: group names must be unique and at least one, got {names}")
        members = sorted(agent for group in groups for agent in group.agents)
        if members != list(range(len(members))):
            raise ValueError(f"{self.name}: every agent 0..N-1 must belong to exactly one group")
        for group in groups:
            space = group.observation_space
            if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
                raise TypeError(f"{self.name}: group {group.name!r} needs a 1-D Box observation space")
        return groups

    def count_agents(self, params: Any) -> int:
        """Agents per environment for ``params``."""
        return sum(group.size for group in self.agent_groups(params))


def _phase_of(step_agent: Callable, phase: int) -> Callable:
    """``step_agent`` with its phase fixed: an agent stage function."""

    @njit
    def stage(state, params, actions, env, agent, key):
        return step_agent(state, params, actions, env, agent, phase, key)

    return stage


def kernel_param_values(definition: EnvironmentDefinition, params: Any, num_envs: int) -> dict[str, Any]:
    """The values the kernels see, by name, checked: numbers and bools as they are, arrays as
    contiguous NumPy arrays, replica params as ``(num_envs,)`` arrays."""
    if definition.kernel_params is not None:
        values = dict(definition.kernel_params(params))
    else:
        values = {field.name: getattr(params, field.name) for field in dataclasses.fields(params)}
    for name in definition.replica_params:
        if name not in values:
            raise ValueError(f"{definition.name}: replica param {name!r} is not a kernel param")
        value = values[name]
        if np.ndim(value) == 0:
            values[name] = np.full(num_envs, value)
        else:
            array = np.asarray(value)
            if array.shape[:1] != (num_envs,):
                raise ValueError(
                    f"{definition.name}: param {name!r} holds one value per environment; "
                    f"got shape {array.shape} for num_envs={num_envs} (give a scalar or {num_envs} values)"
                )
            values[name] = array
    return values


def params_to_tuple(
    params: Any, float_dtype: Any = np.float32, values: dict[str, Any] | None = None
) -> tuple:
    """Turn params into a namedtuple that kernels can take: floats become ``float_dtype`` (default
    ``float32``), ints ``int64``, bools ``bool_``, and arrays contiguous NumPy arrays (float arrays
    in ``float_dtype``, integer arrays ``int32`` or ``int64`` as given, bools as ``bool_``).

    ``values`` (name -> value) replaces the params' own fields, as ``kernel_param_values`` gives.
    """
    if values is None:
        values = {field.name: getattr(params, field.name) for field in dataclasses.fields(params)}
    converted = [_kernel_value(name, value, float_dtype) for name, value in values.items()]
    tuple_type = _params_tuple_type(type(params).__name__, tuple(values))
    return tuple_type(*converted)


def _kernel_value(name: str, value: Any, float_dtype: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value)
    if isinstance(value, (int, np.integer)):
        return np.int64(value)
    if isinstance(value, (float, np.floating)):
        return np.dtype(float_dtype).type(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.asarray(value)
        if array.dtype == np.bool_:
            return np.ascontiguousarray(array)
        if np.issubdtype(array.dtype, np.integer):
            wide = array.dtype.itemsize > 4 and array.size and np.abs(array).max() >= 2**31
            return np.ascontiguousarray(array, dtype=np.int64 if wide else np.int32)
        if np.issubdtype(array.dtype, np.floating):
            return np.ascontiguousarray(array, dtype=float_dtype)
    raise TypeError(f"params field {name!r} must be a number, a bool or an array of numbers, got {value!r}")


def flat_size(space: gymnasium.Space) -> int:
    """Number of entries of one agent's observation (a Box) or action (components)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return 1
    return int(math.prod(space.shape))


def mask_size(space: gymnasium.Space) -> int:
    """Entries of one agent's action mask: ``n`` (Discrete), ``sum(nvec)`` (MultiDiscrete), 0 (Box)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return 0


_TUPLE_TYPES: dict[tuple[str, tuple[str, ...]], type] = {}


def _state_tuple_type(env_name: str, names: tuple[str, ...]) -> type:
    return _cached_namedtuple("State_" + env_name, names)


def _params_tuple_type(params_name: str, names: tuple[str, ...]) -> type:
    return _cached_namedtuple(params_name + "Tuple", names)


def _cached_namedtuple(name: str, names: tuple[str, ...]) -> type:
    # One type per layout: Numba compiles once per argument type, so a fresh namedtuple class per
    # environment instance would recompile every kernel.
    safe = "".join(ch if ch.isalnum() else "_" for ch in name)
    return _layout_type(safe, names)


def _layout_type(safe: str, names: tuple[str, ...]) -> type:
    key = (safe, names)
    if key not in _TUPLE_TYPES:
        # The class name spells out the layout and the class is reachable as a module attribute
        # (see ``__getattr__``), so pickles - Numba's disk cache stores kernel signatures - refer
        # to it by name and load as this very class in any process. Pickled by value instead, a
        # loaded CPU kernel's signature would never match and every call would reload it.
        type_name = f"T{len(safe)}_{safe}" + "".join(f"_{len(field)}_{field}" for field in names)
        tuple_type = namedtuple(type_name, names)
        tuple_type.__module__ = __name__
        _TUPLE_TYPES[key] = tuple_type
    return _TUPLE_TYPES[key]


def __getattr__(attribute: str) -> type:
    """Rebuild a state or params tuple type from its name (``T<len>_<name>_<len>_<field>...``)."""
    layout = _decode_layout(attribute)
    if layout is None:
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
    return _layout_type(*layout)


def _decode_layout(type_name: str) -> tuple[str, tuple[str, ...]] | None:
    def read(text: str) -> tuple[str, str] | None:
        length, separator, rest = text.partition("_")
        if not separator or not length.isdigit() or len(rest) < int(length):
            return None
        return rest[: int(length)], rest[int(length) :]

    if not type_name.startswith("T"):
        return None
    first = read(type_name[1:])
    if first is None:
        return None
    safe, rest = first
    names = []
    while rest:
        if not rest.startswith("_"):
            return None
        field = read(rest[1:])
        if field is None:
            return None
        names.append(field[0])
        rest = field[1]
    return safe, tuple(names)
