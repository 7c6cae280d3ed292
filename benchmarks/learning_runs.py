"""Train several configurations at once through the CLI and tabulate what they reached.

    python benchmarks/learning_runs.py SPEC.yaml OUT_DIR [--parallel 8]

SPEC.yaml is a list of runs, each ``{name, env_id, threshold, config: {TrainConfig fields}}``
(``config`` may be omitted to use the packaged preset as ``warpsci train ENV`` does). Every run is
``warpsci train ENV --config OUT_DIR/NAME.yaml --run-dir OUT_DIR/NAME --no-progress`` in its own
process; up to ``--parallel`` run at a time (several processes share one GPU well, since a small
training run leaves it mostly idle between launches). The table gives, per run: the greedy
evaluation return (100 episodes), the mean training return of the last 100 episodes, the steps at
which that rolling mean first reached the threshold, and the wall time. It is also written to
OUT_DIR/results.csv.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml


def rolling_return(progress_csv: Path, threshold: float) -> tuple[float, float]:
    """``(mean return of the last ~100 episodes, steps when that mean first reached threshold)``."""
    rows = list(csv.DictReader(progress_csv.open()))
    window: list[tuple[float, float]] = []  # (episodes, return sum) per iteration
    first_step = math.nan
    mean = math.nan
    for row in rows:
        episodes = float(row.get("charts/episodes") or 0)
        value = float(row.get("charts/episodic_return") or "nan")
        if episodes > 0 and math.isfinite(value):
            window.append((episodes, value * episodes))
        # Keep the newest iterations that hold at least 100 episodes.
        while len(window) > 1 and sum(e for e, _ in window[1:]) >= 100:
            window.pop(0)
        total = sum(e for e, _ in window)
        if total > 0:
            mean = sum(s for _, s in window) / total
            if math.isnan(first_step) and total >= 100 and mean >= threshold:
                first_step = float(row["global_step"])
    return mean, first_step


def run_one(spec: dict, out_dir: Path) -> dict:
    name = spec["name"]
    run_dir = out_dir / name
    command = [sys.executable, "-m", "warpsci.cli", "train", spec["env_id"], "--run-dir", str(run_dir)]
    command += ["--no-progress"]
    if spec.get("config"):
        config_path = out_dir / f"{name}.yaml"
        config_path.write_text(yaml.safe_dump(spec["config"]))
        command += ["--config", str(config_path)]
    start = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    (out_dir / f"{name}.log").write_text(completed.stdout + completed.stderr)
    result = {"name": name, "env_id": spec["env_id"], "threshold": spec["threshold"], "wall_s": wall}
    if completed.returncode != 0:
        result["error"] = completed.stderr.strip().splitlines()[-1] if completed.stderr else "failed"
        return result
    summary = json.loads((run_dir / "summary.json").read_text())
    mean, first = rolling_return(run_dir / "progress.csv", spec["threshold"])
    result.update(
        algo=summary["algo"],
        steps=summary["global_step"],
        train_s=summary["train_wall_time_s"],
        eval_return=summary.get("eval_mean_return", math.nan),
        last100_return=mean,
        steps_to_threshold=first,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec")
    parser.add_argument("out_dir")
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    specs = yaml.safe_load(Path(args.spec).read_text())
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda spec: run_one(spec, out_dir), specs))
    columns = ["name", "env_id", "algo", "threshold", "eval_return", "last100_return", "steps_to_threshold"]
    columns += ["steps", "train_s", "wall_s", "error"]
    with (out_dir / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(results)
    print(f"{'run':<28} {'eval':>8} {'last100':>8} {'thr':>6} {'@steps':>10} {'steps':>10} {'train s':>8}")
    for r in results:
        if "error" in r:
            print(f"{r['name']:<28} ERROR {r['error']}")
            continue
        print(
            f"{r['name']:<28} {r['eval_return']:>8.1f} {r['last100_return']:>8.1f} {r['threshold']:>6} "
            f"{r['steps_to_threshold']:>10,.0f} {r['steps']:>10,} {r['train_s']:>8.1f}"
        )


if __name__ == "__main__":
    main()
