"""Worker for tests/test_distributed.py, launched by torchrun: ``python -m torch.distributed.run
--nproc-per-node 2 tests/distributed_worker.py MODE RUN_DIR``.

Modes:
  die      train CartPole on the CPU; rank 1 dies (os._exit) after its second iteration.
  diverge  check that ``modules_in_sync`` sees equal weights as equal, and one bit changed on
           rank 1 as different; prints ``in_sync_before=... in_sync_after=...``.
  average  average gradients that are views of one buffer (averaged in place) and gradients that
           are not (gathered and copied back); prints ``rank=R span=[...] separate=[...]
           aliased=True|False in_place=True|False`` (in_place: the views' average gathered nothing).
"""

from __future__ import annotations

import os
import sys

import torch

from warpsci import distributed
from warpsci.algorithms import make_trainer
from warpsci.config import TrainConfig


def die(run_dir: str) -> None:
    config = TrainConfig(
        env_id="CartPole-v1", device="cpu", num_envs=8, num_steps=16, total_timesteps=8 * 16 * 1000
    )
    trainer = make_trainer(config, run_dir)

    def on_iteration(metrics: dict) -> None:
        if trainer.processes.rank == 1 and metrics["iteration"] == 2:
            os._exit(3)

    trainer.train(on_iteration=on_iteration)


def diverge() -> None:
    processes = distributed.setup("cpu")
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 3)
    before = processes.modules_in_sync([module])
    if processes.rank == 1:
        with torch.no_grad():
            weight = module.weight.view(-1)
            weight[0] = torch.nextafter(weight[0], torch.tensor(2.0))
    after = processes.modules_in_sync([module])
    print(f"rank={processes.rank} in_sync_before={before} in_sync_after={after}", flush=True)
    distributed.shutdown()


def average() -> None:
    processes = distributed.setup("cpu")
    rank = processes.rank
    # The fused loss's layout: both networks' gradients back to back in one buffer.
    buffer = torch.arange(7, dtype=torch.float32) * (rank + 1)
    views = [torch.nn.Parameter(torch.zeros(shape)) for shape in ((2, 2), (3,))]
    for parameter, grad in zip(views, buffer.split([4, 3]), strict=True):
        parameter.grad = grad.view(parameter.shape)
    separate = [torch.nn.Parameter(torch.zeros(2)) for _ in range(2)]
    for index, parameter in enumerate(separate):
        parameter.grad = torch.full((2,), float(10 * rank + index))
    gathered = []
    concatenate = torch.cat
    torch.cat = lambda *args, **kwargs: gathered.append(True) or concatenate(*args, **kwargs)
    processes.average_gradients(views)
    in_place = not gathered
    torch.cat = concatenate
    processes.average_gradients(separate)
    aliased = all(p.grad.data_ptr() == g.data_ptr() for p, g in zip(views, buffer.split([4, 3]), strict=True))
    flat = [round(v, 3) for p in separate for v in p.grad.tolist()]
    span = [round(v, 3) for v in buffer.tolist()]
    print(f"rank={rank} span={span} separate={flat} aliased={aliased} in_place={in_place}", flush=True)
    distributed.shutdown()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "die":
        die(sys.argv[2])
    elif mode == "diverge":
        diverge()
    elif mode == "average":
        average()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
