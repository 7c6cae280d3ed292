"""Every registered environment on a GPU: real-GPU parity with the CPU kernels, and env-only throughput.

    python benchmarks/classic_suite.py OUT_DIR [--sizes 10000 1000000] [--repeats 5]

Parity: ``warpsci.testing.check_parity`` on the GPU (1024 environments, 300 steps, episodes cut at
50 steps so that every environment resets several times). Throughput: ``warpsci.bench.bench_env``
(uniform random actions sampled on the device each step; median of the repeats). Writes
OUT_DIR/parity.csv and OUT_DIR/env_throughput.csv and prints both tables.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
from pathlib import Path

import torch

from warpsci.bench import bench_env
from warpsci.envs import BUILTIN_ENVIRONMENTS
from warpsci.testing import check_parity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    env_ids = [definition.name for definition in BUILTIN_ENVIRONMENTS]
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")

    parity_rows = []
    for env_id in env_ids:
        report = check_parity(
            env_id,
            num_envs=1024,
            steps=300,
            params={"max_episode_steps": 50},
            threads_per_block=128,
            raise_on_failure=False,
        )
        row = dataclasses.asdict(report)
        row["divergence"] = str(report.divergence) if report.divergence else ""
        parity_rows.append(row)
        print(
            f"parity {env_id:<26} {report.backend:<8} max |diff| {report.max_abs_diff:.2e} "
            f"episodes {report.episodes_ended:>7,} divergence: {row['divergence'] or 'none'}",
            flush=True,
        )
    with (out / "parity.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, list(parity_rows[0]))
        writer.writeheader()
        writer.writerows(parity_rows)

    rows = []
    for env_id in env_ids:
        for size in args.sizes:
            steps = max(50, min(1000, 2_000_000_000 // (size * 200)))
            result = bench_env(env_id, size, "cuda", steps=steps, repeats=args.repeats)
            rows.append(
                [
                    env_id,
                    size,
                    steps,
                    f"{result.steps_per_second:.1f}",
                    " ".join(f"{rate:.1f}" for rate in result.repeats),
                ]
            )
            print(
                f"env-only {env_id:<26} {size:>10,} envs {result.steps_per_second:>16,.0f} steps/s",
                flush=True,
            )
    with (out / "env_throughput.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_id", "num_envs", "steps_per_repeat", "steps_per_second_median", "repeats"])
        writer.writerows(rows)


if __name__ == "__main__":
    main()
