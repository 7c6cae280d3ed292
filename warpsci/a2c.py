"""Advantage actor-critic (Mnih et al., 2016), synchronous: one gradient step per rollout.

The rollout, GAE (with ``gae_lambda = 1`` it is the n-step return of the original A2C) and the
training loop are shared with PPO (:mod:`warpsci.trainer`). The loss is the policy gradient
``-A * log pi(a|s)``, plus ``vf_coef`` times half the squared error of the value, minus ``ent_coef``
times the entropy, over the whole rollout at once; gradients are clipped to ``max_grad_norm``.
"""

from __future__ import annotations

import torch
from torch import nn

from warpsci.trainer import OnPolicyTrainer


class A2CTrainer(OnPolicyTrainer):
    """Trains an :class:`~warpsci.networks.ActorCritic` with A2C; see :class:`OnPolicyTrainer`."""

    def update(self) -> dict[str, torch.Tensor]:
        """One gradient step on the whole rollout; returns the losses (device scalars)."""
        config, buffer = self.config, self.buffer
        log_prob, entropy, value = self.policy.evaluate(
            buffer.obs.flatten(0, 1), buffer.actions.flatten(0, 1)
        )
        advantages = buffer.advantages.flatten(0, 1)
        if config.norm_adv:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss = -(advantages * log_prob).mean()
        value_loss = 0.5 * (value - buffer.returns.flatten(0, 1)).square().mean()
        entropy_loss = entropy.mean()
        loss = policy_loss - config.ent_coef * entropy_loss + config.vf_coef * value_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), config.max_grad_norm)
        self.optimizer.step()
        return {
            "losses/value_loss": value_loss.detach(),
            "losses/policy_loss": policy_loss.detach(),
            "losses/entropy": entropy_loss.detach(),
            "losses/explained_variance": self.explained_variance(),
        }
