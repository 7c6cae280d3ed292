"""Policy and value networks (CleanRL's architecture: separate tanh MLPs, orthogonal init)."""

from __future__ import annotations

import math

import gymnasium
import torch
from torch import nn

from warpsci.sampling import categorical_log_prob_entropy, greedy_categorical, sample_categorical


def _layer(in_features: int, out_features: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(in_features: int, hidden_sizes: tuple[int, ...], out_features: int, out_gain: float) -> nn.Sequential:
    """Tanh MLP with orthogonal weights (gain sqrt(2) inside, ``out_gain`` on the output layer)."""
    layers: list[nn.Module] = []
    width = in_features
    for hidden in hidden_sizes:
        layers += [_layer(width, hidden, math.sqrt(2)), nn.Tanh()]
        width = hidden
    layers.append(_layer(width, out_features, out_gain))
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """An actor (logits over discrete actions) and a critic (state value), both MLPs.

    Args:
        observation_size: Length of a flat observation.
        num_actions: Number of discrete actions.
        hidden_sizes: Widths of the hidden layers. Default ``(64, 64)``.
    """

    def __init__(self, observation_size: int, num_actions: int, hidden_sizes: tuple[int, ...] = (64, 64)):
        super().__init__()
        self.actor = mlp(observation_size, hidden_sizes, num_actions, out_gain=0.01)
        self.critic = mlp(observation_size, hidden_sizes, 1, out_gain=1.0)

    @classmethod
    def for_spaces(
        cls,
        observation_space: gymnasium.spaces.Box,
        action_space: gymnasium.Space,
        hidden_sizes: tuple[int, ...] = (64, 64),
    ) -> ActorCritic:
        """Build a network for one agent's observation and action spaces."""
        if not isinstance(action_space, gymnasium.spaces.Discrete):
            raise TypeError(f"ActorCritic supports Discrete action spaces, got {action_space}")
        observation_size = int(math.prod(observation_space.shape))
        return cls(observation_size, int(action_space.n), tuple(hidden_sizes))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values, shaped ``obs.shape[:-1]``."""
        return self.critic(obs).squeeze(-1)

    def act(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample actions for a batch of observations: ``(actions, log_prob)``."""
        return sample_categorical(self.actor(obs), generator)

    def act_greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """The most likely action for each observation."""
        return greedy_categorical(self.actor(obs))

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value)`` of given actions, for the update."""
        log_prob, entropy = categorical_log_prob_entropy(self.actor(obs), actions)
        return log_prob, entropy, self.value(obs)
