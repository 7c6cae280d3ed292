"""Action sampling on the device, without ``torch.distributions``.

``torch.distributions.Categorical`` validates arguments and builds objects on every call; at 10K
environments it cost ten times an environment step (see DESIGN.md). These functions are a handful
of fused-friendly tensor operations, and take an explicit ``torch.Generator`` so that sampling is
reproducible from the run's seed.

Three action kinds are covered:

* categorical (``Discrete``): logits ``(..., n)``, actions ``(...)``;
* several independent categoricals (``MultiDiscrete``): logits ``(..., k, n_max)`` padded with
  :data:`MASKED_LOGIT`, actions ``(..., k)``, log-probabilities and entropies summed over ``k``;
* diagonal Gaussian (``Box``): means ``(..., d)`` and a log standard deviation ``(d,)``, actions
  ``(..., d)``, log-probabilities and entropies summed over ``d``.
"""

from __future__ import annotations

import math

import torch

#: Logit given to the padding categories of a MultiDiscrete head: never sampled, no entropy.
MASKED_LOGIT = -1e9

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


def sample_categorical(
    logits: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one index per row of ``logits`` (last axis = categories) by the Gumbel-max trick.

    Returns ``(actions, log_prob)``: ``actions`` is int64 shaped ``logits.shape[:-1]``, ``log_prob``
    the log-probability of each sampled action.
    """
    uniform = torch.rand(logits.shape, device=logits.device, generator=generator)
    tiny = torch.finfo(uniform.dtype).tiny
    gumbel = -torch.log(-torch.log(uniform.clamp_(min=tiny)))
    actions = torch.argmax(logits + gumbel, dim=-1)
    log_probs = torch.log_softmax(logits, dim=-1)
    return actions, log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def categorical_log_prob_entropy(
    logits: torch.Tensor, actions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of ``actions`` under ``logits`` and the distribution's entropy (nats)."""
    log_probs = torch.log_softmax(logits, dim=-1)
    log_prob = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return log_prob, entropy


def greedy_categorical(logits: torch.Tensor) -> torch.Tensor:
    """The most likely action of each row (for evaluation)."""
    return torch.argmax(logits, dim=-1)


def sample_multi_categorical(
    logits: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``k`` independent categoricals from padded logits ``(..., k, n_max)``.

    Returns ``(actions (..., k) int64, log_prob (...))``, the log-probability of the joint action.
    """
    actions, log_prob = sample_categorical(logits, generator)
    return actions, log_prob.sum(-1)


def multi_categorical_log_prob_entropy(
    logits: torch.Tensor, actions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Joint log-probability of ``actions (..., k)`` and the joint entropy, from ``(..., k, n_max)``."""
    log_prob, entropy = categorical_log_prob_entropy(logits, actions)
    return log_prob.sum(-1), entropy.sum(-1)


def sample_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample a diagonal Gaussian: ``(actions, log_prob)``, the log-probability summed over dims."""
    noise = torch.randn(mean.shape, device=mean.device, generator=generator)
    actions = mean + log_std.exp() * noise
    log_prob = (-0.5 * noise.square() - log_std - _HALF_LOG_TWO_PI).sum(-1)
    return actions, log_prob


def gaussian_log_prob_entropy(
    mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of ``actions`` under ``N(mean, exp(log_std)^2)`` and the entropy (nats)."""
    standardized = (actions - mean) * torch.exp(-log_std)
    log_prob = (-0.5 * standardized.square() - log_std - _HALF_LOG_TWO_PI).sum(-1)
    entropy = (0.5 + _HALF_LOG_TWO_PI + log_std).sum(-1).expand(log_prob.shape)
    return log_prob, entropy
