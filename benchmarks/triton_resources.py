"""Registers, spills and shared memory of the fused MLP's backward kernels for sm_90, compiled
without a GPU (Triton compiles for a named target; its wheel carries ``cuobjdump``).

    python benchmarks/triton_resources.py

Cartpole's networks (4 inputs, 64 x 64, 2 actions, a value), PPO's loss with clipped values and
normalised advantages, rounded TF32: ``mlp_kernels.actor_critic_backward`` under several launch
settings, and ``mlp_kernels.backward`` with each head. Prints ``cuobjdump --dump-resource-usage``'s
line (``REG``: registers a thread, ``STACK``: bytes a thread, spilled values among them) and the
kernel's shared memory.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from warpsci import mlp_kernels

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
POINTERS_I64 = {"index", "actions"}
INTEGERS = {"rows", "partial_width", "critic_offset", "actor_parts", "critic_parts", "n_in", "n_h1", "n_h2"}
INTEGERS |= {"n_actions", "n_out"}
FLOATS = {"clip_coef", "ratio_low", "ratio_high", "vf_coef", "scale"}
CARTPOLE = dict(IN_P=16, H1_P=64, H2_P=64, OUT_P=16, PRECISION="tf32_rounded", GATHER=True)
PPO = dict(NORM_ADV=True, PPO=True, CLIP_VLOSS=True, WEIGHTED=False)


def signature(kernel, constants: dict) -> dict[str, str]:
    """Triton's signature of ``kernel``: constants as such, pointers, 32-bit integers, floats."""
    types = {}
    for name in inspect.signature(kernel.fn).parameters:
        if name in constants:
            types[name] = "constexpr"
        elif name in INTEGERS:
            types[name] = "i32"
        elif name in FLOATS:
            types[name] = "fp32"
        else:
            types[name] = "*i64" if name in POINTERS_I64 else "*fp32"
    return types


def report(kernel, constants: dict, warps: int, stages: int, label: str) -> None:
    source = ASTSource(fn=kernel, signature=signature(kernel, constants), constexprs=constants)
    compiled = triton.compile(
        source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages}
    )
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        dump = subprocess.run(
            [CUOBJDUMP, "--dump-resource-usage", cubin.name], capture_output=True, text=True
        )
    usage = next((line.strip() for line in dump.stdout.splitlines() if "REG:" in line), dump.stderr[-200:])
    print(f"{label:<58} {usage.split(' TEXTURE')[0]}  shared {compiled.metadata.shared} B", flush=True)


def main() -> None:
    for warps, stages, rows in ((4, 1, 32), (4, 3, 32), (4, 1, 64), (4, 1, 16), (8, 1, 32), (8, 1, 64)):
        constants = dict(CARTPOLE, **PPO, CRITIC_OUT_P=16, BLOCK=rows)
        label = f"actor_critic_backward {rows}-row tiles, {warps} warps, {stages} stage(s)"
        report(mlp_kernels.actor_critic_backward, constants, warps, stages, label)
    for head in ("given", "categorical", "value"):
        constants = dict(CARTPOLE, **PPO, BLOCK=32, HEAD=head)
        report(mlp_kernels.backward, constants, 4, 1, f"backward, head {head}, 32-row tiles, 4 warps")


if __name__ == "__main__":
    main()
