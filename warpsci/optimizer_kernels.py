"""Triton kernel of :meth:`warpsci.optimizers.Adam.clipped_step` (imported only where it runs: Triton
needs a CUDA build of torch, or ``TRITON_INTERPRET=1``)."""

import triton
import triton.language as tl

from warpsci.triton_key import remember_triton_key

remember_triton_key()  # before any kernel is loaded from Triton's cache


@triton.jit(do_not_specialize=["grad"])
def clipped_adam(
    grad, param, exp_avg, exp_avg_sq, step, lr, n, max_norm, beta1, beta2, eps,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """Global-norm gradient clipping and one Adam step over ``n`` parameters held flat:
    ``torch.nn.utils.clip_grad_norm_(max_norm)``'s scaling by ``min(1, max_norm / (norm + 1e-6))``
    (applied as read: ``grad`` is left as it was), then ``torch._fused_adam_``'s arithmetic (bias
    corrections in float64). Each program computes the norm over every gradient (the same sum in
    the same order, so every program scales alike), then steps its own ``BLOCK`` parameters.
    ``step``: the step count, this step included (float32); ``lr``: the learning rate; both
    device scalars."""
    offsets = tl.arange(0, BLOCK)
    squares = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n, BLOCK):
        g = tl.load(grad + start + offsets, mask=start + offsets < n, other=0.0)
        squares += g * g
    norm = tl.sqrt(tl.sum(squares, axis=0))
    # A NaN norm gives NaN weights, as torch's clipping (which multiplies by it) does.
    coefficient = tl.minimum(max_norm / (norm + 1e-6), 1.0, propagate_nan=tl.PropagateNan.ALL)
    step64 = tl.load(step).to(tl.float64)
    bias_correction1 = 1.0 - tl.exp(step64 * tl.log(tl.cast(beta1, tl.float64)))
    bias_correction2 = 1.0 - tl.exp(step64 * tl.log(tl.cast(beta2, tl.float64)))
    step_size = (tl.load(lr).to(tl.float64) / bias_correction1).to(tl.float32)
    bias_correction2_sqrt = tl.sqrt(bias_correction2).to(tl.float32)
    index = tl.program_id(0) * BLOCK + offsets
    live = index < n
    g = tl.load(grad + index, mask=live, other=0.0) * coefficient
    average = tl.load(exp_avg + index, mask=live, other=0.0)
    square = tl.load(exp_avg_sq + index, mask=live, other=0.0)
    average = beta1 * average + (1.0 - beta1) * g
    square = beta2 * square + (1.0 - beta2) * g * g
    denominator = tl.sqrt(square) / bias_correction2_sqrt + eps
    p = tl.load(param + index, mask=live, other=0.0) - step_size * average / denominator
    tl.store(exp_avg + index, average, mask=live)
    tl.store(exp_avg_sq + index, square, mask=live)
    tl.store(param + index, p, mask=live)
