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

from warpsci.trainer import OnPolicyTrainer, TrainResult, evaluate_policy

__all__ = ["PPOTrainer", "TrainResult", "evaluate_policy"]


class PPOTrainer(OnPolicyTrainer):
    """Trains an :class:`~warpsci.networks.ActorCritic` with PPO; see :class:`OnPolicyTrainer`."""

    def update(self) -> dict[str, torch.Tensor]:
        """PPO epochs over the rollout; returns the last minibatch's losses (device scalars)."""
        config, buffer = self.config, self.buffer
        obs = buffer.obs.flatten(0, 1)
        actions = buffer.actions.flatten(0, 1)
        old_log_probs = buffer.log_probs.flatten(0, 1)
        advantages = buffer.advantages.flatten(0, 1)
        returns = buffer.returns.flatten(0, 1)
        old_values = buffer.values.flatten(0, 1)
        clip_fractions = []
        for _epoch in range(config.update_epochs):
            # argsort of uniform keys rather than randperm: the same draws eager and graph-replayed.
            keys = torch.rand(config.batch_size, device=self.device, generator=self.generator)
            order = torch.argsort(keys)
            for start in range(0, config.batch_size, config.minibatch_size):
                index = order[start : start + config.minibatch_size]
                new_log_prob, entropy, new_value = self.policy.evaluate(obs[index], actions[index])
                log_ratio = new_log_prob - old_log_probs[index]
                ratio = log_ratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-log_ratio).mean()
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clip_fractions.append(((ratio - 1.0).abs() > config.clip_coef).float().mean())

                minibatch_advantages = advantages[index]
                if config.norm_adv:
                    minibatch_advantages = (minibatch_advantages - minibatch_advantages.mean()) / (
                        minibatch_advantages.std() + 1e-8
                    )
                policy_loss = torch.max(
                    -minibatch_advantages * ratio,
                    -minibatch_advantages * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef),
                ).mean()

                if config.clip_vloss:
                    unclipped = (new_value - returns[index]) ** 2
                    clipped_value = old_values[index] + (new_value - old_values[index]).clamp(
                        -config.clip_coef, config.clip_coef
                    )
                    clipped = (clipped_value - returns[index]) ** 2
                    value_loss = 0.5 * torch.max(unclipped, clipped).mean()
                else:
                    value_loss = 0.5 * ((new_value - returns[index]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = policy_loss - config.ent_coef * entropy_loss + config.vf_coef * value_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), config.max_grad_norm)
                self.optimizer.step()
            if config.target_kl is not None and float(approx_kl) > config.target_kl:
                break

        return {
            "losses/value_loss": value_loss.detach(),
            "losses/policy_loss": policy_loss.detach(),
            "losses/entropy": entropy_loss.detach(),
            "losses/old_approx_kl": old_approx_kl,
            "losses/approx_kl": approx_kl,
            "losses/clipfrac": torch.stack(clip_fractions).mean(),
            "losses/explained_variance": self.explained_variance(),
        }
