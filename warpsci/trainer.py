"""The on-policy training loop shared by PPO and A2C, with every tensor on the environment's device.

One iteration: a rollout of ``num_steps`` steps of ``num_envs`` environments (per step: the actor's
forward pass, then one kernel each to sample the actions, step the environments and record the
step; see :mod:`warpsci.rollout_kernels`), values for the whole rollout in one critic pass, GAE in
one kernel, then the algorithm's update (:mod:`warpsci.ppo`, :mod:`warpsci.a2c`). The only host
transfers are the metrics read once per iteration.
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

from warpsci.checkpoint import CHECKPOINT_NAME, load_checkpoint, save_checkpoint
from warpsci.config import TrainConfig
from warpsci.graphs import GraphReplay
from warpsci.networks import ActorCritic
from warpsci.normalization import RewardScaler
from warpsci.registry import make
from warpsci.rollout import RecentEpisodes, RolloutBuffer
from warpsci.rollout_kernels import RolloutKernels
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
    solved_at_step: int | None = None
    """With ``target_return``: the step count when the last-100 mean reached it (else None)."""


class OnPolicyTrainer:
    """Trains an :class:`~warpsci.networks.ActorCritic` on a warpsci environment; subclasses supply
    ``update`` (PPO, A2C).

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
        if len(self.env.groups) > 1:
            raise ValueError(
                f"{config.env_id} has agent groups {[g.name for g in self.env.groups]}; "
                f"{type(self).__name__} trains environments of one agent (training several groups "
                "is not available yet: use warpsci.make or warpsci.parallel_env to run them)"
            )
        if self.env.num_agents != 1:
            raise ValueError(
                f"{config.env_id} has {self.env.num_agents} agents; {type(self).__name__} trains one"
            )
        self.device = self.env.device
        if self.device.type == "cuda":
            torch.set_float32_matmul_precision("high" if config.tf32 else "highest")
        torch.manual_seed(config.seed)
        self.policy = build_policy(config, self.env).to(self.device)
        capture = config.capture_graphs and self.device.type == "cuda"
        # The update is captured too unless early stopping on the KL needs a host-side decision.
        capture_update = capture and config.target_kl is None
        # Capturable on every CUDA run, so that eager and captured runs do the same arithmetic.
        self.optimizer = build_optimizer(config, self.policy, capturable=self.device.type == "cuda")
        self.reward_scaler = (
            RewardScaler(config.num_envs, config.gamma).to(self.device) if config.normalize_reward else None
        )
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(config.seed)
        obs_shape = tuple(self.env.single_observation_space.shape)
        self.buffer = RolloutBuffer(
            config.num_steps,
            config.num_envs,
            obs_shape,
            self.policy.action_shape,
            self.device,
            action_dtype=self.policy.action_dtype,
        )
        self.recent_episodes = RecentEpisodes(100, self.device)
        self.rollout_kernels = RolloutKernels(
            self.env, self.buffer, self.policy.kind, getattr(self.policy, "actor_logstd", None)
        )
        self._compiled: dict[Callable, Callable] = {}
        self._graph: GraphReplay | None = None
        self._update_graph: GraphReplay | None = None
        self._losses: dict[str, torch.Tensor] = {}
        if capture:
            # The reset seed is a kernel argument frozen into the graph: a new seed, a new capture.
            self._graph = GraphReplay(
                self._rollout_work, self.device, (self.generator,), key=lambda: self.env.current_seed
            )
        if capture_update:
            self._update_graph = GraphReplay(self._update_work, self.device, (self.generator,))
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
            "reward_scaler": None if self.reward_scaler is None else self.reward_scaler.state_dict(),
            "recent_episodes": {"returns": self.recent_episodes.returns, "seen": self.recent_episodes.seen},
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
        if self.device.type == "cuda":
            # A checkpoint of a CPU run holds float learning rates; a captured update needs tensors.
            for group in self.optimizer.param_groups:
                group["lr"] = torch.as_tensor(group["lr"], dtype=torch.float32, device=self.device)
        self.iteration = int(payload["iteration"])
        self.global_step = int(payload["global_step"])
        self.generator.set_state(payload["generator_state"].cpu())
        if payload.get("recent_episodes") is not None:
            self.recent_episodes.returns.copy_(payload["recent_episodes"]["returns"])
            self.recent_episodes.seen.copy_(payload["recent_episodes"]["seen"])
        if self.reward_scaler is not None and payload.get("reward_scaler") is not None:
            self.reward_scaler.load_state_dict(payload["reward_scaler"])

    @classmethod
    def resume(cls, run_dir: str | Path, **overrides: Any) -> OnPolicyTrainer:
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

    def compiled(self, function: Callable) -> Callable:
        """``function`` through ``torch.compile`` when ``config.compile`` is on (compiled once per
        trainer), else ``function`` itself."""
        if not self.config.compile:
            return function
        if function not in self._compiled:
            self._compiled[function] = torch.compile(function)
        return self._compiled[function]

    def learning_rate_at(self, iteration: int) -> float:
        """Learning rate for (0-based) ``iteration``: linear decay to zero when annealing."""
        if not self.config.anneal_lr:
            return self.config.learning_rate
        return self.config.learning_rate * (1.0 - iteration / self.config.num_iterations)

    def collect_rollout(self, obs: torch.Tensor) -> torch.Tensor:
        """Run ``num_steps`` steps from ``obs`` into the rollout buffer; returns the next observation
        (a view of the environment's own buffer)."""
        buffer, env = self.buffer, self.env
        env_buffers = env.buffers
        for step in range(self.config.num_steps):
            buffer.obs[step].copy_(obs)
            with torch.no_grad():
                actor_output = self.policy.actor_output(obs)
            self.rollout_kernels.sample(actor_output, step)  # into the buffer and the env
            env.step_in_place()
            self.rollout_kernels.record(step)
            obs = env_buffers.obs.squeeze(1)
        return obs

    def rollout_and_advantages(self) -> torch.Tensor:
        """One iteration's rollout (from the environment's current observation) and advantages;
        replayed as a CUDA graph when ``capture_graphs`` is on. Returns the episode stats
        ``[sum of returns, sum of lengths, count]`` of the episodes that ended (on the device)."""
        if self._graph is not None:
            self._graph()
        else:
            self._rollout_work()
        self.recent_episodes.add(self.buffer.episode_returns, self.buffer.dones)
        return self.buffer.episode_stats()

    def _rollout_work(self) -> None:
        next_obs = self.collect_rollout(self.env.buffers.obs.squeeze(1))
        self.compute_advantages(next_obs)

    def compute_advantages(self, next_obs: torch.Tensor) -> None:
        """Values in one critic pass, reward scaling, truncation bootstrapping, GAE and returns."""
        config, buffer = self.config, self.buffer
        with torch.no_grad():
            buffer.values.copy_(self.policy.value(buffer.obs))
            next_value = self.policy.value(next_obs)
            final_values = self.policy.value(buffer.final_obs)
            rewards = buffer.rewards
            if self.reward_scaler is not None:
                rewards = self.reward_scaler.scale(rewards, buffer.dones)
            # A truncated episode did not end: credit it with the value of where it stopped.
            bootstrapped = rewards + config.gamma * final_values * buffer.truncated
            self.rollout_kernels.advantages(bootstrapped, next_value, config.gamma, config.gae_lambda)

    def update(self) -> dict[str, torch.Tensor]:
        """Learn from the rollout in ``self.buffer``; returns losses as device scalars."""
        raise NotImplementedError

    def run_update(self) -> dict[str, torch.Tensor]:
        """``update``, replayed as a CUDA graph when the update is captured."""
        if self._update_graph is None:
            return self.update()
        self._update_graph()
        return self._losses

    def _update_work(self) -> None:
        # Captured: the returned tensors are the graph's outputs, refreshed by every replay.
        self._losses = self.update()

    def explained_variance(self) -> torch.Tensor:
        """How much of the returns' variance the rollout's values explain (NaN for constant returns)."""
        returns, values = self.buffer.returns, self.buffer.values
        variance = returns.var()
        return torch.where(variance > 0, 1 - (returns - values).var() / variance, torch.nan)

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
        if self.iteration == 0:
            self.env.reset()
        mean_return = math.nan
        solved_at = None
        try:
            while self.iteration < config.num_iterations:
                iteration_start = time.perf_counter()
                learning_rate = self.learning_rate_at(self.iteration)
                set_learning_rate(self.optimizer, learning_rate)
                episode_stats = self.rollout_and_advantages()
                losses = self.run_update()
                if self.policy.obs_normalizer is not None:
                    # After the update, so that the statistics are fixed within an iteration.
                    self.policy.obs_normalizer.update(self.buffer.obs)
                self.iteration += 1
                self.global_step += config.batch_size

                # One host transfer per iteration for all the metrics.
                names = list(losses)
                recent = self.recent_episodes
                window = torch.stack([recent.mean(), recent.seen.to(episode_stats.dtype)])
                values = torch.cat([episode_stats, window, torch.stack([losses[n] for n in names])]).tolist()
                returns_sum, lengths_sum, episodes, last100, episodes_seen = values[:5]
                elapsed = time.perf_counter() - iteration_start
                metrics = {
                    "global_step": self.global_step,
                    "iteration": self.iteration,
                    "charts/episodic_return": returns_sum / episodes if episodes else math.nan,
                    "charts/episodic_length": lengths_sum / episodes if episodes else math.nan,
                    "charts/episodes": episodes,
                    "charts/return_last100": last100,
                    "charts/learning_rate": learning_rate,
                    "charts/SPS": config.batch_size / elapsed,
                    "time/elapsed_s": time.perf_counter() - start_time,
                    **dict(zip(names, values[5:], strict=True)),
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
                target = config.target_return
                if target is not None and episodes_seen >= recent.size and last100 >= target:
                    solved_at = self.global_step
                    break
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
            solved_at_step=solved_at,
        )


