"""PPO's minibatch gradient in two kernel launches: the loss computed inside the fused MLP's backward.

Through autograd a PPO minibatch step is a gather of the minibatch's rows, the actor's and the
critic's forward passes, a dozen element-wise and reduction kernels for the loss (log-softmax,
ratio, clipped surrogate, entropy, value loss, their means) and two backward passes that recompute
the hidden layers anyway. Here the backward kernel (``mlp_kernels.backward``) reads each row's
observation through the minibatch's index, runs the network, computes the loss's gradient with
respect to the network's output from the row's rollout data, and backpropagates it: one launch for
the actor (categorical head: clipped surrogate and entropy bonus) and one for the critic (value
loss). Each program also sums the loss's parts over its rows, for the logs.

The formulas are :func:`warpsci.ppo.ppo_losses`'s, derived by hand, including torch's conventions
at the edges (ties of ``maximum`` split the gradient, ``clamp`` passes it at its bounds); the tests
check the two against each other (gradients and logged losses). :func:`applies` says where this
path runs: a categorical policy (``Discrete`` actions) of separate two-hidden-layer tanh networks
on the fused kernels, without observation normalisation, bfloat16, action masks or row weights
(agents that leave the game); elsewhere PPO differentiates :func:`~warpsci.ppo.ppo_losses`.
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


def applies(policy: ActorCritic, rollout: tuple[torch.Tensor | None, ...]) -> bool:
    """Whether :func:`minibatch_gradients` computes ``policy``'s PPO gradient on ``rollout``
    (flattened observations, actions, log-probabilities, advantages, returns, values, row weights,
    action masks)."""
    obs, weights, masks = rollout[0], rollout[6], rollout[7]
    return (
        policy.fused
        and policy.kind == "discrete"
        and not policy.shared_trunk
        and not policy.bf16
        and policy.obs_normalizer is None
        and weights is None
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
    key = ("ppo", *padded_shape_key(obs, *(layer.weight for layer in actor)), critic[2].weight.shape[0])
    empty, no_rows = obs[:0], torch.zeros(0, device=obs.device, dtype=torch.int64)

    def launch(candidate: LaunchSettings) -> None:
        for network, head in ((actor, "categorical_ppo"), (critic, "value_ppo")):
            weights = tuple(p for layer in network for p in (layer.weight, layer.bias))
            backward_pass(empty, 0, weights, "default", candidate, head=head, index=no_rows)

    return probe_settings(key, launch_candidates(max(policy.hidden_sizes)), launch)


def minibatch_indices(
    rollout: tuple[torch.Tensor | None, ...], order: torch.Tensor, minibatch_size: int, norm_adv: bool
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """An epoch's minibatches: ``order`` in slices of ``minibatch_size`` rows (the last may be
    shorter), each with its advantages' mean and standard deviation where ``norm_adv`` (one
    reduction for the epoch where the slices are equal). The kernels read the rows through the
    index: copying the rollout into minibatch order first made an update at 65,536 environments on
    the H100 slower (75 ms against 66)."""
    indices = list(order.split(minibatch_size))
    if not norm_adv:
        return [(index, None) for index in indices]
    advantages = rollout[3]
    if order.numel() % minibatch_size == 0:
        std, mean = torch.std_mean(advantages[order].view(-1, minibatch_size), dim=1)
        stats = list(torch.stack([mean, std], dim=1))
    else:
        stats = [torch.stack(torch.std_mean(advantages[index])[::-1]) for index in indices]
    return list(zip(indices, stats, strict=True))


def minibatch_gradients(
    policy: ActorCritic,
    config: TrainConfig,
    rollout: tuple[torch.Tensor | None, ...],
    index: torch.Tensor,
    adv_stats: torch.Tensor | None,
    ent_coef: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Set every parameter's ``.grad`` of ``policy`` to the gradient of PPO's loss
    (:func:`warpsci.ppo.ppo_losses`) on the rows ``index`` of ``rollout`` (with the advantages'
    mean and standard deviation ``adv_stats`` where ``config.norm_adv``, as
    :func:`minibatch_indices` gives them), and return the loss's parts under the same names,
    without the loss itself (device scalars, detached). ``ent_coef``: a device scalar (a schedule
    may change it between replays of a captured update)."""
    obs, actions, log_probs, advantages, returns, values = rollout[:6]
    rows = index.numel()
    launch = settings(policy, obs)
    precision = resolved_precision("default")
    options = {"clip_coef": config.clip_coef, "vf_coef": config.vf_coef, "scale": 1.0 / rows}
    options.update(norm_adv=config.norm_adv, clip_vloss=config.clip_vloss)
    heads = (
        (policy.actor, "categorical_ppo", {"actions": actions, "old_log_probs": log_probs,
         "advantages": advantages, "adv_stats": advantages if adv_stats is None else adv_stats,
         "ent_coef": ent_coef.reshape(1)}),
        (policy.critic, "value_ppo", {"returns": returns, "old_values": values}),
    )  # fmt: skip
    sums = []
    for network, head, tensors in heads:
        weights = tuple(p for layer in mlp_layers(network) for p in (layer.weight, layer.bias))
        flat, parts = backward_pass(
            obs, rows, weights, precision, launch, head=head, index=index,
            head_tensors=tensors, head_options=options,
        )  # fmt: skip
        for weight, grad in zip(weights, flat.split([w.numel() for w in weights]), strict=True):
            weight.grad = grad.view(weight.shape)
        sums.append(parts / rows)
    (policy_loss, entropy, old_approx_kl, approx_kl, clip_fraction), value_sum = sums[0], sums[1][0]
    return {
        "losses/value_loss": 0.5 * value_sum,
        "losses/policy_loss": policy_loss,
        "losses/entropy": entropy,
        "losses/old_approx_kl": old_approx_kl,
        "losses/approx_kl": approx_kl,
        "losses/clipfrac": clip_fraction,
    }
