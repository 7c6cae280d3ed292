"""PPO's and A2C's gradients with the loss computed inside the fused MLP's backward kernel.

Through autograd a PPO minibatch step is a gather of the minibatch's rows, the actor's and the
critic's forward passes, a dozen element-wise and reduction kernels for the loss (log-softmax,
ratio, clipped surrogate, entropy, value loss, their means) and two backward passes that recompute
the hidden layers anyway. Here one launch of ``mlp_kernels.actor_critic_backward`` does both networks:
each program reads its rows' observations (through the minibatch's index), runs its network,
computes the loss's gradient with respect to the network's output from the rows' rollout data, and
backpropagates it; the actor's programs with the categorical head (policy loss and entropy bonus),
the critic's with the value loss. Each program also sums the loss's parts over its rows, for the
logs. Rows of agents out of the game (row weights) count in no mean, as in the autograd path
(where their data are not finite, they are left out here, while autograd's ``0 x NaN`` would
spread NaN).

The formulas are :func:`warpsci.ppo.ppo_losses`'s and :func:`warpsci.a2c.a2c_losses`', derived by
hand, including torch's conventions at the edges (ties of ``maximum`` split the gradient, ``clamp``
passes it at its bounds); the tests check the two paths against each other (gradients and logged
losses). :func:`settings` says where this path runs (None elsewhere): a categorical policy (``Discrete``
actions) of separate two-hidden-layer tanh networks on the fused kernels (in the networks' products,
:attr:`warpsci.networks.ActorCritic.fused_precision`), without observation normalisation or action
masks, on contiguous rollout tensors; elsewhere the algorithms differentiate their loss functions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from warpsci.config import TrainConfig
from warpsci.fused_mlp import (
    LaunchSettings,
    actor_critic_pass,
    can_fuse,
    launch_candidates,
    mlp_layers,
    padded_shape_key,
    probe_settings,
    resolved_precision,
)
from warpsci.networks import ActorCritic
from warpsci.trainer import advantage_statistics, mean_denominator

#: The kernels' names of PPO's and A2C's flattened rollout tensors, in the order in which
#: :func:`warpsci.ppo.ppo_losses` and :func:`warpsci.a2c.a2c_losses` take them (without the masks).
PPO_FIELDS = ("obs", "actions", "old_log_probs", "advantages", "returns", "old_values", "row_weights")
A2C_FIELDS = ("obs", "actions", "advantages", "returns", "row_weights")


def settings(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: dict[str, torch.Tensor | None],
    masks: torch.Tensor | None,
    ppo: bool,
) -> LaunchSettings | None:
    """The launch settings of the two loss-head kernels for ``policy`` on a rollout (flattened
    tensors by the kernel's names: ``obs``, ``actions``, ``advantages``, ``returns``,
    ``row_weights`` (None: every row counts) and, for PPO, ``old_log_probs`` and ``old_values``),
    or None where the fused loss does not apply (see the module's docstring). The first candidate
    of the fused MLP's whose kernels load, probed once per network shape and loss variant with the
    kernels that will run (as :func:`warpsci.fused_mlp.chosen_settings`)."""
    obs, weights = rollout["obs"], rollout.get("row_weights")
    eligible = (
        policy.fused
        and policy.kind == "discrete"
        and not policy.shared_trunk
        and policy.obs_normalizer is None
        and masks is None
        and can_fuse(policy.actor, obs)
        and can_fuse(policy.critic, obs)
        and not torch.compiler.is_compiling()
        and all(tensor.is_contiguous() for tensor in rollout.values() if tensor is not None)
    )
    if not eligible:
        return None
    actor, critic = mlp_layers(policy.actor), mlp_layers(policy.critic)
    # One launch runs both networks at the actor's widths: the critic's hidden layers must match.
    if any(a.weight.shape != c.weight.shape for a, c in zip(actor[:2], critic[:2], strict=True)):
        return None
    precision = resolved_precision(policy.fused_precision)
    flags = (
        precision,
        config.norm_adv,
        ppo,
        config.clip_vloss,
        weights is not None,
        rollout["actions"].dtype,
    )
    key = ("loss", *padded_shape_key(obs, *(layer.weight for layer in actor)), *flags)

    def launch(candidate: LaunchSettings) -> None:
        empty = {name: tensor[:0] for name, tensor in rollout.items() if tensor is not None}
        no_rows = torch.zeros(0, device=obs.device, dtype=torch.int64) if ppo else None
        stats = torch.ones(STATISTICS, device=obs.device)
        _launch_heads(policy, config, empty, no_rows, 0, stats, obs.new_zeros(()), ppo, candidate)

    return probe_settings(key, launch_candidates(max(policy.hidden_sizes)), launch)


def minibatch_indices(
    advantages: torch.Tensor,
    weights: torch.Tensor | None,
    order: torch.Tensor,
    minibatch_size: int,
    norm_adv: bool,
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """An epoch's minibatches: ``order`` in slices of ``minibatch_size`` rows (the last may be
    shorter), each with its statistics (:func:`statistics`) where there are row ``weights`` or
    ``norm_adv``; one reduction for the epoch where the slices are equal. The kernels read the
    rows through the index: copying the rollout into minibatch order first made an update at
    65,536 environments on the H100 slower (75 ms against 66)."""
    indices = list(order.split(minibatch_size))
    if weights is None and not norm_adv:
        return [(index, None) for index in indices]
    if order.numel() % minibatch_size == 0:
        by_minibatch = order.view(-1, minibatch_size)
        stats = list(statistics(advantages[by_minibatch], None if weights is None else weights[by_minibatch]))
    else:
        stats = [
            statistics(advantages[index], None if weights is None else weights[index]) for index in indices
        ]
    return list(zip(indices, stats, strict=True))


#: Floats of a minibatch's :func:`statistics` (the fourth pads each minibatch's to 16 bytes, so that
#: every minibatch's view is aligned alike and the kernels compile once).
STATISTICS = 4


def statistics(advantages: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``(mean, std, total weight, 0)`` of rows of ``advantages`` along the last axis, stacked
    along a new last axis: what the kernels normalise advantages with and divide weighted sums by
    (the total weight is :func:`warpsci.trainer.mean_denominator`'s; 1 where ``weights`` is None,
    and unused)."""
    mean, std = advantage_statistics(advantages, weights)
    total = torch.ones_like(mean) if weights is None else mean_denominator(weights)
    return torch.stack([mean, std, total, torch.zeros_like(mean)], dim=-1)


