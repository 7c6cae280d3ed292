"""Worker for tests/test_distributed.py, launched by torchrun: ``python -m torch.distributed.run
--nproc-per-node 2 tests/distributed_worker.py MODE RUN_DIR``.

Modes:
  die      train CartPole on the CPU; rank 1 dies (os._exit) after its second iteration.
  diverge  check that ``modules_in_sync`` sees equal weights as equal, and one bit changed on
           rank 1 as different; prints ``in_sync_before=... in_sync_after=...``.
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


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "die":
        die(sys.argv[2])
    elif mode == "diverge":
        diverge()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
