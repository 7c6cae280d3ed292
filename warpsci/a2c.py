"""Advantage actor-critic (Mnih et al., 2016), synchronous: one gradient step per rollout.

The rollout, GAE (with ``gae_lambda = 1`` it is the n-step return of the original A2C) and the
training loop are shared with PPO (:mod:`warpsci.trainer`). The loss is the policy gradient
``-A * log pi(a|s)``, plus ``vf_coef`` times half the squared error of the value, minus ``ent_coef``
times the entropy, over the whole rollout at once; gradients are clipped to ``max_grad_norm``.
"""

from __future__ import annotations

import torch

from warpsci import fused_loss
from warpsci.config import TrainConfig
from warpsci.learner import PolicyLearner
from warpsci.networks import ActorCritic
from warpsci.trainer import OnPolicyTrainer, actor_critic_loss, masked_mean, normalize_advantages


class A2CTrainer(OnPolicyTrainer):
    """Trains an :class:`~warpsci.networks.ActorCritic` per policy with A2C; see
    :class:`OnPolicyTrainer`."""

    def update(self, learner: PolicyLearner) -> dict[str, torch.Tensor]:
        """One gradient step on the learner's whole rollout; returns the losses (device scalars)."""
        buffer = learner.buffer
        tensors = (
            buffer.obs,
            buffer.actions,
            buffer.advantages,
            buffer.returns,
            buffer.valid if learner.masked_rows else None,
            buffer.action_masks,
        )
        rollout = tuple(None if tensor is None else tensor.flatten(0, 1) for tensor in tensors)
        named = dict(zip(fused_loss.A2C_FIELDS, rollout, strict=False))
        launch = fused_loss.settings(learner.policy, learner.config, named, rollout[5], ppo=False)
        if launch is not None:
            # The loss inside the fused backward kernels (warpsci.fused_loss).
            losses = fused_loss.a2c_gradients(learner.policy, learner.config, named, learner.ent_coef, launch)
            self.gradient_step(learner, None)
        else:
            losses = self.compiled(a2c_losses)(learner.policy, learner.config, rollout, learner.ent_coef)
            self.gradient_step(learner, losses.pop("loss"))
        losses["losses/explained_variance"] = self.explained_variance(learner)
        return losses


def a2c_losses(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: tuple[torch.Tensor | None, ...],
    ent_coef: torch.Tensor | float | None = None,
) -> dict[str, torch.Tensor]:
    """A2C's loss on the flattened ``rollout`` (observations, actions, advantages, returns, and
    optionally row weights and action masks: None where unused), and its parts (detached);
    ``loss`` is what the update differentiates."""
    obs, actions, advantages, returns, weights, masks = (*rollout, None, None)[:6]
    log_prob, entropy, value = policy.evaluate(obs, actions, masks)
    if config.norm_adv:
        advantages = normalize_advantages(advantages, weights)
    policy_loss = -masked_mean(advantages * log_prob, weights)
    value_loss = 0.5 * masked_mean((value - returns).square(), weights)
    return actor_critic_loss(config, policy_loss, value_loss, entropy, ent_coef, weights)
