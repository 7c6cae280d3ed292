"""PPO's and A2C's gradients with the loss computed inside the fused MLP's backward kernel.

Through autograd a PPO minibatch step is a gather of the minibatch's rows, the actor's and the
critic's forward passes, a dozen element-wise and reduction kernels for the loss (log-softmax,
ratio, clipped surrogate, entropy, value loss, their means) and two backward passes that recompute
the hidden layers anyway. Here the backward kernel (``mlp_kernels.backward``) reads each row's
observation (through the minibatch's index), runs the network, computes the loss's gradient with
respect to the network's output from the row's rollout data, and backpropagates it: one launch for
the actor (categorical head: policy loss and entropy bonus) and one for the critic (value loss).
Each program also sums the loss's parts over its rows, for the logs. Rows of agents out of the
game (row weights) count in no mean, as in the autograd path.

The formulas are :func:`warpsci.ppo.ppo_losses`'s and :func:`warpsci.a2c.a2c_losses`', derived by
hand, including torch's conventions at the edges (ties of ``maximum`` split the gradient, ``clamp``
passes it at its bounds); the tests check the two paths against each other (gradients and logged
losses). :func:`applies` says where this path runs: a categorical policy (``Discrete`` actions) of
separate two-hidden-layer tanh networks on the fused kernels, without observation normalisation,
bfloat16 or action masks; elsewhere the algorithms differentiate their loss functions.
"""

from __future__ import annotations

import torch

from warpsci.config import TrainConfig
from warpsci.fused_mlp import (
    LaunchSettings,
    backward_pass,
    can_fuse,
    launch_candidates,
    mlp_layers,
    padded_shape_key,
    probe_settings,
    resolved_precision,
)
from warpsci.networks import ActorCritic
from warpsci.trainer import advantage_statistics, mean_denominator


def applies(policy: ActorCritic, obs: torch.Tensor, masks: torch.Tensor | None) -> bool:
    """Whether :func:`ppo_gradients` and :func:`a2c_gradients` compute ``policy``'s gradients on a
    rollout of flattened observations ``obs`` with action masks ``masks`` (None: none)."""
    return (
        policy.fused
        and policy.kind == "discrete"
        and not policy.shared_trunk
        and not policy.bf16
        and policy.obs_normalizer is None
        and masks is None
        and can_fuse(policy.actor, obs)
        and can_fuse(policy.critic, obs)
        and not torch.compiler.is_compiling()
        and settings(policy, obs) is not None
    )


def settings(policy: ActorCritic, obs: torch.Tensor) -> LaunchSettings | None:
    """The launch settings of the two loss-head kernels for ``policy`` on ``obs``'s device: the
    first candidate of the fused MLP's whose kernels load (probed once per shape, as
    :func:`warpsci.fused_mlp.chosen_settings`), or None."""
    actor, critic = mlp_layers(policy.actor), mlp_layers(policy.critic)
    key = ("loss", *padded_shape_key(obs, *(layer.weight for layer in actor)), critic[2].weight.shape[0])
    empty, no_rows = obs[:0], torch.zeros(0, device=obs.device, dtype=torch.int64)

    def launch(candidate: LaunchSettings) -> None:
        for network, head in ((actor, "categorical"), (critic, "value")):
            weights = tuple(p for layer in network for p in (layer.weight, layer.bias))
            backward_pass(empty, 0, weights, "default", candidate, head=head, index=no_rows)

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


