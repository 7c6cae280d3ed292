"""Policy and value networks: CleanRL's architecture (separate tanh MLPs for the actor and the
critic, orthogonal init) by default, or WarpDrive's (one trunk of hidden layers, usually ReLU, with
a policy head and a value head on it: ``shared_trunk``).

The actor's head depends on the action space: logits for ``Discrete``, padded logits for each
component of ``MultiDiscrete``, and means with a state-independent log standard deviation for
``Box`` (a diagonal Gaussian, as in CleanRL's ``ppo_continuous_action.py``). Sampled Gaussian actions
are not clipped here: environments clip them where their Gymnasium counterparts do, and the
log-probability is that of the sampled action.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import gymnasium
import numpy as np
import torch
from torch import nn

from warpsci.fused_mlp import can_fuse, fused_mlp
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

if TYPE_CHECKING:
    from warpsci.config import TrainConfig

#: The most bytes one hidden layer of a critic pass over a whole rollout may take: larger passes go in
#: slices of rollout steps (10,000 COVID-19 environments x 90 steps x 51 governor rows through a
#: [256, 256] network asked for 44 GB at once).
VALUE_PASS_BYTES = 2**31


def _layer(in_features: int, out_features: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


#: The hidden layers' activation functions, by the name a config gives.
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def hidden_layers(
    in_features: int, hidden_sizes: tuple[int, ...], activation: str = "tanh"
) -> list[nn.Module]:
    """Linear layers with orthogonal weights (gain sqrt(2)), each followed by ``activation``."""
    layers: list[nn.Module] = []
    width = in_features
    for hidden in hidden_sizes:
        layers += [_layer(width, hidden, math.sqrt(2)), ACTIVATIONS[activation]()]
        width = hidden
    return layers


def mlp(
    in_features: int,
    hidden_sizes: tuple[int, ...],
    out_features: int,
    out_gain: float,
    activation: str = "tanh",
) -> nn.Sequential:
    """An MLP with orthogonal weights (gain sqrt(2) inside, ``out_gain`` on the output layer)."""
    width = hidden_sizes[-1] if hidden_sizes else in_features
    layers = hidden_layers(in_features, hidden_sizes, activation)
    return nn.Sequential(*layers, _layer(width, out_features, out_gain))


def _layers_in_order(network: nn.Module) -> list[nn.Module] | None:
    """The layers of a network of nested ``nn.Sequential``s in the order they run, or None when it
    holds a module other than Linear, ReLU and Tanh."""
    if isinstance(network, nn.Sequential):
        layers: list[nn.Module] = []
        for module in network:
            inner = _layers_in_order(module)
            if inner is None:
                return None
            layers += inner
        return layers
    return [network] if isinstance(network, nn.Linear | nn.ReLU | nn.Tanh) else None


def forward_fusing_relu(network: nn.Module, features: torch.Tensor) -> torch.Tensor:
    """``network(features)`` for passes without gradients (the rollout's), each ``Linear`` that a
    ``ReLU`` follows run as one product with the bias and the ReLU applied as it is written
    (``torch._addmm_activation``: a cuBLASLt epilogue on CUDA) instead of a product, then a pass
    of ReLU over it in memory (at Tag continuous's 220,000 rows of a 256-wide trunk, two such
    passes of about 70 us each per rollout step on an H100). Networks of other modules run as they
    are. Under ``torch.autocast`` the fused products take the operands in autocast's type, as its
    ``Linear`` would (autocast casts ``_addmm_activation``'s on the CPU, not on CUDA)."""
    layers = _layers_in_order(network)
    if layers is None or not any(isinstance(layer, nn.ReLU) for layer in layers):
        return network(features)
    device = features.device.type
    low = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    rows = features.reshape(-1, features.shape[-1])
    index = 0
    while index < len(layers):
        layer = layers[index]
        fused = index + 1 < len(layers) and isinstance(layers[index + 1], nn.ReLU)
        if isinstance(layer, nn.Linear) and layer.bias is not None and fused:
            weight, bias = layer.weight, layer.bias
            if low is not None:
                rows, weight, bias = rows.to(low), weight.to(low), bias.to(low)
            rows = torch._addmm_activation(bias, rows, weight.t())
            index += 2
        else:
            rows = layer(rows)
            index += 1
    return rows.reshape(*features.shape[:-1], rows.shape[-1])


def _forward(network: nn.Module, features: torch.Tensor) -> torch.Tensor:
    """``network(features)``; without gradients through :func:`forward_fusing_relu`."""
    return network(features) if torch.is_grad_enabled() else forward_fusing_relu(network, features)


def both_heads(
    actor_head: nn.Linear, critic_head: nn.Linear, hidden: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(actor_head(hidden), critic_head(hidden).squeeze(-1))`` as one product with the two
    heads' weights stacked: the trunk's output is read once, and the one-column value head is no
    matrix-vector product of its own, which reads all of it again (H100, Tag continuous's 220,000
    rows of a 256-wide trunk: about 66 us a rollout step per group)."""
    weight = torch.cat([actor_head.weight, critic_head.weight])
    bias = torch.cat([actor_head.bias, critic_head.bias])
    both = nn.functional.linear(hidden, weight, bias)
    return both[..., :-1], both[..., -1]


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
    """An actor (a distribution over actions) and a critic (state value), both MLPs, separate or on
    one shared trunk.

    Args:
        observation_size: Length of a flat observation.
        action_space: One agent's action space: ``Discrete``, 1-D ``MultiDiscrete`` or 1-D ``Box``.
        hidden_sizes: Widths of the hidden layers. Default ``(64, 64)``.
        log_std_init: Initial log standard deviation of Gaussian actions (Box only). Default 0.
        normalize_obs: Normalise observations by running statistics (updated by the trainer through
            ``obs_normalizer.update``; saved with the weights). Default False.
        fused: Run two-hidden-layer tanh networks on CUDA through the fused Triton kernels of
            :mod:`warpsci.fused_mlp` (hidden activations never stored; equal up to float rounding).
            Default False (see that module's status).
        activation: The hidden layers' activation, a key of :data:`ACTIVATIONS`. Default ``"tanh"``.
        shared_trunk: One stack of hidden layers for the actor and the critic, with a policy head
            and a value head on top (WarpDrive's ``FullyConnected``: about half the arithmetic of
            two networks), instead of two networks. Default False.
        bf16: Matrix products in bfloat16, outputs returned as float32: PyTorch's layers under
            ``torch.autocast`` (the rollout's ReLU products too, :func:`forward_fusing_relu`; a
            shared trunk's output stays bfloat16 for the heads), the fused kernels with
            ``precision="bf16"`` (:attr:`warpsci.config.TrainConfig.bf16`). Default False.

    ``actor`` and ``critic`` are ``nn.Sequential`` modules from observations to the actor's raw
    output and to the value; with a shared trunk both start with the same trunk module.
    """

    def __init__(
        self,
        observation_size: int,
        action_space: gymnasium.Space,
        hidden_sizes: tuple[int, ...] = (64, 64),
        log_std_init: float = 0.0,
        normalize_obs: bool = False,
        fused: bool = False,
        activation: str = "tanh",
        shared_trunk: bool = False,
        bf16: bool = False,
    ) -> None:
        super().__init__()
        self.bf16 = bf16
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
        self.fused = fused
        self.observation_size = observation_size
        self.hidden_sizes = tuple(hidden_sizes)
        self.shared_trunk = shared_trunk
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
        if shared_trunk:
            trunk = nn.Sequential(*hidden_layers(observation_size, self.hidden_sizes, activation))
            width = self.hidden_sizes[-1] if self.hidden_sizes else observation_size
            self.actor = nn.Sequential(trunk, _layer(width, num_outputs, 0.01))
            self.critic = nn.Sequential(trunk, _layer(width, 1, 1.0))
        else:
            self.actor = mlp(observation_size, self.hidden_sizes, num_outputs, 0.01, activation)
            self.critic = mlp(observation_size, self.hidden_sizes, 1, 1.0, activation)

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

    @classmethod
    def for_config(
        cls, config: TrainConfig, observation_space: gymnasium.spaces.Box, action_space: gymnasium.Space
    ) -> ActorCritic:
        """The network a run with ``config`` trains for one agent's spaces (and an evaluation of
        its checkpoint loads)."""
        return cls.for_spaces(
            observation_space,
            action_space,
            config.hidden_sizes,
            log_std_init=config.log_std_init,
            normalize_obs=config.normalize_obs,
            fused=config.fused_mlp,
            activation=config.activation,
            shared_trunk=config.shared_trunk,
            bf16=config.bf16,
        )

    @property
    def fused_precision(self) -> str:
        """The fused kernels' products (:data:`warpsci.fused_mlp.PRECISIONS`): ``"bf16"`` with
        ``bf16``, else ``"default"`` (TF32 rounded, or float32 where torch's matmul precision is
        ``"highest"``)."""
        return "bf16" if self.bf16 else "default"

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations as the networks see them."""
        return obs if self.obs_normalizer is None else self.obs_normalizer(obs)

    def _run(self, network: nn.Module, features: torch.Tensor) -> torch.Tensor:
        """``network(features)`` as float32: through the fused kernels, or its layers in the
        networks' precision (:meth:`_precision`; without gradients each ReLU in its product's
        epilogue, :func:`forward_fusing_relu`)."""
        if self.fused and can_fuse(network, features):
            return fused_mlp(network, features, self.fused_precision)
        with self._precision(features):
            return _forward(network, features).float()

    def _precision(self, features: torch.Tensor) -> contextlib.AbstractContextManager:
        """Where the layers run: under ``torch.autocast`` to bfloat16 with ``bf16``, else as they
        are. Not cached: a CUDA graph replays the casts of weights that an update has changed."""
        if self.bf16:
            return torch.autocast(features.device.type, dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values, shaped ``obs.shape[:-1]``."""
        return self._run(self.critic, self.normalize(obs)).squeeze(-1)

    def rollout_values(self, obs: torch.Tensor) -> torch.Tensor:
        """:meth:`value` of a rollout's observations ``(steps, rows, obs_size)``, in slices of steps
        whose widest hidden layer fits :data:`VALUE_PASS_BYTES` (no gradients needed)."""
        rows_per_step = max(1, obs[0].numel() // obs.shape[-1])
        step_bytes = 4 * max(self.hidden_sizes, default=1) * rows_per_step
        steps = max(1, VALUE_PASS_BYTES // step_bytes)
        if steps >= obs.shape[0]:
            return self.value(obs)
        return torch.cat([self.value(obs[start : start + steps]) for start in range(0, obs.shape[0], steps)])

    def _actor_and_critic(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's raw output and the values of normalised observations, the trunk run once
        when it is shared."""
        if self.shared_trunk:
            # The trunk's output goes to the heads in the products' type (bfloat16 with bf16).
            with self._precision(features):
                out, value = both_heads(self.actor[1], self.critic[1], _forward(self.actor[0], features))
            return out.float(), value.float()
        return self._run(self.actor, features), self._run(self.critic, features).squeeze(-1)

    def act_and_value(
        self, obs: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actor_output(obs, mask), value(obs))`` in one pass of a shared trunk."""
        out, value = self._actor_and_critic(self.normalize(obs))
        return self._head(out, mask), value

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
        out, value = self.act_and_value(obs, mask)
        if self.kind == "discrete":
            log_prob, entropy = categorical_log_prob_entropy(out, actions)
        elif self.kind == "multi_discrete":
            log_prob, entropy = multi_categorical_log_prob_entropy(out, actions)
        else:
            log_prob, entropy = gaussian_log_prob_entropy(out, self.actor_logstd, actions)
        return log_prob, entropy, value
