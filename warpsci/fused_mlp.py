"""The policy and value MLPs as Triton kernels that never write their hidden activations.

A ``Linear-Tanh-Linear-Tanh-Linear`` network (two hidden layers, the shape of every preset) over a
batch of rows reads each row's input once and writes only its outputs: both hidden layers stay in
registers. Run through PyTorch layer by layer, every hidden layer is written and read back as a
``rows x width`` float32 tensor, several times in the backward pass; with a few inputs and outputs
per row (Tag gridworld: 6 in, 5 out) that traffic is nearly all of an update's time (H100,
2,000 x 1,000 agents: 63 ms of a 97 ms iteration, BENCHMARKS.md).

* Forward: one program per 64 or 128 rows (:func:`launch_settings`), the three products on the
  tensor cores (``tl.dot``).
* Backward: the hidden layers are recomputed from the input (cheaper than storing them), the
  gradients of the weights and biases summed over each program's rows in registers and written
  once per program; the per-program partial sums are added up by ``torch.sum``, so the result does
  not depend on the order programs finish in (no float atomics).
* The input needs no gradient (observations); the weights do.
* The backward kernel takes the gradient of the network's output as given, or computes it itself
  from a loss head: PPO's or A2C's policy loss with the entropy bonus for a categorical actor,
  their value loss for a critic (:mod:`warpsci.fused_loss`), reading a minibatch's rows through
  its index.
* Eager calls go through a ``torch.autograd.Function``; under ``torch.compile`` the same kernels
  are torch custom operators (``warpsci::fused_mlp``, its backward registered for autograd), kept
  inside the compiled loss. (A custom operator's first eager call imports ``torch._dynamo``: 6 s
  of start-up on the H100 host.)

The products run on the TF32 tensor cores with operands rounded to TF32 first
(``precision="tf32_rounded"``) where torch's float32 matmul precision allows TF32
(``TrainConfig.tf32``, the default), or in float32 arithmetic (``"ieee"``) where it is
``"highest"``. Plain ``"tf32"`` is never chosen by default: Triton hands the float32 operands to the
TF32 tensor cores unrounded, so their low 13 mantissa bits are truncated (toward zero) and the
outputs shrink: on the H100 a critic's outputs came out scaled
by 1 - 1.7e-3 (3xTF32: 1 - 3.5e-7; PyTorch's layers under the same setting: 1 + 5e-6). In A2C's
Cartpole preset that biased values near 100 by -0.07, and near convergence, where the value loss is
small, the bias dominated the gradient: weight gradients off by up to 360 % against float64 (PyTorch's
TF32 layers: 0.2 %).
With single tensor-core products (``"tf32"``, ``"tf32_rounded"``, ``"bf16"``) the hidden layers'
tanh is the GPU's ``tanh.approx.f32`` (relative error below 2^-10.9, TF32's own size; 13-14% off
the loss kernel's time); with ``"ieee"`` and ``"tf32x3"`` it is exact.
``"bf16"`` (``TrainConfig.bf16``) rounds the products' operands to bfloat16 and sums in float32.
With ``TRITON_INTERPRET=1`` the kernels run on the CPU (the tests' reference check).
:func:`fused_mlp` falls back to the module itself where the kernels do not apply, or where
their operands do not fit the GPU's shared memory under any launch setting
(:func:`chosen_settings`).

Status: on by default (``TrainConfig.fused_mlp``). Outputs and gradients equal PyTorch's up to
TF32 rounding (tests: CPU interpreter and H100). On the H100 (2026-11-23) Tag gridworld trained
3.1x faster end to end at 2,000 x 1,000 agents (633K against 203K env steps/s), and A2C's Cartpole
preset reached its threshold in 7 of 8 fused runs against 5 of 8 with PyTorch's layers; with plain
(truncated) TF32 it had been 3 of 10 against 7 of 10.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch import nn

from warpsci.triton_interpreter import interpreting


@dataclasses.dataclass(frozen=True)
class LaunchSettings:
    """How the kernels are launched for networks of one width class (measured on the H100 with
    ``benchmarks/fused_mlp_tuning.py``, BENCHMARKS.md 2026-11-25)."""

    forward_rows: int
    """Rows per program of the forward pass."""
    backward_rows: int
    """Rows per tile of the backward pass (each program loops over tiles)."""
    backward_stages: int
    """Software-pipeline stages of the backward loop (1: none; Triton's default on Hopper is 3)."""
    warps: int = 4
    """Warps per program, both passes."""
    programs_per_sm: int = 2
    """Programs of the backward pass per streaming multiprocessor (each loops over tiles)."""


#: Hidden layers of up to 32 units: 128-row programs, 3 stages (2M-20M rows of 6 -> 32 -> 32 -> 5:
#: 10-20 % faster than the wide settings).
NARROW = LaunchSettings(forward_rows=128, backward_rows=128, backward_stages=3)
#: Wider (up to 128): 64-row forward programs, 32-row backward tiles without pipelining. At 64 wide
#: (Cartpole, 2M rows) the backward pass took 0.80-0.94 ms against 1.9-2.8 ms with NARROW's; at 128
#: wide NARROW's backward asks for more shared memory than an H100 has.
WIDE = LaunchSettings(forward_rows=64, backward_rows=32, backward_stages=1)


#: The last resort for wide networks: 16-row tiles (``tl.dot``'s least), for devices or widths
#: where WIDE's operands do not fit the shared memory (not measured for speed).
SMALLEST = LaunchSettings(forward_rows=16, backward_rows=16, backward_stages=1)


def launch_settings(widest_hidden: int) -> LaunchSettings:
    """The preferred launch settings for a network whose widest hidden layer has ``widest_hidden``
    units (the kernels fall back to others where these do not fit, see :func:`chosen_settings`)."""
    return NARROW if widest_hidden <= 32 else WIDE


def launch_candidates(widest_hidden: int) -> tuple[LaunchSettings, ...]:
    """The settings to try, preferred first."""
    preferred = launch_settings(widest_hidden)
    return (preferred, *(other for other in (WIDE, SMALLEST) if other != preferred))


#: Settings chosen per network shape (padded widths) and device: the first candidate whose two
#: kernels load (a kernel whose operands need more shared memory than the device has does not);
#: None where none does, and PyTorch's layers run instead.
_CHOSEN: dict[tuple, LaunchSettings | None] = {}


def padded_shape_key(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> tuple:
    """What a network's kernels compile for: its padded widths, and the device they run on."""
    widths = (x.shape[-1], w1.shape[0], w2.shape[0], w3.shape[0])
    return (*(_padded(width) for width in widths), x.device)


def chosen_settings(x, w1, w2, w3, precision: str) -> LaunchSettings | None:
    """The launch settings for this network on ``x``'s device, probed on first use (see
    :func:`probe_settings`)."""
    empty = x[:0]

    def launch(settings: LaunchSettings) -> None:
        _forward(empty, w1, w1.new_zeros(w1.shape[0]), w2, w2.new_zeros(w2.shape[0]), w3,
                 w3.new_zeros(w3.shape[0]), precision, settings)  # fmt: skip
        _weight_grads(empty, empty.new_zeros((0, w3.shape[0])), w1, w1.new_zeros(w1.shape[0]),
                      w2, w2.new_zeros(w2.shape[0]), w3, precision, settings)  # fmt: skip

    candidates = launch_candidates(max(w1.shape[0], w2.shape[0]))
    return probe_settings((*padded_shape_key(x, w1, w2, w3), precision), candidates, launch)


def probe_settings(
    key: tuple, candidates: tuple[LaunchSettings, ...], launch: Callable[[LaunchSettings], None]
) -> LaunchSettings | None:
    """The first of ``candidates`` whose kernels load, remembered under ``key``: ``launch(settings)``
    launches them over no rows; a kernel that asks for more shared memory than the device has does
    not load (Triton raises ``OutOfResources``). None where none does. Under Triton's interpreter
    (no shared-memory limit): the first."""
    if key not in _CHOSEN:
        if interpreting():
            _CHOSEN[key] = candidates[0]
            return _CHOSEN[key]
        from triton.runtime.errors import OutOfResources

        _CHOSEN[key] = None
        for settings in candidates:
            try:
                launch(settings)
            except OutOfResources:
                continue
            _CHOSEN[key] = settings
            break
    return _CHOSEN[key]


#: Widest input, hidden layer or output the kernels take (the weights live in registers).
MAX_WIDTH = 128


@functools.cache
def triton_available() -> bool:
    """Whether Triton can be imported (it ships with CUDA builds of torch)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def mlp_layers(module: nn.Module) -> tuple[nn.Linear, nn.Linear, nn.Linear] | None:
    """The three Linear layers of a ``Linear, Tanh, Linear, Tanh, Linear`` Sequential, or None."""
    if not isinstance(module, nn.Sequential) or len(module) != 5:
        return None
    kinds = (nn.Linear, nn.Tanh, nn.Linear, nn.Tanh, nn.Linear)
    if not all(type(layer) is kind for layer, kind in zip(module, kinds, strict=True)):
        return None
    layers = (module[0], module[2], module[4])
    if any(layer.bias is None or max(layer.in_features, layer.out_features) > MAX_WIDTH for layer in layers):
        return None
    return layers


def can_fuse(module: nn.Module, x: torch.Tensor) -> bool:
    """Whether :func:`fused_mlp` runs ``module`` on ``x`` through the kernels."""
    on_device = x.is_cuda or (interpreting() and x.device.type == "cpu")
    return (
        on_device
        and x.dtype == torch.float32
        and not x.requires_grad
        # Traced by torch.compile, which itself needs Triton: the cached import check stays out.
        and (torch.compiler.is_compiling() or triton_available())
        and mlp_layers(module) is not None
        and x.shape[-1] == module[0].in_features
        and x.numel() > 0
    )


def fused_mlp(module: nn.Module, x: torch.Tensor, precision: str | None = None) -> torch.Tensor:
    """``module(x)`` for a two-hidden-layer tanh MLP, through the fused kernels where they apply
    (:func:`can_fuse`), else through ``module``. Differentiable with respect to the weights.
    ``precision``: ``"ieee"`` (float32 arithmetic), ``"tf32"`` (tensor cores, 10-bit mantissas,
    truncated: biased, see the module's docstring), ``"tf32_rounded"`` (operands rounded to TF32
    to nearest first: TF32's speed and error, unbiased), ``"tf32x3"`` (three TF32 products per
    product, float32 accuracy, half the speed) or ``"bf16"`` (operands rounded to bfloat16, sums
    in float32: ``TrainConfig.bf16``); default :func:`default_precision`."""
    if not can_fuse(module, x):
        return module(x)
    first, second, third = mlp_layers(module)
    rows = x.reshape(-1, x.shape[-1])
    if not rows.is_contiguous():
        rows = rows.contiguous()
    weights = (first.weight, first.bias, second.weight, second.bias, third.weight, third.bias)
    if torch.compiler.is_compiling():
        # Traced: only settings an eager call has already chosen (the rollout's forward passes run
        # eagerly before the compiled update); the operator resolves "default" when it runs.
        key = (
            *padded_shape_key(rows, first.weight, second.weight, third.weight),
            resolved_precision(precision or "default"),
        )
        if _CHOSEN.get(key) is None:
            return module(x)
        out = _fused_mlp_op(rows, *weights, precision or "default")
    else:
        # Eagerly through an autograd.Function: a custom operator's first call imports
        # torch._dynamo (seconds at start-up).
        precision = resolved_precision(precision or "default")
        if chosen_settings(rows, first.weight, second.weight, third.weight, precision) is None:
            return module(x)
        out = _FusedMLP.apply(rows, *weights, precision)
    return out.reshape(*x.shape[:-1], third.out_features)


def default_precision() -> str:
    """The kernels' products for torch's float32 matmul precision: ``"ieee"`` where it is
    ``"highest"``, else ``"tf32_rounded"``, never plain ``"tf32"`` (its truncated operands bias
    every output and gradient, see the module's docstring)."""
    return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32_rounded"


def _padded(width: int) -> int:
    """Triton's tensor-core products need power-of-two sides of at least 16."""
    return max(16, 1 << (width - 1).bit_length())


def _forward(
    x, w1, b1, w2, b2, w3, b3, precision: str, settings: LaunchSettings | None = None
) -> torch.Tensor:
    """``rows x n_out`` outputs of the network on the contiguous ``rows x n_in`` float32 ``x``, with
    ``settings`` (default: :func:`chosen_settings`)."""
    x = x.contiguous()
    rows, width_in = x.shape
    settings = settings or _settings(x, w1, w2, w3, precision)
    out = torch.empty((rows, w3.shape[0]), device=x.device, dtype=torch.float32)
    # At least one program, so that a probe over no rows loads the kernel.
    _kernels().forward[(max(1, triton_cdiv(rows, settings.forward_rows)),)](
        x, w1, b1, w2, b2, w3, b3, out, rows,
        width_in, w1.shape[0], w2.shape[0], w3.shape[0],
        _padded(width_in), _padded(w1.shape[0]), _padded(w2.shape[0]), _padded(w3.shape[0]),
        settings.forward_rows, resolved_precision(precision), num_warps=settings.warps,
    )  # fmt: skip
    return out


def _weight_grads(
    x, grad_out, w1, b1, w2, b2, w3, precision: str, settings: LaunchSettings | None = None
) -> torch.Tensor:
    """The gradients of w1, b1, w2, b2, w3 and b3, flattened in that order into one vector."""
    x = x.contiguous()
    settings = settings or _settings(x, w1, w2, w3, precision)
    return backward_pass(x, grad_out.contiguous(), (w1, b1, w2, b2, w3), precision, settings)


#: The backward kernel's loss-head tensors, in its argument order.
HEAD_TENSORS = ("actions", "old_log_probs", "advantages", "adv_stats", "ent_coef", "returns", "old_values",
                "row_weights")  # fmt: skip
#: The loss heads' options and their defaults (``ppo``: PPO's clipped policy loss, else A2C's).
HEAD_OPTIONS = {"clip_coef": 0.0, "ratio_low": 0.0, "ratio_high": 0.0, "vf_coef": 0.0, "scale": 0.0,
                "norm_adv": False, "ppo": False, "clip_vloss": False}  # fmt: skip
#: The options the kernels take as float arguments, in their order.
SCALAR_OPTIONS = ("clip_coef", "ratio_low", "ratio_high", "vf_coef", "scale")
#: Sums a loss head of the backward kernel returns (the categorical head's policy loss, entropy, two
#: KL estimates and clipped rows, the last three zeros for A2C; the value head's squared errors,
#: then zeros), weighted by the rows' weights.
LOSS_PARTS = 5


def backward_pass(
    x: torch.Tensor, grad_out: torch.Tensor, weights: tuple[torch.Tensor, ...], precision: str,
    settings: LaunchSettings,
) -> torch.Tensor:  # fmt: skip
    """One launch of the backward kernel over the rows of ``x`` with the gradient of the outputs
    ``grad_out``: the flat weight gradients (:func:`_weight_grads`'s layout). ``weights``: w1, b1,
    w2, b2, w3."""
    w1, b1, w2, b2, w3 = weights
    rows = x.shape[0]
    programs = max(1, min(triton_cdiv(rows, settings.backward_rows), _program_count(x.device, settings)))
    partial = torch.empty((programs, _parameter_count(w1, w2, w3)), device=x.device, dtype=torch.float32)
    _kernels().backward[(programs,)](
        x, partial, grad_out, w1, b1, w2, b2, w3, partial, partial, rows, partial.shape[1],
        x.shape[1], w1.shape[0], w2.shape[0], w3.shape[0],
        *(partial for _ in HEAD_TENSORS), *(0.0 for _ in SCALAR_OPTIONS),
        _padded(x.shape[1]), _padded(w1.shape[0]), _padded(w2.shape[0]), _padded(w3.shape[0]),
        settings.backward_rows, resolved_precision(precision), "given", False, False, False, False, False,
        num_warps=settings.warps, num_stages=settings.backward_stages,
    )  # fmt: skip
    return partial.sum(dim=0)


def actor_critic_pass(
    x: torch.Tensor,
    rows: int,
    actor: tuple[torch.Tensor, ...],
    critic: tuple[torch.Tensor, ...],
    precision: str,
    settings: LaunchSettings,
    index: torch.Tensor | None,
    head_tensors: dict[str, torch.Tensor],
    head_options: dict[str, float | bool],
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """One launch of ``mlp_kernels.actor_critic_backward`` over the first ``rows`` rows of ``x``,
    or the rows ``x[index]``: for the actor (categorical loss head) and the critic (value loss
    head), the flat weight gradients (:func:`_weight_grads`'s layout) and the rows' sums of the
    loss's parts (:data:`LOSS_PARTS` floats). ``actor`` and ``critic``: w1, b1, w2, b2, w3, b3 of
    networks of the same input and hidden widths. ``head_tensors`` (by the kernel's argument
    names, :data:`HEAD_TENSORS`; ``row_weights`` only where rows are weighted) and
    ``head_options`` (:data:`HEAD_OPTIONS`) are the loss's arguments."""
    programs = max(1, min(triton_cdiv(rows, settings.backward_rows), _program_count(x.device, settings)))
    # A program's row: the actor's gradients, the critic's, then the loss sums of each.
    actor_width, critic_width = (_parameter_count(*net[0:6:2]) for net in (actor, critic))
    grads_width = actor_width + critic_width
    partial = torch.empty((programs, grads_width + 2 * LOSS_PARTS), device=x.device, dtype=torch.float32)
    tensors = dict.fromkeys(HEAD_TENSORS, partial) | head_tensors
    options = HEAD_OPTIONS | head_options
    w1, _, w2, _, w3, _ = actor
    _kernels().actor_critic_backward[(programs, 2)](
        x, partial if index is None else index, partial, rows, partial.shape[1], actor_width,
        grads_width, grads_width + LOSS_PARTS,
        *actor, *critic, x.shape[1], w1.shape[0], w2.shape[0], w3.shape[0],
        *(tensors[name] for name in HEAD_TENSORS), *(float(options[name]) for name in SCALAR_OPTIONS),
        _padded(x.shape[1]), _padded(w1.shape[0]), _padded(w2.shape[0]), _padded(w3.shape[0]),
        _padded(1), settings.backward_rows, resolved_precision(precision), index is not None,
        bool(options["norm_adv"]), bool(options["ppo"]), bool(options["clip_vloss"]),
        "row_weights" in head_tensors,
        num_warps=settings.warps, num_stages=settings.backward_stages,
    )  # fmt: skip
    total = partial.sum(dim=0)
    actor_flat, critic_flat, actor_parts, critic_parts = total.split(
        (actor_width, critic_width, LOSS_PARTS, LOSS_PARTS)
    )
    return (actor_flat, actor_parts), (critic_flat, critic_parts)


def _parameter_count(w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor) -> int:
    return sum(w.shape[0] * (w.shape[1] + 1) for w in (w1, w2, w3))


def _split(flat: torch.Tensor, weights) -> tuple[torch.Tensor, ...]:
    """:func:`_weight_grads`'s vector as one gradient per weight, each of its weight's shape."""
    grads = flat.split([weight.numel() for weight in weights])
    return tuple(grad.view(weight.shape) for grad, weight in zip(grads, weights, strict=True))


class _FusedMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, w3, b3, precision):  # type: ignore[override]
        ctx.save_for_backward(x, w1, b1, w2, b2, w3, b3)
        ctx.precision = precision
        return _forward(x, w1, b1, w2, b2, w3, b3, precision)

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        x, *weights = ctx.saved_tensors
        flat = _weight_grads(x, grad_out, *weights[:5], ctx.precision)
        return None, *_split(flat, weights), None


# The same as torch custom operators, for torch.compile (``--compile``): it keeps them as opaque
# calls inside the compiled loss and fuses the work around them.


@torch.library.custom_op("warpsci::fused_mlp", mutates_args=())
def _fused_mlp_op(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor,
    w3: torch.Tensor, b3: torch.Tensor, precision: str,
) -> torch.Tensor:  # fmt: skip
    return _forward(x, w1, b1, w2, b2, w3, b3, precision)


@_fused_mlp_op.register_fake
def _(x, w1, b1, w2, b2, w3, b3, precision):
    return x.new_empty((x.shape[0], w3.shape[0]))


@torch.library.custom_op("warpsci::fused_mlp_weight_grads", mutates_args=())
def _weight_grads_op(
    x: torch.Tensor, grad_out: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
    b2: torch.Tensor, w3: torch.Tensor, precision: str,
) -> torch.Tensor:  # fmt: skip
    return _weight_grads(x, grad_out, w1, b1, w2, b2, w3, precision)


@_weight_grads_op.register_fake
def _(x, grad_out, w1, b1, w2, b2, w3, precision):
    return x.new_empty((_parameter_count(w1, w2, w3),))


def _save_for_backward(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs[:7])
    ctx.precision = inputs[7]


def _operator_backward(ctx, grad_out):
    x, *weights = ctx.saved_tensors
    flat = _weight_grads_op(x, grad_out, *weights[:5], ctx.precision)
    return None, *_split(flat, weights), None


_fused_mlp_op.register_autograd(_operator_backward, setup_context=_save_for_backward)


def _settings(x, w1, w2, w3, precision: str) -> LaunchSettings:
    settings = chosen_settings(x, w1, w2, w3, resolved_precision(precision))
    if settings is None:
        raise RuntimeError(
            f"the fused MLP kernels do not fit this GPU's shared memory for a {x.shape[-1]} -> "
            f"{w1.shape[0]} -> {w2.shape[0]} -> {w3.shape[0]} network; use --no-fused-mlp"
        )
    return settings


#: What :func:`fused_mlp`'s ``precision`` accepts ("default": :func:`default_precision`).
PRECISIONS = ("default", "ieee", "tf32", "tf32_rounded", "tf32x3", "bf16")


def resolved_precision(precision: str) -> str:
    """``precision`` checked against :data:`PRECISIONS`, ``"default"`` resolved."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return default_precision() if precision == "default" else precision


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _program_count(device: torch.device, settings: LaunchSettings) -> int:
    """Programs of the backward pass: ``settings.programs_per_sm`` per streaming multiprocessor (4
    on the CPU)."""
    if device.type != "cuda":
        return 4
    return settings.programs_per_sm * _multiprocessors(device)


@functools.cache
def _multiprocessors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.cache
def _kernels():
    """The kernel module, imported on first use: importing Triton costs a second, CPU runs never
    need it."""
    from warpsci import mlp_kernels

    return mlp_kernels
