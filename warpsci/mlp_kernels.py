"""Triton kernels of :mod:`warpsci.fused_mlp` (imported only where they run: Triton needs a CUDA
build of torch, or ``TRITON_INTERPRET=1``).

Shapes: ``x`` is ``rows x n_in``; weights are in torch's ``Linear`` layout (``out x in``), loaded
zero-padded to power-of-two sides (``*_P``, at least 16, as ``tl.dot`` needs).
"""

import triton
import triton.language as tl


@triton.jit
def tanh(z):
    return 2.0 * tl.sigmoid(2.0 * z) - 1.0


@triton.jit
def round_to_tf32(x):
    """``x`` rounded to TF32's 10-bit mantissa, to nearest (ties away from zero): add half of the
    last kept bit to the 13 dropped ones, then clear them."""
    bits = x.to(tl.uint32, bitcast=True)
    return ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def mm(a, b, PRECISION: tl.constexpr):
    """``a @ b`` in ``PRECISION``: ``"tf32_rounded"`` rounds both operands to TF32 first, so that
    the tensor cores (which truncate float32 operands) see values they hold exactly: TF32 speed
    without the truncation's bias toward zero."""
    if PRECISION == "tf32_rounded":
        return tl.dot(round_to_tf32(a), round_to_tf32(b), input_precision="tf32")
    else:
        return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def load_transposed(w, n_in, n_out, IN_P: tl.constexpr, OUT_P: tl.constexpr):
    """``w`` (``n_out x n_in``, torch's Linear layout) as ``IN_P x OUT_P``, zero padded."""
    k = tl.arange(0, IN_P)
    n = tl.arange(0, OUT_P)
    mask = (k[:, None] < n_in) & (n[None, :] < n_out)
    return tl.load(w + n[None, :] * n_in + k[:, None], mask=mask, other=0.0)


@triton.jit
def load_weight(w, n_in, n_out, IN_P: tl.constexpr, OUT_P: tl.constexpr):
    """``w`` as stored, ``OUT_P x IN_P``, zero padded."""
    n = tl.arange(0, OUT_P)
    k = tl.arange(0, IN_P)
    mask = (n[:, None] < n_out) & (k[None, :] < n_in)
    return tl.load(w + n[:, None] * n_in + k[None, :], mask=mask, other=0.0)


@triton.jit
def load_bias(b, n, N_P: tl.constexpr):
    offsets = tl.arange(0, N_P)
    return tl.load(b + offsets, mask=offsets < n, other=0.0)


