"""Launch settings of the PPO loss-head backward kernels (``warpsci.fused_loss``) on a GPU.

    python benchmarks/fused_ppo_tuning.py [--rows 65536 2097152] [--shape 4x64x2]

For each launch setting (rows per tile, pipeline stages, warps, programs per multiprocessor) it
times one PPO minibatch's kernel launch (actor: categorical head, critic: value head; two launches,
one per network, in the figures of 2026-11-25 night in BENCHMARKS.md) over
``rows`` rows drawn from a rollout four times as long, with the minibatch's index random (as
training draws it), sorted, and contiguous; and, for reference, the two plain backward passes
(gradient given) that the autograd loss path runs over the same rows. Medians of
``triton.testing.do_bench``, microseconds; console output.
"""

from __future__ import annotations

import argparse
import functools
import itertools

import torch
import triton.testing
from triton.runtime.errors import OutOfResources

from warpsci.fused_mlp import LaunchSettings, actor_critic_pass, backward_pass
from warpsci.networks import mlp


def loss_heads(obs, rows, weights, tensors, options, settings, index) -> None:
    """One PPO minibatch's kernel launch (actor and critic) over the rows ``index``."""
    actor_critic_pass(obs, rows, *weights, "tf32_rounded", settings, index, tensors, options)


def given(obs, rows, weights, grads, settings) -> None:
    """The two plain backward passes over the first ``rows`` rows (the autograd loss path's)."""
    for network, grad in zip(weights, grads, strict=True):
        backward_pass(obs[:rows], grad, network[:5], "tf32_rounded", settings)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", nargs="+", type=int, default=[65536, 2097152])
    parser.add_argument("--shape", default="4x64x2", help="observation size x hidden width x actions")
    args = parser.parse_args()
    n_in, hidden, n_actions = (int(v) for v in args.shape.split("x"))
    torch.set_float32_matmul_precision("high")
    actor = mlp(n_in, (hidden, hidden), n_actions, 0.01).cuda()
    critic = mlp(n_in, (hidden, hidden), 1, 1.0).cuda()
    weights = [tuple(p.detach() for p in net.parameters()) for net in (actor, critic)]
    print(torch.cuda.get_device_name(), torch.__version__, "triton", triton.__version__, args.shape)
    for rows in args.rows:
        total = 4 * rows
        obs = torch.randn(total, n_in, device="cuda")
        actions = torch.randint(0, n_actions, (total,), device="cuda")
        data = {name: torch.randn(total, device="cuda") for name in ("logp", "adv", "ret", "val")}
        stats, ent_coef = torch.tensor([0.0, 1.0, 1.0], device="cuda"), torch.tensor([0.01], device="cuda")
        tensors = {"actions": actions, "old_log_probs": data["logp"], "advantages": data["adv"],
                   "adv_stats": stats, "ent_coef": ent_coef, "returns": data["ret"],
                   "old_values": data["val"]}  # fmt: skip
        options = {"clip_coef": 0.2, "vf_coef": 0.5, "scale": 1.0 / rows}
        options.update(ratio_low=0.8, ratio_high=1.2, norm_adv=True, ppo=True, clip_vloss=True)
        random_index = torch.randperm(total, device="cuda")[:rows]
        indices = {"random": random_index, "sorted": random_index.sort().values,
                   "contiguous": torch.arange(rows, device="cuda")}  # fmt: skip
        grads = [torch.randn(rows, n, device="cuda") for n in (n_actions, 1)]
        best = None
        for block, stages, warps, per_sm in itertools.product((32, 64), (1, 3), (4, 8), (2, 4)):
            settings = LaunchSettings(64, block, stages, warps, per_sm)
            label = f"rows {rows:>9,} tile {block:>3} stages {stages} warps {warps} per SM {per_sm}:"
            times = {}
            try:
                for kind, index in indices.items():
                    run = functools.partial(loss_heads, obs, rows, weights, tensors, options, settings, index)
                    times[kind] = 1000 * triton.testing.do_bench(run)
                run = functools.partial(given, obs, rows, weights, grads, settings)
                times["given"] = 1000 * triton.testing.do_bench(run)
            except OutOfResources:
                print(label, "does not load")
                continue
            print(label, ", ".join(f"{kind} {value:8.1f}" for kind, value in times.items()), "us")
            if best is None or times["random"] < best[1]["random"]:
                best = (settings, times)
        print(f"best at {rows:,} rows (random index): {best}")


if __name__ == "__main__":
    main()