class PPOSums(NamedTuple):
    """A minibatch's sums of PPO's loss parts over its rows, as the kernels leave them."""

    #: Policy loss, entropy, -log ratio, (ratio - 1) - log ratio, clipped rows (weighted sums).
    policy: torch.Tensor
    #: The value loss's squared errors (weighted sum) first.
    value: torch.Tensor
    #: The rows' total weight (their count where every row counts).
    total: torch.Tensor | int

    def losses(self) -> dict[str, torch.Tensor]:
        """The loss's parts under :func:`warpsci.ppo.ppo_losses`'s names, without the loss itself
        (device scalars)."""
        (policy_loss, entropy, old_approx_kl, approx_kl, clip_fraction), value_sum = (
            self.policy / self.total,
            self.value[0] / self.total,
        )
        return {
            "losses/value_loss": 0.5 * value_sum,
            "losses/policy_loss": policy_loss,
            "losses/entropy": entropy,
            "losses/old_approx_kl": old_approx_kl,
            "losses/approx_kl": approx_kl,
            "losses/clipfrac": clip_fraction,
        }


def mean_clip_fraction(minibatches: list[PPOSums]) -> torch.Tensor:
    """The mean over ``minibatches`` of each one's fraction of clipped rows, in a few launches for
    any number of minibatches (one division each where their totals differ)."""
    clipped = torch.stack([sums.policy[4] for sums in minibatches])
    totals = [sums.total for sums in minibatches]
    if all(isinstance(total, torch.Tensor) for total in totals):
        return (clipped / torch.stack(totals)).mean()
    if len(set(totals)) == 1:
        return clipped.mean() / totals[0]
    return torch.stack([sums.policy[4] / sums.total for sums in minibatches]).mean()


