"""Issue 18 on one GPU: PPO Cartpole end to end (CleanRL's / PureJaxRL's configuration: 64x64 tanh,
128-step rollouts, 4 epochs of 4 minibatches) for several network paths, where an iteration's time
goes (rollout against update), and the time to solve Cartpole from process start against a bare
``import torch; torch.cuda.init()`` in the same call.

    python benchmarks/cartpole_e2e_session.py OUT_DIR [--parts train phases solve]
        [--sizes 2048 65536 262144] [--modes fused layers-compiled ...] [--phase-sizes 2048 65536]
        [--three-launch-rollout] [--autograd-loss] [--solve-rounds 1]

Modes (``MODES``): ``fused`` is the default build (Triton MLP kernels), ``layers`` PyTorch's
layers, ``-compiled`` adds ``TrainConfig.compile``, ``-bf16`` ``TrainConfig.bf16``. Figures are
medians of 5 timed iterations (train), 7 (phases) and 3 seeds / 5 bare imports (solve). The solve
part runs ``warpsci train`` as a user does (the default build; ``--modes`` does not apply). Writes
``train.csv``, ``phases.csv``, ``solve.csv`` and ``profile_2048_<mode>.txt``.
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

from warpsci.bench import bench_train
from warpsci.config import TrainConfig
from warpsci.ppo import PPOTrainer

MODES: dict[str, dict] = {
    "fused": {},
    "fused-compiled": {"compile": True},
    "fused-bf16": {"bf16": True},
    "layers": {"fused_mlp": False},
    "layers-compiled": {"fused_mlp": False, "compile": True},
    "layers-bf16": {"fused_mlp": False, "bf16": True},
    "layers-compiled-bf16": {"fused_mlp": False, "compile": True, "bf16": True},
}


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def train(out: Path, sizes: list[int], modes: list[str]) -> None:
    rows = []
    for mode in modes:
        for num_envs in sizes:
            result = bench_train("CartPole-v1", num_envs, "cuda", iterations=5, overrides=MODES[mode])
            rows.append({"mode": mode, "num_envs": num_envs, "steps_per_s": round(result.steps_per_second)})
            print(
                f"train {mode:<22} {num_envs:>8,} envs {result.steps_per_second / 1e6:8.1f} M steps/s",
                flush=True,
            )
    write_csv(out / "train.csv", rows)


def phases(out: Path, sizes: list[int], modes: list[str]) -> None:
    """Rollout (with advantages) against update, CUDA events over graph replays; a profile at 2K."""
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for mode in modes:
        for num_envs in sizes:
            config = TrainConfig(
                env_id="CartPole-v1",
                device="cuda",
                num_envs=num_envs,
                num_steps=128,
                total_timesteps=num_envs * 128 * 100,
                checkpoint_every=0,
                **MODES[mode],
            )
            trainer = PPOTrainer(config)
            trainer.env.reset()
            for _ in range(3):  # warm-up and capture
                trainer.rollout_and_advantages()
                trainer.run_update()
            rollout_ms, update_ms = [], []
            for _ in range(7):
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
            rate = num_envs * 128 / ((rollout + update) / 1e3)
            rows.append(
                {
                    "mode": mode,
                    "num_envs": num_envs,
                    "rollout_ms": round(rollout, 3),
                    "update_ms": round(update, 3),
                    "steps_per_s": round(rate),
                }
            )
            print(
                f"phases {mode:<22} {num_envs:>8,} envs: rollout {rollout:8.2f} ms, update {update:8.2f} ms"
                f" ({rate / 1e6:.1f} M steps/s)",
                flush=True,
            )
            if num_envs == min(sizes):
                with profile(activities=[ProfilerActivity.CUDA]) as profiler:
                    trainer.rollout_and_advantages()
                    trainer.run_update()
                    torch.cuda.synchronize()
                table = profiler.key_averages().table(sort_by="cuda_time_total", row_limit=30)
                (out / f"profile_{num_envs}_{mode}.txt").write_text(table)
            del trainer
            torch.cuda.empty_cache()
    write_csv(out / "phases.csv", rows)


def bare_torch_start() -> float:
    """Seconds of a fresh ``python -c "import torch; torch.cuda.init()"``."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch; torch.cuda.init()"], check=True)
    return time.perf_counter() - start


