"""Proximal Policy Optimisation (Schulman et al., 2017), as CleanRL's ``ppo.py``.

The update makes ``update_epochs`` passes over the rollout in ``num_minibatches`` shuffled
minibatches, with the clipped surrogate objective, an optionally clipped value loss, an entropy
bonus, per-minibatch advantage normalisation, global gradient clipping and optional early stopping
on the approximate KL divergence. Rollouts, advantages and the training loop are in
:mod:`warpsci.trainer`.
"""

from __future__ import annotations

import torch
from torch import nn

from warpsci.config import TrainConfig
from warpsci.networks import ActorCritic
from warpsci.trainer import (
    OnPolicyTrainer,
    TrainResult,
    actor_critic_loss,
    evaluate_policy,
    normalize_advantages,
)

__all__ = ["PPOTrainer", "TrainResult", "evaluate_policy", "ppo_losses"]


class PPOTrainer(OnPolicyTrainer):
    """Trains an :class:`~warpsci.networks.ActorCritic` with PPO; see :class:`OnPolicyTrainer`."""

    def update(self) -> dict[str, torch.Tensor]:
        """PPO epochs over the rollout; returns the last minibatch's losses (device scalars)."""
        config, buffer = self.config, self.buffer
        rollout = tuple(
            tensor.flatten(0, 1)
            for tensor in (
                buffer.obs,
                buffer.actions,
                buffer.log_probs,
                buffer.advantages,
                buffer.returns,
                buffer.values,
            )
        )
        minibatch_losses = self.compiled(ppo_losses)
        clip_fractions = []
        for _epoch in range(config.update_epochs):
            # argsort of uniform keys rather than randperm: the same draws eager and graph-replayed.
            keys = torch.rand(config.batch_size, device=self.device, generator=self.generator)
            order = torch.argsort(keys)
            for start in range(0, config.batch_size, config.minibatch_size):
                index = order[start : start + config.minibatch_size]
                losses = minibatch_losses(self.policy, config, rollout, index)
                clip_fractions.append(losses["losses/clipfrac"])
                self.optimizer.zero_grad(set_to_none=True)
                losses.pop("loss").backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), config.max_grad_norm)
                self.optimizer.step()
            if config.target_kl is not None and float(losses["losses/approx_kl"]) > config.target_kl:
                break

        losses["losses/clipfrac"] = torch.stack(clip_fractions).mean()
        losses["losses/explained_variance"] = self.explained_variance()
        return losses


def ppo_losses(
    policy: ActorCritic, config: TrainConfig, rollout: tuple[torch.Tensor, ...], index: torch.Tensor
) -> dict[str, torch.Tensor]:
    """PPO's loss on the minibatch ``index`` of the flattened ``rollout`` (observations, actions,
    log-probabilities, advantages, returns, values), and its parts and statistics (detached).

    ``loss`` is what the update differentiates; the rest are for the logs.
    """
    obs, actions, old_log_probs, advantages, returns, old_values = (tensor[index] for tensor in rollout)
    new_log_prob, entropy, new_value = policy.evaluate(obs, actions)
    log_ratio = new_log_prob - old_log_probs
    ratio = log_ratio.exp()
    with torch.no_grad():
        old_approx_kl = (-log_ratio).mean()
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > config.clip_coef).float().mean()

    if config.norm_adv:
        advantages = normalize_advantages(advantages)
    policy_loss = torch.max(
        -advantages * ratio,
        -advantages * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef),
    ).mean()

    if config.clip_vloss:
        unclipped = (new_value - returns) ** 2
        clipped_value = old_values + (new_value - old_values).clamp(-config.clip_coef, config.clip_coef)
        clipped = (clipped_value - returns) ** 2
        value_loss = 0.5 * torch.max(unclipped, clipped).mean()
    else:
        value_loss = 0.5 * ((new_value - returns) ** 2).mean()

    return {
        **actor_critic_loss(config, policy_loss, value_loss, entropy),
        "losses/old_approx_kl": old_approx_kl,
        "losses/approx_kl": approx_kl,
        "losses/clipfrac": clip_fraction,
    }