def ppo_gradient_sums(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: dict[str, torch.Tensor | None],
    index: torch.Tensor,
    stats: torch.Tensor | None,
    ent_coef: torch.Tensor,
    launch: LaunchSettings,
) -> PPOSums:
    """Set every parameter's ``.grad`` of ``policy`` to the gradient of PPO's loss
    (:func:`warpsci.ppo.ppo_losses`) on the rows ``index`` of ``rollout`` (as :func:`settings`
    takes it), with the minibatch's ``stats`` as :func:`minibatch_indices` gives them, and return
    the loss's sums as the kernels leave them (:class:`PPOSums`; its ``losses()`` names them as
    ``ppo_losses`` does, without the loss itself): a minibatch whose losses are not logged costs no
    launch more. ``ent_coef``: a device scalar (a schedule may change it between replays of a
    captured update). ``launch``: :func:`settings`'s."""
    sums = _set_gradients(policy, config, rollout, index, index.numel(), stats, ent_coef, True, launch)
    total = index.numel() if stats is None or rollout.get("row_weights") is None else stats[2]
    return PPOSums(sums[0], sums[1], total)


def a2c_gradients(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: dict[str, torch.Tensor | None],
    ent_coef: torch.Tensor,
    launch: LaunchSettings,
) -> dict[str, torch.Tensor]:
    """Set every parameter's ``.grad`` of ``policy`` to the gradient of A2C's loss
    (:func:`warpsci.a2c.a2c_losses`) on the whole ``rollout`` (as :func:`settings` takes it), and
    return the loss's parts under the same names, without the loss itself (device scalars,
    detached)."""
    advantages, weights = rollout["advantages"], rollout.get("row_weights")
    stats = statistics(advantages, weights) if weights is not None or config.norm_adv else None
    rows = rollout["obs"].shape[0]
    sums = _set_gradients(policy, config, rollout, None, rows, stats, ent_coef, False, launch)
    total = rows if weights is None else stats[2]
    return {
        "losses/value_loss": 0.5 * sums[1][0] / total,
        "losses/policy_loss": sums[0][0] / total,
        "losses/entropy": sums[0][1] / total,
    }


def _set_gradients(policy, config, rollout, index, rows, stats, ent_coef, ppo, launch) -> list[torch.Tensor]:
    """:func:`_launch_heads`, then every parameter's ``.grad`` set; returns the heads' sums."""
    if stats is None and (config.norm_adv or rollout.get("row_weights") is not None):
        raise ValueError("the minibatch's statistics are needed for advantage normalisation or row weights")
    sums = []
    for parameters, flat, parts in _launch_heads(
        policy, config, rollout, index, rows, stats, ent_coef, ppo, launch
    ):
        for parameter, grad in zip(parameters, flat.split([p.numel() for p in parameters]), strict=True):
            parameter.grad = grad.view(parameter.shape)
        sums.append(parts)
    return sums


def _launch_heads(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: dict[str, torch.Tensor | None],
    index: torch.Tensor | None,
    rows: int,
    stats: torch.Tensor | None,
    ent_coef: torch.Tensor,
    ppo: bool,
    launch: LaunchSettings,
) -> list[tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]]:
    """The actor's and the critic's kernels, in one launch, over ``rows`` rows (``obs[index]``, or
    the first): for each network, its parameters, their flat gradient and the head's sums."""
    options = {"clip_coef": config.clip_coef, "vf_coef": config.vf_coef, "scale": 1.0 / max(rows, 1)}
    # The ratio's clamp bounds rounded from double to float32, as torch rounds them.
    options.update(ratio_low=1.0 - config.clip_coef, ratio_high=1.0 + config.clip_coef)
    options.update(norm_adv=config.norm_adv, ppo=ppo, clip_vloss=ppo and config.clip_vloss)
    names = ("actions", "advantages", "old_log_probs", "returns", "old_values", "row_weights")
    tensors = {name: rollout[name] for name in names if rollout.get(name) is not None}
    tensors["ent_coef"] = ent_coef.reshape(1)
    if stats is not None:
        tensors["adv_stats"] = stats
    networks = [
        tuple(p for layer in mlp_layers(net) for p in (layer.weight, layer.bias))
        for net in (policy.actor, policy.critic)
    ]
    results = actor_critic_pass(
        rollout["obs"],
        rows,
        *networks,
        resolved_precision(policy.fused_precision),
        launch,
        index,
        tensors,
        options,
    )
    return [(parameters, flat, parts) for parameters, (flat, parts) in zip(networks, results, strict=True)]
