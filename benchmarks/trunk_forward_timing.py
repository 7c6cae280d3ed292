"""The rollout's forward pass of WarpDrive's shared-trunk network (71 inputs, [256, 256] ReLU, a
42-logit policy head and a value head) over Tag continuous's 2,000 x 110 rows: PyTorch's layers
against the one-launch trunk kernel (``fused_mlp.trunk_and_heads``), each launch setting of
``TRUNK_CANDIDATES``. Run on a CUDA GPU: ``python benchmarks/trunk_forward_timing.py``; prints
microseconds per pass (CUDA events, median of 7 timings of 20 passes), default TF32 precision.
"""

from __future__ import annotations

import statistics

import torch
from torch import nn

from warpsci import fused_mlp


def timed(function, repeats: int = 7, passes: int = 20) -> float:
    function()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(passes):
            function()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / passes)
    return statistics.median(times)


def main() -> None:
    torch.set_float32_matmul_precision("high")
    trunk = nn.Sequential(nn.Linear(71, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU()).cuda()
    heads = (nn.Linear(256, 42).cuda(), nn.Linear(256, 1).cuda())
    x = torch.randn(220_000, 71, device="cuda")
    with torch.no_grad():

        def layers():
            hidden = trunk(x)
            return [head(hidden) for head in heads]

        print(f"trunk forward, PyTorch's layers (TF32): {timed(layers):8.1f} us")
        for settings in fused_mlp.TRUNK_CANDIDATES:
            fused_mlp._CHOSEN.clear()
            original = fused_mlp.TRUNK_CANDIDATES
            fused_mlp.TRUNK_CANDIDATES = (settings,)
            try:
                name = f"trunk forward, kernel {settings.forward_rows} rows, {settings.warps} warps"
                if fused_mlp.trunk_and_heads(trunk, heads, x) is None:
                    print(f"{name}: does not fit")
                    continue
                print(f"{name}: {timed(lambda: fused_mlp.trunk_and_heads(trunk, heads, x)):8.1f} us")
            finally:
                fused_mlp.TRUNK_CANDIDATES = original


if __name__ == "__main__":
    main()
