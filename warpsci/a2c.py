"""Advantage actor-critic (Mnih et al., 2016), synchronous: one gradient step per rollout.

The rollout, GAE (with ``gae_lambda = 1`` it is the n-step return of the original A2C) and the
training loop are shared with PPO (:mod:`warpsci.trainer`). The loss is the policy gradient
``-A * log pi(a|s)``, plus ``vf_coef`` times half the squared error of the value, minus ``ent_coef``
times the entropy, over the whole rollout at once; gradients are clipped to ``max_grad_norm``.
"""

from __future__ import annotations

import torch
from torch import nn

from warpsci.config import TrainConfig
from warpsci.networks import ActorCritic
from warpsci.trainer import OnPolicyTrainer, actor_critic_loss, normalize_advantages


class A2CTrainer(OnPolicyTrainer):
    """Trains an :class:`~warpsci.networks.ActorCritic` with A2C; see :class:`OnPolicyTrainer`."""

    def update(self) -> dict[str, torch.Tensor]:
        """One gradient step on the whole rollout; returns the losses (device scalars)."""
        buffer = self.buffer
        rollout = tuple(
            tensor.flatten(0, 1) for tensor in (buffer.obs, buffer.actions, buffer.advantages, buffer.returns)
        )
        losses = self.compiled(a2c_losses)(self.policy, self.config, rollout)
        self.optimizer.zero_grad(set_to_none=True)
        losses.pop("loss").backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        losses["losses/explained_variance"] = self.explained_variance()
        return losses


def a2c_losses(
    policy: ActorCritic, config: TrainConfig, rollout: tuple[torch.Tensor, ...]
) -> dict[str, torch.Tensor]:
    """A2C's loss on the flattened ``rollout`` (observations, actions, advantages, returns), and
    its parts (detached); ``loss`` is what the update differentiates."""
    obs, actions, advantages, returns = rollout
    log_prob, entropy, value = policy.evaluate(obs, actions)
    if config.norm_adv:
        advantages = normalize_advantages(advantages)
    policy_loss = -(advantages * log_prob).mean()
    value_loss = 0.5 * (value - returns).square().mean()
    return actor_critic_loss(config, policy_loss, value_loss, entropy)
