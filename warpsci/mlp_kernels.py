"""Triton kernels of :mod:`warpsci.fused_mlp` (imported only where they run: Triton needs a CUDA
build of torch, or ``TRITON_INTERPRET=1``).

Shapes: ``x`` is ``rows x n_in``; weights are in torch's ``Linear`` layout (``out x in``), loaded
zero-padded to power-of-two sides (``*_P``, at least 16, as ``tl.dot`` needs).
"""

import triton
import triton.language as tl

from warpsci.triton_interpreter import interpreting
from warpsci.triton_key import remember_triton_key

remember_triton_key()  # before any kernel is loaded from Triton's cache

#: Whether the kernels run on a GPU; Triton's interpreter (``TRITON_INTERPRET`` on) has no inline
#: assembly.
ON_GPU = tl.constexpr(not interpreting())


@triton.jit
def tanh(z, PRECISION: tl.constexpr):
    """``tanh(z)``. With single-product tensor-core precisions (``"tf32"``, ``"tf32_rounded"``,
    ``"bf16"``) on a GPU: the hardware's ``tanh.approx.f32``, one instruction (relative error
    below 2^-10.9, the size of TF32's own rounding of the next product's operands); the form
    through the sigmoid took two special-function instructions and a dozen others per value, and
    with them the backward loss kernel 2.97 ms against 2.56 ms for a minibatch of 2M rows (H100,
    BENCHMARKS.md). Otherwise (``"ieee"``, ``"tf32x3"``: float32 accuracy; the interpreter)
    exactly, through the sigmoid."""
    if (PRECISION == "tf32" or PRECISION == "tf32_rounded" or PRECISION == "bf16") and ON_GPU:
        return tl.inline_asm_elementwise(
            "tanh.approx.f32 $0, $1;", "=r,r", [z], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        return 2.0 * tl.sigmoid(2.0 * z) - 1.0


@triton.jit
def round_to_tf32(x):
    """``x`` rounded to TF32's 10-bit mantissa, to nearest (ties away from zero): add half of the
    last kept bit to the 13 dropped ones, then clear them."""
    bits = x.to(tl.uint32, bitcast=True)
    return ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)


@triton.jit
def round_to_bf16(x):
    """``x`` rounded to bfloat16's 7-bit mantissa, to nearest even, kept in float32 (NaN stays
    NaN: the rounding's carry would turn some into infinities or zeros)."""
    bits = x.to(tl.uint32, bitcast=True)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).to(tl.float32, bitcast=True)
    return tl.where(x != x, x, rounded)


@triton.jit
def mm(a, b, PRECISION: tl.constexpr):
    """``a @ b`` in ``PRECISION``: ``"tf32_rounded"`` rounds both operands to TF32 first, so that
    the tensor cores (which truncate float32 operands) see values they hold exactly: TF32 speed
    without the truncation's bias toward zero. ``"bf16"``: operands rounded to bfloat16 (to
    nearest even), products summed in float32 (on a GPU bfloat16 tensor cores; under Triton's
    interpreter, whose bfloat16 products are wrong, the same sums from the rounded operands)."""
    if PRECISION == "tf32_rounded":
        return tl.dot(round_to_tf32(a), round_to_tf32(b), input_precision="tf32")
    elif PRECISION == "bf16" and ON_GPU:
        return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif PRECISION == "bf16":
        return tl.dot(round_to_bf16(a), round_to_bf16(b), input_precision="ieee")
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
    h1 = tanh(h1 + load_bias(b1, n_h1, H1_P)[None, :], PRECISION)
    h2 = mm(h1, load_transposed(w2, n_h1, n_h2, H1_P, H2_P), PRECISION)
    h2 = tanh(h2 + load_bias(b2, n_h2, H2_P)[None, :], PRECISION)
    y = mm(h2, load_transposed(w3, n_h2, n_out, H2_P, OUT_P), PRECISION)
    y = y + load_bias(b3, n_out, OUT_P)[None, :]
    n = tl.arange(0, OUT_P)
    tl.store(out + row[:, None] * n_out + n[None, :], y, mask=live[:, None] & (n[None, :] < n_out))


