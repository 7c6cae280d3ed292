"""Where a training iteration's wall time goes besides GPU work: the GPU's idle gaps inside the
real training loop (``trainer.train``), and the kernels launched outside the captured graphs.

    python benchmarks/iteration_gaps.py OUT_DIR [--envs 2048] [--env CartPole-v1] [--algo ppo]

Runs 8 iterations, profiles iterations 5-7 with ``torch.profiler`` (CPU and CUDA), and prints:
the window's wall time, the GPU's busy time (union of kernel and copy intervals), the gaps over
5 us with the CPU operation running when each began, and eager kernels by name. Writes
``gaps.txt`` and the Chrome trace ``trace.json.gz``.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import shutil
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from warpsci.algorithms import make_trainer
from warpsci.config import TrainConfig


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out_dir")
    parser.add_argument("--envs", type=int, default=2048)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--algo", default="ppo")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = TrainConfig(
        env_id=args.env,
        algo=args.algo,
        device="cuda",
        num_envs=args.envs,
        num_steps=128,
        total_timesteps=args.envs * 128 * 8,
        checkpoint_every=0,
    )
    trainer = make_trainer(config)
    profiler = profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=torch.profiler.schedule(wait=4, warmup=1, active=3, repeat=1),
    )
    rates = []

    def on_iteration(metrics: dict) -> None:
        rates.append(metrics["charts/SPS_iteration"])
        profiler.step()

    with profiler:
        trainer.train(on_iteration=on_iteration)
    trace = out / "trace.json"
    profiler.export_chrome_trace(str(trace))
    with trace.open() as handle:
        events = json.load(handle)["traceEvents"]
    with trace.open("rb") as source, gzip.open(out / "trace.json.gz", "wb") as target:
        shutil.copyfileobj(source, target)
    trace.unlink()
    gpu = sorted(
        (e["ts"], e["ts"] + e["dur"], e["name"], e.get("args", {}).get("correlation"))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    cpu = sorted(
        (e["ts"], e["ts"] + e["dur"], e["name"])
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "python_function", "user_annotation")
    )
    launches = {
        e.get("args", {}).get("correlation"): e["name"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
    }
    lines = [f"SPS_iteration of the 8 iterations: {[round(r / 1e6, 2) for r in rates]} M"]
    start, end = gpu[0][0], gpu[-1][1]
    busy, reach = 0.0, start
    gaps = []
    for begin, finish, name, _ in gpu:
        if begin > reach:
            gaps.append((begin - reach, reach, name))
        busy += max(0.0, finish - max(begin, reach))
        reach = max(reach, finish)
    lines.append(
        f"window {(end - start) / 1e3:.3f} ms, GPU busy {busy / 1e3:.3f} ms, "
        f"idle {(end - start - busy) / 1e3:.3f} ms"
    )
    lines.append("gaps over 5 us (us, CPU operation running at the gap's start, the next GPU work):")
    for length, at, name in sorted(gaps, reverse=True)[:40]:
        if length < 5:
            break
        running = [c for c in cpu if c[0] <= at <= c[1]]
        label = running[-1][2][:60] if running else "-"
        lines.append(f"  {length:9.1f}  {label:<60}  {name[:60]}")
    eager = collections.Counter(
        name[:90] for _, _, name, corr in gpu if launches.get(corr) not in ("cudaGraphLaunch", None)
    )
    in_graphs = sum(1 for _, _, _, corr in gpu if launches.get(corr) == "cudaGraphLaunch")
    lines.append(f"GPU work from graph launches: {in_graphs}; launched eagerly: {sum(eager.values())}")
    for name, count in eager.most_common(40):
        lines.append(f"  {count:5d}  {name}")
    lines += time_parts(trainer)
    text = "\n".join(lines)
    print(text)
    (out / "gaps.txt").write_text(text + "\n")


def time_parts(trainer) -> list[str]:
    """GPU time of the iteration's small parts on their own (CUDA events around 50 graph replays
    of each part captured alone, median of 5), in microseconds."""
    learner = trainer.learners[0]
    parameters = list(learner.policy.parameters())
    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)

    def gradient_step() -> None:
        trainer.gradient_step(learner, None)

    parts = {
        "clip + optimizer step": gradient_step,
        "health flags": trainer.health_flags,
        "episode statistics": trainer.episode_statistics,
        "explained variance": trainer.explained_variance,
        "advantages (critic, bootstrap, GAE)": lambda: trainer.compute_advantages(learner=learner),
    }
    lines = ["parts on their own, graph-replayed (us, median of 5 x 50 replays):"]
    for name, work in parts.items():
        try:
            lines.append(f"  {time_alone(work):8.1f}  {name}")
        except RuntimeError as error:
            lines.append(f"  {'-':>8}  {name}: {str(error).splitlines()[0][:100]}")
    return lines


def time_alone(work) -> float:
    """Microseconds of GPU time of ``work`` captured alone (median of 5 x 50 replays)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            work()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        work()
    times = []
    for _ in range(5):
        begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(50):
            graph.replay()
        finish.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(finish) * 1e3 / 50)
    return sorted(times)[2]


if __name__ == "__main__":
    main()
