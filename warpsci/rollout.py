"""The rollout buffer (device memory, allocated once) and generalised advantage estimation.

:func:`compute_gae` is the plain torch definition; the trainer runs the same recursion as one
kernel (:func:`warpsci.rollout_kernels.generalized_advantages`), which the tests check against it.
"""

from __future__ import annotations

import torch

from warpsci.memory import check_fits, nbytes


class RolloutBuffer:
    """``num_steps`` transitions of ``num_rows`` rows (one row per environment and agent the policy
    plays: ``num_envs`` rows for a single-agent environment), stored on ``device``.

    Tensors are shaped ``(num_steps, num_rows, ...)``. ``dones[t]`` marks a row whose episode ended
    with the transition at ``t`` for its agent (the environment's episode ended, or the agent left
    the game); ``episode_ends[t]`` where the environment's episode ended (episode statistics count
    those); ``truncated[t]`` (a time limit, the agent still in the game) and ``final_obs[t]`` (written
    only where ``truncated[t]``; stale elsewhere) are kept so that a truncated episode is
    bootstrapped from the value of its last observation. ``valid[t]``
    is 1 where the agent was in the game when it acted (rows of agents that left are masked out of
    the loss); ``action_masks[t]`` holds the masks it acted under (``mask_width`` > 0 only).
    """

    def __init__(
        self,
        num_steps: int,
        num_rows: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        device: torch.device,
        action_dtype: torch.dtype = torch.int64,
        mask_width: int = 0,
    ) -> None:
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        rows = (num_steps, num_rows)
        plan = {
            "obs": nbytes(rows + tuple(obs_shape), torch.float32),
            "final_obs": nbytes(rows + tuple(obs_shape), torch.float32),
            "actions": nbytes(rows + tuple(action_shape), action_dtype),
            "12 per-row tensors": 12 * nbytes(rows, torch.float32),
            "action_masks": nbytes((*rows, mask_width), torch.bool),
        }
        check_fits(
            f"a rollout buffer of {num_steps:,} steps x {num_rows:,} agent rows",
            plan,
            torch.device(device),
            "use fewer environments (--num-envs) or shorter rollouts (--num-steps)",
        )
        self.num_steps, self.num_rows = num_steps, num_rows
        self.obs = zeros(num_steps, num_rows, *obs_shape)
        self.final_obs = zeros(num_steps, num_rows, *obs_shape)
        self.actions = zeros(num_steps, num_rows, *action_shape, dtype=action_dtype)
        self.log_probs = zeros(num_steps, num_rows)
        self.rewards = zeros(num_steps, num_rows)
        self.dones = zeros(num_steps, num_rows)
        self.episode_ends = zeros(num_steps, num_rows)
        self.truncated = zeros(num_steps, num_rows)
        self.valid = zeros(num_steps, num_rows)
        self.values = zeros(num_steps, num_rows)
        self.advantages = zeros(num_steps, num_rows)
        self.returns = zeros(num_steps, num_rows)
        # Return and length of the episode that ended at step t (meaningful where episode_ends[t] is 1).
        self.episode_returns = zeros(num_steps, num_rows)
        self.episode_lengths = zeros(num_steps, num_rows)
        self.action_masks = (
            torch.ones(num_steps, num_rows, mask_width, dtype=torch.bool, device=device)
            if mask_width
            else None
        )

    @property
    def num_envs(self) -> int:
        """Rows, under the name single-agent code knows them by."""
        return self.num_rows

    def episode_stats(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``[sum of returns, sum of lengths, count]`` of the episodes that ended in the rollout, over
        every row or the rows where ``rows`` (a ``(num_rows,)`` 0/1 float mask) is 1."""
        ended = self.episode_ends if rows is None else self.episode_ends * rows
        return torch.stack(
            [
                (self.episode_returns * ended).sum(),
                (self.episode_lengths * ended).sum(),
                ended.sum(),
            ]
        )


def keep_successful_rows(buffer: RolloutBuffer, ratio: float, generator: torch.Generator) -> torch.Tensor:
    """WarpDrive's ``neg_pos_env_ratio`` on the rollout in ``buffer``, whose rows are environments
    of one agent: the rows whose episode terminated at some step of it (``dones`` without
    ``truncated``: where only reaching the goal terminates, as in the catalysis scenarios, a
    success) are *positive* and all kept; of the others, at most ``floor(ratio * positives)`` are
    kept, drawn uniformly without replacement with ``generator``; with no positive row every row
    is kept. The dropped rows' weights (``buffer.valid``) are set to 0 for every step. Returns the
    number of rows kept (a device scalar); nothing is read back to the host, so a CUDA graph can
    hold it."""
    terminated = buffer.dones * (1.0 - buffer.truncated)
    positive = terminated.amax(dim=0) > 0
    positives = positive.sum()
    # Random priorities, positive rows after every other; a row's rank is its place in that order.
    priority = torch.rand(buffer.num_rows, generator=generator, device=positive.device)
    priority = torch.where(positive, 2.0, priority)
    rank = torch.empty_like(positive, dtype=torch.int64)
    rank.scatter_(0, priority.argsort(), torch.arange(buffer.num_rows, device=positive.device))
    kept_negatives = torch.floor(positives.double() * ratio).to(torch.int64)
    keep = positive | (rank < kept_negatives) | (positives == 0)
    buffer.valid.mul_(keep.to(buffer.valid.dtype))
    return keep.sum()


class RecentEpisodes:
    """The returns of the last ``size`` episodes to end, kept on the device (a ring buffer).

    Args:
        size: Episodes kept. Default 100 (the usual "solved" window).
        device: Where the buffer lives.
    """

    def __init__(self, size: int = 100, device: torch.device | str = "cpu") -> None:
        self.size = size
        # One slot more than kept: the episodes that did not end are all written to the last one.
        self.returns = torch.zeros(size + 1, device=device)
        self.seen = torch.zeros((), dtype=torch.int64, device=device)

    def add(self, returns: torch.Tensor, ended: torch.Tensor) -> None:
        """Append ``returns[i]`` where ``ended[i]``, in index order; no host synchronisation. When
        more than ``size`` episodes end at once, the last ``size`` of them are kept."""
        returns, ended = returns.reshape(-1), ended.reshape(-1).to(torch.int64)
        self.returns.scatter_(0, self.slots(ended), returns.to(self.returns.dtype))
        self.seen += ended.sum()

    def slots(self, ended: torch.Tensor) -> torch.Tensor:
        """Where :meth:`add` writes each return: its ring slot, or the spare slot ``size`` for
        episodes that did not end and for all but the last ``size`` that did (so that no ring slot
        is written twice: a scatter with repeated indices keeps an arbitrary one on a GPU)."""
        ended = ended.reshape(-1).to(torch.int64)
        order = self.seen + torch.cumsum(ended, 0) - 1
        kept = ended.bool() & (order >= self.seen + ended.sum() - self.size)
        return torch.where(kept, order % self.size, self.size)

    def mean(self) -> torch.Tensor:
        """Mean of the kept returns (NaN before any episode ended), a device scalar."""
        count = torch.clamp(self.seen, max=self.size)
        valid = torch.arange(self.size, device=self.returns.device) < count
        return torch.where(count > 0, (self.returns[: self.size] * valid).sum() / count, torch.nan)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    """Generalised advantage estimates (Schulman et al., 2016), shaped like ``rewards``.

    ``values[t]`` is the value of the observation acted on at ``t``; ``dones[t]`` is 1 where the
    episode ended with transition ``t`` (the next stored observation then starts a new episode, so
    nothing is bootstrapped across it); ``next_value`` is the value of the observation after the
    last step. Truncation bootstrapping must already be folded into ``rewards``.
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last_advantage = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        following_value = next_value if t == num_steps - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * following_value * not_done - values[t]
        last_advantage = delta + gamma * gae_lambda * not_done * last_advantage
        advantages[t] = last_advantage
    return advantages