@triton.jit
def categorical_head(
    y, valid, weight, o, n_out, action, old_log_prob, advantage, adv_mean, adv_std, ent_coef,
    clip_coef, ratio_low, ratio_high, scale, NORM_ADV: tl.constexpr, PPO: tl.constexpr,
):  # fmt: skip
    """The gradient of the policy loss minus the entropy bonus with respect to a categorical
    policy's logits ``y``, given each row's action, advantage and (PPO) old log-probability, and
    each row's parts of the loss, times its ``weight`` (0 past the minibatch's end or for agents
    out of the game, else 1): policy loss, entropy, -log ratio, (ratio - 1) - log ratio, clipped
    or not. The loss is a weighted mean: ``scale`` is 1 / the total weight. ``PPO``: the clipped
    surrogate, the ratio clamped to [``ratio_low``, ``ratio_high``] (1 -/+ ``clip_coef``, rounded
    to float32 from double as torch rounds them; ties of the surrogate's two terms split the
    gradient in halves and the clamp passes it at its bounds, as torch's ``maximum`` and ``clamp``
    do; NaN propagates as in torch); else A2C's ``-advantage x log-probability``.
    ``valid``: the live rows' actual logits."""
    logits = tl.where(valid, y, -1.0e30)
    shifted = logits - tl.max(logits, axis=1)[:, None]
    exps = tl.where(valid, tl.exp(shifted), 0.0)
    total = tl.sum(exps, axis=1)
    total = tl.where(total > 0.0, total, 1.0)
    log_p = shifted - tl.log(total)[:, None]
    p = exps / total[:, None]
    chosen = valid & (o[None, :] == action[:, None])
    log_prob = tl.sum(tl.where(chosen, log_p, 0.0), axis=1)
    entropy = -tl.sum(tl.where(valid, p * log_p, 0.0), axis=1)
    if NORM_ADV:
        advantage = (advantage - adv_mean) / (adv_std + 1e-8)
    if PPO:
        log_ratio = log_prob - old_log_prob
        ratio = tl.exp(log_ratio)
        unclipped = -advantage * ratio
        clamped = tl.minimum(
            tl.maximum(ratio, ratio_low, propagate_nan=tl.PropagateNan.ALL),
            ratio_high,
            propagate_nan=tl.PropagateNan.ALL,
        )
        clipped = -advantage * clamped
        inside = (ratio >= ratio_low) & (ratio <= ratio_high)
        d_clipped = tl.where(inside, unclipped, 0.0)
        d_log_prob = tl.where(
            unclipped > clipped,
            unclipped,
            tl.where(unclipped < clipped, d_clipped, 0.5 * (unclipped + d_clipped)),
        )
        policy_loss = tl.maximum(unclipped, clipped, propagate_nan=tl.PropagateNan.ALL)
        old_kl = -log_ratio
        kl = (ratio - 1.0) - log_ratio
        clip_count = tl.where(tl.abs(ratio - 1.0) > clip_coef, 1.0, 0.0)
    else:
        d_log_prob = -advantage
        policy_loss = -advantage * log_prob
        old_kl = tl.zeros_like(log_prob)
        kl = old_kl
        clip_count = old_kl
    d_logits = d_log_prob[:, None] * (tl.where(chosen, 1.0, 0.0) - p) + ent_coef * p * (
        log_p + entropy[:, None]
    )
    counted = weight != 0.0
    d_logits = tl.where(valid & counted[:, None], d_logits * (weight * scale)[:, None], 0.0)
    return (
        d_logits,
        tl.where(counted, policy_loss * weight, 0.0),
        tl.where(counted, entropy * weight, 0.0),
        tl.where(counted, old_kl * weight, 0.0),
        tl.where(counted, kl * weight, 0.0),
        tl.where(counted, clip_count * weight, 0.0),
    )


