"""The fused MLP kernels (``warpsci.fused_mlp``) against PyTorch, through Triton's interpreter on the
CPU (the checks live in ``fused_mlp_checks.py``); on a GPU, also compiled."""

from __future__ import annotations

import importlib.util
import textwrap

import fused_mlp_checks
import pytest
import torch
from fresh_interpreter import run_script

from warpsci.fused_mlp import can_fuse
from warpsci.networks import mlp

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton")


@needs_triton
@pytest.mark.parametrize("check", [check.__name__ for check in fused_mlp_checks.CHECKS])
def test_under_the_triton_interpreter(check):
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, "tests")
        import fused_mlp_checks
        fused_mlp_checks.{check}()
        """
    )
    completed = run_script(script, timeout=600, TRITON_INTERPRET="1")
    assert completed.returncode == 0, completed.stderr[-4000:]


def test_not_fused_on_the_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not can_fuse(mlp(6, (8, 8), 2, 1.0), torch.randn(4, 6))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_compiled_kernels_on_the_gpu():
    """The compiled kernels (full float32 products) against float64, and the ActorCritic on CUDA."""
    from warpsci.fused_mlp import fused_mlp

    net = mlp(6, (32, 32), 5, 1.0).cuda()
    x = torch.randn(5000, 6, device="cuda")
    assert can_fuse(net, x)
    out = fused_mlp(net, x, precision="ieee")
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    reference = net.double()
    reference.zero_grad()
    expected = reference(x.double())
    (expected * weights.double()).sum().backward()
    assert ((out.double() - expected).norm() / expected.norm()).item() < 1e-5
    for grad, parameter in zip(grads, reference.parameters(), strict=True):
        assert ((grad.double() - parameter.grad).norm() / parameter.grad.norm()).item() < 1e-5