def solve(out: Path, seeds: int = 3, rounds: int = 1) -> None:
    """Time to a last-100 mean of 475 from process start (warm kernel cache), and a bare torch start.
    Five bare starts first (their median is the ``warpsci_share_s`` baseline), then ``rounds``
    rounds of seeds 1..``seeds``, each run right after a bare start of its own
    (``paired_share_s``: the share against that one, which follows the host's drift)."""
    common = [
        sys.executable,
        "-m",
        "warpsci.cli",
        "train",
        "CartPole-v1",
        "--device",
        "cuda",
        "--eval-episodes",
        "0",
        "--no-progress",
    ]
    start = time.perf_counter()
    cold = subprocess.run(
        common + ["--total-steps", "4096", "--run-dir", str(out / "runs" / "cold")],
        capture_output=True,
        text=True,
    )
    print(f"solve: first (cold) process {time.perf_counter() - start:.2f} s, rc {cold.returncode}")
    print("\n".join(line for line in cold.stdout.splitlines() if "compil" in line))
    bare = [bare_torch_start() for _ in range(5)]
    bare_s = statistics.median(bare)
    print(
        f"solve: bare `import torch; torch.cuda.init()` median {bare_s:.2f} s",
        "(" + ", ".join(f"{b:.2f}" for b in bare) + ")",
    )
    rows = []
    for round_index in range(rounds):
        for seed in range(1, seeds + 1):
            run_dir = out / "runs" / f"solve-{seed}-{round_index}"
            paired = bare_torch_start()
            start = time.perf_counter()
            done = subprocess.run(
                common + ["--target-return", "475", "--seed", str(seed), "--run-dir", str(run_dir)],
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - start
            if done.returncode != 0:
                print(f"solve round {round_index + 1} seed {seed} failed:", done.stderr[-1500:])
                continue
            summary = json.loads((run_dir / "summary.json").read_text())
            to_target = summary.get("time_to_target_s")
            own = None if to_target is None else round(to_target - bare_s, 2)
            own_paired = None if to_target is None else round(to_target - paired, 2)
            rows.append(
                {
                    "round": round_index + 1,
                    "seed": seed,
                    "process_s": round(wall, 2),
                    "time_to_target_s": to_target,
                    "bare_torch_s": round(bare_s, 2),
                    "warpsci_share_s": own,
                    "paired_bare_s": round(paired, 2),
                    "paired_share_s": own_paired,
                    "train_wall_time_s": summary["train_wall_time_s"],
                    "solved_at_step": summary.get("solved_at_step"),
                }
            )
            print(
                f"solve round {round_index + 1} seed {seed}: process {wall:.2f} s, to target {to_target} s, "
                f"warpsci's share {own} s (against the bare start just before, {paired:.2f} s: "
                f"{own_paired} s), training {summary['train_wall_time_s']} s, "
                f"solved at {summary.get('solved_at_step')}",
                flush=True,
            )
            write_csv(out / "solve.csv", rows)  # after every run: a later failure keeps these
    shares = [row["paired_share_s"] for row in rows if row["paired_share_s"] is not None]
    if shares:
        print(f"solve: paired shares median {statistics.median(shares):.2f} s over {len(shares)} runs")
    write_csv(out / "solve.csv", rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out_dir")
    parser.add_argument("--parts", nargs="+", default=["train", "phases", "solve"])
    parser.add_argument("--solve-rounds", type=int, default=1, help="rounds of seeds 1-3 in the solve part")
    parser.add_argument("--sizes", nargs="+", type=int, default=[2048, 65536, 262144])
    parser.add_argument("--modes", nargs="+", default=["fused", "layers-compiled"], choices=list(MODES))
    parser.add_argument("--phase-sizes", nargs="+", type=int, default=[2048, 65536])
    parser.add_argument(
        "--three-launch-rollout",
        action="store_true",
        help="sample, step and record as three launches a step (as before the one-launch step)",
    )
    parser.add_argument(
        "--autograd-loss",
        action="store_true",
        help="PPO's loss through autograd (as before warpsci.fused_loss), not inside the kernels",
    )
    args = parser.parse_args()
    if args.autograd_loss:
        from warpsci import fused_loss

        fused_loss.settings = lambda *args, **kwargs: None
    if args.three_launch_rollout:
        from warpsci.rollout_kernels import RolloutKernels

        RolloutKernels.fuses_step = property(lambda self: False)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(torch.cuda.get_device_name(), torch.__version__, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    if "train" in args.parts:
        train(out, args.sizes, args.modes)
    if "phases" in args.parts:
        phases(out, args.phase_sizes, args.modes)
    if "solve" in args.parts:
        solve(out, rounds=args.solve_rounds)


if __name__ == "__main__":
    main()