@triton.jit
def value_head(
    y, weight, o, target, old, clip_coef, vf_coef, scale, CLIP_VLOSS: tl.constexpr
):  # fmt: skip
    """The gradient of ``vf_coef`` x half the weighted mean squared error of the critic's output
    ``y`` (column 0) against each row's ``target`` (``scale``: 1 / the total weight), optionally
    of the larger of the plain and the clipped error (PPO's ``clip_vloss``, around the ``old``
    values), and each row's squared error times its ``weight``."""
    value = tl.sum(tl.where(o[None, :] == 0, y, 0.0), axis=1)
    error = value - target
    squared = error * error
    d_value = 2.0 * error
    if CLIP_VLOSS:
        delta = value - old
        clamped = tl.minimum(
            tl.maximum(delta, -clip_coef, propagate_nan=tl.PropagateNan.ALL),
            clip_coef,
            propagate_nan=tl.PropagateNan.ALL,
        )
        clipped_error = old + clamped - target
        clipped = clipped_error * clipped_error
        inside = (delta >= -clip_coef) & (delta <= clip_coef)
        d_clipped = tl.where(inside, 2.0 * clipped_error, 0.0)
        d_value = tl.where(
            squared > clipped, d_value, tl.where(squared < clipped, d_clipped, 0.5 * (d_value + d_clipped))
        )
        squared = tl.maximum(squared, clipped, propagate_nan=tl.PropagateNan.ALL)
    counted = weight != 0.0
    d_value = tl.where(counted, 0.5 * vf_coef * scale * weight * d_value, 0.0)
    d_out = tl.where((o[None, :] == 0) & counted[:, None], d_value[:, None], 0.0)
    return d_out, tl.where(counted, squared * weight, 0.0)


@triton.jit
def backward(
    x, index, grad_out, w1, b1, w2, b2, w3, b3, partial, rows, partial_width,
    n_in, n_h1, n_h2, n_out,
    actions, old_log_probs, advantages, adv_stats, ent_coef, returns, old_values, row_weights,
    clip_coef, ratio_low, ratio_high, vf_coef, scale,
    IN_P: tl.constexpr, H1_P: tl.constexpr, H2_P: tl.constexpr, OUT_P: tl.constexpr,
    BLOCK: tl.constexpr, PRECISION: tl.constexpr, HEAD: tl.constexpr, GATHER: tl.constexpr,
    NORM_ADV: tl.constexpr, PPO: tl.constexpr, CLIP_VLOSS: tl.constexpr, WEIGHTED: tl.constexpr,
):  # fmt: skip
    """One network's weight gradients (:func:`network_grads`), one program per ``program_id(0)``;
    the loss's parts, if any, follow the gradients in each program's row of ``partial``."""
    parameter_count = n_h1 * n_in + n_h1 + n_h2 * n_h1 + n_h2 + n_out * n_h2 + n_out
    network_grads(
        x, index, grad_out, w1, b1, w2, b2, w3, b3, partial, partial + parameter_count, rows, partial_width,
        n_in, n_h1, n_h2, n_out,
        actions, old_log_probs, advantages, adv_stats, ent_coef, returns, old_values, row_weights,
        clip_coef, ratio_low, ratio_high, vf_coef, scale, tl.program_id(0), tl.num_programs(0),
        IN_P, H1_P, H2_P, OUT_P, BLOCK, PRECISION, HEAD, GATHER, NORM_ADV, PPO, CLIP_VLOSS, WEIGHTED,
    )  # fmt: skip


