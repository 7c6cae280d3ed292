"""Policy and value networks (CleanRL's architecture: separate tanh MLPs, orthogonal init).

The actor's head depends on the action space: logits for ``Discrete``, padded logits for each
component of ``MultiDiscrete``, and means with a state-independent log standard deviation for
``Box`` (a diagonal Gaussian, as in CleanRL's ``ppo_continuous_action.py``). Sampled Gaussian actions
are not clipped here: environments clip them where their Gymnasium counterparts do, and the
log-probability is that of the sampled action.
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import torch
from torch import nn

from warpsci.fused_mlp import fused_mlp
from warpsci.normalization import ObservationNormalizer
from warpsci.sampling import (
    MASKED_LOGIT,
    categorical_log_prob_entropy,
    gaussian_log_prob_entropy,
    greedy_categorical,
    multi_categorical_log_prob_entropy,
    sample_categorical,
    sample_gaussian,
    sample_multi_categorical,
)


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


def action_layout(action_space: gymnasium.Space) -> tuple[tuple[int, ...], torch.dtype]:
    """Shape and dtype of one action as the trainer stores it (int64 indices or float32 values)."""
    if isinstance(action_space, gymnasium.spaces.Discrete):
        return (), torch.int64
    if isinstance(action_space, gymnasium.spaces.MultiDiscrete):
        return tuple(action_space.shape), torch.int64
    if isinstance(action_space, gymnasium.spaces.Box):
        return tuple(action_space.shape), torch.float32
    raise TypeError(f"unsupported action space {action_space!r}: use Discrete, MultiDiscrete or Box")


class ActorCritic(nn.Module):
    """An actor (a distribution over actions) and a critic (state value), both MLPs.

    Args:
        observation_size: Length of a flat observation.
        action_space: One agent's action space: ``Discrete``, 1-D ``MultiDiscrete`` or 1-D ``Box``.
        hidden_sizes: Widths of the hidden layers. Default ``(64, 64)``.
        log_std_init: Initial log standard deviation of Gaussian actions (Box only). Default 0.
        normalize_obs: Normalise observations by running statistics (updated by the trainer through
            ``obs_normalizer.update``; saved with the weights). Default False.
        fused: Run two-hidden-layer networks on CUDA through the fused Triton kernels of
            :mod:`warpsci.fused_mlp` (hidden activations never stored; equal up to float rounding).
            Default False (see that module's status).
    """

    def __init__(
        self,
        observation_size: int,
        action_space: gymnasium.Space,
        hidden_sizes: tuple[int, ...] = (64, 64),
        log_std_init: float = 0.0,
        normalize_obs: bool = False,
        fused: bool = False,
    ) -> None:
        super().__init__()
        self.fused = fused
        self.action_shape, self.action_dtype = action_layout(action_space)
        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.kind, num_outputs = "discrete", int(action_space.n)
        elif isinstance(action_space, gymnasium.spaces.MultiDiscrete):
            if len(action_space.shape) != 1:
                raise TypeError(f"MultiDiscrete action spaces must be 1-D, got shape {action_space.shape}")
            self.kind = "multi_discrete"
            nvec = [int(n) for n in action_space.nvec]
            num_outputs = sum(nvec)
            # Row i lists the logits of component i, padded with the extra masked column.
            index = np.full((len(nvec), max(nvec)), num_outputs, dtype=np.int64)
            offsets = np.cumsum([0] + nvec[:-1])
            for row, (offset, n) in enumerate(zip(offsets, nvec, strict=True)):
                index[row, :n] = np.arange(offset, offset + n)
            self.register_buffer("logit_index", torch.from_numpy(index.reshape(-1)), persistent=False)
            self.component_shape = (len(nvec), max(nvec))
            # Equal components need no padding: the flat logits reshape to (components, n).
            self.equal_components = len(set(nvec)) == 1
        else:
            if len(action_space.shape) != 1:
                raise TypeError(f"Box action spaces must be 1-D, got shape {action_space.shape}")
            self.kind, num_outputs = "continuous", int(action_space.shape[0])
            self.actor_logstd = nn.Parameter(torch.full((num_outputs,), float(log_std_init)))
        self.obs_normalizer = ObservationNormalizer((observation_size,)) if normalize_obs else None
        self.actor = mlp(observation_size, hidden_sizes, num_outputs, out_gain=0.01)
        self.critic = mlp(observation_size, hidden_sizes, 1, out_gain=1.0)

    @classmethod
    def for_spaces(
        cls,
        observation_space: gymnasium.spaces.Box,
        action_space: gymnasium.Space,
        hidden_sizes: tuple[int, ...] = (64, 64),
        **options: float | bool,
    ) -> ActorCritic:
        """Build a network for one agent's observation and action spaces (``options`` as in
        the constructor)."""
        observation_size = int(math.prod(observation_space.shape))
        return cls(observation_size, action_space, tuple(hidden_sizes), **options)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations as the networks see them."""
        return obs if self.obs_normalizer is None else self.obs_normalizer(obs)

    def _run(self, network: nn.Sequential, features: torch.Tensor) -> torch.Tensor:
        return fused_mlp(network, features) if self.fused else network(features)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values, shaped ``obs.shape[:-1]``."""
        return self._run(self.critic, self.normalize(obs)).squeeze(-1)

    def actor_output(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """What the action distribution is built from: logits (Discrete), padded logits
        ``(..., k, n_max)`` (MultiDiscrete) or means (Box). ``mask`` (bool, ``(..., n)`` or
        ``(..., sum(nvec))``) gives the logits of disallowed actions :data:`MASKED_LOGIT`."""
        return self._head(self._run(self.actor, self.normalize(obs)), mask)

    def _head(self, out: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The actor's raw output as the distribution takes it (padded per component for
        MultiDiscrete, disallowed actions masked)."""
        if self.kind == "continuous":
            return out
        if mask is not None:
            out = out.masked_fill(~mask, MASKED_LOGIT)
        if self.kind == "multi_discrete":
            if self.equal_components:
                return out.reshape(*out.shape[:-1], *self.component_shape)
            # index_select, not advanced indexing: its backward is an index_add, where advanced
            # indexing's sorts the indices (8.7 ms an update at 2,000 x 110 Tag continuous rows).
            padding = out.new_full(out.shape[:-1] + (1,), MASKED_LOGIT)
            padded = torch.cat([out, padding], dim=-1).index_select(-1, self.logit_index)
            out = padded.reshape(*out.shape[:-1], *self.component_shape)
        return out

    def act(
        self, obs: torch.Tensor, generator: torch.Generator | None = None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample actions for a batch of observations: ``(actions, log_prob)``."""
        out = self.actor_output(obs, mask)
        if self.kind == "discrete":
            return sample_categorical(out, generator)
        if self.kind == "multi_discrete":
            return sample_multi_categorical(out, generator)
        return sample_gaussian(out, self.actor_logstd, generator)

    def act_greedy(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The most likely action for each observation (the mean for Gaussian actions)."""
        out = self.actor_output(obs, mask)
        return out if self.kind == "continuous" else greedy_categorical(out)

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value)`` of given actions (under action masks ``mask``), for the
        update."""
        features = self.normalize(obs)
        out = self._head(self._run(self.actor, features), mask)
        if self.kind == "discrete":
            log_prob, entropy = categorical_log_prob_entropy(out, actions)
        elif self.kind == "multi_discrete":
            log_prob, entropy = multi_categorical_log_prob_entropy(out, actions)
        else:
            log_prob, entropy = gaussian_log_prob_entropy(out, self.actor_logstd, actions)
        return log_prob, entropy, self._run(self.critic, features).squeeze(-1)
