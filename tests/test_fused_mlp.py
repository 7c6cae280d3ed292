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
@pytest.mark.parametrize(
    ("n_in", "hidden", "n_out"),
    [(6, (32, 32), 5), (6, (128, 128), 5), (70, (128, 128), 5), (128, (128, 128), 128)],
)
def test_compiled_kernels_on_the_gpu(n_in, hidden, n_out):
    """The compiled kernels (full float32 products) against float64, up to the widest networks
    ``can_fuse`` takes; where a shape's kernels need more shared memory than the GPU has under every
    launch setting, ``fused_mlp`` runs PyTorch's layers, and the results must hold all the same
    (the backward pass at 128 wide once did not load on an H100)."""
    from warpsci.fused_mlp import fused_mlp

    net = mlp(n_in, hidden, n_out, 1.0).cuda()
    x = torch.randn(5000, n_in, device="cuda")
    assert can_fuse(net, x)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # for PyTorch's layers, where they run instead
    try:
        out = fused_mlp(net, x, precision="ieee")
        weights = torch.randn_like(out)
        (out * weights).sum().backward()
    finally:
        torch.set_float32_matmul_precision(previous)
    grads = [p.grad.clone() for p in net.parameters()]
    reference = net.double()
    reference.zero_grad()
    expected = reference(x.double())
    (expected * weights.double()).sum().backward()
    assert ((out.double() - expected).norm() / expected.norm()).item() < 1e-5
    for grad, parameter in zip(grads, reference.parameters(), strict=True):
        assert ((grad.double() - parameter.grad).norm() / parameter.grad.norm()).item() < 1e-5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("hidden", [(16, 16), (24, 40), (128, 128)])
def test_loss_inside_the_kernels_on_the_gpu(hidden):
    """The compiled loss heads of ``warpsci.fused_loss`` against autograd, float32 products, on a
    minibatch of more rows than the programs' first tiles hold (each program loops), at widths of
    each launch-setting class: every loss option at one width, the defaults at the others (each
    option is a compilation of its own)."""
    previous = torch.get_float32_matmul_precision()
    try:
        fused_mlp_checks.loss_gradients_equal_autograd(
            "cuda", total=60000, minibatch=20011, hidden=hidden, every_option=hidden == (24, 40)
        )
    finally:
        torch.set_float32_matmul_precision(previous)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bf16_products_on_the_gpu():
    """``precision="bf16"`` on the bfloat16 tensor cores: outputs as the float64 emulation that
    rounds each product's operands, bfloat16-sized errors in the gradients, the loss inside the
    kernels as autograd through them."""
    fused_mlp_checks.bf16_products_round_their_operands("cuda")


class _FakeKernels:
    """Stands in for :mod:`warpsci.mlp_kernels`: records each launch's precision and rows per
    program, and refuses to load (as Triton does when a kernel needs more shared memory than the
    device has) for the rows per program in ``too_big``."""

    def __init__(self, too_big: tuple[int, ...] = ()) -> None:
        self.too_big, self.precisions, self.rows = too_big, [], []
        self.forward = self.backward = self

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            from triton.runtime.errors import OutOfResources

            rows_per_program, precision = args[-2], args[-1]
            if rows_per_program in self.too_big:
                raise OutOfResources(300_000, 232_448, "shared memory")
            self.rows.append(rows_per_program)
            self.precisions.append(precision)

        return launch


def test_launch_settings_fall_back_where_a_kernel_does_not_fit(monkeypatch):
    """The first call for a network shape probes the candidates: settings whose kernels do not load
    are skipped; where none loads, the module's own layers run (and give its outputs)."""
    pytest.importorskip("triton")
    import warpsci.fused_mlp as fused_module

    monkeypatch.setattr(fused_module, "_CHOSEN", {})
    monkeypatch.setattr(fused_module, "can_fuse", lambda module, x: True)
    net, x = mlp(4, (64, 64), 2, 1.0), torch.randn(8, 4)
    layers = fused_module.mlp_layers(net)
    weights = (layers[0].weight, layers[1].weight, layers[2].weight)

    kernels = _FakeKernels(too_big=(fused_module.WIDE.forward_rows,))
    monkeypatch.setattr(fused_module, "_kernels", lambda: kernels)
    assert fused_module.chosen_settings(x, *weights, "ieee") == fused_module.SMALLEST

    monkeypatch.setattr(fused_module, "_CHOSEN", {})
    too_big = {s.forward_rows for s in (fused_module.WIDE, fused_module.NARROW, fused_module.SMALLEST)}
    monkeypatch.setattr(fused_module, "_kernels", lambda: _FakeKernels(too_big=tuple(too_big)))
    assert fused_module.chosen_settings(x, *weights, "ieee") is None
    with torch.no_grad():
        assert torch.equal(fused_module.fused_mlp(net, x), net(x))


@pytest.mark.parametrize(
    ("matmul_precision", "expected"),
    [("highest", "ieee"), ("high", "tf32_rounded"), ("medium", "tf32_rounded")],
)
def test_default_precision_is_never_truncated_tf32(monkeypatch, matmul_precision, expected):
    """Plain TF32 in ``tl.dot`` truncates the operands (a -7e-4 relative bias on every output and
    gradient; A2C's Cartpole critic at values near 100 was biased by -0.07 on the H100), so the
    trainer's TF32 setting (``high``) must pick TF32 with operands rounded to nearest."""
    import warpsci.fused_mlp as fused_module

    kernels = _FakeKernels()
    monkeypatch.setattr(fused_module, "_kernels", lambda: kernels)
    monkeypatch.setattr(fused_module, "can_fuse", lambda module, x: True)
    monkeypatch.setattr(fused_module, "interpreting", lambda: True)  # no probe
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul_precision)
    try:
        fused_module.fused_mlp(mlp(4, (16, 16), 1, 1.0), torch.randn(8, 4))
    finally:
        torch.set_float32_matmul_precision(previous)
    assert kernels.precisions == [expected]  # what the kernel launch was given


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_default_precision_is_unbiased_on_the_gpu():
    """With the trainer's TF32 setting, the fused outputs are not shrunk toward zero against float64
    (H100: plain TF32 -1.7e-3, 3xTF32 -3.5e-7, PyTorch's layers 5e-6)."""
    from warpsci.fused_mlp import fused_mlp

    torch.manual_seed(0)
    net = mlp(4, (64, 64), 1, 1.0).cuda()
    with torch.no_grad():
        net[4].weight.abs_().mul_(20.0)  # coherent terms, as in a trained critic
    x = torch.randn(20_000, 4, device="cuda")
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        out = fused_mlp(net, x).double()
    finally:
        torch.set_float32_matmul_precision(previous)
    expected = net.double()(x.double())
    product = expected - net[4].bias
    shrink = (((out - expected) * product).mean() / product.square().mean()).item()
    assert abs(shrink) < 1e-4, f"outputs scaled by 1 + {shrink:.2e} against float64"
