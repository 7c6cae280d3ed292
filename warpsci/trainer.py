"""The on-policy training loop shared by PPO and A2C, with every tensor on the environment's device.

One iteration: a rollout of ``num_steps`` steps of ``num_envs`` environments (per step: the actor's
forward pass, then one kernel each to sample the actions, step the environments and record the
step; see :mod:`warpsci.rollout_kernels`), values for the whole rollout in one critic pass (in
slices where it would not fit in memory; a shared trunk's values come from the rollout's forward
pass instead), GAE in one kernel, then the algorithm's update
(:mod:`warpsci.ppo`, :mod:`warpsci.a2c`). The only host transfers are the metrics read once per
iteration.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from warpsci import distributed, kernel_cache
from warpsci.checkpoint import (
    CheckpointError,
    load_latest_checkpoint,
    save_checkpoint,
    save_run_checkpoint,
)
from warpsci.config import TrainConfig
from warpsci.graphs import GraphReplay
from warpsci.learner import PolicyLearner, set_learning_rate
from warpsci.networks import ActorCritic
from warpsci.optimizers import Optimizer
from warpsci.progress import Progress
from warpsci.registry import make
from warpsci.rollout import RolloutBuffer, keep_successful_rows
from warpsci.run_safety import NonFiniteError, RunFolderError, RunLock, StopSignals, holds_run
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
    """The metrics of the last iterations (at most ``HISTORY_LIMIT``; ``progress.csv`` has all)."""
    solved_at_step: int | None = None
    """With ``target_return``: the step count when the last-100 mean reached it (else None)."""
    stopped_by: str | None = None
    """The signal (``"SIGTERM"``, ``"SIGINT"``) that stopped the run early, else None."""
    ranks_in_sync: bool | None = None
    """With several training processes: whether every process ended with bit-identical weights
    (None for one process)."""


#: Iterations of metrics a TrainResult keeps in memory.
HISTORY_LIMIT = 1000

#: Version of the checkpoint layout; a checkpoint of a newer layout is refused.
CHECKPOINT_FORMAT = 2


class OnPolicyTrainer:
    """Trains one :class:`~warpsci.networks.ActorCritic` per agent group (one in all for a
    single-agent environment, or one shared by every group); subclasses supply ``update`` (PPO, A2C).

    Args:
        config: Hyperparameters and run settings.
        run_dir: Where to write ``config.yaml``, ``progress.csv``, TensorBoard events and
            ``checkpoint.pt``; None writes nothing.

    Launched by torchrun as one of several processes (:mod:`warpsci.distributed`), the trainer
    steps its share of ``num_envs`` (a global count, as ``total_timesteps``), averages gradients
    and statistics with the other processes, and only rank 0 writes to ``run_dir``.
    """

    def __init__(self, config: TrainConfig, run_dir: str | Path | None = None) -> None:
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.processes = distributed.setup(config.device)
        if self.processes.active:
            config.env_params = agreed_env_params(config, self.processes)
        self.env: WarpVectorEnv = make(
            config.env_id,
            num_envs=self.processes.share(config.num_envs, "num_envs"),
            device=self.processes.device(config.device),
            seed=self.processes.seed(config.seed),
            params=dict(config.env_params) or None,
            copy=False,
            check_actions=False,
        )
        self.device = self.env.device
        # An environment that draws its set-up from a seed it picked itself (``seed=None``) keeps
        # that seed in its params: record it, so that a resume or an evaluation rebuilds the same game.
        drawn_seed = getattr(self.env.params, "seed", None)
        if drawn_seed is not None and config.env_params.get("seed") is None:
            config.env_params = {**config.env_params, "seed": drawn_seed}
        if self.device.type == "cuda":
            torch.set_float32_matmul_precision("high" if config.tf32 else "highest")
        torch.manual_seed(config.seed)
        capture = config.capture_graphs and self.device.type == "cuda"
        # The update is captured too unless early stopping on the KL needs a host-side decision.
        capture_update = capture and config.target_kl is None
        # Capturable on every CUDA run, so that eager and captured runs do the same arithmetic.
        self.learners = build_learners(config, self.env, capturable=self.device.type == "cuda")
        # Every process starts from the same weights (rank 0's), and samples its own actions.
        for learner in self.learners:
            self.processes.broadcast_module(learner.policy)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.processes.seed(config.seed))
        self.recent_episodes = {
            name: ring for learner in self.learners for name, ring in learner.new_recent_episodes().items()
        }
        self._compiled: dict[Callable, Callable] = {}
        self._graph: GraphReplay | None = None
        self._update_graph: GraphReplay | None = None
        self._losses: dict[str, torch.Tensor] = {}
        self._health = torch.ones(0)
        if capture:
            # The reset seed is a kernel argument frozen into the graph: a new seed, a new capture.
            self._graph = GraphReplay(
                self._rollout_work, self.device, (self.generator,), key=lambda: self.env.current_seed
            )
        if capture_update:
            self._update_graph = GraphReplay(self._update_work, self.device, (self.generator,))
        self.iteration = 0
        self.global_step = 0
        #: The checkpoint this trainer was resumed from (None for a fresh run).
        self.resumed_from: Path | None = None
        self._last_checkpoint: Path | None = None
        self._last_checkpoint_time = time.monotonic()
        self._non_finite = False
        #: On a GPU, queue the next iteration's rollout behind this iteration's update before waiting
        #: for this iteration's numbers, so that the GPU works while the host launches it; it goes
        #: unused when the run stops after this iteration. Not where a rollout changes what a
        #: checkpoint holds (:meth:`rollout_changes_saved_state`).
        self.queue_ahead = True

    # ----------------------------------------------------------------------------- one policy

    @property
    def single(self) -> PolicyLearner:
        """The learner of a run with one policy (a single-agent environment, or a shared policy)."""
        if len(self.learners) != 1:
            raise AttributeError(
                f"{self.config.env_id} trains {len(self.learners)} policies "
                f"({[learner.name for learner in self.learners]}): use trainer.learners"
            )
        return self.learners[0]

    @property
    def policy(self) -> ActorCritic:
        """The policy of a one-policy run."""
        return self.single.policy

    @property
    def optimizer(self) -> Optimizer:
        """The optimizer of a one-policy run."""
        return self.single.optimizer

    @property
    def buffer(self) -> RolloutBuffer:
        """The rollout buffer of a one-policy run."""
        return self.single.buffer

    @property
    def writes(self) -> bool:
        """Whether this trainer writes its run folder (it has one, and it is rank 0)."""
        return self.run_dir is not None and self.processes.is_main

    @property
    def group_names(self) -> list[str]:
        return [group.name for group in self.env.groups]

    # ----------------------------------------------------------------------------- checkpoints

    def checkpoint_payload(self) -> dict[str, Any]:
        learners = {
            learner.name: {
                "policy": learner.policy.state_dict(),
                "optimizer": learner.optimizer.state_dict(),
                "reward_scaler": None
                if learner.reward_scaler is None
                else learner.reward_scaler.state_dict(),
            }
            for learner in self.learners
        }
        from warpsci import __version__

        payload = {
            "format": CHECKPOINT_FORMAT,
            "warpsci_version": __version__,
            "config": self.config.to_dict(),
            "learners": learners,
            "iteration": self.iteration,
            "global_step": self.global_step,
            "generator_state": self.generator.get_state(),
            "torch_rng_state": torch.get_rng_state(),
            "recent_episodes": {
                name: {"returns": ring.returns, "seen": ring.seen}
                for name, ring in self.recent_episodes.items()
            },
        }
        if len(self.learners) == 1:
            payload["policy"] = learners[self.learners[0].name]["policy"]  # what `warpsci eval` reads
        return payload

    def save(self, path: Path | None = None) -> Path:
        """Write a checkpoint (atomically) to ``path``; by default to the run folder: it becomes
        ``run_dir/checkpoint.pt`` and the newest of ``config.keep_checkpoints`` in
        ``run_dir/checkpoints/``. Refuses to save weights that went non-finite."""
        if self._non_finite:
            raise NonFiniteError("refusing to checkpoint a run whose numbers went non-finite")
        if path is None:
            if self.run_dir is None:
                raise ValueError("save() needs a path when the trainer has no run_dir")
            path = save_run_checkpoint(
                self.run_dir, self.checkpoint_payload(), self.iteration, self.config.keep_checkpoints
            )
        else:
            save_checkpoint(path, self.checkpoint_payload())
        self._last_checkpoint, self._last_checkpoint_time = path, time.monotonic()
        return path

    def check_compatible(self, payload: dict[str, Any], source: str = "the checkpoint") -> None:
        """Raise :class:`~warpsci.checkpoint.CheckpointError` when ``payload`` comes from a run of
        another environment or algorithm, or from a newer checkpoint layout."""
        layout = int(payload.get("format", 1))
        if layout > CHECKPOINT_FORMAT:
            raise CheckpointError(
                f"{source} has checkpoint format {layout}, written by warpsci "
                f"{payload.get('warpsci_version', '?')}; this warpsci reads formats up to "
                f"{CHECKPOINT_FORMAT}: upgrade warpsci to resume it"
            )
        saved = payload.get("config", {})
        theirs = (saved.get("env_id"), saved.get("algo", "ppo"))
        ours = (self.config.env_id, self.config.algo)
        if theirs != ours:
            raise CheckpointError(
                f"{source} is from a {theirs[0]} {str(theirs[1]).upper()} run; this run is {ours[0]} "
                f"{ours[1].upper()}: resume the run folder it belongs to, or start a new run"
            )

    def load(self, payload: dict[str, Any]) -> None:
        """Restore networks, optimisers, counters and sampling state from a checkpoint."""
        self.check_compatible(payload)
        saved = payload.get("learners")
        if saved is None:  # a checkpoint written before agent groups: one policy
            saved = {self.single.name: payload}
        missing = sorted({learner.name for learner in self.learners} - set(saved))
        if missing:
            raise ValueError(f"the checkpoint holds policies {sorted(saved)}, this run needs {missing}")
        for learner in self.learners:
            state = saved[learner.name]
            learner.policy.load_state_dict(state["policy"])
            # (A checkpoint of a CPU run holds a float learning rate; it fills a CUDA run's tensor.)
            learner.optimizer.load_state_dict(state["optimizer"])
            if learner.reward_scaler is not None and state.get("reward_scaler") is not None:
                learner.reward_scaler.load_state_dict(state["reward_scaler"])
        self.iteration = int(payload["iteration"])
        self.global_step = int(payload["global_step"])
        self.generator.set_state(payload["generator_state"].cpu())
        if "torch_rng_state" in payload:
            torch.set_rng_state(payload["torch_rng_state"].cpu())
        recent = payload.get("recent_episodes") or {}
        if "returns" in recent:  # before agent groups: the one ring
            recent = {next(iter(self.recent_episodes)): recent}
        for name, ring in self.recent_episodes.items():
            if name in recent:
                ring.returns.copy_(recent[name]["returns"])
                ring.seen.copy_(recent[name]["seen"])

    @classmethod
    def resume(cls, run_dir: str | Path, **overrides: Any) -> OnPolicyTrainer:
        """Continue the run in ``run_dir`` from its newest readable checkpoint (config fields may be
        overridden, e.g. ``total_timesteps`` to train longer). The environments start new episodes."""
        payload, path = load_latest_checkpoint(Path(run_dir))
        config = TrainConfig.from_dict({**payload["config"], **overrides})
        trainer = cls(config, run_dir)
        trainer.load(payload)
        trainer.resumed_from = trainer._last_checkpoint = path
        # Different episodes from the interrupted run, but the same ones on every resume.
        seed = trainer.processes.seed(config.seed + trainer.iteration)
        trainer.env.reset(seed=seed)
        if trainer.processes.active:  # the checkpoint holds rank 0's sampling state
            trainer.generator.manual_seed(seed)
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
        """Learning rate of a one-policy run for (0-based) ``iteration``."""
        return self.single.learning_rate_at(iteration)

    def collect_rollout(self) -> None:
        """Run ``num_steps`` steps from the environment's current observations into every
        learner's rollout buffer. With one policy over environments of one agent on CUDA, each
        step's sampling, environment step, recording and storing of the next observations are one
        kernel launch."""
        env = self.env
        one_launch = len(self.learners) == 1 and self.single.kernels.fuses_step
        for step in range(self.config.num_steps):
            # The one-launch step stores the next step's observations itself.
            store_obs = step == 0 or not one_launch
            actor_outputs = [self._act(learner, step, store_obs) for learner in self.learners]
            if one_launch:
                self.single.kernels.sample_step_record(actor_outputs[0], step)
                continue
            for learner, actor_output in zip(self.learners, actor_outputs, strict=True):
                learner.kernels.sample(actor_output, step)  # into the buffer and the env
            env.step_in_place()
            for learner in self.learners:
                learner.kernels.record(step)

    def _act(self, learner: PolicyLearner, step: int, store_obs: bool = True) -> torch.Tensor:
        """Store the learner's observations (unless ``store_obs`` is False) and action masks at
        ``step``, and return its actor's output on them (recording the values of a shared trunk)."""
        obs = learner.observations(self.env.buffers.obs)
        if store_obs:
            learner.buffer.obs[step].copy_(obs)
        mask = learner.action_mask(self.env.buffers.action_mask)
        if mask is not None:
            learner.buffer.action_masks[step].copy_(mask)
        with torch.no_grad():
            if learner.policy.shared_trunk:
                actor_output, values = learner.policy.act_and_value(obs, mask)
                learner.buffer.values[step].copy_(values)
                return actor_output
            return learner.policy.actor_output(obs, mask)

    def rollout_and_advantages(self) -> dict[str, torch.Tensor]:
        """One iteration's rollout (from the environment's current observation) and advantages;
        replayed as a CUDA graph when ``capture_graphs`` is on. Returns, per group, the episode
        stats ``[sum of returns, sum of lengths, count]`` of the episodes that ended (on the device)."""
        self.launch_rollout()
        return self.episode_statistics()

    def rollout_changes_saved_state(self) -> bool:
        """Whether a rollout changes what a checkpoint holds: a reward scaler's statistics
        (``normalize_reward``) or the generator's draws (``neg_pos_env_ratio``). Such runs do not
        queue a rollout ahead (``queue_ahead``), so that a checkpoint written after an iteration
        holds that iteration's state, not some of the next rollout's."""
        return any(
            learner.reward_scaler is not None or learner.config.neg_pos_env_ratio is not None
            for learner in self.learners
        )

    def launch_rollout(self) -> None:
        """Queue one iteration's rollout and advantages (a graph replay where captured)."""
        if self._graph is not None:
            self._graph()
        else:
            self._rollout_work()

    def episode_statistics(self) -> dict[str, torch.Tensor]:
        """Per group, ``[sum of returns, sum of lengths, count]`` of the episodes that ended in the
        last rollout (device tensors), which also join the recent-episode rings."""
        stats = {}
        for learner in self.learners:
            buffer = learner.buffer
            for group in learner.groups:
                returns = learner.columns(buffer.episode_returns, group.name)
                ends = learner.columns(buffer.episode_ends, group.name)
                self.recent_episodes[group.name].add(returns, ends)
                lengths = learner.columns(buffer.episode_lengths, group.name)
                stats[group.name] = torch.stack([(returns * ends).sum(), (lengths * ends).sum(), ends.sum()])
        return stats

    def _rollout_work(self) -> None:
        self.collect_rollout()
        for learner in self.learners:
            self.compute_advantages(learner=learner)
            ratio = learner.config.neg_pos_env_ratio
            if ratio is not None:
                learner.kept_rows.copy_(keep_successful_rows(learner.buffer, ratio, self.generator))

    def compute_advantages(
        self, next_obs: torch.Tensor | None = None, learner: PolicyLearner | None = None
    ) -> None:
        """Values in one critic pass (a shared trunk's were recorded in the rollout), reward
        scaling, truncation bootstrapping, GAE and returns for ``learner`` (default the one
        policy), from ``next_obs`` (default the environment's current observations)."""
        learner = learner or self.single
        config, buffer, policy = learner.config, learner.buffer, learner.policy
        if next_obs is None:
            next_obs = learner.observations(self.env.buffers.obs)
        with torch.no_grad():
            if not policy.shared_trunk:
                buffer.values.copy_(policy.rollout_values(buffer.obs))
            next_value = policy.value(next_obs)
            final_values = truncated_values(policy, buffer, self.env.max_episode_steps)
            rewards = buffer.rewards
            if learner.reward_scaler is not None:
                rewards = learner.reward_scaler.scale(rewards, buffer.dones, self.processes)
            # A truncated episode did not end: credit it with the value of where it stopped.
            bootstrapped = rewards + config.gamma * final_values * buffer.truncated
            learner.kernels.advantages(bootstrapped, next_value, config.gamma, config.gae_lambda)

    def update(self, learner: PolicyLearner) -> dict[str, torch.Tensor]:
        """Learn from ``learner``'s rollout; returns losses as device scalars."""
        raise NotImplementedError

    def gradient_step(self, learner: PolicyLearner, loss: torch.Tensor | None) -> None:
        """One optimizer step on ``loss``'s gradients (None: the parameters' ``.grad`` are already
        set), averaged over the training processes, clipped to ``max_grad_norm`` in global norm."""
        if loss is not None:
            learner.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        self.processes.average_gradients(learner.policy.parameters())
        learner.optimizer.clipped_step(learner.config.max_grad_norm)

    def run_update(self) -> dict[str, torch.Tensor]:
        """``update`` of every learner, replayed as a CUDA graph when the update is captured.
        Losses are named as in CleanRL for one policy, with ``/<policy>`` appended for several."""
        if self._update_graph is None:
            return self._all_updates()
        self._update_graph()
        return self._losses

    def _all_updates(self) -> dict[str, torch.Tensor]:
        losses = {}
        for learner in self.learners:
            learner_losses = self.update(learner)
            if learner.config.neg_pos_env_ratio is not None:
                learner_losses["charts/rows_trained"] = learner.kept_rows / learner.num_rows
            for name, value in learner_losses.items():
                losses[name if len(self.learners) == 1 else f"{name}/{learner.name}"] = value
        return losses

    def _update_work(self) -> None:
        # Captured: the returned tensors are the graph's outputs, refreshed by every replay.
        self._losses = self._all_updates()
        self._health = self.health_flags()

    def explained_variance(self, learner: PolicyLearner | None = None) -> torch.Tensor:
        """How much of the returns' variance the rollout's values explain (NaN for constant returns)."""
        buffer = (learner or self.single).buffer
        returns, values = buffer.returns, buffer.values
        # Both variances in one reduction.
        variance, unexplained = torch.stack([returns, returns - values]).flatten(1).var(dim=1)
        return torch.where(variance > 0, 1 - unexplained / variance, torch.nan)

    def train(
        self,
        on_iteration: Callable[[dict[str, float]], None] | None = None,
        progress_bar: bool = False,
        announce: bool | None = None,
    ) -> TrainResult:
        """Train until ``total_timesteps`` (environment steps, not agent steps); calls
        ``on_iteration(metrics)`` after each iteration. ``progress_bar``: a tqdm bar on stderr
        (plain lines every 30 s where stderr is not a terminal, :mod:`warpsci.progress`);
        ``announce``: say on stderr what the first iteration compiles and when it is done (default:
        with the progress bar).

        With a run_dir: a fresh run refuses a folder that holds a run (RunFolderError), and the
        folder is locked while the run trains; ``config.yaml``, ``progress.csv`` (on a resume, rows
        logged after the checkpoint are dropped first), TensorBoard events and checkpoints (every
        ``checkpoint_every`` iterations or ``checkpoint_every_s`` seconds, on a stop signal, at the
        end) are written. SIGTERM or SIGINT stops the run after the current iteration
        (``TrainResult.stopped_by``). On a GPU (``queue_ahead``), ``on_iteration`` and checkpoints
        run while the next iteration's rollout is queued: change the policy between iterations
        from ``on_iteration`` only with ``queue_ahead = False``. Non-finite observations, rewards,
        losses or weights raise NonFiniteError, and nothing is checkpointed after them.
        """
        guard: contextlib.AbstractContextManager = contextlib.nullcontext()
        if self.run_dir is not None:
            # Every process checks the folder before rank 0 writes to it.
            self.check_run_folder()
            self.processes.barrier()
            if self.writes:
                guard = RunLock(self.run_dir)
        with guard, StopSignals() as stop:
            return self._train_loop(
                on_iteration, progress_bar, progress_bar if announce is None else announce, stop
            )

    def check_run_folder(self) -> None:
        """Raise RunFolderError where :meth:`train` would refuse the run folder: a file, or, for a
        fresh run, a folder that holds a run already."""
        if self.run_dir is None:
            return
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise RunFolderError(f"run folder {str(self.run_dir)!r} is a file; give a folder path")
        found = holds_run(self.run_dir)
        if found is not None and self.resumed_from is None and self.iteration == 0:
            raise RunFolderError(
                f"run folder {str(self.run_dir)!r} already holds a run ({found}): continue it with "
                f"--resume {self.run_dir}, or choose a new --run-dir (or delete the folder)"
            )

    def _train_loop(
        self,
        on_iteration: Callable[[dict[str, float]], None] | None,
        progress_bar: bool,
        announce: bool,
        stop: StopSignals,
    ) -> TrainResult:
        from warpsci.config import save_yaml
        from warpsci.run_log import RunLog

        config = self.config
        log = None
        if self.writes:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            save_yaml(config.to_dict(), self.run_dir / "config.yaml")
            tracker = None
            if config.track:
                from warpsci.tracking import start_tracking

                tracker = start_tracking(config, self.run_dir)
            log = RunLog(
                self.run_dir, resume_at_step=self.global_step if self.iteration > 0 else None, tracker=tracker
            )
        bar: Progress | None = None
        first_announced = False
        progress_bar = progress_bar and self.processes.is_main
        announce = announce and self.processes.is_main
        compiled_before = kernel_cache.cache_counts()["compiled"]
        if announce:
            print("taking the first iteration ...", file=sys.stderr, flush=True)
            # A cold first run says what it compiles (kernels the disk cache does not hold yet).
            kernel_cache.announce_compiles(
                lambda label, target: print(
                    f"  compiling {label} ({target})",
                    file=sys.stderr,
                    flush=True,
                )
            )

        groups = self.group_names
        one_group = len(groups) == 1
        # Bounded, so that a run of millions of iterations keeps a constant footprint.
        history: collections.deque[dict[str, float]] = collections.deque(maxlen=HISTORY_LIMIT)
        start_time = time.perf_counter()
        first_step = self.global_step
        if self.iteration == 0:
            self.env.reset()
        mean_return = math.nan
        solved_at = None
        stopped_by = None
        queue_ahead = (
            self.queue_ahead and self.device.type == "cuda" and not self.rollout_changes_saved_state()
        )
        queued = False  # whether this iteration's rollout is queued already
        numbers = IterationNumbers(self.device)
        try:
            while self.iteration < config.num_iterations:
                iteration_start = time.perf_counter()
                progress = self.iteration / config.num_iterations
                for learner in self.learners:
                    set_learning_rate(learner.optimizer, learner.learning_rate_at(self.iteration))
                    learner.ent_coef.fill_(learner.entropy_coefficient_at(progress))
                if not queued:
                    self.launch_rollout()
                episode_stats = self.episode_statistics()
                losses = self.run_update()
                for learner in self.learners:
                    if learner.policy.obs_normalizer is not None:
                        # After the update, so that the statistics are fixed within an iteration.
                        learner.policy.obs_normalizer.update(learner.buffer.obs, self.processes)
                self.iteration += 1
                self.global_step += config.batch_size

                # One host transfer per iteration for all the metrics.
                names = list(losses)
                recent = self.recent_episodes
                parts = []
                for group in groups:
                    ring = recent[group]
                    parts += [episode_stats[group], torch.stack([ring.mean(), ring.seen.to(torch.float32)])]
                parts.append(torch.stack([losses[n].float() for n in names]) if names else torch.zeros(0))
                health_names, health = self.health_checks()
                parts.append(health)
                # Whether a stop signal reached this process: every process stops at the same iteration.
                parts.append(torch.tensor([float(stop.received is not None)]))
                values = torch.cat([part.float().to(self.device) for part in parts])
                # Several processes: every number averaged (health flags stay 1 only if 1 everywhere).
                numbers.copy(self.processes.average_(values))
                # A graph-replayed rollout's launch takes about 1 us of host time a graph node (0.3 ms
                # for Cartpole's 128 steps): queued now, it runs behind the update instead of after a
                # GPU left idle. A run that stops after this iteration leaves it unused.
                queued = queue_ahead and self.iteration < config.num_iterations
                if queued:
                    self.launch_rollout()
                values = numbers.read()
                stop_requested = values.pop() > 0
                first_loss = 5 * len(groups)
                loss_values = dict(zip(names, values[first_loss : first_loss + len(names)], strict=True))
                self.raise_if_non_finite(health_names, values[len(values) - len(health_names) :], loss_values)
                elapsed = time.perf_counter() - iteration_start
                metrics: dict[str, float] = {"global_step": self.global_step, "iteration": self.iteration}
                for index, group in enumerate(groups):
                    returns_sum, lengths_sum, episodes, last100, seen = values[5 * index : 5 * index + 5]
                    suffix = "" if one_group else f"/{group}"
                    metrics[f"charts/episodic_return{suffix}"] = (
                        returns_sum / episodes if episodes else math.nan
                    )
                    metrics[f"charts/episodic_length{suffix}"] = (
                        lengths_sum / episodes if episodes else math.nan
                    )
                    metrics[f"charts/episodes{suffix}"] = episodes
                    metrics[f"charts/return_last100{suffix}"] = last100
                    if one_group:
                        episodes_seen = seen
                for learner in self.learners:
                    suffix = "" if len(self.learners) == 1 else f"/{learner.name}"
                    metrics[f"charts/learning_rate{suffix}"] = learner.learning_rate_at(self.iteration - 1)
                    if learner.config.ent_coef_final is not None:
                        metrics[f"charts/ent_coef{suffix}"] = learner.entropy_coefficient_at(progress)
                # CleanRL's SPS: steps of this call over its time; and the last iteration's own rate.
                metrics["charts/SPS"] = (self.global_step - first_step) / (time.perf_counter() - start_time)
                metrics["charts/SPS_iteration"] = config.batch_size / elapsed
                metrics["time/elapsed_s"] = time.perf_counter() - start_time
                metrics.update(loss_values)
                if one_group and metrics["charts/episodes"]:
                    mean_return = metrics["charts/episodic_return"]
                history.append(metrics)
                if log is not None:
                    log.write(metrics)
                if on_iteration is not None:
                    on_iteration(metrics)
                if announce and not first_announced:
                    first_announced = True
                    kernel_cache.announce_compiles(None)
                    compiled = kernel_cache.cache_counts()["compiled"] - compiled_before
                    cached = (
                        f"; {compiled} kernel{'s' if compiled != 1 else ''} compiled and cached in "
                        f"{kernel_cache.kernel_cache_dir()}, where later runs load them"
                        if compiled
                        else ""
                    )
                    print(
                        f"first iteration done after {time.perf_counter() - start_time:.1f} s{cached}",
                        file=sys.stderr,
                        flush=True,
                    )
                if progress_bar and bar is None:
                    # Started after the compilation, and with the mean rate since: an honest ETA.
                    total = config.num_iterations * config.batch_size
                    bar = Progress(total, initial=self.global_step - config.batch_size)
                if bar is not None:
                    shown = {"SPS": f"{metrics['charts/SPS']:,.0f}"}
                    if one_group:
                        shown["ret"] = f"{mean_return:.1f}"
                    else:
                        shown.update(
                            {group: f"{metrics[f'charts/return_last100/{group}']:.2f}" for group in groups}
                        )
                    bar.update(config.batch_size, shown)
                every, every_s = config.checkpoint_every, config.checkpoint_every_s
                due = (every > 0 and self.iteration % every == 0) or (
                    every_s > 0 and time.monotonic() - self._last_checkpoint_time >= every_s
                )
                if self.writes and due:
                    self.save()
                if stop_requested:
                    stopped_by = stop.received or "SIGTERM"  # (received by another process)
                    break
                target = config.target_return
                if (
                    target is not None
                    and one_group
                    and episodes_seen >= 100
                    and metrics["charts/return_last100"] >= target
                ):
                    solved_at = self.global_step
                    break
        finally:
            if announce:
                kernel_cache.announce_compiles(None)
            if self.writes and not self._non_finite:
                self.save()
            if log is not None:
                log.close()
            if bar is not None:
                bar.close()
        if not one_group and history:
            mean_return = math.nan
        in_sync = None
        if self.processes.active:
            in_sync = self.processes.modules_in_sync(learner.policy for learner in self.learners)
            if not in_sync:
                raise RuntimeError(
                    f"the weights differ between the {self.processes.world_size} training processes "
                    "after training: a process took a different step (please report this as a bug)"
                )
        return TrainResult(
            global_step=self.global_step,
            iterations=self.iteration,
            mean_episodic_return=mean_return,
            wall_time=time.perf_counter() - start_time,
            history=list(history),
            solved_at_step=solved_at,
            stopped_by=stopped_by,
            ranks_in_sync=in_sync,
        )

    def health_checks(self) -> tuple[list[str], torch.Tensor]:
        """What is checked for NaN and infinity every iteration (:meth:`health_names`) and a float
        tensor on the device, 1 where it is finite (:meth:`health_flags`). Where the update is
        replayed as a CUDA graph the flags are computed inside it (no launch from Python); they are
        read with the iteration's metrics in the same transfer."""
        if self._update_graph is None:
            return self.health_names(), self.health_flags()
        return self.health_names(), self._health

    def health_names(self) -> list[str]:
        """Names of the checked tensors: each policy's rollout observations and rewards and its
        weights after the update, and the environment's ``finite_state_fields``."""
        names = []
        for learner in self.learners:
            suffix = "" if len(self.learners) == 1 else f" of policy {learner.name!r}"
            names += [f"observations{suffix}", f"rewards{suffix}", f"weights{suffix} after the update"]
        return names + [f"environment state {field!r}" for field in self.env.definition.finite_state_fields]

    def health_flags(self) -> torch.Tensor:
        """1.0 where the tensor of :meth:`health_names` is all finite, else 0.0: one read of each
        tensor the iteration already holds. A tensor's least and greatest values are finite exactly
        when every value is (NaN propagates through both), and finding them allocates nothing the
        size of the tensor (a float64 sum did: 22 GB for 46M rollout rows of 64 observations)."""
        tensors = []
        for learner in self.learners:
            parameters = [parameter.detach() for parameter in learner.policy.parameters()]
            # (Parameters held flat on CUDA are read where they lie.)
            weights = distributed.contiguous_span(parameters)
            if weights is None:
                weights = torch.cat([parameter.reshape(-1) for parameter in parameters])
            tensors += [learner.buffer.obs, learner.buffer.rewards, weights]
        tensors += [self.env.state_tensors[field] for field in self.env.definition.finite_state_fields]
        extremes = [
            torch.aminmax(tensor) if tensor.numel() else (tensor.new_zeros(()), tensor.new_zeros(()))
            for tensor in tensors
        ]
        if len({tensor.dtype for tensor in tensors}) == 1:  # one pass over all their extremes
            pairs = torch.stack([value for pair in extremes for value in pair]).view(len(tensors), 2)
            return pairs.isfinite().all(dim=1).float()
        return torch.stack([torch.stack(pair).isfinite().all() for pair in extremes]).float()

    def raise_if_non_finite(
        self, health_names: list[str], health: list[float], losses: dict[str, float]
    ) -> None:
        """Raise :class:`NonFiniteError` (and refuse later checkpoints) when a health check
        (:meth:`health_checks`, 1 for finite) or a loss of this iteration is NaN or infinite."""
        bad = [name for name, finite in zip(health_names, health, strict=True) if finite < 1.0]
        for name, value in losses.items():
            # The explained variance is NaN, legitimately, when every return is equal.
            if not math.isfinite(value) and "explained_variance" not in name:
                bad.append(name)
        if not bad:
            return
        self._non_finite = True
        last = self._last_checkpoint or "none (the run had not written one yet)"
        raise NonFiniteError(
            f"iteration {self.iteration} (step {self.global_step}) produced NaN or infinity in "
            f"{', '.join(bad)}; the run stopped without checkpointing it. Last good checkpoint: {last}. "
            "Lower the learning rate, check the environment's dynamics and rewards, or clip them."
        )