def statistics(advantages: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``(mean, std, total weight)`` of rows of ``advantages`` along the last axis, stacked along
    a new last axis: what the kernels normalise advantages with and divide weighted sums by (the
    total weight is :func:`warpsci.trainer.mean_denominator`'s; 1 where ``weights`` is None, and
    unused)."""
    mean, std = advantage_statistics(advantages, weights)
    total = torch.ones_like(mean) if weights is None else mean_denominator(weights)
    return torch.stack([mean, std, total], dim=-1)


def ppo_gradients(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: tuple[torch.Tensor | None, ...],
    index: torch.Tensor,
    stats: torch.Tensor | None,
    ent_coef: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Set every parameter's ``.grad`` of ``policy`` to the gradient of PPO's loss
    (:func:`warpsci.ppo.ppo_losses`) on the rows ``index`` of ``rollout`` (flattened observations,
    actions, log-probabilities, advantages, returns, values and row weights), with the minibatch's
    ``stats`` as :func:`minibatch_indices` gives them, and return the loss's parts under the same
    names, without the loss itself (device scalars, detached). ``ent_coef``: a device scalar (a
    schedule may change it between replays of a captured update)."""
    obs, actions, log_probs, advantages, returns, values, weights = rollout[:7]
    sums, total = _gradients(
        policy, config, obs, index, index.numel(), stats, weights, ent_coef,
        actor={"actions": actions, "old_log_probs": log_probs, "advantages": advantages},
        critic={"returns": returns, "old_values": values}, ppo=True,
    )  # fmt: skip
    (policy_loss, entropy, old_approx_kl, approx_kl, clip_fraction), value_sum = (
        sums[0] / total,
        sums[1][0] / total,
    )
    return {
        "losses/value_loss": 0.5 * value_sum,
        "losses/policy_loss": policy_loss,
        "losses/entropy": entropy,
        "losses/old_approx_kl": old_approx_kl,
        "losses/approx_kl": approx_kl,
        "losses/clipfrac": clip_fraction,
    }


def a2c_gradients(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: tuple[torch.Tensor | None, ...],
    ent_coef: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Set every parameter's ``.grad`` of ``policy`` to the gradient of A2C's loss
    (:func:`warpsci.a2c.a2c_losses`) on the whole ``rollout`` (flattened observations, actions,
    advantages, returns and row weights), and return the loss's parts under the same names,
    without the loss itself (device scalars, detached)."""
    obs, actions, advantages, returns, weights = rollout[:5]
    stats = statistics(advantages, weights) if weights is not None or config.norm_adv else None
    sums, total = _gradients(
        policy, config, obs, None, obs.shape[0], stats, weights, ent_coef,
        actor={"actions": actions, "advantages": advantages}, critic={"returns": returns}, ppo=False,
    )  # fmt: skip
    return {
        "losses/value_loss": 0.5 * sums[1][0] / total,
        "losses/policy_loss": sums[0][0] / total,
        "losses/entropy": sums[0][1] / total,
    }


def _gradients(
    policy: ActorCritic,
    config: TrainConfig,
    obs: torch.Tensor,
    index: torch.Tensor | None,
    rows: int,
    stats: torch.Tensor | None,
    weights: torch.Tensor | None,
    ent_coef: torch.Tensor,
    actor: dict[str, torch.Tensor],
    critic: dict[str, torch.Tensor],
    ppo: bool,
) -> tuple[list[torch.Tensor], torch.Tensor | float]:
    """The actor's and the critic's launches over ``rows`` rows (``obs[index]``, or the first):
    sets the gradients, returns the heads' sums and what their means divide by."""
    launch = settings(policy, obs)
    precision = resolved_precision("default")
    options = {"clip_coef": config.clip_coef, "vf_coef": config.vf_coef, "scale": 1.0 / rows}
    options.update(norm_adv=config.norm_adv, ppo=ppo, clip_vloss=ppo and config.clip_vloss)
    common = {} if stats is None else {"adv_stats": stats}
    if weights is not None:
        common["row_weights"] = weights
    actor = actor | common | {"ent_coef": ent_coef.reshape(1)}
    sums = []
    for network, head, tensors in (
        (policy.actor, "categorical", actor),
        (policy.critic, "value", critic | common),
    ):
        parameters = tuple(p for layer in mlp_layers(network) for p in (layer.weight, layer.bias))
        flat, parts = backward_pass(
            obs, rows, parameters, precision, launch, head=head, index=index,
            head_tensors=tensors, head_options=options,
        )  # fmt: skip
        for parameter, grad in zip(parameters, flat.split([p.numel() for p in parameters]), strict=True):
            parameter.grad = grad.view(parameter.shape)
        sums.append(parts)
    return sums, rows if weights is None else stats[2]
