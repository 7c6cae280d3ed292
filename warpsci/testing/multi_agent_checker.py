"""``check_multi_agent_env``: the contract of a :class:`~warpsci.multi_agent_env.MultiAgentVectorEnv`.

Checked, in order: the spaces (a Dict per group, batched from the single ones); ``reset`` (per group:
shape, dtype, device, observations inside the group's space, every agent active, masks shaped
``(num_envs, group_size, mask_size)``, the same seed giving the same observations); ``step`` and
autoreset (per group shapes; agents out of the game get reward 0 and never terminate twice; episode
returns reported at an episode's end equal the rewards summed by the checker; after the end every
agent is active again); determinism (same seed and actions, same trajectory); and bad actions being
refused (a missing group, a wrong shape, an action outside the space).
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium.vector.utils import batch_space

from warpsci.environment import mask_size
from warpsci.multi_agent_env import MultiAgentVectorEnv
from warpsci.testing.env_checker import EnvCheckError, _require
from warpsci.testing.parity import random_actions


def check_multi_agent_env(env: MultiAgentVectorEnv, seed: int = 0, max_steps: int | None = None) -> list[str]:
    """Check ``env`` against the multi-agent vector-environment contract; raises
    :class:`~warpsci.testing.env_checker.EnvCheckError`. Returns the names of the checks that passed."""
    _require(
        isinstance(env, MultiAgentVectorEnv), f"expected a MultiAgentVectorEnv, got {type(env).__name__}"
    )
    passed = []
    _check_spaces(env)
    passed.append("spaces")
    first = _check_reset(env, seed)
    passed.append("reset")
    _check_steps(env, seed, max_steps or env.max_episode_steps + 1)
    passed += ["step", "autoreset"]
    again = _trajectory(env, seed, 6)
    _require(
        all(torch.equal(a, b) for a, b in zip(again, _trajectory(env, seed, 6), strict=True)),
        "the same seed and actions gave different trajectories",
    )
    _require(torch.equal(again[0], first), "a reset with the same seed gave different observations")
    passed.append("determinism")
    _check_bad_actions(env)
    passed.append("bad actions refused")
    return passed


def _check_spaces(env: MultiAgentVectorEnv) -> None:
    for group in env.groups:
        single_obs = env.single_observation_space[group.name]
        _require(
            single_obs == batch_space(group.observation_space, group.size), f"{group.name}: observation space"
        )
        _require(
            env.observation_space[group.name] == batch_space(single_obs, env.num_envs),
            f"{group.name}: observation_space must be the single one batched num_envs times",
        )
        _require(
            env.action_space[group.name] == batch_space(env.single_action_space[group.name], env.num_envs),
            f"{group.name}: action_space must be the single one batched num_envs times",
        )


def _check_observations(env: MultiAgentVectorEnv, obs: dict, where: str) -> None:
    _require(set(obs) == set(env.group_names), f"{where}: observation groups {sorted(obs)}")
    for group in env.groups:
        values = obs[group.name]
        expected = (env.num_envs, group.size, *group.observation_space.shape)
        _require(
            tuple(values.shape) == expected,
            f"{where}: {group.name} observations {tuple(values.shape)} != {expected}",
        )
        _require(values.dtype == torch.float32, f"{where}: {group.name} observations are {values.dtype}")
        array = values.cpu().numpy()
        _require(
            bool(np.isfinite(array).all()), f"{where}: {group.name} observations contain NaN or infinity"
        )
        space = group.observation_space
        _require(
            bool(((array >= space.low) & (array <= space.high)).all()),
            f"{where}: a {group.name} observation lies outside its space",
        )


def _check_reset(env: MultiAgentVectorEnv, seed: int) -> torch.Tensor:
    obs, info = env.reset(seed=seed)
    _check_observations(env, obs, "reset")
    for group in env.groups:
        _require(bool(info["active"][group.name].all()), f"reset: a {group.name} agent is not active")
        if "action_mask" in info:
            expected = (env.num_envs, group.size, max(1, mask_size(group.action_space)))
            shape = tuple(info["action_mask"][group.name].shape)
            _require(shape == expected, f"reset: {group.name} action mask {shape} != {expected}")
    return torch.cat([obs[name].flatten() for name in env.group_names]).cpu()


def _random(env: MultiAgentVectorEnv, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    return {
        group.name: torch.from_numpy(random_actions(group.action_space, (env.num_envs, group.size), rng))
        for group in env.groups
    }


def _check_steps(env: MultiAgentVectorEnv, seed: int, max_steps: int) -> None:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    returns = {g.name: torch.zeros(env.num_envs, g.size, dtype=torch.float64) for g in env.groups}
    gone = {g.name: torch.zeros(env.num_envs, g.size, dtype=torch.bool) for g in env.groups}
    ended = torch.zeros(env.num_envs, dtype=torch.bool)
    for step in range(1, max_steps + 1):
        obs, rewards, terminated, truncated, info = env.step(_random(env, rng))
        where = f"step {step}"
        _check_observations(env, obs, where)
        done = info["_final_obs"].cpu()
        for group in env.groups:
            name = group.name
            reward = rewards[name].cpu()
            _require(
                tuple(reward.shape) == (env.num_envs, group.size) and reward.dtype == torch.float32,
                f"{where}: {name} rewards {tuple(reward.shape)} {reward.dtype}",
            )
            _require(bool(torch.isfinite(reward).all()), f"{where}: {name} rewards contain NaN or infinity")
            _require(
                bool((reward[gone[name]] == 0).all()), f"{where}: a {name} agent out of the game got a reward"
            )
            left = terminated[name].cpu()
            _require(not bool((left & gone[name]).any()), f"{where}: a {name} agent terminated twice")
            returns[name] += reward.double()
            gone[name] |= left | truncated[name].cpu()
            if done.any():
                reported = info["episode"]["r"][name].cpu()[done].double()
                _require(
                    torch.allclose(reported, returns[name][done], rtol=1e-4, atol=1e-3),
                    f"{where}: {name} episode returns {reported.tolist()} != rewards summed "
                    f"{returns[name][done].tolist()}",
                )
                _require(
                    bool(gone[name][done].all()),
                    f"{where}: the episode ended but a {name} agent was not done",
                )
                returns[name][done] = 0.0
                gone[name][done] = False
                _require(
                    bool(info["active"][name].cpu()[done].all()),
                    f"{where}: after a reset a {name} agent is inactive",
                )
        ended |= done
    _require(bool(ended.all()), f"not every environment ended an episode within {max_steps} steps")


def _trajectory(env: MultiAgentVectorEnv, seed: int, steps: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed + 1)
    obs, _ = env.reset(seed=seed)
    out = [torch.cat([obs[name].flatten() for name in env.group_names]).cpu()]
    for _ in range(steps):
        obs, rewards, _, _, _ = env.step(_random(env, rng))
        out.append(
            torch.cat(
                [obs[name].flatten() for name in env.group_names]
                + [rewards[n].flatten() for n in env.group_names]
            ).cpu()
        )
    return out


def _check_bad_actions(env: MultiAgentVectorEnv) -> None:
    env.reset(seed=0)
    good = _random(env, np.random.default_rng(0))
    first = env.group_names[0]
    cases = {
        "a missing group": {name: value for name, value in good.items() if name != first},
        # One agent too many (a slice to one agent is no change for a group of one).
        "a wrong shape": {**good, first: torch.cat([good[first], good[first][:, :1]], dim=1)},
    }
    if env.check_actions:
        out_of_range = good[first].clone()
        out_of_range.view(-1)[0] = 10**6 if not out_of_range.dtype.is_floating_point else float("nan")
        cases["an action outside the space"] = {**good, first: out_of_range}
    for label, actions in cases.items():
        try:
            env.step(actions)
        except (ValueError, TypeError):
            continue
        raise EnvCheckError(f"step accepted {label}")