class IterationNumbers:
    """An iteration's numbers (metrics, health flags, the stop flag) on their way to the host: on a
    GPU copied into pinned memory behind the work queued so far, so that more work can be queued
    before :meth:`read` waits for them."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.host: torch.Tensor | None = None
        self.ready = torch.cuda.Event() if device.type == "cuda" else None

    def copy(self, values: torch.Tensor) -> None:
        """Start copying ``values`` (a 1-D float tensor on the device)."""
        if self.ready is None:
            self.host = values
            return
        if self.host is None or self.host.numel() != values.numel():
            self.host = torch.empty(values.numel(), dtype=values.dtype, pin_memory=True)
        self.host.copy_(values, non_blocking=True)
        self.ready.record(torch.cuda.current_stream(values.device))

    def read(self) -> list[float]:
        """The copied numbers, once they have arrived."""
        if self.ready is not None:
            self.ready.synchronize()
        return self.host.tolist()


def truncated_values(policy: nn.Module, buffer: Any, max_episode_steps: int | None = None) -> torch.Tensor:
    """The critic's values of the last observations of truncated episodes (``buffer.final_obs``
    where ``buffer.truncated``; zero elsewhere, where they are multiplied by ``truncated`` anyway).

    Only the truncated rows go through the critic, found without a host synchronisation (so the
    rollout stays capturable as a CUDA graph): a time limit of ``max_episode_steps`` truncates a
    row at most ``ceil(num_steps / max_episode_steps)`` times a rollout, so that many slots per row
    are gathered with ``torch.nonzero_static``; unused slots read row 0 and add nothing. Without a
    limit, or where the slots would be every row, one pass over every row. (Every row cost 27 ms of
    a 1,024 x 64 Cartpole iteration's 600 ms on 2 cores.)"""
    num_steps, num_rows = buffer.truncated.shape
    per_row = min(num_steps, -(-num_steps // max_episode_steps) if max_episode_steps else num_steps)
    if per_row == num_steps:
        return torch.where(buffer.truncated > 0, policy.rollout_values(buffer.final_obs), 0.0)
    truncated = buffer.truncated.reshape(-1)
    slots = per_row * num_rows
    where = torch.nonzero_static(truncated, size=slots, fill_value=0).squeeze(1)
    final_obs = buffer.final_obs.reshape(truncated.numel(), -1).index_select(0, where)
    gathered = policy.rollout_values(final_obs.reshape(per_row, num_rows, -1)).reshape(slots)
    used = torch.arange(slots, device=where.device) < torch.count_nonzero(truncated)
    values = torch.zeros_like(truncated)
    values.index_add_(0, where, torch.where(used, gathered, 0.0))
    return values.reshape(num_steps, num_rows)


def agreed_env_params(config: TrainConfig, processes: distributed.Processes) -> dict[str, Any]:
    """``config.env_params`` with one ``seed`` for every process where the environment would draw
    its own (a ``seed`` param left None): the processes must play the same game."""
    from warpsci.registry import get_definition

    params_type = get_definition(config.env_id).params_type
    fields = dataclasses.fields(params_type) if dataclasses.is_dataclass(params_type) else ()
    if "seed" not in {field.name for field in fields} or config.env_params.get("seed") is not None:
        return config.env_params
    drawn = int(np.random.SeedSequence().generate_state(1)[0])
    return {**config.env_params, "seed": processes.broadcast_object(drawn)}


def build_learners(config: TrainConfig, env: WarpVectorEnv, capturable: bool) -> list[PolicyLearner]:
    """One learner per agent group, or one for all groups with ``shared_policy``."""
    groups = env.groups
    names = [group.name for group in groups]
    unknown = sorted(set(config.groups) - set(names))
    if unknown:
        raise ValueError(f"groups: unknown group(s) {unknown} for {config.env_id}; its groups are {names}")
    if len(groups) > 1 and config.target_return is not None:
        raise ValueError("target_return stops a run of one agent group; it has no meaning for several")
    if config.shared_policy and len(groups) > 1:
        first = groups[0]
        for group in groups[1:]:
            if group.observation_space != first.observation_space or group.action_space != first.action_space:
                raise ValueError(
                    f"shared_policy needs equal spaces; groups {first.name!r} and {group.name!r} differ"
                )
        if config.groups:
            raise ValueError("with shared_policy the groups: overrides do not apply; remove one of them")
        return [PolicyLearner("shared", tuple(groups), config, env, capturable)]
    return [
        PolicyLearner(group.name, (group,), config.for_group(group.name), env, capturable) for group in groups
    ]


def normalize_advantages(advantages: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Advantages shifted to mean 0 and scaled to standard deviation 1 (``norm_adv``), over the
    rows with weight 1 when ``weights`` are given."""
    mean, std = advantage_statistics(advantages, weights)
    return (advantages - mean) / (std + 1e-8)


def advantage_statistics(
    advantages: torch.Tensor, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (unbiased) standard deviation of ``advantages`` along the last axis, over the rows
    with weight 1 when ``weights`` are given, as :func:`normalize_advantages` uses them."""
    if weights is None:
        std, mean = torch.std_mean(advantages, -1)  # one pass (Welford's), not two
        return mean, std
    count = weights.sum(-1).clamp(min=2.0)
    mean = (advantages * weights).sum(-1) / count
    variance = ((advantages - mean.unsqueeze(-1)).square() * weights).sum(-1) / (count - 1)
    return mean, variance.sqrt()


def masked_mean(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``values``, or their weighted mean over rows with weight 1 (agents in the game)."""
    if weights is None:
        return values.mean()
    return (values * weights).sum() / mean_denominator(weights)


def mean_denominator(weights: torch.Tensor) -> torch.Tensor:
    """What :func:`masked_mean` divides by: the total weight along the last axis, at least 1."""
    return weights.sum(-1).clamp(min=1.0)


def actor_critic_loss(
    config: TrainConfig,
    policy_loss: torch.Tensor,
    value_loss: torch.Tensor,
    entropy: torch.Tensor,
    ent_coef: torch.Tensor | float | None = None,
    weights: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """What PPO and A2C minimise, ``policy_loss - ent_coef * mean(entropy) + vf_coef *
    value_loss``, under ``"loss"``, and its parts (detached) under their log names. ``ent_coef``
    defaults to the config's; ``weights`` mask rows out of the entropy's mean."""
    entropy_loss = masked_mean(entropy, weights)
    coefficient = config.ent_coef if ent_coef is None else ent_coef
    return {
        "loss": policy_loss - coefficient * entropy_loss + config.vf_coef * value_loss,
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
    return ActorCritic.for_config(config, env.single_observation_space, env.single_action_space)
