"""Load a trained run and act with it, outside the trainer::

policy = warpsci.load_policy("runs/cartpole")
action = policy.act(observation)                      # NumPy in, NumPy out; greedy by default
actions = policy.act(torch_batch, deterministic=False)  # torch in, torch out (sampled)

tag = warpsci.load_policy("runs/tag")                   # a multi-group run
tag.act({"tagger": tagger_obs, "runner": runner_obs})   # a dict in, a dict of actions out
tag.act(runner_obs, group="runner")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from warpsci.networks import ActorCritic


class TrainedPolicy:
    """The policies of a trained run by group (see the module docstring); built by
    :func:`load_policy`.

    Attributes:
        env_id: The environment the run trained on.
        groups: Its agent groups' names (one, ``"agent"``, for a single-agent environment).
        config: The run's configuration (a :class:`~warpsci.config.TrainConfig`).
    """

    def __init__(self, policies: dict[str, ActorCritic], config: Any, device: torch.device) -> None:
        self._policies = policies
        self.config = config
        self.env_id: str = config.env_id
        self.groups = list(policies)
        self.device = device

    def network(self, group: str | None = None) -> ActorCritic:
        """The :class:`~warpsci.networks.ActorCritic` that plays ``group`` (default: the only one)."""
        if group is None:
            if len(self.groups) != 1:
                raise ValueError(
                    f"{self.env_id} has groups {self.groups}: pass group=..., or a dict of observations"
                )
            group = self.groups[0]
        if group not in self._policies:
            raise ValueError(f"unknown group {group!r}; {self.env_id} has {self.groups}")
        return self._policies[group]

    @torch.no_grad()
    def act(
        self,
        obs: Any,
        group: str | None = None,
        deterministic: bool = True,
        mask: Any = None,
        generator: torch.Generator | None = None,
    ) -> Any:
        """Actions for ``obs``: one observation or a batch (``(..., obs_size)``), NumPy or torch.

        Returns the same kind as given (NumPy arrays, or torch tensors on ``obs``'s device); a dict
        of observations by group gives a dict of actions. ``deterministic`` takes the most likely
        action (the mean for Box actions), else samples (with ``generator``). ``mask``: allowed
        actions (bool, ``(..., n)``) where the environment has action masks.
        """
        if isinstance(obs, dict):
            masks = mask or {}
            return {
                name: self.act(value, name, deterministic, masks.get(name), generator)
                for name, value in obs.items()
            }
        network = self.network(group)
        as_numpy = not isinstance(obs, torch.Tensor)
        tensor = torch.as_tensor(np.asarray(obs) if as_numpy else obs, dtype=torch.float32)
        size = network.observation_size
        if tensor.shape[-1:] != (size,):
            raise ValueError(
                f"observations for {group or self.groups[0]!r} must end in {size} entries, "
                f"got shape {tuple(tensor.shape)}"
            )
        original_device = tensor.device
        tensor = tensor.to(self.device)
        if mask is not None:
            mask = torch.as_tensor(np.asarray(mask) if not isinstance(mask, torch.Tensor) else mask)
            mask = mask.to(self.device, torch.bool)
        if deterministic:
            actions = network.act_greedy(tensor, mask)
        else:
            actions, _ = network.act(tensor, generator, mask)
        if as_numpy:
            return actions.cpu().numpy()
        return actions.to(original_device)

    @torch.no_grad()
    def value(self, obs: Any, group: str | None = None) -> Any:
        """The critic's value of ``obs`` (same kinds as :meth:`act`)."""
        network = self.network(group)
        as_numpy = not isinstance(obs, torch.Tensor)
        tensor = torch.as_tensor(np.asarray(obs) if as_numpy else obs, dtype=torch.float32).to(self.device)
        values = network.value(tensor)
        return values.cpu().numpy() if as_numpy else values


def load_policy(run: str | Path, device: str | torch.device = "cpu") -> TrainedPolicy:
    """The trained policies of a run folder (or a checkpoint file), on ``device`` (default CPU)."""
    from warpsci.checkpoint import load_checkpoint
    from warpsci.config import TrainConfig
    from warpsci.evaluation import load_policies

    config = TrainConfig.from_dict(load_checkpoint(run)["config"])
    device = torch.device(device)
    policies = load_policies(run, device)
    return TrainedPolicy(policies, config, device)