@triton.jit(do_not_specialize=["index", "rows", "adv_stats"])
def actor_critic_backward(
    x, index, partial, rows, partial_width, critic_offset, actor_parts, critic_parts,
    a_w1, a_b1, a_w2, a_b2, a_w3, a_b3, c_w1, c_b1, c_w2, c_b2, c_w3, c_b3,
    n_in, n_h1, n_h2, n_actions,
    actions, old_log_probs, advantages, adv_stats, ent_coef, returns, old_values, row_weights,
    clip_coef, ratio_low, ratio_high, vf_coef, scale,
    IN_P: tl.constexpr, H1_P: tl.constexpr, H2_P: tl.constexpr, OUT_P: tl.constexpr,
    CRITIC_OUT_P: tl.constexpr, BLOCK: tl.constexpr, PRECISION: tl.constexpr, GATHER: tl.constexpr,
    NORM_ADV: tl.constexpr, PPO: tl.constexpr, CLIP_VLOSS: tl.constexpr, WEIGHTED: tl.constexpr,
):  # fmt: skip
    """An actor's (categorical head) and a critic's (value head) weight gradients in one launch:
    ``program_id(1)`` 0 runs the actor, 1 the critic (both of widths ``n_in``, ``n_h1``, ``n_h2``),
    so that the two networks' programs share the GPU instead of following each other (the
    critic's output padded to ``CRITIC_OUT_P`` columns, the actor's to ``OUT_P``). The row count
    and the pointers that differ between minibatches are not specialised on, so that one
    compilation (the one the launch-settings probe loads) serves every minibatch. Each
    program's row of ``partial`` holds the actor's gradients, from ``critic_offset`` the
    critic's, and from ``actor_parts`` and ``critic_parts`` their loss sums: the two
    networks' gradients lie back to back, so that averaging them over GPUs is one all-reduce."""
    if tl.program_id(1) == 0:
        network_grads(
            x, index, partial, a_w1, a_b1, a_w2, a_b2, a_w3, a_b3, partial, partial + actor_parts, rows,
            partial_width, n_in, n_h1, n_h2, n_actions,
            actions, old_log_probs, advantages, adv_stats, ent_coef, returns, old_values, row_weights,
            clip_coef, ratio_low, ratio_high, vf_coef, scale, tl.program_id(0), tl.num_programs(0),
            IN_P, H1_P, H2_P, OUT_P, BLOCK, PRECISION, "categorical", GATHER, NORM_ADV, PPO, CLIP_VLOSS,
            WEIGHTED,
        )  # fmt: skip
    else:
        network_grads(
            x, index, partial, c_w1, c_b1, c_w2, c_b2, c_w3, c_b3, partial + critic_offset,
            partial + critic_parts, rows, partial_width, n_in, n_h1, n_h2, 1,
            actions, old_log_probs, advantages, adv_stats, ent_coef, returns, old_values, row_weights,
            clip_coef, ratio_low, ratio_high, vf_coef, scale, tl.program_id(0), tl.num_programs(0),
            IN_P, H1_P, H2_P, CRITIC_OUT_P, BLOCK, PRECISION, "value", GATHER, NORM_ADV, PPO, CLIP_VLOSS,
            WEIGHTED,
        )  # fmt: skip


