"""Where a PPO iteration on the CPU spends its time (issue 17, item 3): the Cartpole preset
(``warpsci/configs/ppo/CartPole-v1.yaml``: 32 environments x 64 steps, 4 epochs x 4 minibatches,
64x64) and a wider batch (1,024 x 64), split into the environment's step kernel, the policy's
forward pass in the rollout, the sampling and recording kernels, advantages, and the update; the
update compared with its gradient steps alone (the network's forward and backward passes, clipping
and Adam on minibatches of the same size, without PPO's bookkeeping).

Run on the CPU:  python benchmarks/profile_cpu_iteration.py [OUT_DIR]
Prints a table (milliseconds per iteration, medians of 7 iterations after 3 warm-ups).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from warpsci.algorithms import make_trainer
from warpsci.cli import preset
from warpsci.config import TrainConfig

CASES = {"preset, 32 x 64": {}, "1,024 x 64": {"num_envs": 1024}}


class Stopwatch:
    """Seconds spent in wrapped callables, by name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start

        return timed


def iteration_split(fields: dict) -> dict[str, float]:
    config = TrainConfig.from_dict({**preset("CartPole-v1", "ppo"), "device": "cpu", **fields})
    trainer = make_trainer(config)
    learner = trainer.single
    watch = Stopwatch()
    trainer.env.step_in_place = watch.wrap("env step kernel", trainer.env.step_in_place)
    learner.policy.actor_output = watch.wrap("policy forward (rollout)", learner.policy.actor_output)
    learner.kernels.sample = watch.wrap("sampling kernel", learner.kernels.sample)
    learner.kernels.record = watch.wrap("recording kernel", learner.kernels.record)
    collect, advantages = trainer.collect_rollout, trainer.compute_advantages
    trainer.collect_rollout = watch.wrap("rollout", collect)
    trainer.compute_advantages = watch.wrap("advantages", advantages)
    trainer.run_update = watch.wrap("update", trainer.run_update)
    rows = []
    for index in range(10):
        watch.seconds.clear()
        start = time.perf_counter()
        trainer.rollout_and_advantages()
        trainer.run_update()
        total = time.perf_counter() - start
        if index >= 3:
            rows.append({"iteration": total, **watch.seconds})
    split = {name: statistics.median(row[name] for row in rows) * 1e3 for name in rows[0]}
    split["update: network and Adam alone"] = bare_gradient_steps(trainer) * 1e3
    return split


def bare_gradient_steps(trainer) -> float:
    """Seconds of the update's gradient steps without PPO's bookkeeping: for each of
    ``update_epochs x num_minibatches`` minibatches, the network's forward and backward pass on a
    minibatch of the rollout, gradient clipping and the Adam step (median of 7)."""
    config, learner = trainer.config, trainer.single
    policy, optimizer, buffer = learner.policy, learner.optimizer, learner.buffer
    obs = buffer.obs.reshape(-1, buffer.obs.shape[-1])
    actions = buffer.actions.reshape(-1)
    size = obs.shape[0] // config.num_minibatches
    times = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(config.update_epochs * config.num_minibatches):
            log_prob, entropy, value = policy.evaluate(obs[:size], actions[:size])
            loss = -log_prob.mean() - 0.01 * entropy.mean() + 0.5 * (value**2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(out_dir: str | None) -> None:
    torch.set_num_threads(torch.get_num_threads())
    report = {"threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d"), "cases": {}}
    for name, fields in CASES.items():
        report["cases"][name] = iteration_split(fields)
    names = list(next(iter(report["cases"].values())))
    print(f"{'ms per iteration':<40}" + "".join(f"{case:>18}" for case in report["cases"]))
    for row in names:
        print(f"{row:<40}" + "".join(f"{split[row]:>18.2f}" for split in report["cases"].values()))
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "profile_cpu_iteration.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
