"""Gradient averaging over GPUs, two ways (issue 15): DistributedDataParallel against the one
all-reduce of a flat gradient buffer that warpsci uses, each eagerly and inside a captured CUDA
graph, timed per optimizer step (forward, backward, averaging, clipping, Adam).

Run with torchrun on a host with several GPUs:
    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node 2 benchmarks/gradient_sync.py OUT
Rank 0 prints a table and writes gradient_sync.json. Each figure is the median of five timings of
50 steps (after warm-up). The networks and minibatches are those of the scaling benchmark
(benchmarks/multi_gpu_scaling.py): CartPole's 64x64 PPO on minibatches of 262,144 samples (8,192
environments x 128 steps / 4), and Tag gridworld's shared [32, 32] A2C on its whole rollout of
1,000,000 agent samples (2,000 environments x 5 agents x 100 steps, 21 observations each).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from warpsci.distributed import Processes
from warpsci.networks import ActorCritic

#: name, observation size, actions, hidden sizes, samples per optimizer step.
CASES = [
    ("CartPole-v1 PPO 64x64, 262,144-sample minibatch", 4, 2, (64, 64), 262_144),
    ("TagGridworld-v0 A2C [32, 32], 1,000,000-sample batch", 21, 5, (32, 32), 1_000_000),
]


class Evaluate(nn.Module):
    """``policy.evaluate`` as a module's forward, so that DDP sees the call."""

    def __init__(self, policy: ActorCritic) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.policy.evaluate(obs, actions)


def make_step(case: tuple, mode: str, processes: Processes, device: torch.device) -> Callable[[], None]:
    _, obs_size, num_actions, hidden, samples = case
    torch.manual_seed(0)
    policy = ActorCritic(obs_size, gymnasium.spaces.Discrete(num_actions), hidden).to(device)
    module: nn.Module = Evaluate(policy)
    if mode.startswith("ddp"):
        static = mode == "ddp_static"
        module = DistributedDataParallel(module, device_ids=[device.index], static_graph=static)
    optimizer = torch.optim.Adam(
        policy.parameters(), lr=torch.tensor(3e-4, device=device), eps=1e-5, capturable=True, fused=True
    )
    generator = torch.Generator(device=device).manual_seed(processes.rank)
    obs = torch.randn(samples, obs_size, device=device, generator=generator)
    actions = torch.randint(0, num_actions, (samples,), device=device, generator=generator)
    advantages = torch.randn(samples, device=device, generator=generator)
    returns = torch.randn(samples, device=device, generator=generator)
    parameters = list(policy.parameters())

    def step() -> None:
        optimizer.zero_grad(set_to_none=False)
        log_prob, entropy, value = module(obs, actions)
        loss = -(log_prob * advantages).mean() - 0.01 * entropy.mean() + 0.5 * ((value - returns) ** 2).mean()
        loss.backward()
        if mode == "flat":
            processes.average_gradients(parameters)
        nn.utils.clip_grad_norm_(parameters, 0.5)
        optimizer.step()

    return step


def captured(step: Callable[[], None], device: torch.device) -> Callable[[], None]:
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(11):  # DDP asks for 11 eager iterations before capture
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def time_per_step(run: Callable[[], None], device: torch.device, steps: int = 50) -> float:
    for _ in range(10):
        run()
    timings = []
    for _ in range(5):
        dist.barrier()
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(steps):
            run()
        torch.cuda.synchronize(device)
        timings.append((time.perf_counter() - start) / steps * 1e3)
    return statistics.median(timings)


def main(out_dir: str) -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    processes = Processes(dist.get_rank(), dist.get_world_size(), local_rank)
    rows = []
    for case in CASES:
        for mode, graph in [
            ("none", False),
            ("flat", False),
            ("ddp", False),
            ("none", True),
            ("flat", True),
            ("ddp", True),
            ("ddp_static", True),
        ]:
            row = {"case": case[0], "averaging": mode, "cuda_graph": graph}
            try:
                step = make_step(case, mode, processes, device)
                row["ms_per_step"] = time_per_step(captured(step, device) if graph else step, device)
            except Exception as error:  # noqa: BLE001 - a mode that cannot run is a result too
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            rows.append(row)
            if processes.is_main:
                print(json.dumps(row), flush=True)
    if processes.is_main:
        report = {
            "device": torch.cuda.get_device_name(device),
            "processes": processes.world_size,
            "date": time.strftime("%Y-%m-%d"),
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "rows": rows,
        }
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "gradient_sync.json").write_text(json.dumps(report, indent=2))
        print(f"{'case':<54} {'averaging':>10} {'graph':>5} {'ms/step':>9}")
        for row in rows:
            cell = f"{row['ms_per_step']:.3f}" if "ms_per_step" in row else "failed"
            print(f"{row['case']:<54} {row['averaging']:>10} {row['cuda_graph']!s:>5} {cell:>9}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
