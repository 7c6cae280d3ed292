"""One GPU session: CUDA-vs-CPU parity on a real GPU, the CUDA learning run, and throughput.

Run on a machine with a CUDA GPU:  python benchmarks/gpu_session.py OUT_DIR
Prints a short table; writes logs and CSVs to OUT_DIR.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

import warpsci
from warpsci.bench import bench_env, bench_train
from warpsci.testing.kernel_runner import HostKernelRunner


def parity_on_gpu(num_envs: int = 4096, steps: int = 600, seed: int = 7) -> dict:
    """Step the CUDA kernels and the CPU kernels from identical arrays each step; compare."""
    definition = warpsci.get_definition("CartPole-v1")
    cpu = HostKernelRunner(definition, num_envs, "cpu")
    gpu = HostKernelRunner(definition, num_envs, "cuda")
    cpu.reset(seed)
    gpu.reset(seed)
    worst = {"reset_obs": float(np.abs(cpu.buffers.obs - gpu.buffers.obs).max())}
    rng = np.random.default_rng(seed)
    max_obs_error, flag_mismatches, done_count = 0.0, 0, 0
    for _ in range(steps):
        for host, source in zip(gpu.state, cpu.state, strict=True):
            host[...] = source
        for host, source in zip(gpu.buffers, cpu.buffers, strict=True):
            host[...] = source
        actions = rng.integers(0, 2, size=num_envs).astype(np.int32)
        cpu.step(actions, seed)
        gpu.step(actions, seed)
        max_obs_error = max(max_obs_error, float(np.abs(cpu.buffers.obs - gpu.buffers.obs).max()))
        max_obs_error = max(max_obs_error, float(np.abs(cpu.buffers.final_obs - gpu.buffers.final_obs).max()))
        flag_mismatches += int((cpu.buffers.terminated != gpu.buffers.terminated).sum())
        flag_mismatches += int((cpu.buffers.truncated != gpu.buffers.truncated).sum())
        done_count += int(cpu.buffers.terminated.sum() + cpu.buffers.truncated.sum())
    worst.update(max_obs_error=max_obs_error, flag_mismatches=flag_mismatches, episodes_ended=done_count)
    return worst


def vector_env_matches_cpu(num_envs: int = 1024, steps: int = 200, seed: int = 3) -> float:
    """Public API on cuda vs cpu with the same seed and actions: max observation difference."""
    cuda_env = warpsci.make("CartPole-v1", num_envs=num_envs, device="cuda", seed=seed)
    cpu_env = warpsci.make("CartPole-v1", num_envs=num_envs, device="cpu", seed=seed)
    cuda_obs, _ = cuda_env.reset()
    cpu_obs, _ = cpu_env.reset()
    worst = float((cuda_obs.cpu() - cpu_obs).abs().max())
    for _ in range(steps):
        # Act on the CPU observation in both, so tiny float differences cannot change actions.
        actions = (cpu_obs[:, 2] + 0.3 * cpu_obs[:, 3] > 0).to(torch.int64)
        cuda_obs, *_ = cuda_env.step(actions.cuda())
        cpu_obs, *_ = cpu_env.step(actions)
        worst = max(worst, float((cuda_obs.cpu() - cpu_obs).abs().max()))
    return worst


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "gpu_out")
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d")}

    report["parity"] = parity_on_gpu()
    report["vector_env_max_obs_diff"] = vector_env_matches_cpu()
    print("parity", json.dumps(report["parity"]), "vector env", report["vector_env_max_obs_diff"], flush=True)

    start = time.perf_counter()
    train = subprocess.run(
        [
            sys.executable,
            "-m",
            "warpsci.cli",
            "train",
            "CartPole-v1",
            "--device",
            "cuda",
            "--no-progress",
            "--run-dir",
            str(out / "run_cuda"),
        ],
        capture_output=True,
        text=True,
    )
    (out / "train_cuda.log").write_text(train.stdout + train.stderr)
    report["train_cuda"] = {"rc": train.returncode, "wall_s": round(time.perf_counter() - start, 1)}
    summary = out / "run_cuda" / "summary.json"
    if summary.exists():
        report["train_cuda"].update(json.loads(summary.read_text()))
    print("train", json.dumps(report["train_cuda"]), flush=True)

    rows = []
    for num_envs in (1_000, 10_000, 100_000, 1_000_000):
        env_result = bench_env(
            "CartPole-v1", num_envs, "cuda", steps=1000 if num_envs < 1_000_000 else 200, repeats=5
        )
        rows.append(env_result)
        print(f"env   {num_envs:>9,d} {env_result.steps_per_second:>16,.0f}", flush=True)
    for num_envs, num_steps in ((1_000, 128), (10_000, 128), (100_000, 128), (1_000_000, 32)):
        try:
            train_result = bench_train("CartPole-v1", num_envs, "cuda", num_steps=num_steps, iterations=5)
            rows.append(train_result)
            print(
                f"train {num_envs:>9,d} {train_result.steps_per_second:>16,.0f} (num_steps {num_steps})",
                flush=True,
            )
        except torch.cuda.OutOfMemoryError as error:
            print(f"train {num_envs:>9,d} out of memory: {error}", flush=True)
        torch.cuda.empty_cache()
    # What bounds small batches: the step kernel alone (launch from Python), no action sampling.
    env = warpsci.make("CartPole-v1", num_envs=10_000, device="cuda", copy=False, check_actions=False)
    env.reset()
    step_rates = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(1000):
            env.step_in_place()
        torch.cuda.synchronize()
        step_rates.append((time.perf_counter() - start) / 1000 * 1e6)
    report["step_only_us_per_launch_10k"] = sorted(step_rates)[2]
    print(
        f"step kernel alone at 10K envs: {report['step_only_us_per_launch_10k']:.1f} us per step", flush=True
    )

    report["bench"] = [
        {"mode": r.mode, "num_envs": r.num_envs, "steps_per_second": r.steps_per_second, "repeats": r.repeats}
        for r in rows
    ]
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print("\nmode   num_envs   steps/s (median of repeats)")
    for r in rows:
        print(f"{r.mode:<6} {r.num_envs:>9,d} {r.steps_per_second:>16,.0f}")


if __name__ == "__main__":
    main()
