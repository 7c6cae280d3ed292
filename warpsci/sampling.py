"""Action sampling on the device, without ``torch.distributions``.

``torch.distributions.Categorical`` validates arguments and builds objects on every call; at 10K
environments it cost ten times an environment step (see DESIGN.md). These functions are a handful
of fused-friendly tensor operations, and take an explicit ``torch.Generator`` so that sampling is
reproducible from the run's seed.
"""

from __future__ import annotations

import torch


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