@triton.jit
def forward(
    x, w1, b1, w2, b2, w3, b3, out, rows,
    n_in, n_h1, n_h2, n_out,
    IN_P: tl.constexpr, H1_P: tl.constexpr, H2_P: tl.constexpr, OUT_P: tl.constexpr,
    BLOCK: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = row < rows
    k = tl.arange(0, IN_P)
    inputs = tl.load(
        x + row[:, None] * n_in + k[None, :], mask=live[:, None] & (k[None, :] < n_in), other=0.0
    )
    h1 = mm(inputs, load_transposed(w1, n_in, n_h1, IN_P, H1_P), PRECISION)
    h1 = tanh(h1 + load_bias(b1, n_h1, H1_P)[None, :])
    h2 = mm(h1, load_transposed(w2, n_h1, n_h2, H1_P, H2_P), PRECISION)
    h2 = tanh(h2 + load_bias(b2, n_h2, H2_P)[None, :])
    y = mm(h2, load_transposed(w3, n_h2, n_out, H2_P, OUT_P), PRECISION)
    y = y + load_bias(b3, n_out, OUT_P)[None, :]
    n = tl.arange(0, OUT_P)
    tl.store(out + row[:, None] * n_out + n[None, :], y, mask=live[:, None] & (n[None, :] < n_out))


@triton.jit
def backward(
    x, grad_out, w1, b1, w2, b2, w3, partial, rows, partial_width,
    n_in, n_h1, n_h2, n_out,
    IN_P: tl.constexpr, H1_P: tl.constexpr, H2_P: tl.constexpr, OUT_P: tl.constexpr,
    BLOCK: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    program = tl.program_id(0)
    programs = tl.num_programs(0)
    w1_t = load_transposed(w1, n_in, n_h1, IN_P, H1_P)
    w2_t = load_transposed(w2, n_h1, n_h2, H1_P, H2_P)
    w2_n = load_weight(w2, n_h1, n_h2, H1_P, H2_P)
    w3_n = load_weight(w3, n_h2, n_out, H2_P, OUT_P)
    bias1 = load_bias(b1, n_h1, H1_P)
    bias2 = load_bias(b2, n_h2, H2_P)
    # Gradients kept transposed (input x output), as the products below make them.
    g_w1 = tl.zeros((IN_P, H1_P), tl.float32)
    g_w2 = tl.zeros((H1_P, H2_P), tl.float32)
    g_w3 = tl.zeros((H2_P, OUT_P), tl.float32)
    g_b1 = tl.zeros((H1_P,), tl.float32)
    g_b2 = tl.zeros((H2_P,), tl.float32)
    g_b3 = tl.zeros((OUT_P,), tl.float32)
    k = tl.arange(0, IN_P)
    o = tl.arange(0, OUT_P)
    tiles = tl.cdiv(rows, BLOCK)
    for tile in range(program, tiles, programs):
        row = tile * BLOCK + tl.arange(0, BLOCK)
        live = row < rows
        inputs = tl.load(
            x + row[:, None] * n_in + k[None, :], mask=live[:, None] & (k[None, :] < n_in), other=0.0
        )
        h1 = tanh(mm(inputs, w1_t, PRECISION) + bias1[None, :])
        h2 = tanh(mm(h1, w2_t, PRECISION) + bias2[None, :])
        d3 = tl.load(
            grad_out + row[:, None] * n_out + o[None, :], mask=live[:, None] & (o[None, :] < n_out), other=0.0
        )
        g_w3 += mm(tl.trans(h2), d3, PRECISION)
        g_b3 += tl.sum(d3, axis=0)
        d2 = mm(d3, w3_n, PRECISION) * (1.0 - h2 * h2)
        d2 = tl.where(live[:, None], d2, 0.0)
        g_w2 += mm(tl.trans(h1), d2, PRECISION)
        g_b2 += tl.sum(d2, axis=0)
        d1 = mm(d2, w2_n, PRECISION) * (1.0 - h1 * h1)
        d1 = tl.where(live[:, None], d1, 0.0)
        g_w1 += mm(tl.trans(inputs), d1, PRECISION)
        g_b1 += tl.sum(d1, axis=0)
    # One row of ``partial`` per program: w1, b1, w2, b2, w3, b3 in torch's layouts, flattened.
    base = partial + program * partial_width
    h1_index = tl.arange(0, H1_P)
    h2_index = tl.arange(0, H2_P)
    # g_w1[k, n] is weight1[n, k].
    tl.store(
        base + h1_index[None, :] * n_in + k[:, None],
        g_w1,
        mask=(k[:, None] < n_in) & (h1_index[None, :] < n_h1),
    )
    base += n_h1 * n_in
    tl.store(base + h1_index, g_b1, mask=h1_index < n_h1)
    base += n_h1
    tl.store(
        base + h2_index[None, :] * n_h1 + h1_index[:, None],
        g_w2,
        mask=(h1_index[:, None] < n_h1) & (h2_index[None, :] < n_h2),
    )
    base += n_h2 * n_h1
    tl.store(base + h2_index, g_b2, mask=h2_index < n_h2)
    base += n_h2
    tl.store(
        base + o[None, :] * n_h2 + h2_index[:, None],
        g_w3,
        mask=(h2_index[:, None] < n_h2) & (o[None, :] < n_out),
    )
    base += n_out * n_h2
    tl.store(base + o, g_b3, mask=o < n_out)
