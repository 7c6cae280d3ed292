"""Weak scaling over the GPUs of one host (issues 15 and 19): end-to-end steps/s of ``torchrun
--nproc-per-node K -m warpsci train`` with the same environments per GPU, K = 1 and K = all.

Run on a host with CUDA GPUs:  python benchmarks/multi_gpu_scaling.py OUT_DIR [K ...] [--only TEXT]
[--repeats N] (default: 1 and every GPU; every case; one run each, else the median of N).
Prints a table and writes multi_gpu_scaling.json; efficiency =
rate on K / (K x rate on 1), with the one-GPU baseline measured on the same host. NVLink
multicast stays off (NCCL_NVLS_ENABLE=0 and the PyTorch and NVSHMEM equivalents). Rates are the
median ``charts/SPS_iteration`` of the iterations after three warm-ups, read from rank 0's
progress.csv.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from warpsci.run_log import read_progress

#: NVLink multicast off in NCCL, PyTorch and NVSHMEM (it can take a shared host out of service).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

#: name, environment, environments per GPU, iterations, extra flags.
CASES = [
    (
        "CartPole-v1 PPO 64x64, 128-step rollouts, 8,192 environments per GPU",
        "CartPole-v1",
        8192,
        12,
        ["--num-steps", "128"],
    ),
    (
        "CartPole-v1 PPO 64x64, 128-step rollouts, 65,536 environments per GPU",
        "CartPole-v1",
        65536,
        12,
        ["--num-steps", "128"],
    ),
    (
        "TagGridworld-v0 2,000 x 5 A2C [32, 32] shared, 100-step rollouts",
        "TagGridworld-v0",
        2000,
        12,
        [
            "--algo", "a2c", "--num-steps", "100", "--hidden-sizes", "32", "32", "--shared-policy",
            "--no-anneal-lr", "--num-minibatches", "1", "--update-epochs", "1",
            "--env-params",
            "{num_taggers: 4, grid_length: 100, episode_length: 100, use_full_observation: true}",
        ],
    ),
]  # fmt: skip


def run_case(
    out: Path, name: str, env_id: str, per_gpu: int, iterations: int, flags: list, gpus: int, repeat: int = 0
) -> dict:
    run_dir = out / (f"{env_id}_{per_gpu}_{gpus}gpu" + (f"_run{repeat + 1}" if repeat else ""))
    steps = 128 if env_id == "CartPole-v1" else 100
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(gpus)]
    command += ["-m", "warpsci", "train", env_id, "--device", "cuda", "--run-dir", str(run_dir)]
    command += ["--num-envs", str(per_gpu * gpus), "--total-steps", str(per_gpu * gpus * steps * iterations)]
    command += ["--no-progress", "--eval-episodes", "0", "--checkpoint-every-s", "0", *flags]
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, **NO_MULTICAST}, timeout=120
        )
    except subprocess.TimeoutExpired as expired:
        stderr = (
            expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else expired.stderr
        )
        return {"case": name, "gpus": gpus, "error": f"no exit within 120 s: {(stderr or '')[-1500:]}"}
    row = {"case": name, "gpus": gpus, "envs_per_gpu": per_gpu, "wall_s": time.perf_counter() - started}
    if completed.returncode != 0:
        row["error"] = completed.stderr[-1500:]
        return row
    rates = [entry["charts/SPS_iteration"] for entry in read_progress(run_dir / "progress.csv")][3:]
    summary = json.loads((run_dir / "summary.json").read_text())
    row.update(
        env_steps_per_s=statistics.median(rates),
        iterations_timed=len(rates),
        ranks_in_sync=summary.get("ranks_in_sync"),
    )
    return row


def combined(runs: list[dict]) -> dict:
    """One row for repeats of a case on K GPUs: the median rate, every run's rate, and whether
    every run ended with its ranks in sync; a failed run's error, if any."""
    row = dict(runs[0])
    failed = [run for run in runs if "env_steps_per_s" not in run]
    if failed:
        return {**row, "error": failed[0].get("error", "no rate")}
    row["runs"] = [run["env_steps_per_s"] for run in runs]
    row["env_steps_per_s"] = statistics.median(row["runs"])
    row["ranks_in_sync"] = None if row["gpus"] == 1 else all(run["ranks_in_sync"] for run in runs)
    return row


def main(out_dir: str, counts: list[int], only: str = "", repeats: int = 1) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in (case for case in CASES if only in case[0]):
        for gpus in counts:
            runs = []
            for repeat in range(repeats):
                runs.append(run_case(out, *case, gpus, repeat))
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "error"}), flush=True)
                if "error" in runs[-1]:
                    print(runs[-1]["error"], flush=True)
                    break
            rows.append(combined(runs))
    for row in rows:
        base = next((r for r in rows if r["case"] == row["case"] and r["gpus"] == 1), None)
        if base and "env_steps_per_s" in base and "env_steps_per_s" in row:
            row["efficiency"] = row["env_steps_per_s"] / (row["gpus"] * base["env_steps_per_s"])
    report = {"device": torch.cuda.get_device_name(), "gpus": torch.cuda.device_count(), "rows": rows}
    report["date"] = time.strftime("%Y-%m-%d")
    (out / "multi_gpu_scaling.json").write_text(json.dumps(report, indent=2))
    print(f"{'case':<66} {'GPUs':>4} {'env steps/s':>14} {'efficiency':>10}")
    for row in rows:
        rate = f"{row['env_steps_per_s']:,.0f}" if "env_steps_per_s" in row else "failed"
        efficiency = f"{row['efficiency']:.1%}" if "efficiency" in row else ""
        print(f"{row['case']:<66} {row['gpus']:>4} {rate:>14} {efficiency:>10}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out_dir")
    parser.add_argument("counts", nargs="*", type=int, help="GPU counts (default: 1 and every GPU)")
    parser.add_argument("--only", default="", help="only the cases whose name holds this text")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each case and count (median)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    main(args.out_dir, args.counts or sorted({1, torch.cuda.device_count()}), args.only, args.repeats)
