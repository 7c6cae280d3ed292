"""Proximal Policy Optimisation, with every tensor on the environment's device.

One iteration: a rollout of ``num_steps`` steps of ``num_envs`` environments (the actor samples on
the device, the step kernel writes straight into the environment's buffers), values for the whole
rollout in one critic pass, GAE, then ``update_epochs`` passes of clipped-surrogate minibatch
updates. The only host transfers are the metrics read once per iteration.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from warpsci.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from warpsci.config import TrainConfig
from warpsci.networks import ActorCritic
from warpsci.registry import make
from warpsci.rollout import RolloutBuffer, compute_gae
from warpsci.vector_env import WarpVectorEnv


@dataclasses.dataclass
class TrainResult:
    """What a finished (or stopped) run reports."""

    global_step: int
    iterations: int
    mean_episodic_return: float
    """Mean return of the episodes that ended in the last iteration with any (NaN if none did)."""
    wall_time: float
    """Seconds spent in ``train``."""
    history: list[dict[str, float]]


class PPOTrainer:
    """Trains an :class:`~warpsci.networks.ActorCritic` on a warpsci environment with PPO.

    Args:
        config: Hyperparameters and run settings.
        run_dir: Where to write ``config.yaml``, ``progress.csv``, TensorBoard events and
            ``checkpoint.pt``; None writes nothing.
    """

    def __init__(self, config: TrainConfig, run_dir: str | Path | None = None) -> None:
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.env: WarpVectorEnv = make(
            config.env_id,
            num_envs=config.num_envs,
            device=config.device,
            seed=config.seed,
            params=dict(config.env_params) or None,
            copy=False,
            check_actions=False,
        )
        if self.env.num_agents != 1:
            raise ValueError(f"{config.env_id} has {self.env.num_agents} agents; PPOTrainer trains one")
        self.device = self.env.device
        torch.manual_seed(config.seed)
        self.policy = ActorCritic.for_spaces(
            self.env.single_observation_space, self.env.single_action_space, config.hidden_sizes
        ).to(self.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.learning_rate, eps=1e-5)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(config.seed)
        obs_shape = tuple(self.env.single_observation_space.shape)
        self.buffer = RolloutBuffer(config.num_steps, config.num_envs, obs_shape, (), self.device)
        self.iteration = 0
        self.global_step = 0

    # ----------------------------------------------------------------------------- checkpoints

    def checkpoint_payload(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "iteration": self.iteration,
            "global_step": self.global_step,
            "generator_state": self.generator.get_state(),
        }

    def save(self, path: Path | None = None) -> Path:
        """Write a checkpoint (atomically) to ``path``, default ``run_dir/checkpoint.pt``."""
        if path is None:
            if self.run_dir is None:
                raise ValueError("save() needs a path when the trainer has no run_dir")
            path = self.run_dir / CHECKPOINT_NAME
        save_checkpoint(path, self.checkpoint_payload())
        return path

    def load(self, payload: dict[str, Any]) -> None:
        """Restore network, optimiser, counters and sampling state from a checkpoint."""
        self.policy.load_state_dict(payload["policy"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.iteration = int(payload["iteration"])
        self.global_step = int(payload["global_step"])
        self.generator.set_state(payload["generator_state"].cpu())

    @classmethod
    def resume(cls, run_dir: str | Path, **overrides: Any) -> PPOTrainer:
        """Continue the run in ``run_dir`` from its checkpoint (config fields may be overridden,
        e.g. ``total_timesteps`` to train longer). The environments start new episodes."""
        payload = load_checkpoint(run_dir)
        config = TrainConfig.from_dict({**payload["config"], **overrides})
        trainer = cls(config, run_dir)
        trainer.load(payload)
        # Different episodes from the interrupted run, but the same ones on every resume.
        trainer.env.reset(seed=config.seed + trainer.iteration)
        return trainer

    # ----------------------------------------------------------------------------- training

    def learning_rate_at(self, iteration: int) -> float:
        """Learning rate for (0-based) ``iteration``: linear decay to zero when annealing."""
        if not self.config.anneal_lr:
            return self.config.learning_rate
        return self.config.learning_rate * (1.0 - iteration / self.config.num_iterations)

    def collect_rollout(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Run ``num_steps`` steps from ``obs``; returns the next observation and episode stats
        ``[sum of returns, sum of lengths, count]`` of the episodes that ended (on the device)."""
        buffer, env = self.buffer, self.env
        env_buffers = env.buffers
        actions_view = env.actions_buffer
        episode_stats = torch.zeros(3, device=self.device)
        for step in range(self.config.num_steps):
            buffer.obs[step].copy_(obs)
            with torch.no_grad():
                actions, log_probs = self.policy.act(obs, self.generator)
            buffer.actions[step].copy_(actions)
            buffer.log_probs[step].copy_(log_probs)
            actions_view.copy_(actions)
            env.step_in_place()
            done = env_buffers.terminated | env_buffers.truncated
            buffer.rewards[step].copy_(env_buffers.rewards.squeeze(1))
            buffer.dones[step].copy_(done)
            # Only a time limit that cut a live episode short is bootstrapped.
            buffer.truncated[step].copy_(env_buffers.truncated & ~env_buffers.terminated)
            buffer.final_obs[step].copy_(env_buffers.final_obs.squeeze(1))
            done_float = done.float()
            episode_stats += torch.stack(
                [
                    (env_buffers.final_return.squeeze(1) * done_float).sum(),
                    (env_buffers.final_length * done_float).sum(),
                    done_float.sum(),
                ]
            )
            obs = env_buffers.obs.squeeze(1)
        return obs, episode_stats

    def compute_advantages(self, next_obs: torch.Tensor) -> None:
        """Values in one critic pass, truncation bootstrapping, GAE and returns."""
        config, buffer = self.config, self.buffer
        with torch.no_grad():
            buffer.values.copy_(self.policy.value(buffer.obs))
            next_value = self.policy.value(next_obs)
            final_values = self.policy.value(buffer.final_obs)
            # A truncated episode did not end: credit it with the value of where it stopped.
            bootstrapped = buffer.rewards + config.gamma * final_values * buffer.truncated
            buffer.advantages.copy_(
                compute_gae(
                    bootstrapped, buffer.values, buffer.dones, next_value, config.gamma, config.gae_lambda
                )
            )
            buffer.returns.copy_(buffer.advantages + buffer.values)

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
            order = torch.randperm(config.batch_size, device=self.device, generator=self.generator)
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

        variance = returns.var()
        explained_variance = 1 - (returns - old_values).var() / variance
        return {
            "losses/value_loss": value_loss.detach(),
            "losses/policy_loss": policy_loss.detach(),
            "losses/entropy": entropy_loss.detach(),
            "losses/old_approx_kl": old_approx_kl,
            "losses/approx_kl": approx_kl,
            "losses/clipfrac": torch.stack(clip_fractions).mean(),
            "losses/explained_variance": torch.where(variance > 0, explained_variance, torch.nan),
        }

    def train(
        self,
        on_iteration: Callable[[dict[str, float]], None] | None = None,
        progress_bar: bool = False,
    ) -> TrainResult:
        """Train until ``total_timesteps``; calls ``on_iteration(metrics)`` after each iteration.

        Writes ``config.yaml``, ``progress.csv`` and checkpoints when the trainer has a run_dir.
        """
        from warpsci.config import save_yaml
        from warpsci.run_log import RunLog

        config = self.config
        log = None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            save_yaml(config.to_dict(), self.run_dir / "config.yaml")
            log = RunLog(self.run_dir, resume=self.iteration > 0)
        bar = None
        if progress_bar:
            from tqdm import tqdm

            bar = tqdm(total=config.num_iterations * config.batch_size, initial=self.global_step, unit="step")

        history: list[dict[str, float]] = []
        start_time = time.perf_counter()
        obs, _ = self.env.reset() if self.iteration == 0 else (self.env.buffers.obs.squeeze(1), {})
        mean_return = math.nan
        try:
            while self.iteration < config.num_iterations:
                iteration_start = time.perf_counter()
                for group in self.optimizer.param_groups:
                    group["lr"] = self.learning_rate_at(self.iteration)
                obs, episode_stats = self.collect_rollout(obs)
                self.compute_advantages(obs)
                losses = self.update()
                self.iteration += 1
                self.global_step += config.batch_size

                # One host transfer per iteration for all the metrics.
                names = list(losses)
                values = torch.cat([episode_stats, torch.stack([losses[n] for n in names])]).tolist()
                returns_sum, lengths_sum, episodes = values[:3]
                elapsed = time.perf_counter() - iteration_start
                metrics = {
                    "global_step": self.global_step,
                    "iteration": self.iteration,
                    "charts/episodic_return": returns_sum / episodes if episodes else math.nan,
                    "charts/episodic_length": lengths_sum / episodes if episodes else math.nan,
                    "charts/episodes": episodes,
                    "charts/learning_rate": self.optimizer.param_groups[0]["lr"],
                    "charts/SPS": config.batch_size / elapsed,
                    "time/elapsed_s": time.perf_counter() - start_time,
                    **dict(zip(names, values[3:], strict=True)),
                }
                if episodes:
                    mean_return = metrics["charts/episodic_return"]
                history.append(metrics)
                if log is not None:
                    log.write(metrics)
                if on_iteration is not None:
                    on_iteration(metrics)
                if bar is not None:
                    bar.update(config.batch_size)
                    bar.set_postfix(SPS=f"{metrics['charts/SPS']:,.0f}", ret=f"{mean_return:.1f}")
                every = config.checkpoint_every
                if self.run_dir is not None and every > 0 and self.iteration % every == 0:
                    self.save()
        finally:
            if self.run_dir is not None:
                self.save()
            if log is not None:
                log.close()
            if bar is not None:
                bar.close()
        return TrainResult(
            global_step=self.global_step,
            iterations=self.iteration,
            mean_episodic_return=mean_return,
            wall_time=time.perf_counter() - start_time,
            history=history,
        )


