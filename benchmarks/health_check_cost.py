"""What the per-iteration NaN/Inf checks cost on a GPU (issue 16): a training iteration with the
checks (``OnPolicyTrainer.health_flags``: one ``isfinite().all()`` reduction per checked tensor,
inside the update's CUDA graph, read with the iteration's metrics in the one existing transfer)
against the same iteration with them replaced by a constant; and one eager call of the checks, as
they ran before they moved into the graph.

Run on a machine with a CUDA GPU:  python benchmarks/health_check_cost.py OUT_DIR
Prints a table and writes health_check_cost.json. Each figure is the median of 5 timings.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

from warpsci.algorithms import make_trainer
from warpsci.config import TrainConfig

CASES = {
    "CartPole-v1 PPO 64x64, 8,192 x 128": {"env_id": "CartPole-v1", "num_envs": 8192, "num_steps": 128},
    "TagGridworld-v0 A2C [32, 32] shared, 2,000 x 5 x 100": {
        "env_id": "TagGridworld-v0", "algo": "a2c", "num_envs": 2000, "num_steps": 100,
        "hidden_sizes": (32, 32), "shared_policy": True, "num_minibatches": 1, "update_epochs": 1,
        "env_params": {
            "num_taggers": 4, "grid_length": 100, "episode_length": 100, "use_full_observation": True
        },
    },
}  # fmt: skip


def timed(function, repeats: int) -> float:
    """Median seconds of ``repeats`` calls, each timed to the end of its GPU work (5 timings)."""
    timings = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            function()
        torch.cuda.synchronize()
        timings.append((time.perf_counter() - start) / repeats)
    return statistics.median(timings)


def iteration_ms(fields: dict, checks: bool) -> tuple[float, float, list[str]]:
    """Milliseconds of one training iteration (rollout and the captured update), with the health
    checks inside the update's graph or (``checks=False``) replaced by a constant; also the
    milliseconds of one eager ``health_flags()`` call (launched from Python, as before they moved
    into the graph) and the checked names."""
    config = TrainConfig(device="cuda", total_timesteps=10**12, anneal_lr=False, **fields)
    trainer = make_trainer(config)
    if not checks:
        constant = torch.ones(len(trainer.health_names()), device="cuda")
        trainer.health_flags = lambda: constant

    def iteration() -> None:
        trainer.rollout_and_advantages()
        trainer.run_update()

    for _ in range(3):  # warm-up and graph capture
        iteration()
    eager_s = timed(lambda: type(trainer).health_flags(trainer).sum(), 50)
    return timed(iteration, 20) * 1e3, eager_s * 1e3, trainer.health_names()


def measure(name: str, fields: dict) -> dict:
    with_checks, eager, names = iteration_ms(fields, checks=True)
    without_checks, _, _ = iteration_ms(fields, checks=False)
    return {
        "case": name,
        "checked": names,
        "iteration_ms": with_checks,
        "iteration_without_checks_ms": without_checks,
        "checks_in_graph_ms": with_checks - without_checks,
        "checks_eager_ms": eager,
        "share_of_iteration": (with_checks - without_checks) / with_checks,
    }


def main(out_dir: str) -> None:
    rows = []
    for name, fields in CASES.items():
        rows.append(measure(name, fields))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "checked"}), flush=True)
        torch.cuda.empty_cache()
    report = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "health_check_cost.json").write_text(json.dumps(report, indent=2))
    print(f"{'case':<72} {'iteration ms':>12} {'without':>8} {'in graph':>8} {'eager':>7}")
    for row in rows:
        print(
            f"{row['case']:<72} {row['iteration_ms']:>12.3f} {row['iteration_without_checks_ms']:>8.3f} "
            f"{row['checks_in_graph_ms']:>8.3f} {row['checks_eager_ms']:>7.3f}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
