"""Running statistics on the device: observation normalisation and reward scaling.

Both follow Gymnasium's ``NormalizeObservation`` and ``NormalizeReward`` wrappers (and CleanRL's
continuous-control PPO, which uses them), but keep their statistics in torch buffers on the
trainer's device and update them once per iteration from the whole rollout, so that the statistics
are constant while a rollout is collected and learned from.
"""

from __future__ import annotations

import torch
from torch import nn

from warpsci.distributed import SINGLE, Processes


class RunningMeanStd(nn.Module):
    """Mean and variance of everything seen so far, per feature (Chan et al.'s parallel update).

    Args:
        shape: Shape of one sample. Default ``()`` (scalars).
        epsilon: Initial pseudo-count, as Gymnasium's. Default ``1e-4``.
    """

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update(self, batch: torch.Tensor, processes: Processes = SINGLE) -> None:
        """Fold in ``batch`` shaped ``(..., *shape)``; every leading index is one sample. With
        several training ``processes``, the batch is every process's batch together."""
        flat = batch.reshape(-1, *self.mean.shape).to(torch.float64)
        batch_count = flat.shape[0]
        batch_mean = flat.mean(0)
        batch_var = flat.var(0, unbiased=False)
        if processes.active:
            # Counts, sums and sums of squares add up over the processes.
            moments = torch.stack([batch_mean * batch_count, (batch_var + batch_mean.square()) * batch_count])
            processes.sum_(moments)
            batch_count *= processes.world_size
            batch_mean = moments[0] / batch_count
            batch_var = moments[1] / batch_count - batch_mean.square()
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean += delta * batch_count / total
        combined = self.var * self.count + batch_var * batch_count
        self.var.copy_((combined + delta.square() * self.count * batch_count / total) / total)
        self.count.copy_(total)


class ObservationNormalizer(RunningMeanStd):
    """``(obs - mean) / sqrt(var + eps)``, clipped to ``[-clip, clip]`` (Gymnasium: eps 1e-8, clip 10
    in CleanRL's use)."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__(shape)
        self.clip, self.eps = clip, eps

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(self.var + self.eps).to(obs.dtype)
        return ((obs - self.mean.to(obs.dtype)) * scale).clamp(-self.clip, self.clip)


class RewardScaler(nn.Module):
    """Divides rewards by the standard deviation of a discounted running return, as Gymnasium's
    ``NormalizeReward``: the return ``G <- gamma * G * (1 - done) + r`` is kept per environment.

    Args:
        num_envs: Environments in the rollout.
        gamma: Discount of the running return (the trainer's gamma).
        clip: Scaled rewards are clipped to ``[-clip, clip]``. Default 10.
    """

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__()
        self.gamma, self.clip, self.eps = gamma, clip, eps
        self.return_stats = RunningMeanStd()
        self.register_buffer("running_return", torch.zeros(num_envs))

    @torch.no_grad()
    def scale(
        self, rewards: torch.Tensor, dones: torch.Tensor, processes: Processes = SINGLE
    ) -> torch.Tensor:
        """Advance the running returns through a rollout ``(num_steps, num_envs)``, update the
        statistics with them (every training process's), and return the rollout's rewards scaled
        by the updated statistics."""
        returns = torch.empty_like(rewards)
        running = self.running_return
        for t in range(rewards.shape[0]):
            running = running * self.gamma + rewards[t]
            returns[t] = running
            running = running * (1.0 - dones[t])
        self.running_return.copy_(running)
        self.return_stats.update(returns, processes)
        std = torch.sqrt(self.return_stats.var + self.eps).to(rewards.dtype)
        return (rewards / std).clamp(-self.clip, self.clip)