@triton.jit
def network_grads(
    x, index, grad_out, w1, b1, w2, b2, w3, b3, partial, parts, rows, partial_width,
    n_in, n_h1, n_h2, n_out,
    actions, old_log_probs, advantages, adv_stats, ent_coef, returns, old_values, row_weights,
    clip_coef, ratio_low, ratio_high, vf_coef, scale, program, programs,
    IN_P: tl.constexpr, H1_P: tl.constexpr, H2_P: tl.constexpr, OUT_P: tl.constexpr,
    BLOCK: tl.constexpr, PRECISION: tl.constexpr, HEAD: tl.constexpr, GATHER: tl.constexpr,
    NORM_ADV: tl.constexpr, PPO: tl.constexpr, CLIP_VLOSS: tl.constexpr, WEIGHTED: tl.constexpr,
):  # fmt: skip
    """The weight gradients of the network over ``rows`` rows of ``x``: its first rows, or with
    ``GATHER`` the rows ``index`` (a minibatch of the rollout). The gradient of its output comes
    from ``HEAD``: ``"given"`` (``grad_out``, one row per row), or a loss computed here from the
    output and the rows' rollout data: ``"categorical"`` (the policy loss and entropy bonus of a
    categorical actor, :func:`categorical_head`) or ``"value"`` (the critic's value loss,
    :func:`value_head`); ``PPO`` selects PPO's clipped policy loss over A2C's. The loss's means
    are over the rows, or with ``WEIGHTED`` weighted by ``row_weights`` (agents in the game), whose
    total is ``adv_stats[2]``; ``adv_stats[:2]`` are the advantages' mean and standard deviation
    (``NORM_ADV``). The rows' sums of the loss's parts (``fused_mlp.LOSS_PARTS`` floats) go to
    ``parts``, a row of ``partial_width`` further per program, as the gradients; this is program
    ``program`` of ``programs``, each looping over tiles of ``BLOCK`` rows.
    Arguments a head does not use may be any tensor."""
    w1_t = load_transposed(w1, n_in, n_h1, IN_P, H1_P)
    w2_t = load_transposed(w2, n_h1, n_h2, H1_P, H2_P)
    w2_n = load_weight(w2, n_h1, n_h2, H1_P, H2_P)
    w3_n = load_weight(w3, n_h2, n_out, H2_P, OUT_P)
    if HEAD != "given":
        w3_t = load_transposed(w3, n_h2, n_out, H2_P, OUT_P)
        bias3 = load_bias(b3, n_out, OUT_P)
        adv_mean = tl.load(adv_stats)
        adv_std = tl.load(adv_stats + 1)
        coefficient = tl.load(ent_coef)
        if WEIGHTED:
            scale = 1.0 / tl.load(adv_stats + 2)
    bias1 = load_bias(b1, n_h1, H1_P)
    bias2 = load_bias(b2, n_h2, H2_P)
    # Gradients kept transposed (input x output), as the products below make them.
    g_w1 = tl.zeros((IN_P, H1_P), tl.float32)
    g_w2 = tl.zeros((H1_P, H2_P), tl.float32)
    g_w3 = tl.zeros((H2_P, OUT_P), tl.float32)
    g_b1 = tl.zeros((H1_P,), tl.float32)
    g_b2 = tl.zeros((H2_P,), tl.float32)
    g_b3 = tl.zeros((OUT_P,), tl.float32)
    # The loss's parts, summed per row position over the tiles (one reduction at the end).
    sum0 = tl.zeros((BLOCK,), tl.float32)
    sum1 = tl.zeros((BLOCK,), tl.float32)
    sum2 = tl.zeros((BLOCK,), tl.float32)
    sum3 = tl.zeros((BLOCK,), tl.float32)
    sum4 = tl.zeros((BLOCK,), tl.float32)
    k = tl.arange(0, IN_P)
    o = tl.arange(0, OUT_P)
    tiles = tl.cdiv(rows, BLOCK)
    for tile in range(program, tiles, programs):
        row = tile * BLOCK + tl.arange(0, BLOCK)
        live = row < rows
        if GATHER:
            src = tl.load(index + row, mask=live, other=0)
        else:
            src = row
        if HEAD != "given":
            # The head's rollout data, loaded before the products so that the loads overlap them.
            if WEIGHTED:
                weight = tl.load(row_weights + src, mask=live, other=0.0)
            else:
                weight = tl.where(live, 1.0, 0.0)
            if HEAD == "categorical":
                action = tl.load(actions + src, mask=live, other=0)
                advantage = tl.load(advantages + src, mask=live, other=0.0)
                if PPO:
                    old_log_prob = tl.load(old_log_probs + src, mask=live, other=0.0)
                else:
                    old_log_prob = advantage
            else:
                target = tl.load(returns + src, mask=live, other=0.0)
                if CLIP_VLOSS:
                    old_value = tl.load(old_values + src, mask=live, other=0.0)
                else:
                    old_value = target
        inputs = tl.load(
            x + src[:, None] * n_in + k[None, :], mask=live[:, None] & (k[None, :] < n_in), other=0.0
        )
        h1 = tanh(mm(inputs, w1_t, PRECISION) + bias1[None, :], PRECISION)
        h2 = tanh(mm(h1, w2_t, PRECISION) + bias2[None, :], PRECISION)
        if HEAD == "given":
            d3 = tl.load(
                grad_out + row[:, None] * n_out + o[None, :],
                mask=live[:, None] & (o[None, :] < n_out),
                other=0.0,
            )
        else:
            y = mm(h2, w3_t, PRECISION) + bias3[None, :]
            if HEAD == "categorical":
                d3, part0, part1, part2, part3, part4 = categorical_head(
                    y, live[:, None] & (o[None, :] < n_out), weight, o, n_out, action, old_log_prob,
                    advantage, adv_mean, adv_std, coefficient, clip_coef, ratio_low, ratio_high, scale,
                    NORM_ADV, PPO,
                )  # fmt: skip
                sum0 += part0
                sum1 += part1
                sum2 += part2
                sum3 += part3
                sum4 += part4
            else:
                d3, part0 = value_head(y, weight, o, target, old_value, clip_coef, vf_coef, scale, CLIP_VLOSS)
                sum0 += part0
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
    if HEAD != "given":
        # The loss's parts in the same row as the gradients: one sum adds up both.
        base = parts + program * partial_width
        tl.store(base, tl.sum(sum0, axis=0))
        tl.store(base + 1, tl.sum(sum1, axis=0))
        tl.store(base + 2, tl.sum(sum2, axis=0))
        tl.store(base + 3, tl.sum(sum3, axis=0))
        tl.store(base + 4, tl.sum(sum4, axis=0))