def evaluate_policy(
    policy: ActorCritic,
    env_id: str,
    num_episodes: int = 100,
    device: str | torch.device = "cpu",
    seed: int = 12345,
    greedy: bool = True,
    env_params: dict[str, Any] | None = None,
) -> np.ndarray:
    """Returns of ``num_episodes`` episodes, one per environment, run in parallel.

    Each of ``num_episodes`` environments plays until its first episode ends; ``greedy`` picks the
    most likely action, otherwise actions are sampled.
    """
    env = make(
        env_id,
        num_envs=num_episodes,
        device=device,
        seed=seed,
        params=env_params or None,
        copy=False,
        check_actions=False,
    )
    generator = torch.Generator(device=env.device)
    generator.manual_seed(seed)
    obs, _ = env.reset()
    finished = torch.zeros(num_episodes, dtype=torch.bool, device=env.device)
    returns = torch.zeros(num_episodes, device=env.device)
    policy = policy.to(env.device)
    for _ in range(env.max_episode_steps):
        with torch.no_grad():
            actions = policy.act_greedy(obs) if greedy else policy.act(obs, generator)[0]
        env.actions_buffer.copy_(actions)
        env.step_in_place()
        done = env.buffers.terminated | env.buffers.truncated
        newly = done & ~finished
        returns = torch.where(newly, env.buffers.final_return.squeeze(1), returns)
        finished |= done
        obs = env.buffers.obs.squeeze(1)
    return returns.cpu().numpy()
