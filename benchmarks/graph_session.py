"""The CUDA-graph session: captured vs eager equality, then captured throughput on Cartpole.

    python benchmarks/graph_session.py OUT_DIR

1. ``pytest -m gpu tests/test_graphs_gpu.py`` (replayed steps and training equal eager ones).
2. Env-only Cartpole, eager and graph-replayed, at 10K and 1M environments, and the block-size
   search: graph-replayed at 32..512 threads per block (1024 fails to launch: the step kernel
   needs more registers than a 1024-thread block has).
3. End-to-end PPO on Cartpole (64x64 tanh, 128 steps, 4 epochs, 4 minibatches), rollout and
   advantages graph-replayed, at 2K..262K environments; eager at 2K for comparison.
Prints one table and writes OUT_DIR/graph_session.csv (medians of 5 repeats).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

import warpsci  # noqa: F401
from warpsci.bench import bench_env, bench_train


def run_gpu_tests(out: Path) -> None:
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "gpu",
            "tests/test_graphs_gpu.py",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    (out / "test_graphs_gpu.txt").write_text(tests.stdout + tests.stderr)
    print(
        "gpu tests:",
        tests.stdout.strip().splitlines()[-1] if tests.stdout else tests.stderr[-2000:],
        flush=True,
    )
    if tests.returncode != 0:
        print(tests.stdout[-6000:])


def time_to_target(out: Path, repeats: int = 3) -> None:
    """``warpsci train CartPole-v1 --device cuda --target-return 475`` (the packaged preset)."""
    for repeat in range(repeats):
        run_dir = out / f"target_{repeat}"
        command = [sys.executable, "-m", "warpsci.cli", "train", "CartPole-v1", "--device", "cuda"]
        command += [
            "--target-return",
            "475",
            "--no-progress",
            "--eval-episodes",
            "0",
            "--run-dir",
            str(run_dir),
        ]
        start = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if completed.returncode != 0:
            print("time-to-target failed:", completed.stderr[-2000:])
            return
        summary = json.loads((run_dir / "summary.json").read_text())
        print(
            f"time-to-target run {repeat}: solved at {summary['solved_at_step']} steps, "
            f"{summary['time_to_target_s']:.2f} s from process start, {wall:.2f} s wall, "
            f"training {summary['train_wall_time_s']:.2f} s",
            flush=True,
        )


def main() -> None:
    out = Path(sys.argv[1])
    run_tests = "--no-tests" not in sys.argv
    out.mkdir(parents=True, exist_ok=True)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    if run_tests:
        run_gpu_tests(out)
    time_to_target(out)

    rows = []

    def record(result, note: str = "") -> None:
        rows.append(
            [
                result.mode,
                result.num_envs,
                note,
                f"{result.steps_per_second:.1f}",
                " ".join(f"{rate:.1f}" for rate in result.repeats),
            ]
        )
        print(
            f"{result.mode:<10} {result.num_envs:>10,} {note:<14} {result.steps_per_second:>16,.0f}",
            flush=True,
        )

    for num_envs, steps in ((10_000, 1000), (1_000_000, 50)):
        record(bench_env("CartPole-v1", num_envs, "cuda", steps=steps), "eager tpb128")
        for threads in (32, 64, 128, 256, 512):  # 1024: too many registers per block (launch fails)
            record(
                bench_env(
                    "CartPole-v1", num_envs, "cuda", steps=steps, capture=True, threads_per_block=threads
                ),
                f"graph tpb{threads}",
            )
    record(bench_train("CartPole-v1", 2048, "cuda", capture=False), "eager")
    for num_envs in (2048, 16_384, 65_536, 262_144):
        record(bench_train("CartPole-v1", num_envs, "cuda", capture=True), "graph")
    with (out / "graph_session.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["mode", "num_envs", "variant", "steps_per_second_median", "repeats"])
        writer.writerows(rows)


if __name__ == "__main__":
    main()
