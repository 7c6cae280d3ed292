"""Issue 4's GPU session: env-only throughput with several steps per launch, end-to-end PPO with the
fused rollout kernels, where PPO's time goes (CUDA events and torch.profiler), and the time to solve
Cartpole from process start for candidate presets.

    python benchmarks/throughput_session.py OUT_DIR [--quick]

Writes ``OUT_DIR/env.csv``, ``train.csv``, ``phases.csv``, ``time_to_target.csv``, the profiler
tables ``profile_<N>.txt``, and prints a short table of each. Figures are medians of 5 repeats.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import warpsci
from warpsci.bench import bench_env, bench_train
from warpsci.config import TrainConfig
from warpsci.ppo import PPOTrainer

#: Candidate Cartpole settings for the time-to-solve run: (name, overrides of the packaged preset).
CANDIDATES = [
    ("preset-32x64", {}),
    ("64x64", {"num_envs": 64, "num_steps": 64, "total_timesteps": 600_000}),
    ("128x32", {"num_envs": 128, "num_steps": 32, "total_timesteps": 600_000}),
    ("256x32", {"num_envs": 256, "num_steps": 32, "total_timesteps": 1_000_000}),
    ("256x16", {"num_envs": 256, "num_steps": 16, "total_timesteps": 600_000}),
    ("512x16", {"num_envs": 512, "num_steps": 16, "total_timesteps": 1_000_000}),
]


#: Names of the candidates to run (``--candidates``); empty runs all.
CHOSEN_CANDIDATES: list[str] = []


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


#: ``--compile-modes``: which of eager-loss (False) and compiled-loss (True) training to measure.
COMPILE_MODES: list[bool] = [False]
#: ``--short``: env part only at 10K, 100K and 1M with 1000 steps per launch, graph-replayed.
SHORT = False


def env_only(out: Path, quick: bool) -> None:
    rows = []
    plans = [
        # (num_envs, steps per repeat, steps per launch, capture)
        (10_000, 1000, 1, True),
        (10_000, 1000, 100, False),
        (10_000, 1000, 1000, False),
        (10_000, 1000, 100, True),
        (10_000, 1000, 1000, True),
        (100_000, 1000, 1000, False),
        (1_000_000, 50, 1, True),
        (1_000_000, 1000, 100, False),
        (1_000_000, 1000, 1000, False),
        (1_000_000, 1000, 1000, True),
    ]
    if SHORT:
        plans = [(n, 1000, 1000, True) for n in (10_000, 100_000, 1_000_000)]
    for num_envs, steps, per_launch, capture in plans[:3] if quick else plans:
        result = bench_env(
            "CartPole-v1", num_envs, "cuda", steps=steps, capture=capture, steps_per_launch=per_launch
        )
        rows.append(
            {
                "num_envs": num_envs,
                "steps_per_launch": per_launch,
                "graph": capture,
                "steps_per_s": round(result.steps_per_second),
                "repeats": " ".join(f"{rate:.4g}" for rate in result.repeats),
            }
        )
        print(
            f"env  {num_envs:>9,}  x{per_launch:<5} graph={capture!s:<5} "
            f"{result.steps_per_second / 1e9:8.2f} G/s"
        )
    for threads in () if SHORT else (64, 256, 512):
        result = bench_env(
            "CartPole-v1", 1_000_000, "cuda", steps=1000, steps_per_launch=1000, threads_per_block=threads
        )
        rows.append(
            {
                "num_envs": 1_000_000,
                "steps_per_launch": 1000,
                "graph": False,
                "steps_per_s": round(result.steps_per_second),
                "repeats": f"threads_per_block={threads}",
            }
        )
        print(f"env  1,000,000  x1000  threads={threads:<4} {result.steps_per_second / 1e9:8.2f} G/s")
    write_csv(out / "env.csv", rows)


def training(out: Path, quick: bool) -> None:
    rows = []
    sizes = [2048, 16384] if quick else [2048, 8192, 16384, 65536, 262144]
    for compile in COMPILE_MODES:
        for num_envs in sizes:
            result = bench_train("CartPole-v1", num_envs, "cuda", iterations=5, compile=compile)
            rows.append(
                {"num_envs": num_envs, "compile": compile, "steps_per_s": round(result.steps_per_second)}
            )
            print(f"ppo  {num_envs:>9,}  compile={compile!s:<5} {result.steps_per_second / 1e6:8.1f} M/s")
    write_csv(out / "train.csv", rows)


def phases_and_profile(out: Path, quick: bool) -> None:
    """Rollout+advantages vs update time (CUDA events, graph replay), and a profiler table."""
    rows = []
    for compile, num_envs in [(c, n) for c in COMPILE_MODES for n in ([2048] if quick else [2048, 65536])]:
        config = TrainConfig(
            compile=compile,
            env_id="CartPole-v1",
            device="cuda",
            num_envs=num_envs,
            num_steps=128,
            total_timesteps=num_envs * 128 * 100,
            checkpoint_every=0,
        )
        trainer = PPOTrainer(config)
        trainer.env.reset()
        for _ in range(3):  # warm-up and capture
            trainer.rollout_and_advantages()
            trainer.run_update()
        torch.cuda.synchronize()
        rollout_ms, update_ms = [], []
        for _ in range(5):
            events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            events[0].record()
            trainer.rollout_and_advantages()
            events[1].record()
            trainer.run_update()
            events[2].record()
            torch.cuda.synchronize()
            rollout_ms.append(events[0].elapsed_time(events[1]))
            update_ms.append(events[1].elapsed_time(events[2]))
        rollout, update = statistics.median(rollout_ms), statistics.median(update_ms)
        rows.append(
            {
                "num_envs": num_envs,
                "compile": compile,
                "rollout_and_advantages_ms": rollout,
                "update_ms": update,
            }
        )
        print(
            f"phases {num_envs:>7,} compile={compile!s:<5}: "
            f"rollout+advantages {rollout:7.2f} ms, update {update:7.2f} ms"
        )

        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
            trainer.rollout_and_advantages()
            trainer.run_update()
            torch.cuda.synchronize()
        table = profiler.key_averages().table(
            sort_by="cuda_time_total", row_limit=25, max_name_column_width=60
        )
        (out / f"profile_{num_envs}{'_compiled' if compile else ''}.txt").write_text(table)
        kernels = [
            event for event in profiler.events() if event.device_type == torch.autograd.DeviceType.CUDA
        ]
        print(f"  profiler: {len(kernels)} GPU kernels per iteration")
    write_csv(out / "phases.csv", rows)


def time_to_target(out: Path, quick: bool) -> None:
    rows = []
    repeats = 1 if quick else 3
    warm = subprocess.run(  # fills the kernel cache, as any earlier run on the machine would
        [
            sys.executable,
            "-m",
            "warpsci.cli",
            "train",
            "CartPole-v1",
            "--device",
            "cuda",
            "--total-steps",
            "4096",
            "--eval-episodes",
            "0",
            "--no-progress",
            "--run-dir",
            str(out / "runs" / "warm"),
        ],
        capture_output=True,
        text=True,
    )
    print("cold run (compiles and caches):", "ok" if warm.returncode == 0 else warm.stderr[-2000:])
    chosen = [
        (name, overrides)
        for name, overrides in CANDIDATES
        if name in CHOSEN_CANDIDATES or not CHOSEN_CANDIDATES
    ]
    for name, overrides in chosen[:2] if quick else chosen:
        config_path = out / f"{name}.yaml"
        config_path.write_text(json.dumps(overrides))  # JSON is YAML
        for repeat in range(repeats):
            run_dir = out / "runs" / f"{name}-{repeat}"
            command = [
                sys.executable,
                "-m",
                "warpsci.cli",
                "train",
                "CartPole-v1",
                "--device",
                "cuda",
                "--target-return",
                "475",
                "--eval-episodes",
                "0",
                "--no-progress",
                "--seed",
                str(1 + repeat),
                "--run-dir",
                str(run_dir),
            ]
            if overrides:
                command += ["--config", str(config_path)]
            start = time.perf_counter()
            completed = subprocess.run(command, capture_output=True, text=True)
            wall = time.perf_counter() - start
            if completed.returncode != 0:
                print(name, "failed:", completed.stderr[-1500:])
                continue
            summary = json.loads((run_dir / "summary.json").read_text())
            rows.append(
                {
                    "candidate": name,
                    "seed": 1 + repeat,
                    "process_wall_s": round(wall, 3),
                    "time_to_target_s": summary.get("time_to_target_s"),
                    "train_wall_time_s": summary["train_wall_time_s"],
                    "solved_at_step": summary.get("solved_at_step"),
                }
            )
            print(
                f"solve {name:<13} seed {1 + repeat}: process {wall:6.2f} s, to target "
                f"{summary.get('time_to_target_s')} s, training {summary['train_wall_time_s']} s, "
                f"solved at {summary.get('solved_at_step')}"
            )
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import warpsci.cli, warpsci.trainer, torch; torch.zeros(1).cuda()"]
    )
    print(f"imports + CUDA context: {time.perf_counter() - start:.2f} s")
    write_csv(out / "time_to_target.csv", rows)


STARTUP_PROBE = """
import time
start = time.perf_counter()
def mark(name):
    print(f"  {name:<34}{time.perf_counter() - start:7.2f} s", flush=True)
