"""One policy in training: its network, optimizer, rollout buffer and the agents it plays.

A single-agent environment has one learner, which plays agent 0 of every environment. A multi-agent
environment has one learner per agent group (each with its own hyperparameters, from the config's
``groups:`` block), or one learner for every group when ``shared_policy`` is set. A learner's rollout
rows are ``(environment, agent)`` pairs, environment-major: ``num_envs * len(agents)`` rows.
"""

from __future__ import annotations

import torch

from warpsci.config import TrainConfig
from warpsci.environment import AgentGroup, flat_size, mask_size
from warpsci.networks import ActorCritic
from warpsci.normalization import RewardScaler
from warpsci.optimizers import Adam, Optimizer, RMSprop, flatten_parameters
from warpsci.rollout import RecentEpisodes, RolloutBuffer
from warpsci.rollout_kernels import RolloutKernels


class PolicyLearner:
    """A policy and everything it needs to learn from its agents' steps.

    Args:
        name: The policy's name: its group's, or ``"shared"``.
        groups: The groups whose agents it plays (equal spaces).
        config: The run's config with this policy's overrides applied.
        env: The vector environment.
        capturable: Keep optimizer state on the device for CUDA-graph replay.
    """

    def __init__(
        self, name: str, groups: tuple[AgentGroup, ...], config: TrainConfig, env, capturable: bool
    ) -> None:
        self.name, self.groups, self.config = name, groups, config
        self.agents = tuple(sorted(agent for group in groups for agent in group.agents))
        observation_space, action_space = groups[0].observation_space, groups[0].action_space
        device = env.device
        self.num_envs, self.obs_size = env.num_envs, flat_size(observation_space)
        self.num_rows = env.num_envs * len(self.agents)
        self.policy = ActorCritic.for_config(config, observation_space, action_space).to(device)
        if capturable:
            # One buffer for every weight: where the gradients are flat too (the fused loss's),
            # clipping and the optimizer step are one kernel (Adam.clipped_step).
            flatten_parameters(list(self.policy.parameters()))
        self.optimizer = build_optimizer(config, self.policy, capturable=capturable)
        self.reward_scaler = (
            RewardScaler(self.num_rows, config.gamma).to(device) if config.normalize_reward else None
        )
        self.mask_width = mask_size(action_space) if env.definition.action_mask is not None else 0
        self.buffer = RolloutBuffer(
            config.num_steps,
            self.num_rows,
            (self.obs_size,),
            self.policy.action_shape,
            device,
            action_dtype=self.policy.action_dtype,
            mask_width=self.mask_width,
        )
        self.kernels = RolloutKernels(
            env, self.buffer, self.policy.kind, getattr(self.policy, "actor_logstd", None), self.agents
        )
        if config.neg_pos_env_ratio is not None and env.num_agents != 1:
            raise ValueError(
                f"neg_pos_env_ratio down-samples whole environments of one agent; {config.env_id} has "
                f"{env.num_agents} agents an environment: leave neg_pos_env_ratio unset for it"
            )
        # Agents can leave the game, or unsuccessful rows are down-sampled: rows weighted in the loss.
        self.masked_rows = env.definition.is_agent_done is not None or config.neg_pos_env_ratio is not None
        # Rows trained on in the last rollout (with ``neg_pos_env_ratio``), a device scalar.
        self.kept_rows = torch.tensor(float(self.num_rows), device=device)
        # A device scalar, so that an annealed coefficient reaches a graph-replayed update.
        self.ent_coef = torch.tensor(float(config.ent_coef), device=device)
        first = self.agents[0]
        self._slice = slice(first, first + len(self.agents)) if self._contiguous() else None
        self._index = torch.tensor(self.agents, dtype=torch.int64, device=device)
        # Which rollout columns belong to which group (episode statistics per group).
        self.group_columns = {
            group.name: None
            if len(groups) == 1
            else torch.tensor(
                [row for row in range(self.num_rows) if self.agents[row % len(self.agents)] in group.agents],
                dtype=torch.int64,
                device=device,
            )
            for group in groups
        }

    def _contiguous(self) -> bool:
        return self.agents[-1] - self.agents[0] + 1 == len(self.agents)

    def _rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """The learner's agents' rows of an environment array ``(num_envs, num_agents, ...)``."""
        if self._slice is not None:
            return tensor[:, self._slice]
        return tensor.index_select(1, self._index)

    def observations(self, obs: torch.Tensor) -> torch.Tensor:
        """``(num_rows, obs_size)`` from the environment's observation buffer (a view where the
        agents are contiguous and the observation fills the buffer's width)."""
        rows = self._rows(obs.reshape(obs.shape[0], obs.shape[1], -1))[..., : self.obs_size]
        return rows.reshape(self.num_rows, self.obs_size)

    def action_mask(self, mask: torch.Tensor) -> torch.Tensor | None:
        """``(num_rows, mask_width)`` from the environment's mask buffer, or None without masks."""
        if not self.mask_width:
            return None
        return self._rows(mask)[..., : self.mask_width].reshape(self.num_rows, self.mask_width)

    def entropy_coefficient_at(self, progress: float) -> float:
        """The entropy coefficient after ``progress`` (0 to 1) of training."""
        final = self.config.ent_coef_final
        if final is None:
            return self.config.ent_coef
        return self.config.ent_coef + (final - self.config.ent_coef) * progress

    def learning_rate_at(self, iteration: int) -> float:
        """Learning rate for (0-based) ``iteration``: linear decay to ``learning_rate_final``
        when annealing."""
        start, final = self.config.learning_rate, self.config.learning_rate_final
        if not self.config.anneal_lr:
            return start
        return final + (start - final) * (1.0 - iteration / self.config.num_iterations)

    def new_recent_episodes(self, size: int = 100) -> dict[str, RecentEpisodes]:
        """A ring buffer of recent returns per group."""
        return {group.name: RecentEpisodes(size, self.buffer.rewards.device) for group in self.groups}

    def columns(self, tensor: torch.Tensor, group: str) -> torch.Tensor:
        """The group's columns of a ``(num_steps, num_rows)`` rollout tensor."""
        columns = self.group_columns[group]
        return tensor if columns is None else tensor.index_select(1, columns)


def build_optimizer(config: TrainConfig, policy: ActorCritic, capturable: bool = False) -> Optimizer:
    """Adam (eps 1e-5) or RMSprop (alpha 0.99, eps 1e-5) over the policy's parameters
    (:mod:`warpsci.optimizers`: torch.optim's arithmetic without its start-up cost).

    ``capturable`` (for CUDA-graph replay) keeps the step counts and the learning rate in device
    tensors, so that a replayed step reads the current learning rate; Adam then also uses torch's
    fused kernel (one launch for every parameter instead of a dozen per step).
    """
    parameters = list(policy.parameters())
    learning_rate: float | torch.Tensor = config.learning_rate
    if capturable:
        learning_rate = torch.tensor(config.learning_rate, device=parameters[0].device)
    if config.optimizer == "rmsprop":
        return RMSprop(parameters, lr=learning_rate, alpha=0.99, eps=1e-5, capturable=capturable)
    return Adam(parameters, lr=learning_rate, eps=1e-5, capturable=capturable)


def set_learning_rate(optimizer: Optimizer, value: float) -> None:
    """Set every group's learning rate, in place where it is a tensor (a captured update reads it)."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(value)
        else:
            group["lr"] = value
