"""A PettingZoo ``ParallelEnv`` over one warpsci environment, on the CPU backend, with NumPy values.

For tools built on PettingZoo (its API tests, wrappers, other trainers' multi-agent loops), one
environment at a time; training at scale uses :class:`~warpsci.vector_env.WarpVectorEnv` directly::

    from warpsci.pettingzoo_adapter import parallel_env

    env = parallel_env("CartPole-v1", max_episode_steps=200)     # params by keyword
    observations, infos = env.reset(seed=0)
    while env.agents:
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)

Agents are named ``f"{group}_{k}"``, ``k`` counting the group's agents in increasing agent index
(``"agent_0"`` for a single-agent environment); ``possible_agents`` lists every agent in the order
of the environment's agent indices (``agent_index`` maps a name to its index). Observations are
NumPy arrays of the agent's group's observation space (shape and dtype); rewards are floats.

* **Masks.** For an environment with ``action_mask``, ``infos[agent]["action_mask"]`` is an ``int8``
  array with one entry per action (``n`` for ``Discrete``, ``sum(nvec)`` for ``MultiDiscrete``):
  1 where the action is allowed at the next step. Masks are advice: an action against the mask is
  applied like any other. An agent that is done with a step is given an all-zero mask (it acts no
  more).
* **Leaving and ending.** An agent is terminated when it left the game with the step
  (``is_agent_done``) or the environment's episode terminated, and truncated when the episode hit its
  time limit (and it did not terminate). Done agents leave ``agents`` after the step and are not
  reported again in the episode. When the episode ends every agent is done and ``agents`` is empty
  until the next ``reset``: the adapter never shows the vector environment's autoreset; the last
  observations are the ones that ended the episode.
* **Steps.** ``step`` takes one action per live agent (a ``ValueError`` names the missing ones and
  unknown names); actions given for agents that are no longer live are ignored. Actions must lie in
  the agent's action space (checked: the kernels do not check indices). ``step`` with no live agents
  returns empty dictionaries.
* **Seeds.** ``reset(seed)`` fixes the trajectory that follows and seeds every agent's spaces;
  ``reset()`` without a seed uses seed 0 the first time and then a new seed derived from the
  previous one. Reset options are ignored.

There is no rendering (``render_mode`` must be None) and no global ``state()``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv

from warpsci.environment import AgentGroup, EnvironmentDefinition, flat_size, mask_size
from warpsci.multi_agent_env import vector_env_class
from warpsci.vector_env import dataclass_replace

__all__ = ["WarpParallelEnv", "parallel_env"]

AgentID = str


def parallel_env(
    env_id_or_definition: str | EnvironmentDefinition, render_mode: str | None = None, **params: Any
) -> WarpParallelEnv:
    """A PettingZoo ``ParallelEnv`` over one environment on the CPU backend.

    Args:
        env_id_or_definition: A registered id (``"CartPole-v1"``, ``"warpsci/CartPole-v1"``) or an
            :class:`~warpsci.environment.EnvironmentDefinition`.
        render_mode: Must be None (warpsci environments do not render).
        **params: Fields of the environment's params dataclass; those left out keep their defaults.
            Unknown names raise ValueError listing the accepted ones.
    """
    if isinstance(env_id_or_definition, EnvironmentDefinition):
        definition = env_id_or_definition
    elif isinstance(env_id_or_definition, str):
        from warpsci.registry import get_definition

        definition = get_definition(env_id_or_definition)
    else:
        kind = type(env_id_or_definition).__name__
        raise TypeError(f"expected an environment id or an EnvironmentDefinition, got {kind}")
    return WarpParallelEnv(definition, dataclass_replace(definition.default_params(), **params), render_mode)


class WarpParallelEnv(ParallelEnv[AgentID, np.ndarray, Any]):
    """One environment of ``definition`` as a PettingZoo ``ParallelEnv``; see the module docstring.

    Build it with :func:`parallel_env`.

    Attributes:
        definition: The environment.
        params: Its params dataclass instance.
        vector_env: The single-environment vector environment underneath (CPU backend).
        agent_index: Agent name -> agent index of the environment.
        agent_group: Agent name -> its :class:`~warpsci.environment.AgentGroup`.
    """

    metadata: dict[str, Any] = {"render_modes": [], "name": "warpsci", "is_parallelizable": True}

    def __init__(
        self, definition: EnvironmentDefinition, params: Any, render_mode: str | None = None
    ) -> None:
        if render_mode is not None:
            raise ValueError(
                f"warpsci environments do not render: render_mode must be None, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.definition = definition
        self.params = params
        self.metadata = {**type(self).metadata, "name": definition.name}
        groups = definition.agent_groups(params)
        self.vector_env = vector_env_class(groups)(
            definition, num_envs=1, device="cpu", params=params, copy=False, check_actions=False
        )
        self.agent_index: dict[AgentID, int] = {}
        self.agent_group: dict[AgentID, AgentGroup] = {}
        for group in groups:
            for k, agent in enumerate(group.agents):
                name = f"{group.name}_{k}"
                self.agent_index[name] = agent
                self.agent_group[name] = group
        self.possible_agents: list[AgentID] = sorted(self.agent_index, key=self.agent_index.__getitem__)
        self.agents: list[AgentID] = []
        # One space object per agent, so that seeding and sampling are per agent.
        self.observation_spaces: dict[AgentID, gymnasium.spaces.Box] = {
            name: copy.deepcopy(self.agent_group[name].observation_space) for name in self.possible_agents
        }
        self.action_spaces: dict[AgentID, gymnasium.Space] = {
            name: copy.deepcopy(self.agent_group[name].action_space) for name in self.possible_agents
        }
        self._has_masks = definition.action_mask is not None
        # NumPy views of the CPU buffers, which the kernels update in place.
        self._buffers = type(self.vector_env.buffers)(*(tensor.numpy() for tensor in self.vector_env.buffers))
        self._has_reset = False

    # ----------------------------------------------------------------------------- spaces

    def observation_space(self, agent: AgentID) -> gymnasium.spaces.Box:
        """The observation space of ``agent`` (its group's; the same object on every call)."""
        return self.observation_spaces[self._known(agent)]

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        """The action space of ``agent`` (its group's; the same object on every call)."""
        return self.action_spaces[self._known(agent)]

    # ----------------------------------------------------------------------------- API

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[AgentID, np.ndarray], dict[AgentID, dict[str, Any]]]:
        """Start a new episode; returns the observations and infos of every agent. ``options`` are
        ignored."""
        self.vector_env.reset(seed=seed)
        if seed is not None:
            seeds = np.random.SeedSequence(int(seed)).generate_state(2 * len(self.possible_agents), np.uint32)
            for position, agent in enumerate(self.possible_agents):
                self.observation_spaces[agent].seed(int(seeds[2 * position]))
                self.action_spaces[agent].seed(int(seeds[2 * position + 1]))
        self._has_reset = True
        active = self._buffers.active[0]
        self.agents = [agent for agent in self.possible_agents if active[self.agent_index[agent]]]
        observations = {agent: self._observation(self._buffers.obs, agent) for agent in self.agents}
        infos = {agent: self._info(agent, done=False) for agent in self.agents}
        return observations, infos

    def step(
        self, actions: Mapping[AgentID, Any]
    ) -> tuple[
        dict[AgentID, np.ndarray],
        dict[AgentID, float],
        dict[AgentID, bool],
        dict[AgentID, bool],
        dict[AgentID, dict[str, Any]],
    ]:
        """Apply one action per live agent; returns observations, rewards, terminations, truncations
        and infos of the agents that were live before the step."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict keyed by agent name, got {type(actions).__name__}")
        unknown = sorted(str(agent) for agent in actions if agent not in self.agent_index)
        if unknown:
            raise ValueError(f"actions for unknown agents {unknown}; agents: {self.possible_agents}")
        missing = [agent for agent in self.agents if agent not in actions]
        if missing:
            raise ValueError(f"no action for live agents {missing}")
        live = list(self.agents)
        if not live:
            return {}, {}, {}, {}, {}
        values = {agent: self._action_value(agent, actions[agent]) for agent in live}
        target = self._buffers.actions[0]
        for agent, value in values.items():
            index = self.agent_index[agent]
            if target.ndim == 1:
                target[index] = value
            else:  # components: an agent with fewer than the widest group fills the first ones
                components = np.atleast_1d(value)
                target[index].reshape(-1)[: components.size] = components

        self.vector_env.step_in_place()

        buffers = self._buffers
        ended = bool(buffers.terminated[0]) or bool(buffers.truncated[0])
        # After the episode ended, ``obs`` is the autoreset's new episode: report the final one.
        source = buffers.final_obs if ended else buffers.obs
        observations, rewards, terminations, truncations, infos = {}, {}, {}, {}, {}
        for agent in live:
            index = self.agent_index[agent]
            terminations[agent] = bool(buffers.agent_terminated[0, index])
            truncations[agent] = bool(buffers.truncated[0]) and not terminations[agent]
            observations[agent] = self._observation(source, agent)
            rewards[agent] = float(buffers.rewards[0, index])
            infos[agent] = self._info(agent, done=terminations[agent] or truncations[agent])
        if ended:
            self.agents = []
        else:
            self.agents = [agent for agent in live if not (terminations[agent] or truncations[agent])]
        return observations, rewards, terminations, truncations, infos

    def render(self) -> None:
        """Nothing to render (``render_mode`` is None)."""
        return None

    def state(self) -> np.ndarray:
        """Not provided: warpsci environments declare no global state space."""
        raise NotImplementedError(
            f"{self.definition.name}: state() is not provided; the raw state arrays are "
            "vector_env.state_tensors (environment 0)"
        )

    def close(self) -> None:
        """Nothing to release."""

    # ----------------------------------------------------------------------------- helpers

    def _known(self, agent: AgentID) -> AgentID:
        if agent not in self.agent_index:
            raise KeyError(f"unknown agent {agent!r}; agents: {self.possible_agents}")
        return agent

    def _observation(self, source: np.ndarray, agent: AgentID) -> np.ndarray:
        space = self.observation_spaces[agent]
        row = source[0, self.agent_index[agent]].reshape(-1)[: flat_size(space)]
        return row.reshape(space.shape).astype(space.dtype, copy=True)

    def _info(self, agent: AgentID, done: bool) -> dict[str, Any]:
        if not self._has_masks:
            return {}
        width = mask_size(self.action_spaces[agent])
        if done:
            return {"action_mask": np.zeros(width, np.int8)}
        return {"action_mask": self._buffers.action_mask[0, self.agent_index[agent], :width].astype(np.int8)}

    def _action_value(self, agent: AgentID, action: Any) -> Any:
        """``action`` as the number or flat array written into the action buffer; ValueError if it
        lies outside the agent's action space."""
        space = self.action_spaces[agent]
        value = np.asarray(action)
        if isinstance(space, gymnasium.spaces.Discrete):
            if value.size != 1 or not np.issubdtype(value.dtype, np.integer):
                raise ValueError(f"action of {agent} must be one integer for {space}, got {action!r}")
            number = int(value.reshape(-1)[0])
            if not 0 <= number < int(space.n):
                raise ValueError(f"action {number} of {agent} is outside its action space {space}")
            return number
        if value.shape != space.shape:
            raise ValueError(
                f"action of {agent} must have shape {space.shape} for {space}, got {value.shape}"
            )
        if isinstance(space, gymnasium.spaces.MultiDiscrete):
            if not np.issubdtype(value.dtype, np.integer):
                raise ValueError(f"action of {agent} must hold integers for {space}, got {value.dtype}")
            if np.any(value < 0) or np.any(value >= space.nvec):
                raise ValueError(f"action {value.tolist()} of {agent} is outside its action space {space}")
            return value.reshape(-1)
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
            raise ValueError(f"action of {agent} must hold numbers for {space}, got {value.dtype}")
        if np.any(np.isnan(value)):
            raise ValueError(f"action of {agent} contains NaN")
        return value.reshape(-1)
