"""The device-resident vector environment of a multi-group environment: tensors per agent group.

``warpsci.make`` returns a :class:`MultiAgentVectorEnv` for an environment of several groups (Tag's
taggers and runners, COVID-19's governors and planner). It holds the same arrays and runs the same
kernels as :class:`~warpsci.vector_env.WarpVectorEnv`; only the front differs: ``reset`` and
``step`` take and return dictionaries keyed by group name, each tensor shaped
``(num_envs, group_size, ...)``::

    env = warpsci.make("TagGridworld-v0", num_envs=2000, device="cuda")
    obs, info = env.reset(seed=0)                    # obs["tagger"]: (2000, 10, 45)
    actions = {group: env.action_space[group].sample() for group in env.group_names}
    obs, rewards, terminated, truncated, info = env.step(actions)

``terminated[group][e, k]`` is True when agent ``k`` of the group left the game with this step
(``is_agent_done``) or the environment's episode terminated; ``truncated`` when the episode hit its
time limit (for agents still in the game). ``info["active"][group]`` says which agents act at the
next step, ``info["action_mask"][group]`` which actions they may take (for environments with
masks). As in ``WarpVectorEnv``, finished environments are reset inside ``step``: ``obs`` is the
first observation of the new episode and ``info["final_obs"]`` the one that ended it.

A group's rows are a view of the environment's buffers when its agents are contiguous, and a
gather (one indexing kernel per group) otherwise.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import torch
from gymnasium.vector.utils import batch_space

from warpsci.environment import AgentGroup, flat_size, mask_size
from warpsci.vector_env import WarpVectorEnv


class MultiAgentVectorEnv(WarpVectorEnv):
    """``num_envs`` copies of a multi-group environment, stepped together on ``device``.

    Arguments as :class:`~warpsci.vector_env.WarpVectorEnv`. Spaces are ``gymnasium.spaces.Dict``
    keyed by group: ``single_observation_space[group]`` is one environment's ``(group_size,
    *obs_shape)`` Box, ``observation_space[group]`` the batch's.
    """

    def _set_spaces(self, observation_space: Any, action_space: Any) -> None:
        self.group_names = tuple(group.name for group in self.groups)
        self.group_by_name = {group.name: group for group in self.groups}
        self.single_observation_space = gymnasium.spaces.Dict(
            {g.name: batch_space(g.observation_space, g.size) for g in self.groups}
        )
        self.single_action_space = gymnasium.spaces.Dict(
            {g.name: batch_space(g.action_space, g.size) for g in self.groups}
        )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def _build_backend(self, threads_per_block: int | None, block_observation: bool) -> None:
        super()._build_backend(threads_per_block, block_observation)
        self._agent_index = {
            group.name: torch.tensor(group.agents, dtype=torch.int64, device=self.device)
            for group in self.groups
        }

    # ----------------------------------------------------------------------------- per-group views

    def group_rows(self, tensor: torch.Tensor, group: str | AgentGroup) -> torch.Tensor:
        """The rows of ``tensor`` (``(num_envs, num_agents, ...)``) that belong to ``group``: a view
        when the group's agents are contiguous, else a gathered copy."""
        group = self.group_by_name[group] if isinstance(group, str) else group
        if group.contiguous:
            return tensor[:, group.agents[0] : group.agents[0] + group.size]
        return tensor.index_select(1, self._agent_index[group.name])

    def group_observations(self, tensor: torch.Tensor, group: AgentGroup) -> torch.Tensor:
        """``(num_envs, group_size, *obs_shape)``: the group's rows, cut to its observation size."""
        rows = self.group_rows(tensor, group)[..., : flat_size(group.observation_space)]
        return rows.reshape(self.num_envs, group.size, *group.observation_space.shape)

    def group_action_mask(self, group: AgentGroup) -> torch.Tensor:
        """``(num_envs, group_size, mask_size)`` bool: the actions the group's agents may take next
        (all True for groups without masks)."""
        return self.group_rows(self.buffers.action_mask, group)[..., : max(1, mask_size(group.action_space))]

    def _per_group(self, tensor: torch.Tensor, observations: bool = False) -> dict[str, torch.Tensor]:
        out = {}
        for group in self.groups:
            rows = self.group_observations(tensor, group) if observations else self.group_rows(tensor, group)
            out[group.name] = rows.clone() if self.copy and group.contiguous else rows
        return out

    # ----------------------------------------------------------------------------- API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Reset every environment; returns observations per group and ``info`` with ``"active"``
        and ``"action_mask"`` per group."""
        super().reset(seed=seed, options=options)
        return self._per_group(self.buffers.obs, observations=True), self._live_info()

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict[str, Any]]:  # type: ignore[override]
        """Apply one action per agent, given per group; see the module docstring for outputs."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        self._write_group_actions(actions)
        active_before = self.buffers.active.clone()
        self.step_in_place()
        buffers = self.buffers
        done = buffers.terminated | buffers.truncated
        truncated = (buffers.truncated[:, None] & active_before) & ~buffers.agent_terminated
        info = {
            **self._live_info(),
            "final_obs": self._per_group(buffers.final_obs, observations=True),
            "_final_obs": done.clone(),
            "episode": {
                "r": {name: rows.clone() for name, rows in self._per_group(buffers.final_return).items()},
                "l": buffers.final_length.clone(),
            },
            "_episode": done.clone(),
        }
        return (
            self._per_group(buffers.obs, observations=True),
            self._per_group(buffers.rewards),
            self._per_group(buffers.agent_terminated),
            self._per_group(truncated),
            info,
        )

    def _live_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"active": self._per_group(self.buffers.active)}
        if self.definition.action_mask is not None:
            info["action_mask"] = {group.name: self.group_action_mask(group).clone() for group in self.groups}
        return info

    def _write_group_actions(self, actions: dict[str, Any]) -> None:
        if not isinstance(actions, dict):
            raise TypeError(
                f"actions of {self.definition.name} must be a dict keyed by group {list(self.group_names)}, "
                f"got {type(actions).__name__}"
            )
        missing = sorted(set(self.group_names) - set(actions))
        unknown = sorted(set(actions) - set(self.group_names))
        if missing or unknown:
            raise ValueError(
                f"actions must have one entry per group {list(self.group_names)}; "
                f"missing {missing}, unknown {unknown}"
            )
        target = self.buffers.actions
        for group in self.groups:
            space = group.action_space
            components = () if isinstance(space, gymnasium.spaces.Discrete) else tuple(space.shape)
            expected = torch.empty(
                (self.num_envs, group.size, *components), dtype=target.dtype, device="meta"
            )
            detail = f"num_envs={self.num_envs}, {group.size} agents of group {group.name!r}"
            values = self._checked_actions(actions[group.name], expected, space, detail).to(
                device=self.device, dtype=target.dtype
            )
            if target.dim() == 3 and values.dim() == 2:
                values = values.unsqueeze(-1)
            if target.dim() == 3:
                width = values.shape[-1]
                if group.contiguous:
                    first = group.agents[0]
                    target[:, first : first + group.size, :width].copy_(values)
                else:
                    target[:, self._agent_index[group.name], :width] = values
            elif group.contiguous:
                first = group.agents[0]
                target[:, first : first + group.size].copy_(values)
            else:
                target[:, self._agent_index[group.name]] = values

    @property
    def group_sizes(self) -> dict[str, int]:
        """Agents per group."""
        return {group.name: group.size for group in self.groups}


def vector_env_class(groups: tuple[AgentGroup, ...]) -> type[WarpVectorEnv]:
    """The vector environment for an environment with these groups: ``WarpVectorEnv`` (Gymnasium's
    API) for one group, :class:`MultiAgentVectorEnv` (tensors per group) for several."""
    return MultiAgentVectorEnv if len(groups) > 1 else WarpVectorEnv
