"""``check_env``: does a warpsci vector environment keep the API contract users rely on?

Checked, in order: the spaces (types, the batched spaces match the single ones); ``reset`` (shape,
dtype, device, finiteness, observations inside the observation space, the same seed giving the
same observations); ``step`` (shapes and dtypes of observations, rewards and flags); autoreset
(episode ends carry ``final_obs`` and episode statistics that agree with the rewards summed by the
checker, and the next observation starts a new episode); determinism (the same seed and actions give
the same trajectory); and bad actions being refused. A multi-group environment is checked against
the same contract per group (:mod:`warpsci.testing.multi_agent_checker`).
"""

from __future__ import annotations

import gymnasium
import numpy as np
import torch
from gymnasium.vector.utils import batch_space

from warpsci.testing.parity import random_actions
from warpsci.vector_env import WarpVectorEnv


class EnvCheckError(AssertionError):
    """The environment breaks the contract; the message says how."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise EnvCheckError(message)


def check_env(env: WarpVectorEnv, seed: int = 0, max_steps: int | None = None) -> list[str]:
    """Check ``env`` against the vector-environment contract; raises :class:`EnvCheckError`.

    The environment is reset and stepped (its state afterwards is arbitrary). Random actions are
    drawn from the action space (Box actions also beyond its bounds, which the environment must
    accept and clip or tolerate).

    Args:
        env: The environment, e.g. ``warpsci.make("CartPole-v1", num_envs=8)``.
        seed: Seed of the resets and random actions. Default 0.
        max_steps: Steps to wait for every environment to end an episode at least once; default
            ``env.max_episode_steps + 1`` (the time limit guarantees it).

    Returns:
        The names of the checks that passed.
    """
    _require(isinstance(env, WarpVectorEnv), f"check_env expects a WarpVectorEnv, got {type(env).__name__}")
    from warpsci.multi_agent_env import MultiAgentVectorEnv

    if isinstance(env, MultiAgentVectorEnv):
        from warpsci.testing.multi_agent_checker import check_multi_agent_env

        return check_multi_agent_env(env, seed=seed, max_steps=max_steps)
    passed: list[str] = []
    _check_spaces(env)
    passed.append("spaces")
    first_obs = _check_reset(env, seed)
    passed.append("reset")
    _check_step_and_autoreset(env, seed, max_steps or env.max_episode_steps + 1)
    passed += ["step", "autoreset"]
    _check_determinism(env, seed, first_obs)
    passed.append("determinism")
    _check_bad_actions(env)
    passed.append("bad actions refused")
    return passed


def _check_spaces(env: WarpVectorEnv) -> None:
    obs_space, action_space = env.single_observation_space, env.single_action_space
    _require(
        isinstance(obs_space, gymnasium.spaces.Box) and obs_space.dtype == np.float32,
        f"single_observation_space must be a float32 Box, got {obs_space!r}",
    )
    supported = (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete, gymnasium.spaces.Box)
    _require(isinstance(action_space, supported), f"unsupported single_action_space {action_space!r}")
    _require(
        env.observation_space == batch_space(obs_space, env.num_envs),
        "observation_space must be single_observation_space batched num_envs times",
    )
    _require(
        env.action_space == batch_space(action_space, env.num_envs),
        "action_space must be single_action_space batched num_envs times",
    )
    _require(env.max_episode_steps > 0, f"max_episode_steps must be positive, got {env.max_episode_steps}")


def _check_observations(env: WarpVectorEnv, obs: torch.Tensor, where: str) -> None:
    expected_shape = (env.num_envs, *env.single_observation_space.shape)
    _require(
        tuple(obs.shape) == expected_shape,
        f"{where}: observations shaped {tuple(obs.shape)}, expected {expected_shape}",
    )
    _require(obs.dtype == torch.float32, f"{where}: observations are {obs.dtype}, expected torch.float32")
    _require(
        obs.device == env.device, f"{where}: observations on {obs.device}, the environment on {env.device}"
    )
    values = obs.detach().cpu().numpy()
    _require(bool(np.isfinite(values).all()), f"{where}: observations contain NaN or infinity")
    space = env.single_observation_space
    outside = (values < space.low) | (values > space.high)
    if outside.any():
        index = tuple(int(i) for i in np.argwhere(outside)[0])
        raise EnvCheckError(
            f"{where}: observation {index} = {values[index]} lies outside the observation space "
            f"[{space.low[index[1:]]}, {space.high[index[1:]]}]"
        )


def _check_reset(env: WarpVectorEnv, seed: int) -> np.ndarray:
    obs, info = env.reset(seed=seed)
    _require(isinstance(info, dict), f"reset must return an info dict, got {type(info).__name__}")
    _check_observations(env, obs, "reset")
    again, _ = env.reset(seed=seed)
    _require(torch.equal(obs.cpu(), again.cpu()), "reset with the same seed gave different observations")
    return obs.cpu().numpy().copy()


def _reward_shape(env: WarpVectorEnv) -> tuple[int, ...]:
    return (env.num_envs,) if env.num_agents == 1 else (env.num_envs, env.num_agents)


def _actions(env: WarpVectorEnv, rng: np.random.Generator) -> torch.Tensor:
    agents = () if env.num_agents == 1 else (env.num_agents,)
    space = env.definition.action_space(env.params)
    return torch.from_numpy(random_actions(space, (env.num_envs, *agents), rng))


def _check_step_and_autoreset(env: WarpVectorEnv, seed: int, max_steps: int) -> None:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    returns = torch.zeros(_reward_shape(env), dtype=torch.float64)
    lengths = torch.zeros(env.num_envs, dtype=torch.int64)
    ended = torch.zeros(env.num_envs, dtype=torch.bool)
    for step in range(1, max_steps + 1):
        obs, rewards, terminated, truncated, info = env.step(_actions(env, rng))
        where = f"step {step}"
        _check_observations(env, obs, where)
        _require(
            tuple(rewards.shape) == _reward_shape(env) and rewards.dtype == torch.float32,
            f"{where}: rewards {tuple(rewards.shape)} {rewards.dtype}, expected "
            f"{_reward_shape(env)} torch.float32",
        )
        _require(bool(torch.isfinite(rewards).all()), f"{where}: rewards contain NaN or infinity")
        for name, flags in (("terminated", terminated), ("truncated", truncated)):
            _require(
                tuple(flags.shape) == (env.num_envs,) and flags.dtype == torch.bool,
                f"{where}: {name} {tuple(flags.shape)} {flags.dtype}, expected ({env.num_envs},) bool",
            )
        done = (terminated | truncated).cpu()
        _require(torch.equal(info["_final_obs"].cpu(), done), f"{where}: info['_final_obs'] != done")
        _require(torch.equal(info["_episode"].cpu(), done), f"{where}: info['_episode'] != done")
        returns += rewards.cpu().double()
        lengths += 1
        if done.any():
            final_obs = info["final_obs"].cpu()
            finals = final_obs[done].numpy()
            space = env.single_observation_space
            _require(bool(np.isfinite(finals).all()), f"{where}: final_obs contains NaN or infinity")
            _require(
                bool(((finals >= space.low) & (finals <= space.high)).all()),
                f"{where}: a final observation lies outside the observation space",
            )
            reported_length = info["episode"]["l"].cpu()[done]
            _require(
                torch.equal(reported_length.long(), lengths[done]),
                f"{where}: episode lengths {reported_length.tolist()} != steps counted "
                f"{lengths[done].tolist()}",
            )
            reported_return = info["episode"]["r"].cpu()[done].double()
            _require(
                torch.allclose(reported_return, returns[done], rtol=1e-4, atol=1e-3),
                f"{where}: episode returns {reported_return.tolist()} != rewards summed "
                f"{returns[done].tolist()}",
            )
            returns[done] = 0.0
            lengths[done] = 0
            ended |= done
        _require(
            bool((lengths <= env.max_episode_steps).all()),
            f"{where}: an episode ran past the time limit of {env.max_episode_steps} steps",
        )
        if ended.all():
            return
    raise EnvCheckError(f"not every environment ended an episode within {max_steps} steps")


def _check_determinism(env: WarpVectorEnv, seed: int, first_obs: np.ndarray) -> None:
    def trajectory() -> list[np.ndarray]:
        rng = np.random.default_rng(seed + 1)
        obs, _ = env.reset(seed=seed)
        frames = [obs.cpu().numpy().copy()]
        for _ in range(min(env.max_episode_steps + 2, 64)):
            obs, rewards, terminated, truncated, _ = env.step(_actions(env, rng))
            frames += [t.cpu().numpy().copy() for t in (obs, rewards, terminated, truncated)]
        return frames

    first, second = trajectory(), trajectory()
    _require(np.array_equal(first[0], first_obs), "reset(seed) after stepping differs from the first reset")
    for index, (a, b) in enumerate(zip(first, second, strict=True)):
        _require(np.array_equal(a, b), f"same seed and actions, different results (output {index})")


def _check_bad_actions(env: WarpVectorEnv) -> None:
    env.reset()
    wrong_shape = torch.zeros((env.num_envs + 1, *env.single_action_space.shape))
    try:
        env.step(wrong_shape)
    except (ValueError, TypeError):
        return
    raise EnvCheckError("step accepted actions of the wrong shape")
