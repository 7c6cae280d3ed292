"""Time to solve Cartpole from process start with and without the background Triton warm-up
(``fused_mlp.warm_up_triton_in_background``), interleaved on one host to cancel drift.

Run on a machine with a CUDA GPU (warm kernel caches: run once first)::

    python benchmarks/triton_warm_up_ab.py OUT_DIR [rounds]

Each round runs ``warpsci train CartPole-v1 --device cuda --target-return 475`` once with the
warm-up and once without (seeds 1, 2, 3 in turn), in fresh processes, and reads the run's
``time_to_target_s`` and ``train_wall_time_s``; prints the medians.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

RUN = """
import sys
import warpsci.trainer
if sys.argv[1] == "off":
    warpsci.trainer.warm_up_triton_in_background = lambda: None
from warpsci.cli import main
sys.exit(main(sys.argv[2:]))
"""


def main() -> None:
    out = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    results: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    for index in range(rounds):
        seed = index % 3 + 1
        for variant in ("on", "off") if index % 2 == 0 else ("off", "on"):
            run_dir = out / f"{variant}-{index}"
            argv = ["train", "CartPole-v1", "--device", "cuda", "--eval-episodes", "0", "--no-progress",
                    "--target-return", "475", "--seed", str(seed), "--run-dir", str(run_dir)]  # fmt: skip
            done = subprocess.run([sys.executable, "-c", RUN, variant, *argv], capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{variant} round {index} failed: {done.stderr[-800:]}")
                continue
            summary = json.loads((run_dir / "summary.json").read_text())
            results[variant].append((summary["time_to_target_s"], summary["train_wall_time_s"]))
            print(f"{variant:>3} seed {seed}: to target {summary['time_to_target_s']:.2f} s, "
                  f"training {summary['train_wall_time_s']:.2f} s", flush=True)  # fmt: skip
    for variant, rows in results.items():
        if rows:
            to_target, training = (statistics.median(row[i] for row in rows) for i in (0, 1))
            print(f"warm-up {variant}: median to target {to_target:.2f} s, median training {training:.2f} s "
                  f"({len(rows)} runs)")  # fmt: skip


if __name__ == "__main__":
    main()
