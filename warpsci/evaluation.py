"""Play episodes of a multi-group environment with a chosen player for each group.

A player is a trained policy (:class:`~warpsci.networks.ActorCritic`), ``"random"`` (uniform over
the allowed actions), a scripted function ``player(obs, mask) -> actions`` on tensors ``(num_envs,
group_size, ...)``, or the path of a run folder or checkpoint whose policy for that group is taken.
This is how a trained group is compared with a baseline against the same opponents::

    trained = evaluate_groups("TagGridworld-v0", {"tagger": "runs/tag", "runner": "runs/tag"})
    baseline = evaluate_groups("TagGridworld-v0", {"tagger": "random", "runner": "runs/tag"})
    trained.mean_length, baseline.mean_length
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

from warpsci.environment import AgentGroup
from warpsci.networks import ActorCritic
from warpsci.sampling import MASKED_LOGIT, sample_categorical

Player = ActorCritic | str | Path | Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]


@dataclasses.dataclass
class GroupEvaluation:
    """The first episode of each of ``num_episodes`` environments.

    Attributes:
        returns: Per group, ``(num_episodes, group_size)`` episode returns of its agents.
        lengths: ``(num_episodes,)`` episode lengths in steps.
        terminated: ``(num_episodes,)`` whether the episode terminated (rather than hit the time limit).
    """

    returns: dict[str, np.ndarray]
    lengths: np.ndarray
    terminated: np.ndarray

    @property
    def mean_length(self) -> float:
        return float(self.lengths.mean())

    def mean_return(self, group: str) -> float:
        """Mean over episodes and the group's agents."""
        return float(self.returns[group].mean())


def load_policies(run: str | Path, device: str | torch.device = "cpu") -> dict[str, ActorCritic]:
    """The trained policies of a run folder or checkpoint, by the group each plays (a shared policy
    under every group's name)."""
    from warpsci.checkpoint import load_checkpoint
    from warpsci.config import TrainConfig
    from warpsci.registry import make
    from warpsci.trainer import build_learners

    payload = load_checkpoint(run)
    config = TrainConfig.from_dict(payload["config"])
    env = make(config.env_id, num_envs=1, device="cpu", params=dict(config.env_params) or None)
    learners = build_learners(config, env, capturable=False)
    saved = payload.get("learners") or {learners[0].name: payload}
    policies = {}
    for learner in learners:
        learner.policy.load_state_dict(saved[learner.name]["policy"])
        for group in learner.groups:
            policies[group.name] = learner.policy.to(device).eval()
    return policies


def evaluate_groups(
    env_id: str,
    players: dict[str, Player],
    num_episodes: int = 100,
    device: str | torch.device = "cpu",
    seed: int = 12345,
    greedy: bool = False,
    env_params: dict[str, Any] | None = None,
) -> GroupEvaluation:
    """Play the first episode of ``num_episodes`` environments, each group by its player.

    Args:
        env_id: A registered multi-group environment.
        players: A player for every group (see the module docstring).
        num_episodes: Environments, one episode each. Default 100.
        device: Where to run. Default ``"cpu"``.
        seed: Seed of the environments and of sampled actions. Default 12345.
        greedy: Trained policies take their most likely action instead of sampling. Default False
            (tag games need their stochastic policies).
        env_params: Overrides of the environment's params.
    """
    from warpsci.registry import make

    env = make(env_id, num_envs=num_episodes, device=device, seed=seed, params=env_params or None)
    groups = getattr(env, "groups", ())
    missing = sorted({group.name for group in groups} - set(players))
    unknown = sorted(set(players) - {group.name for group in groups})
    if missing or unknown or len(groups) < 2:
        raise ValueError(
            f"players must name every group of {env_id} {[g.name for g in groups]}; "
            f"missing {missing}, unknown {unknown}"
        )
    generator = torch.Generator(device=env.device).manual_seed(seed)
    actors = {
        group.name: _actor(players[group.name], group, env.device, greedy, generator) for group in groups
    }
    env.reset(seed=seed)
    finished = torch.zeros(num_episodes, dtype=torch.bool, device=env.device)
    lengths = torch.zeros(num_episodes, dtype=torch.int64, device=env.device)
    terminated = torch.zeros(num_episodes, dtype=torch.bool, device=env.device)
    returns = {group.name: torch.zeros(num_episodes, group.size, device=env.device) for group in groups}
    buffers = env.buffers
    for _ in range(env.max_episode_steps):
        actions = {}
        for group in groups:
            obs = env.group_observations(buffers.obs, group)
            mask = env.group_action_mask(group) if env.definition.action_mask is not None else None
            with torch.no_grad():
                actions[group.name] = actors[group.name](obs, mask)
        env._write_group_actions(actions)
        env.step_in_place()
        done = buffers.terminated | buffers.truncated
        newly = done & ~finished
        for group in groups:
            final = env.group_rows(buffers.final_return, group)
            returns[group.name] = torch.where(newly[:, None], final, returns[group.name])
        lengths = torch.where(newly, buffers.final_length.long(), lengths)
        terminated = torch.where(newly, buffers.terminated, terminated)
        finished |= done
        if bool(finished.all()):
            break
    return GroupEvaluation(
        returns={name: value.cpu().numpy() for name, value in returns.items()},
        lengths=lengths.cpu().numpy(),
        terminated=terminated.cpu().numpy(),
    )


def _actor(player: Player, group: AgentGroup, device: torch.device, greedy: bool, generator: torch.Generator):
    """``act(obs (num_envs, group_size, *shape), mask) -> actions`` for one group."""
    if isinstance(player, (str, Path)) and str(player) == "random":
        return _random_actor(group.action_space, generator)
    if isinstance(player, (str, Path)):
        policies = load_policies(player, device)
        if group.name not in policies:
            raise ValueError(f"the run {str(player)!r} has no policy for group {group.name!r}")
        player = policies[group.name]
    if isinstance(player, ActorCritic):
        policy = player.to(device)

        def act(obs: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
            rows = obs.reshape(obs.shape[0] * obs.shape[1], -1)
            flat_mask = None if mask is None else mask.reshape(rows.shape[0], -1)
            if greedy:
                chosen = policy.act_greedy(rows, flat_mask)
            else:
                chosen = policy.act(rows, generator, flat_mask)[0]
            return chosen.reshape(obs.shape[0], obs.shape[1], *chosen.shape[1:])

        return act
    if callable(player):
        return player
    raise TypeError(f"a player is a policy, 'random', a run folder or a function; got {player!r}")


def _random_actor(space: gymnasium.Space, generator: torch.Generator):
    def act(obs: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        shape = obs.shape[:2]
        if isinstance(space, gymnasium.spaces.Discrete):
            logits = torch.zeros(*shape, int(space.n), device=obs.device)
            if mask is not None:
                logits = logits.masked_fill(~mask, MASKED_LOGIT)
            return sample_categorical(logits, generator)[0]
        if isinstance(space, gymnasium.spaces.MultiDiscrete):
            nvec = torch.as_tensor(space.nvec, device=obs.device)
            uniform = torch.rand(*shape, len(space.nvec), device=obs.device, generator=generator)
            return (uniform * nvec).long().clamp(max=nvec - 1)
        low = torch.as_tensor(space.low, device=obs.device)
        high = torch.as_tensor(space.high, device=obs.device)
        return low + (high - low) * torch.rand(*shape, *space.shape, device=obs.device, generator=generator)

    return act
