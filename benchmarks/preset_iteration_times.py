"""Wall time of each of the first iterations of `warpsci train CartPole-v1`'s preset (32 x 64), in a
fresh process: where the time to solve goes (compilation, capture, steady state).

    python benchmarks/preset_iteration_times.py [--no-fused-mlp] [--iterations 40]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from warpsci.algorithms import make_trainer
from warpsci.cli import preset
from warpsci.config import TrainConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-fused-mlp", action="store_true")
    parser.add_argument("--iterations", type=int, default=40, help="at least 6")
    args = parser.parse_args()
    if args.iterations < 6:
        parser.error("--iterations must be at least 6 (5 first ones, then the median of the rest)")
    config = TrainConfig.from_dict(
        {**preset("CartPole-v1"), "device": "cuda", "checkpoint_every": 0, "fused_mlp": not args.no_fused_mlp}
    )
    trainer = make_trainer(config)
    trainer.env.reset()
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        trainer.rollout_and_advantages()
        trainer.run_update()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    print(
        f"fused={not args.no_fused_mlp}: first iterations (ms) {[round(t, 1) for t in times[:5]]}, "
        f"median of the rest {statistics.median(times[5:]):.2f} ms"
    )


if __name__ == "__main__":
    main()
