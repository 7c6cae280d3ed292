"""How an environment is described to warpsci.

An environment is one Python module holding

* a **params** dataclass (frozen; every field a number or a bool) with the physical constants;
* its **state layout**: a tuple of :class:`StateField`, each a named array shaped
  ``(num_envs, num_agents, *shape)`` (or ``(num_envs, *shape)`` for fields of the whole environment);
* plain, Numba-compilable functions for one agent of one environment (decorate them with
  :func:`warpsci.agent_function`):

  ``reset_agent(state, params, env, agent, key) -> None``
      Write the agent's initial state. Agent 0 also resets fields of the whole environment.
  ``step_agent(state, params, actions, env, agent, phase, key) -> float``
      Advance the agent by one step (or one phase of a step) and return its reward. ``actions`` is
      the whole action array, so an agent may read the others' actions. Rewards of all phases add up.
  ``observe_agent(state, params, obs, env, agent) -> None``
      Write the agent's observation into ``obs[env, agent, :]``.
  ``is_terminal(state, params, env) -> bool``
      Whether the environment's episode has ended (called once per environment after the step).

  ``state`` is a namedtuple of the state arrays (``state.x[env, agent]``), ``params`` a namedtuple
  of the params' scalar fields (``params.gravity``), ``key`` the ``uint64`` key of a counter-based
  generator (see :mod:`warpsci.random`). ``env`` and ``agent`` are ``uint32`` indices on both
  backends (unsigned indices spare the GPU Numba's negative-index wrap-around on every access):
  arithmetic with an integer literal gives ``int64``, but the difference of two indices wraps
  around below zero, so convert with ``np.int64(agent)`` before subtracting another index.

The framework compiles these once for the CPU (``numba.njit(parallel=True)``, environments in
parallel, agents and phases in order) and once for CUDA (one thread per agent, environments in
blocks, ``cuda.syncthreads()`` between phases). The functions must not keep state of their own.
"""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from numba import njit


def agent_function(function: Callable) -> Callable:
    """Compile an environment function with Numba so that both backends can call it.

    ``inline="always"`` is deliberately not used: with ``parallel=True`` callers, numba 0.68 drops
    writes made through namedtuple fields of an inlined function.
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
    """

    name: str
    dtype: Any
    shape: tuple[int, ...] = ()
    per_agent: bool = True

    def full_shape(self, num_envs: int, num_agents: int) -> tuple[int, ...]:
        """Array shape for ``num_envs`` environments of ``num_agents`` agents."""
        leading = (num_envs, num_agents) if self.per_agent else (num_envs,)
        return leading + tuple(self.shape)


@dataclasses.dataclass(frozen=True)
class EnvironmentDefinition:
    """Everything warpsci needs to build, compile and run an environment.

    Attributes:
        name: Registered id, e.g. ``"CartPole-v1"``.
        params_type: The frozen params dataclass; its defaults are the environment's defaults.
        state_fields: Layout of the state arrays.
        reset_agent, step_agent, observe_agent, is_terminal: Compiled functions (see module doc).
        observation_space: ``params -> gymnasium.spaces.Box``, the space of one agent's observation.
        action_space: ``params -> gymnasium.Space``, the space of one agent's action
            (``Discrete``, ``MultiDiscrete`` or ``Box``).
        num_agents: ``params -> int``; default one agent.
        max_episode_steps: ``params -> int``, the time limit after which an episode is truncated.
        num_step_phases: Number of phases of a step; agents synchronise between phases. Default 1.
        reference: Where the dynamics come from (for documentation).
        params_float_dtype: Precision in which float params reach the kernels: ``np.float32``
            (default, the precision of most state) or ``np.float64`` for dynamics so sensitive that a
            constant rounded to float32 changes the result (Acrobot's 0.2 s Runge-Kutta step).
    """

    name: str
    params_type: type
    state_fields: tuple[StateField, ...]
    reset_agent: Callable
    step_agent: Callable
    observe_agent: Callable
    is_terminal: Callable
    observation_space: Callable[[Any], gymnasium.spaces.Box]
    action_space: Callable[[Any], gymnasium.Space]
    max_episode_steps: Callable[[Any], int]
    num_agents: Callable[[Any], int] = lambda params: 1
    num_step_phases: int = 1
    reference: str = ""
    params_float_dtype: Any = np.float32

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.params_type):
            raise TypeError(f"params_type must be a dataclass, got {self.params_type!r}")
        names = [field.name for field in self.state_fields]
        if len(set(names)) != len(names):
            raise ValueError(f"state field names must be unique, got {names}")
        if np.dtype(self.params_float_dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(
                f"params_float_dtype must be np.float32 or np.float64, got {self.params_float_dtype!r}"
            )
        if self.num_step_phases < 1:
            raise ValueError(f"num_step_phases must be >= 1, got {self.num_step_phases}")

    @property
    def state_type(self) -> type:
        """The namedtuple type that holds the state arrays."""
        return _state_tuple_type(self.name, tuple(field.name for field in self.state_fields))

    def default_params(self) -> Any:
        """The params dataclass with its default values."""
        return self.params_type()


def params_to_tuple(params: Any, float_dtype: Any = np.float32) -> tuple:
    """Turn a params dataclass into a namedtuple of numpy scalars that kernels can take.

    Floats become ``float_dtype`` (default ``float32``, the precision of most state arrays), ints
    ``int64``, bools ``bool_``.
    """
    fields = dataclasses.fields(params)
    values = []
    for field in fields:
        value = getattr(params, field.name)
        if isinstance(value, (bool, np.bool_)):
            values.append(np.bool_(value))
        elif isinstance(value, (int, np.integer)):
            values.append(np.int64(value))
        elif isinstance(value, (float, np.floating)):
            values.append(np.dtype(float_dtype).type(value))
        else:
            raise TypeError(f"params field {field.name!r} must be a number or a bool, got {value!r}")
    tuple_type = _params_tuple_type(type(params).__name__, tuple(f.name for f in fields))
    return tuple_type(*values)


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
