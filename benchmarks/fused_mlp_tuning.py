"""Launch settings of the fused MLP kernels (warpsci/mlp_kernels.py) on one GPU: rows per program,
warps per program, pipeline stages and (backward) programs per SM, against PyTorch's layers.
Medians of ``triton.testing.do_bench``.

    python benchmarks/fused_mlp_tuning.py [--rows 16384 2097152] [--shapes 4x64x2 4x64x1] [--compare]

Shapes are ``IN x HIDDEN x OUT`` (two hidden layers of HIDDEN; default the Cartpole actor and critic);
``--compare`` times only the named settings of ``warpsci.fused_mlp`` (``NARROW``, which were every
width's until 2026-11-25, ``WIDE`` and ``SMALLEST``), with the backward pass's 2 programs per SM.
"""

from __future__ import annotations

import argparse
import itertools

import torch
import triton
from torch import nn

from warpsci import mlp_kernels
from warpsci.fused_mlp import NARROW, SMALLEST, WIDE, LaunchSettings, _padded, fused_mlp
from warpsci.networks import mlp

NAMED = {"NARROW": NARROW, "WIDE": WIDE, "SMALLEST": SMALLEST}


def forward_key(settings: LaunchSettings) -> tuple[int, int, int]:
    return (settings.forward_rows, settings.warps, 3)  # Triton's default stages (no loop to pipeline)


def backward_key(settings: LaunchSettings) -> tuple[int, int, int, int]:
    return (settings.backward_rows, settings.warps, settings.backward_stages, 2)


def forward_time(net, x, block: int, warps: int, stages: int) -> float:
    first, second, third = net[0], net[2], net[4]
    hidden = first.out_features
    out = torch.empty((x.shape[0], third.out_features), device="cuda")
    pads = [_padded(v) for v in (x.shape[1], hidden, hidden, third.out_features)]

    def launch():
        mlp_kernels.forward[(triton.cdiv(x.shape[0], block),)](
            x, first.weight, first.bias, second.weight, second.bias, third.weight, third.bias, out,
            x.shape[0], x.shape[1], hidden, hidden, third.out_features, *pads, block, "tf32_rounded",
            num_warps=warps, num_stages=stages,
        )  # fmt: skip

    try:
        return triton.testing.do_bench(launch, return_mode="median") * 1e3
    except triton.runtime.errors.OutOfResources:
        return float("inf")  # does not fit the SM's shared memory


def backward_time(net, x, block: int, warps: int, stages: int, per_sm: int) -> float:
    first, second, third = net[0], net[2], net[4]
    hidden = first.out_features
    grad = torch.randn((x.shape[0], third.out_features), device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs = min(triton.cdiv(x.shape[0], block), per_sm * sms)
    width = sum(p.numel() for p in net.parameters())
    partial = torch.empty((programs, width), device="cuda")
    pads = [_padded(v) for v in (x.shape[1], hidden, hidden, third.out_features)]

    def launch():
        mlp_kernels.backward[(programs,)](
            x, grad, first.weight, first.bias, second.weight, second.bias, third.weight, partial,
            x.shape[0], width, x.shape[1], hidden, hidden, third.out_features, *pads, block, "tf32_rounded",
            num_warps=warps, num_stages=stages,
        )  # fmt: skip
        partial.sum(dim=0)

    try:
        return triton.testing.do_bench(launch, return_mode="median") * 1e3
    except triton.runtime.errors.OutOfResources:
        return float("inf")  # does not fit the SM's shared memory


def step_time(net: nn.Sequential, x: torch.Tensor, fused: bool) -> float:
    """Forward and weight gradients of ``net`` on ``x``, microseconds."""
    weights = list(net.parameters())

    def step():
        y = fused_mlp(net, x) if fused else net(x)
        torch.autograd.grad(y.sum(), weights)

    return triton.testing.do_bench(step, return_mode="median") * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", nargs="+", type=int, default=[16_384, 2_097_152])
    parser.add_argument("--shapes", nargs="+", default=["4x64x2", "4x64x1"])
    parser.add_argument("--compare", action="store_true", help="the named settings only")
    args = parser.parse_args()
    torch.set_float32_matmul_precision("high")
    print(torch.cuda.get_device_name(), torch.__version__, "triton", triton.__version__)
    for rows, shape in itertools.product(args.rows, args.shapes):
        n_in, hidden, n_out = (int(v) for v in shape.split("x"))
        net = mlp(n_in, (hidden, hidden), n_out, out_gain=1.0).cuda()
        x = torch.randn(rows, n_in, device="cuda")
        base, fused = step_time(net, x, fused=False), step_time(net, x, fused=True)
        print(f"rows {rows:>10,} {shape:>8}: fwd+bwd torch {base:9.1f} us, fused as shipped {fused:9.1f} us")
        if args.compare:
            forward = {key: forward_time(net, x, *key) for key in map(forward_key, NAMED.values())}
            backward = {key: backward_time(net, x, *key) for key in map(backward_key, NAMED.values())}
        else:
            forward = {
                key: forward_time(net, x, *key)
                for key in itertools.product((64, 128, 256), (2, 4, 8), (1, 2, 3))
            }
            backward = {
                key: backward_time(net, x, *key)
                for key in itertools.product((32, 64, 128), (2, 4, 8), (1, 3), (1, 2, 4, 8))
            }
        for name, times, key in (
            ("forward  (rows, warps, stages)", forward, forward_key),
            ("backward (rows, warps, stages, per SM)", backward, backward_key),
        ):
            named = ", ".join(
                f"{label} {times.get(key(settings), float('nan')):.1f}" for label, settings in NAMED.items()
            )
            best = sorted(times.items(), key=lambda item: item[1])[:4]
            print(f"  {name} us: {named}; best", ", ".join(f"{k} {v:.1f}" for k, v in best), flush=True)


if __name__ == "__main__":
    main()