import torch; mark("import torch")
from numba import cuda; mark("import numba.cuda")
import warpsci, warpsci.cli, warpsci.trainer; mark("import warpsci")
torch.zeros(1, device="cuda"); torch.cuda.synchronize(); mark("CUDA context")
from warpsci.config import TrainConfig
from warpsci.cli import preset
config = TrainConfig.from_dict({**preset("CartPole-v1"), "device": "cuda", "checkpoint_every": 0})
trainer = warpsci.trainer.make_trainer(config); trainer.env.reset(); torch.cuda.synchronize()
mark("trainer built, env reset")
for label in ("iteration 1 (warm-up)", "iteration 2 (capture)", "iteration 3 (replay)"):
    trainer.rollout_and_advantages(); trainer.run_update(); torch.cuda.synchronize(); mark(label)
from warpsci.backends.cuda import _compile
from warpsci.envs.cartpole import CARTPOLE
kernels = _compile(CARTPOLE, False)
print("  env kernel cache hits", [sum(k.stats.cache_hits.values()) for k in kernels],
      "misses", [sum(k.stats.cache_misses.values()) for k in kernels])
"""


def startup(out: Path, quick: bool) -> None:
    """Where the seconds before training go, in a fresh process (twice: the first may compile)."""
    for attempt in (1, 2):
        print(f"startup, process {attempt}:")
        subprocess.run([sys.executable, "-c", STARTUP_PROBE])
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import warpsci.cli, warpsci.trainer"],
        capture_output=True,
        text=True,
    )
    lines = [line for line in imports.stderr.splitlines() if line.startswith("import time:")]
    slowest = sorted(lines[1:], key=lambda line: -int(line.split("|")[1]))[:12]
    (out / "importtime.txt").write_text("\n".join(slowest) + "\n")
    print("\n".join(slowest))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out_dir")
    parser.add_argument("--quick", action="store_true", help="a few sizes only (a smoke test)")
    parser.add_argument("--parts", nargs="+", default=["solve", "env", "train", "phases"])
    parser.add_argument("--candidates", nargs="*", default=[], help="solve: candidate names (default all)")
    parser.add_argument(
        "--compile-modes",
        nargs="+",
        choices=["off", "on"],
        default=["off"],
        help="train and phases: eager loss (off) and/or torch.compile (on)",
    )
    parser.add_argument("--short", action="store_true", help="env: 10K, 100K and 1M at x1000, graph only")
    args = parser.parse_args()
    CHOSEN_CANDIDATES.extend(args.candidates)
    COMPILE_MODES[:] = [mode == "on" for mode in args.compile_modes]
    global SHORT
    SHORT = args.short
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "warpsci", warpsci.__version__)
    parts = {
        "startup": startup,
        "solve": time_to_target,
        "env": env_only,
        "train": training,
        "phases": phases_and_profile,
    }
    for part in args.parts:
        parts[part](out, args.quick)


if __name__ == "__main__":
    main()
