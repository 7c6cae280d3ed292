"""Catalysis on the GPU (issue 13): env-only and end-to-end steps/s of ``CatalysisOneAtom-v0``
(the ``surface`` scenario, the published default) and ``CatalysisTwoAtom-v0`` (``diffusion``).

Run on a machine with a CUDA GPU:  python benchmarks/catalysis_session.py OUT_DIR
Prints a table and writes catalysis_session.json. Env-only: uniform random actions, medians of 5
repeats of 1,000 steps, each repeat one CUDA graph ("step": one launch a step) or
``random_rollout(100)`` (actions drawn inside the kernel, 100 steps a launch); the CPU backend on
the same host for comparison. End to end: A2C with the published [50, 50] network (lr 1e-3,
gamma 0.99, entropy 0.1), median ``charts/SPS_iteration`` of 5 iterations after 2 warm-ups.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

from warpsci.algorithms import make_trainer
from warpsci.bench import bench_env
from warpsci.config import TrainConfig

ENVS = ("CatalysisOneAtom-v0", "CatalysisTwoAtom-v0")


def end_to_end(env_id: str, num_envs: int, num_steps: int) -> float:
    config = TrainConfig(
        env_id=env_id, device="cuda", algo="a2c", num_envs=num_envs, num_steps=num_steps,
        total_timesteps=num_envs * num_steps * 7, hidden_sizes=(50, 50), learning_rate=1e-3,
        gamma=0.99, ent_coef=0.1, checkpoint_every=0, anneal_lr=False,
    )  # fmt: skip
    rates: list[float] = []
    make_trainer(config).train(on_iteration=lambda metrics: rates.append(metrics["charts/SPS_iteration"]))
    return statistics.median(rates[2:])


def main(out_dir: str) -> None:
    rows = []

    def record(**row) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    for env_id in ENVS:
        for num_envs in (2_000, 100_000, 1_000_000):
            step = bench_env(env_id, num_envs, "cuda", steps=1000, capture=True)
            record(
                env=env_id,
                mode="env-only, graph of single steps",
                envs=num_envs,
                steps_per_s=step.steps_per_second,
            )
            rollout = bench_env(env_id, num_envs, "cuda", steps=1000, steps_per_launch=100)
            record(
                env=env_id,
                mode="env-only, random_rollout(100)",
                envs=num_envs,
                steps_per_s=rollout.steps_per_second,
            )
        for num_envs in (2_000, 100_000):
            cpu = bench_env(env_id, num_envs, "cpu", steps=200, steps_per_launch=100)
            record(env=env_id, mode="env-only CPU backend, random_rollout(100)", envs=num_envs,
                   steps_per_s=cpu.steps_per_second)  # fmt: skip
        for num_envs, num_steps in ((2_000, 100), (100_000, 20)):
            rate = end_to_end(env_id, num_envs, num_steps)
            record(env=env_id, mode=f"end to end, A2C [50, 50], {num_steps}-step rollouts", envs=num_envs,
                   steps_per_s=rate)  # fmt: skip
    report = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "catalysis_session.json").write_text(json.dumps(report, indent=2))
    print(f"{'environment':<22} {'mode':<46} {'envs':>9} {'steps/s':>16}")
    for row in rows:
        print(f"{row['env']:<22} {row['mode']:<46} {row['envs']:>9,} {row['steps_per_s']:>16,.0f}")


if __name__ == "__main__":
    main(sys.argv[1])
