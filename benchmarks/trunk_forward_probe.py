"""WarpDrive's [256, 256] ReLU trunk with a 42-logit and a value head on Tag continuous's rows
(issue 12, end to end): where its time goes on a GPU, and what two changes give.

1. Rollout passes (no gradients, 220,000 rows: 2,000 x 110): PyTorch's layers against
   ``networks.forward_fusing_relu`` (bias and ReLU in the product's epilogue).
2. Observations 71 wide (k = 10), not a multiple of 4 floats: cuBLAS cannot use its 16-byte-aligned
   Hopper kernels for the first layer. The same passes over rows padded to 72 (a zero column, the
   first layer one input wider), and over a 72-wide buffer's first 71 columns.
3. The update's forward and backward over 2,200,000 rows (A2C, 10 steps), the same widths.

Run on a CUDA machine: python benchmarks/trunk_forward_probe.py. Prints ms per pass, median of 10
after 3 warm-ups (CUDA events), TF32 products as the trainer sets them.
"""

from __future__ import annotations

import statistics

import gymnasium
import torch

from warpsci.networks import ActorCritic, forward_fusing_relu


def timed(function, repeats: int = 10) -> float:
    for _ in range(3):
        function()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def network(width: int) -> ActorCritic:
    space = gymnasium.spaces.MultiDiscrete([11] * 2)
    return ActorCritic(width, space, (256, 256), activation="relu", shared_trunk=True).cuda()


def measure(label: str, width: int, view: bool, rollout_rows: int, update_rows: int) -> None:
    policy = network(width)
    trunk, head = policy.actor[0], policy.actor[1]
    buffer = torch.randn(update_rows, 72 if view else width, device="cuda")
    rows = buffer[:, :width]
    few = rows[:rollout_rows]
    with torch.no_grad():
        layers = timed(lambda: head(trunk(few)))
        fused = timed(lambda: head(forward_fusing_relu(trunk, few)))

    def update() -> None:
        out, value = policy.act_and_value(rows)
        (out.sum() + value.sum()).backward()

    update_ms = timed(update, repeats=5)
    print(f"{label:24s} rollout pass: layers {layers:.3f} ms, fused ReLU {fused:.3f} ms; "
          f"update fwd+bwd {update_ms:.2f} ms", flush=True)  # fmt: skip


def main() -> None:
    torch.set_float32_matmul_precision("high")
    torch.manual_seed(0)
    for label, width, view in (("71 wide", 71, False), ("72 wide (padded)", 72, False),
                               ("71 of a 72-wide buffer", 71, True)):  # fmt: skip
        measure(label, width, view, rollout_rows=220_000, update_rows=2_200_000)


if __name__ == "__main__":
    main()
