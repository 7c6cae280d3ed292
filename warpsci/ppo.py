"""Proximal Policy Optimisation (Schulman et al., 2017), as CleanRL's ``ppo.py``.

The update makes ``update_epochs`` passes over the rollout in ``num_minibatches`` shuffled
minibatches, with the clipped surrogate objective, an optionally clipped value loss, an entropy
bonus, per-minibatch advantage normalisation, global gradient clipping and optional early stopping
on the approximate KL divergence. Rollouts, advantages and the training loop are in
:mod:`warpsci.trainer`.
"""

from __future__ import annotations

import functools

import torch

from warpsci import fused_loss
from warpsci.config import TrainConfig
from warpsci.learner import PolicyLearner
from warpsci.networks import ActorCritic
from warpsci.rollout_kernels import RowShuffle
from warpsci.trainer import (
    OnPolicyTrainer,
    TrainResult,
    actor_critic_loss,
    evaluate_policy,
    masked_mean,
    normalize_advantages,
)

__all__ = ["PPOTrainer", "TrainResult", "evaluate_policy", "ppo_losses"]

#: The most rows (batch times epochs) whose epochs' orders the fused update draws at once: 16M
#: rows hold 128 MB of order and 64 MB of advantages; at 2,048 Cartpole environments (1M rows) it
#: saved three of four gathers and reductions, about 60 us of a 3.9 ms iteration on an H100.
TOGETHER_MAX_ROWS = 1 << 24


class PPOTrainer(OnPolicyTrainer):
    """Trains an :class:`~warpsci.networks.ActorCritic` per policy with PPO; see
    :class:`OnPolicyTrainer`."""

    @functools.cached_property
    def _shuffles(self) -> dict[int, RowShuffle]:
        return {}

    def _shuffle(self, batch_size: int) -> RowShuffle:
        """The epochs' row order for a batch of ``batch_size`` rows: one kernel, keyed from the
        trainer's generator (the same draws eager and graph-replayed)."""
        if batch_size not in self._shuffles:
            self._shuffles[batch_size] = RowShuffle(batch_size, self.device, self.generator)
        return self._shuffles[batch_size]

    def update(self, learner: PolicyLearner) -> dict[str, torch.Tensor]:
        """PPO epochs over the learner's rollout; returns the last minibatch's losses (device scalars)."""
        config, buffer = learner.config, learner.buffer
        batch_size = buffer.num_steps * buffer.num_rows
        minibatch_size = batch_size // config.num_minibatches
        tensors = [
            buffer.obs,
            buffer.actions,
            buffer.log_probs,
            buffer.advantages,
            buffer.returns,
            buffer.values,
        ]
        tensors.append(buffer.valid if learner.masked_rows else None)
        tensors.append(buffer.action_masks)
        rollout = tuple(None if tensor is None else tensor.flatten(0, 1) for tensor in tensors)
        # The loss inside the fused backward kernels where they apply (warpsci.fused_loss), else autograd.
        named = dict(zip(fused_loss.PPO_FIELDS, rollout, strict=False))
        launch = fused_loss.settings(learner.policy, config, named, rollout[7], ppo=True)
        minibatch_losses = self.compiled(ppo_losses)
        clip_fractions = []
        fused_sums: list[fused_loss.PPOSums] = []  # the fused loss's, named once at the end
        # Without an early stop on the KL, the fused path draws every epoch's order first, so that
        # one reduction gives every minibatch's advantage statistics (equal minibatches only; at
        # most TOGETHER_MAX_ROWS rows, whose orders and gathered advantages it holds at once).
        together = (
            launch is not None
            and config.target_kl is None
            and batch_size % minibatch_size == 0
            and batch_size * config.update_epochs <= TOGETHER_MAX_ROWS
        )
        for epochs in [config.update_epochs] if together else [1] * config.update_epochs:
            order = torch.empty(epochs * batch_size, dtype=torch.int64, device=self.device)
            for epoch_order in order.split(batch_size):
                self._shuffle(batch_size)(out=epoch_order)
            if launch is not None:
                for index, stats in fused_loss.minibatch_indices(
                    rollout[3], rollout[6], order, minibatch_size, config.norm_adv
                ):
                    fused_sums.append(
                        fused_loss.ppo_gradient_sums(
                            learner.policy, config, named, index, stats, learner.ent_coef, launch
                        )
                    )
                    self.gradient_step(learner, None)
                if config.target_kl is not None:
                    losses = fused_sums[-1].losses()
            else:
                for start in range(0, batch_size, minibatch_size):
                    index = order[start : start + minibatch_size]
                    losses = minibatch_losses(learner.policy, config, rollout, index, learner.ent_coef)
                    clip_fractions.append(losses["losses/clipfrac"])
                    self.gradient_step(learner, losses.pop("loss"))
            if config.target_kl is not None:
                # Every training process must take the same decision: on the mean KL.
                approx_kl = self.processes.average_(losses["losses/approx_kl"].detach().clone())
                if float(approx_kl) > config.target_kl:
                    break

        if fused_sums:
            losses = fused_sums[-1].losses()
            losses["losses/clipfrac"] = fused_loss.mean_clip_fraction(fused_sums)
        else:
            losses["losses/clipfrac"] = torch.stack(clip_fractions).mean()
        losses["losses/explained_variance"] = self.explained_variance(learner)
        return losses


def ppo_losses(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: tuple[torch.Tensor | None, ...],
    index: torch.Tensor,
    ent_coef: torch.Tensor | float | None = None,
) -> dict[str, torch.Tensor]:
    """PPO's loss on the minibatch ``index`` of the flattened ``rollout`` (observations, actions,
    log-probabilities, advantages, returns, values, and optionally row weights and action masks:
    None where unused), and its parts and statistics (detached).

    ``loss`` is what the update differentiates; the rest are for the logs. Rows of weight 0 (agents
    out of the game) count in no mean.
    """
    obs, actions, old_log_probs, advantages, returns, old_values, weights, masks = (
        None if tensor is None else tensor[index] for tensor in (*rollout, None, None)[:8]
    )
    new_log_prob, entropy, new_value = policy.evaluate(obs, actions, masks)
    log_ratio = new_log_prob - old_log_probs
    ratio = log_ratio.exp()
    with torch.no_grad():
        old_approx_kl = masked_mean(-log_ratio, weights)
        approx_kl = masked_mean((ratio - 1) - log_ratio, weights)
        clip_fraction = masked_mean(((ratio - 1.0).abs() > config.clip_coef).float(), weights)

    if config.norm_adv:
        advantages = normalize_advantages(advantages, weights)
    policy_loss = masked_mean(
        torch.max(
            -advantages * ratio,
            -advantages * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef),
        ),
        weights,
    )

    if config.clip_vloss:
        unclipped = (new_value - returns) ** 2
        clipped_value = old_values + (new_value - old_values).clamp(-config.clip_coef, config.clip_coef)
        clipped = (clipped_value - returns) ** 2
        value_loss = 0.5 * masked_mean(torch.max(unclipped, clipped), weights)
    else:
        value_loss = 0.5 * masked_mean((new_value - returns) ** 2, weights)

    return {
        **actor_critic_loss(config, policy_loss, value_loss, entropy, ent_coef, weights),
        "losses/old_approx_kl": old_approx_kl,
        "losses/approx_kl": approx_kl,
        "losses/clipfrac": clip_fraction,
    }