def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """Advantages shifted to mean 0 and scaled to standard deviation 1 (``norm_adv``)."""
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def actor_critic_loss(
    config: TrainConfig, policy_loss: torch.Tensor, value_loss: torch.Tensor, entropy: torch.Tensor
) -> dict[str, torch.Tensor]:
    """What PPO and A2C minimise, ``policy_loss - ent_coef * mean(entropy) + vf_coef *
    value_loss``, under ``"loss"``, and its parts (detached) under their log names."""
    entropy_loss = entropy.mean()
    return {
        "loss": policy_loss - config.ent_coef * entropy_loss + config.vf_coef * value_loss,
        "losses/value_loss": value_loss.detach(),
        "losses/policy_loss": policy_loss.detach(),
        "losses/entropy": entropy_loss.detach(),
    }


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


def build_policy(config: TrainConfig, env: WarpVectorEnv) -> ActorCritic:
    """The network a run with ``config`` trains (and an evaluation of its checkpoint loads)."""
    return ActorCritic.for_spaces(
        env.single_observation_space,
        env.single_action_space,
        config.hidden_sizes,
        log_std_init=config.log_std_init,
        normalize_obs=config.normalize_obs,
    )


def build_optimizer(
    config: TrainConfig, policy: ActorCritic, capturable: bool = False
) -> torch.optim.Optimizer:
    """Adam (eps 1e-5) or RMSprop (alpha 0.99, eps 1e-5) over the policy's parameters.

    ``capturable`` (for CUDA-graph replay) keeps the step counts and the learning rate in device
    tensors, so that a replayed step reads the current learning rate; Adam then also uses torch's
    fused kernel (one launch for every parameter instead of a dozen per step).
    """
    parameters = list(policy.parameters())
    learning_rate: float | torch.Tensor = config.learning_rate
    if capturable:
        learning_rate = torch.tensor(config.learning_rate, device=parameters[0].device)
    if config.optimizer == "rmsprop":
        options = {"capturable": True} if capturable else {}
        return torch.optim.RMSprop(parameters, lr=learning_rate, alpha=0.99, eps=1e-5, **options)
    options = {"capturable": True, "fused": True} if capturable else {}
    return torch.optim.Adam(parameters, lr=learning_rate, eps=1e-5, **options)


