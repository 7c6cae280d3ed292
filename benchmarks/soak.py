"""Soak run (issue 16): ``warpsci train`` for >= 1e9 environment steps on a GPU, with the GPU
memory of the process (nvidia-smi) and its host memory (RSS, /proc) sampled every 2 s. Memory
must not grow after the first iterations.

Run on a machine with a CUDA GPU:  python benchmarks/soak.py OUT_DIR [STEPS]
Writes soak_<env>.csv (time, step, GPU MiB, host MiB) and soak.json, prints a table.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CASES = [
    ("CartPole-v1", ["--num-envs", "65536", "--num-steps", "128"]),
    (
        "TagGridworld-v0",
        [
            "--algo", "a2c", "--num-envs", "2000", "--num-steps", "100", "--hidden-sizes", "32", "32",
            "--shared-policy", "--no-anneal-lr", "--env-params",
            "{num_taggers: 4, grid_length: 100, episode_length: 100, use_full_observation: true}",
        ],
    ),
]  # fmt: skip


def gpu_mib(pid: int) -> float | None:
    query = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        found = subprocess.run(query, capture_output=True, text=True).stdout
    except OSError:
        return None
    for line in found.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 2 and fields[0] == str(pid):
            return float(fields[1])
    return None


def host_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def last_step(progress: Path) -> int:
    try:
        lines = progress.read_text().splitlines()
        return int(float(lines[-1].split(",")[0])) if len(lines) > 1 else 0
    except (OSError, ValueError, IndexError):
        return 0


def soak(out: Path, env_id: str, flags: list[str], steps: int) -> dict:
    run_dir = out / f"run_{env_id}"
    command = [
        sys.executable,
        "-m",
        "warpsci",
        "train",
        env_id,
        "--device",
        os.environ.get("SOAK_DEVICE", "cuda"),
        "--run-dir",
        str(run_dir),
    ]
    command += ["--total-steps", str(steps), "--no-progress", "--checkpoint-every-s", "10", *flags]
    started = time.monotonic()
    log = open(out / f"soak_{env_id}.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
    samples = []
    while process.poll() is None:
        samples.append(
            (
                round(time.monotonic() - started, 1),
                last_step(run_dir / "progress.csv"),
                gpu_mib(process.pid),
                host_mib(process.pid),
            )
        )
        time.sleep(2)
    process.wait()
    log.close()
    with open(out / f"soak_{env_id}.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["seconds", "global_step", "gpu_mib", "host_mib"])
        writer.writerows(samples)
    row: dict = {"env": env_id, "returncode": process.returncode, "wall_s": time.monotonic() - started}
    if process.returncode != 0:
        row["error"] = (out / f"soak_{env_id}.log").read_text()[-1500:]
        return row
    summary = json.loads((run_dir / "summary.json").read_text())
    # "After warm-up": samples once training has logged its third iteration.
    warm = [s for s in samples if s[1] > 0][2:] or samples
    for index, name in ((2, "gpu_mib"), (3, "host_mib")):
        values = [s[index] for s in warm if s[index] is not None]
        if values:
            row[f"{name}_after_warmup"] = values[0]
            row[f"{name}_max"] = max(values)
            row[f"{name}_last"] = values[-1]
    row["global_step"] = summary["global_step"]
    row["train_wall_time_s"] = summary["train_wall_time_s"]
    row["samples"] = len(samples)
    row["checkpoints_kept"] = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    return row


def main(out_dir: str, steps: int) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for env_id, flags in CASES:
        rows.append(soak(out, env_id, flags, steps))
        print(json.dumps(rows[-1]), flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), "steps": steps, "rows": rows}
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True)
        report["device"] = gpu.stdout.decode().strip()
    except OSError:
        report["device"] = "cpu"
    (out / "soak.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(sys.argv[1], int(float(sys.argv[2])) if len(sys.argv) > 2 else 1_000_000_000)
