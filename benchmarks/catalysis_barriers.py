"""The barrier a trained policy finds on every one-atom catalysis scenario (issue 13): PPO (the
package preset's settings, 2,048 environments x 64 steps, 20M steps) on a GPU, then the greedy
policy's reaction pathway (``warpsci.reaction_path``): whether it reaches the final state, in how
many steps, its barrier (eV), and the training steps and seconds it took.

Run on a machine with a CUDA GPU:  python benchmarks/catalysis_barriers.py OUT_DIR [SCENARIO ...]
Prints a table; writes OUT_DIR/catalysis_barriers.json and, per scenario, the pathway CSV and
pictures under OUT_DIR/<scenario>/.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from warpsci.algorithms import make_trainer
from warpsci.config import TrainConfig
from warpsci.envs.catalysis import landscape, scenario_names
from warpsci.reaction_path import greedy_path, write_reaction_path

ENV_ID = "CatalysisOneAtom-v0"


def train_and_trace(scenario: str, out: Path, total_steps: int = 20_000_000) -> dict:
    env_params = {"scenario": scenario}
    config = TrainConfig(
        env_id=ENV_ID, device="cuda", seed=1, num_envs=2048, num_steps=64, total_timesteps=total_steps,
        hidden_sizes=(50, 50), learning_rate=1e-3, ent_coef=0.01, env_params=env_params, checkpoint_every=0,
    )  # fmt: skip
    trainer = make_trainer(config)
    start = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - start
    rows = greedy_path(trainer.single.policy, ENV_ID, env_params, device="cuda")
    summary = write_reaction_path(rows, landscape(trainer.env.params), out / scenario)
    return {
        "scenario": scenario,
        "training_steps": result.global_step,
        "training_seconds": seconds,
        "reached_final_state": summary["reached_final_state"],
        "path_steps": summary["path_steps"],
        "barrier_eV": summary["barrier_eV"],
    }


def main(out_dir: str, scenarios: list[str]) -> None:
    out = Path(out_dir)
    rows = []
    for scenario in scenarios or scenario_names(1):
        try:
            rows.append(train_and_trace(scenario, out))
        except Exception as error:  # noqa: BLE001 - reported in the table
            rows.append({"scenario": scenario, "error": f"{type(error).__name__}: {error}"})
        print(json.dumps(rows[-1]), flush=True)
        report = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
        (out / "catalysis_barriers.json").write_text(json.dumps(report, indent=2))
    print(f"{'scenario':<22} {'reached':>7} {'path':>5} {'barrier eV':>10} {'train steps':>12} {'s':>6}")
    for row in rows:
        if "error" in row:
            print(f"{row['scenario']:<22} {row['error'][:80]}")
            continue
        print(
            f"{row['scenario']:<22} {row['reached_final_state']!s:>7} {row['path_steps']:>5} "
            f"{row['barrier_eV']:>10.3f} {row['training_steps']:>12,} {row['training_seconds']:>6.1f}"
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
