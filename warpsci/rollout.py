"""The rollout buffer (device memory, allocated once) and generalised advantage estimation."""

from __future__ import annotations

import torch


class RolloutBuffer:
    """``num_steps`` transitions of ``num_envs`` environments, stored on ``device``.

    Tensors are shaped ``(num_steps, num_envs, ...)``. ``dones[t]`` marks an episode that ended with
    the transition at ``t`` (terminated or truncated); ``truncated[t]`` (truncated and not terminated)
    and ``final_obs[t]`` are kept so that a truncated episode is bootstrapped from the value of its
    last observation.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        device: torch.device,
        action_dtype: torch.dtype = torch.int64,
    ) -> None:
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        self.num_steps, self.num_envs = num_steps, num_envs
        self.obs = zeros(num_steps, num_envs, *obs_shape)
        self.final_obs = zeros(num_steps, num_envs, *obs_shape)
        self.actions = zeros(num_steps, num_envs, *action_shape, dtype=action_dtype)
        self.log_probs = zeros(num_steps, num_envs)
        self.rewards = zeros(num_steps, num_envs)
        self.dones = zeros(num_steps, num_envs)
        self.truncated = zeros(num_steps, num_envs)
        self.values = zeros(num_steps, num_envs)
        self.advantages = zeros(num_steps, num_envs)
        self.returns = zeros(num_steps, num_envs)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    """Generalised advantage estimates (Schulman et al., 2016), shaped like ``rewards``.

    ``values[t]`` is the value of the observation acted on at ``t``; ``dones[t]`` is 1 where the
    episode ended with transition ``t`` (the next stored observation then starts a new episode, so
    nothing is bootstrapped across it); ``next_value`` is the value of the observation after the
    last step. Truncation bootstrapping must already be folded into ``rewards``.
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last_advantage = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        following_value = next_value if t == num_steps - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * following_value * not_done - values[t]
        last_advantage = delta + gamma * gae_lambda * not_done * last_advantage
        advantages[t] = last_advantage
    return advantages