def set_learning_rate(optimizer: torch.optim.Optimizer, value: float) -> None:
    """Set every group's learning rate, in place where it is a tensor (a captured update reads it)."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(value)
        else:
            group["lr"] = value


def trainer_class(algo: str) -> type[OnPolicyTrainer]:
    """The trainer of ``algo`` (``"ppo"`` or ``"a2c"``)."""
    from warpsci.a2c import A2CTrainer
    from warpsci.ppo import PPOTrainer

    classes: dict[str, type[OnPolicyTrainer]] = {"ppo": PPOTrainer, "a2c": A2CTrainer}
    if algo not in classes:
        raise ValueError(f"algo must be one of {list(classes)}, got {algo!r}")
    return classes[algo]


def make_trainer(config: TrainConfig, run_dir: str | Path | None = None) -> OnPolicyTrainer:
    """A PPO or A2C trainer, as ``config.algo`` says."""
    return trainer_class(config.algo)(config, run_dir)


def resume_trainer(run_dir: str | Path, **overrides: Any) -> OnPolicyTrainer:
    """Continue the run in ``run_dir`` with the algorithm it was started with."""
    payload = load_checkpoint(run_dir)
    algo = overrides.get("algo", payload["config"].get("algo", "ppo"))
    return trainer_class(algo).resume(run_dir, **overrides)
