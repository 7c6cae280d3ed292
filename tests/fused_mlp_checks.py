"""Checks of the fused MLP kernels, run by ``test_fused_mlp.py`` in a fresh interpreter with
``TRITON_INTERPRET=1`` (Triton decides at import whether its kernels are interpreted, so the checks
must not share a process with tests that want compiled kernels). Each check raises AssertionError
with what differed."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from warpsci.fused_mlp import can_fuse, fused_mlp
from warpsci.networks import ActorCritic, mlp


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def forward_and_gradients_match_float64() -> None:
    """Outputs and weight gradients equal a float64 autograd reference: row counts that do not fill
    a block and that make each backward program loop over several blocks, widths that are not
    powers of two, wider than 16 and up to 128."""
    generator = torch.Generator().manual_seed(7)
    cases = ((1, 6, (32, 32), 5), (300, 6, (32, 32), 5), (1100, 4, (64, 64), 1), (37, 21, (24, 40), 3),
             (130, 128, (128, 96), 17))  # fmt: skip
    for rows, n_in, hidden, n_out in cases:
        net = mlp(n_in, hidden, n_out, out_gain=1.0)
        with torch.no_grad():
            for parameter in net.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.4)
        x = torch.randn(rows, n_in, generator=generator)
        weights = torch.randn(rows, n_out, generator=generator)
        assert can_fuse(net, x), (rows, n_in, hidden, n_out)
        out = fused_mlp(net, x, precision="ieee")
        (out * weights).sum().backward()
        fused_grads = [parameter.grad.clone() for parameter in net.parameters()]
        reference = net.double()
        reference.zero_grad()
        expected = reference(x.double())
        (expected * weights.double()).sum().backward()
        error = _relative(out, expected)
        assert error < 1e-5, f"outputs differ by {error:.2e} for {(rows, n_in, hidden, n_out)}"
        for (name, parameter), grad in zip(reference.named_parameters(), fused_grads, strict=True):
            error = _relative(grad, parameter.grad)
            assert error < 1e-5, (
                f"gradient of {name} differs by {error:.2e} for {(rows, n_in, hidden, n_out)}"
            )


def _shrink(out: torch.Tensor, expected: torch.Tensor, bias: torch.Tensor) -> float:
    """How much ``out`` is scaled against ``expected`` (0: unbiased; negative: toward zero)."""
    product = expected - bias.double()
    return (((out.double() - expected) * product).mean() / product.square().mean()).item()


def rounded_tf32_is_unbiased() -> None:
    """``"tf32_rounded"`` rounds the products' operands to TF32 (errors of TF32's size) without
    the bias toward zero that truncating them has (emulated here in float64 from truncated weights
    and inputs: the statistic below sees it)."""
    torch.manual_seed(0)
    net = mlp(4, (64, 64), 1, 1.0)
    with torch.no_grad():
        net[4].weight.abs_().mul_(20.0)  # coherent terms, as in a trained critic
    x = torch.randn(4096, 4)
    out = fused_mlp(net, x, precision="tf32_rounded")
    expected = net.double()(x.double()).detach()
    error = _relative(out, expected)
    assert 1e-5 < error < 1e-2, f"relative error {error:.2e}: not TF32-sized"
    rounded = _shrink(out.detach(), expected, net[4].bias.detach())

    def truncate(tensor: torch.Tensor) -> torch.Tensor:
        bits = tensor.float().contiguous().view(torch.int32) & ~0x1FFF
        return bits.view(torch.float32).double()

    layers = [net[0], net[2], net[4]]
    hidden = x.double()
    for index, layer in enumerate(layers):
        hidden = truncate(hidden) @ truncate(layer.weight.detach()).T + layer.bias.detach().double()
        if index < 2:
            hidden = hidden.tanh()
    truncated = _shrink(hidden, expected, net[4].bias.detach())
    assert truncated < -3e-4, f"the emulated truncation's shrink {truncated:.2e} was not detected"
    assert abs(rounded) < 1e-4, f"rounded TF32 scaled the outputs by 1 + {rounded:.2e}"


def _bf16(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.bfloat16().double()


def bf16_products_round_their_operands(device: str = "cpu") -> None:
    """``precision="bf16"`` (``TrainConfig.bf16``): each product's operands rounded to bfloat16,
    sums in float32. The outputs equal a float64 emulation that rounds the operands so, far closer
    than they equal the unrounded float64 network (bfloat16's error: 8-bit mantissas); the weight
    gradients carry bfloat16-sized errors and no more; a bfloat16 policy's PPO loss runs inside
    the kernels, with the gradients of autograd through the same bfloat16 kernels."""
    from warpsci import fused_loss
    from warpsci.config import TrainConfig

    generator = torch.Generator().manual_seed(11)
    net = mlp(6, (32, 48), 5, out_gain=1.0).to(device)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator).to(device) * 0.4)
    x = torch.randn(300, 6, generator=generator).to(device)
    out = fused_mlp(net, x, precision="bf16")
    weights = torch.randn(out.shape, generator=generator).to(device)
    (out * weights).sum().backward()
    grads = [parameter.grad.clone() for parameter in net.parameters()]
    emulated = x.double()
    layers = [module for module in net if isinstance(module, torch.nn.Linear)]
    for index, layer in enumerate(layers):
        emulated = _bf16(emulated) @ _bf16(layer.weight.detach()).T + layer.bias.detach().double()
        if index < 2:
            emulated = emulated.tanh()
    reference = net.double()
    reference.zero_grad()
    exact = reference(x.double())
    (exact * weights.double()).sum().backward()
    to_emulation, to_exact = _relative(out, emulated), _relative(out, exact)
    # On a GPU the hidden layers' tanh is the hardware's approximation (relative error 2^-10.9).
    assert to_emulation < (2e-3 if device == "cuda" else 1e-4), f"{to_emulation:.2e} from the emulation"
    assert 1e-3 < to_exact < 3e-2, f"{to_exact:.2e} from float64: not bfloat16-sized"
    for grad, (name, parameter) in zip(grads, reference.named_parameters(), strict=True):
        error = _relative(grad, parameter.grad)
        assert error < 3e-2, f"gradient of {name} differs by {error:.2e} from float64"
    # NaN stays NaN through the rounding (a carry can turn its bits into an infinity or a zero).
    poisoned = x[:3].clone()
    for row, bits in enumerate((0x7FFFFFFF, 0x7F800001, 0xFFFFFFFF)):
        poisoned[row, 0] = torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32)
    with torch.no_grad():
        assert torch.isnan(fused_mlp(net.float(), poisoned, precision="bf16")).all(), "NaN inputs lost"

    torch.manual_seed(5)
    policy = ActorCritic(6, gymnasium.spaces.Discrete(5), (24, 40), fused=True, bf16=True).to(device)
    parameters = list(policy.parameters())
    total = 200
    obs = torch.randn(total, 6, generator=generator).to(device)
    actions = torch.randint(0, 5, (total,), generator=generator).to(device)
    with torch.no_grad():
        log_probs, _, values = policy.evaluate(obs, actions)
    noise = [torch.randn(total, generator=generator).to(device) for _ in range(4)]
    rollout = {"obs": obs, "actions": actions, "old_log_probs": log_probs + 0.3 * noise[0],
               "advantages": noise[1], "returns": values + noise[2],
               "old_values": values + 0.3 * noise[3]}  # fmt: skip
    index = torch.randperm(total, generator=generator)[:137].to(device)
    config, ent_coef = TrainConfig(), torch.tensor(0.05, device=device)
    launch = fused_loss.settings(policy, config, rollout, None, ppo=True)
    assert launch is not None, "a bfloat16 policy's loss runs inside the kernels"
    [(rows, stats)] = fused_loss.minibatch_indices(rollout["advantages"], None, index, 137, True)
    fused_loss.ppo_gradient_sums(policy, config, rollout, rows, stats, ent_coef, launch)
    fused_grads = [parameter.grad.clone() for parameter in parameters]
    from warpsci.ppo import ppo_losses

    for parameter in parameters:
        parameter.grad = None
    fields = (*(rollout.get(name) for name in fused_loss.PPO_FIELDS), None)
    ppo_losses(policy, config, fields, index, ent_coef)["loss"].backward()
    for fused_grad, parameter in zip(fused_grads, parameters, strict=True):
        error = _relative(fused_grad, parameter.grad)
        assert error < 1e-3, f"loss in the kernels against autograd, bfloat16 both: {error:.2e}"
    # The same policy in float32 products: bfloat16-sized differences show that the rollout's
    # forward pass and the loss kernels took bfloat16 operands.
    with torch.no_grad():
        logits = policy.actor_output(obs)
        policy.bf16 = False
        float_logits, float_values = policy.actor_output(obs), policy.value(obs)
    assert _relative(float_values, values) > 1e-4, "the bfloat16 policy's values are float32's"
    assert _relative(float_logits, logits) > 1e-4, "the bfloat16 policy's logits are float32's"
    launch = fused_loss.settings(policy, config, rollout, None, ppo=True)
    fused_loss.ppo_gradient_sums(policy, config, rollout, rows, stats, ent_coef, launch)
    difference = _relative(torch.cat([g.flatten() for g in fused_grads]),
                           torch.cat([p.grad.flatten() for p in parameters]))  # fmt: skip
    assert difference > 1e-4, f"the bfloat16 loss kernels' gradients are float32's ({difference:.2e})"


def leading_dimensions_are_kept() -> None:
    net = mlp(6, (32, 32), 5, out_gain=1.0)
    x = torch.randn(3, 7, 6)
    out = fused_mlp(net, x, precision="ieee")
    assert out.shape == (3, 7, 5), out.shape
    assert torch.allclose(out, net(x), atol=1e-5)


def only_supported_networks_are_fused() -> None:
    x = torch.randn(4, 6)
    assert can_fuse(mlp(6, (8, 8), 2, 1.0), x)
    assert not can_fuse(mlp(6, (8,), 2, 1.0), x), "one hidden layer"
    assert not can_fuse(mlp(6, (8, 8, 8), 2, 1.0), x), "three hidden layers"
    assert not can_fuse(mlp(6, (8, 129), 2, 1.0), x), "wider than 128"
    relu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.ReLU(),
                               torch.nn.Linear(8, 2))  # fmt: skip
    assert not can_fuse(relu, x), "ReLU"
    assert not can_fuse(mlp(6, (8, 8), 2, 1.0), x.double()), "float64 input"
    assert not can_fuse(mlp(6, (8, 8), 2, 1.0), x.requires_grad_()), "input that needs a gradient"


def actor_critic_equals_unfused() -> None:
    """An ActorCritic with and without the kernels: the same log-probabilities, entropies, values and
    gradients, with an action mask, and for MultiDiscrete and Box heads."""
    spaces = (gymnasium.spaces.Discrete(5), gymnasium.spaces.MultiDiscrete([3, 4]),
              gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32))  # fmt: skip
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (6,), np.float32)
    for space in spaces:
        torch.manual_seed(3)
        fused = ActorCritic.for_spaces(observation_space, space, (32, 32), fused=True)
        plain = ActorCritic.for_spaces(observation_space, space, (32, 32), fused=False)
        plain.load_state_dict(fused.state_dict())
        obs = torch.randn(200, 6)
        actions = torch.stack([torch.as_tensor(space.sample()) for _ in range(200)]).to(fused.action_dtype)
        mask = None
        if isinstance(space, gymnasium.spaces.Discrete):
            mask = torch.rand(200, 5) > 0.3
            mask[torch.arange(200), actions] = True
        results = []
        for policy in (fused, plain):
            log_prob, entropy, value = policy.evaluate(obs, actions, mask)
            loss = -(log_prob * 1.3).mean() - 0.01 * entropy.mean() + value.square().mean()
            policy.zero_grad()
            loss.backward()
            grads = torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])
            results.append((log_prob.detach(), entropy.detach(), value.detach(), grads))
        for name, a, b in zip(("log_prob", "entropy", "value", "gradients"), *results, strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), f"{type(space).__name__}: {name} differ"


def training_equals_unfused() -> None:
    """Two A2C iterations of Tag gridworld (partial observations, shared policy), two PPO
    iterations of Cartpole, and PPO and A2C on down-sampled Cartpole (row weights), with and
    without the kernels (the loss inside them, :mod:`warpsci.fused_loss`) end with the same
    weights and log the same losses (the clipped fraction a mean over every minibatch)."""
    from warpsci import fused_loss
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig

    runs = (
        dict(env_id="TagGridworld-v0", algo="a2c", hidden_sizes=(32, 32), shared_policy=True,
             env_params={"num_taggers": 3, "grid_length": 5, "use_full_observation": False}),
        dict(env_id="CartPole-v1", algo="ppo", hidden_sizes=(64, 64), num_minibatches=2, update_epochs=2),
        # Down-sampling weighs rows out of the loss (row weights): 8 environments, 16 steps; those
        # whose episode terminated train, and at most a tenth as many others.
        dict(env_id="CartPole-v1", algo="ppo", hidden_sizes=(64, 64), num_envs=8, num_steps=16,
             total_timesteps=256, neg_pos_env_ratio=0.1),
        dict(env_id="CartPole-v1", algo="a2c", hidden_sizes=(64, 64), num_envs=8, num_steps=16,
             total_timesteps=256, neg_pos_env_ratio=0.1),
    )  # fmt: skip
    for run in runs:
        weights, logged = [], []
        for fused in (True, False):
            config = TrainConfig(
                **({"num_envs": 4, "num_steps": 8, "total_timesteps": 64} | run), fused_mlp=fused, tf32=False
            )
            trainer = make_trainer(config)
            obs = trainer.single.buffer.obs
            assert trainer.policy.fused is fused and can_fuse(trainer.policy.actor, obs[0])
            named = {"obs": obs.flatten(0, 1), "actions": trainer.single.buffer.actions.flatten(0, 1)}
            applies = fused_loss.settings(trainer.policy, config, named, None, ppo=run["algo"] == "ppo")
            assert (applies is not None) is fused
            result = trainer.train()
            weights.append(torch.cat([p.detach().flatten() for p in trainer.policy.parameters()]))
            logged.append({k: v for k, v in result.history[-1].items() if k.startswith("losses/")})
        difference = (weights[0] - weights[1]).abs().max()
        assert torch.allclose(weights[0], weights[1], rtol=1e-4, atol=1e-6), (run["env_id"], difference)
        assert logged[0].keys() == logged[1].keys(), (logged[0].keys(), logged[1].keys())
        for name, value in logged[0].items():
            assert abs(value - logged[1][name]) <= 1e-4 * (1 + abs(value)), (
                run,
                name,
                value,
                logged[1][name],
            )


def eager_calls_do_not_import_dynamo() -> None:
    """A fused forward and backward outside torch.compile leaves torch._dynamo unimported (its
    import is seconds of a run's start-up; a custom operator's first eager call would import it)."""
    import sys

    net = mlp(4, (64, 64), 2, out_gain=1.0)
    fused_mlp(net, torch.randn(40, 4)).sum().backward()
    assert net[0].weight.grad is not None
    assert "torch._dynamo" not in sys.modules


def compiled_loss_keeps_the_kernels() -> None:
    """Under ``torch.compile`` (``TrainConfig.compile``) the kernels stay, as registered custom
    operators inside one graph (no graph break, autograd through their registered backward): the
    loss's outputs and weight gradients equal the eager call's."""
    import torch._dynamo.testing

    net = mlp(4, (64, 64), 2, out_gain=1.0)
    x = torch.randn(300, 4)
    weights = torch.randn(300, 2)

    def loss(x, weights):
        return (fused_mlp(net, x, precision="ieee").tanh() * weights).sum()

    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(loss, backend=counter, fullgraph=True)
    results = []
    for function in (loss, compiled):
        net.zero_grad()
        value = function(x, weights)
        value.backward()
        results.append((value.detach(), [p.grad.clone() for p in net.parameters()]))
    assert counter.frame_count == 1, f"{counter.frame_count} graphs"
    operators = {str(node.target) for graph in counter.graphs for node in graph.graph.nodes}
    assert "warpsci.fused_mlp.default" in operators, sorted(operators)
    assert torch.allclose(results[0][0], results[1][0], rtol=1e-6)
    for eager, traced in zip(results[0][1], results[1][1], strict=True):
        assert torch.allclose(eager, traced, rtol=1e-6, atol=1e-7)


def loss_gradients_equal_autograd(
    device: str = "cpu",
    total: int = 300,
    minibatch: int = 137,
    hidden: tuple[int, int] = (24, 40),
    every_option: bool = True,
) -> None:
    """:mod:`warpsci.fused_loss`'s gradients and logged losses equal :func:`warpsci.ppo.ppo_losses`
    and :func:`warpsci.a2c.a2c_losses` differentiated by autograd (float32 products both): with
    and without advantage normalisation, value clipping and row weights (a quarter of the rows out
    of the game), PPO on a minibatch gathered by index that leaves a partial tile, with ratios and
    value changes on both sides of the clip range; A2C on the whole rollout. ``every_option``
    False: only the defaults (normalised advantages, clipped values), with and without weights."""
    import copy
    import dataclasses
    import functools
    import itertools

    from warpsci import fused_loss
    from warpsci.a2c import a2c_losses
    from warpsci.config import TrainConfig
    from warpsci.distributed import contiguous_span
    from warpsci.ppo import ppo_losses

    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(3)  # the networks' initial weights
    generator = torch.Generator().manual_seed(3)
    policy = ActorCritic(6, gymnasium.spaces.Discrete(5), hidden, fused=True).to(device)

    def noise() -> torch.Tensor:
        return torch.randn(total, generator=generator).to(device)

    obs = torch.randn(total, 6, generator=generator).to(device)
    actions = torch.randint(0, 5, (total,), generator=generator).to(device)
    with torch.no_grad():
        log_probs, _, values = policy.evaluate(obs, actions)
    old_log_probs, advantages = log_probs + 0.3 * noise(), noise()
    returns, old_values = values + noise(), values + 0.3 * noise()
    row_weights = (torch.rand(total, generator=generator) > 0.25).float().to(device)
    index = torch.randperm(total, generator=generator)[:minibatch].to(device)
    ent_coef = torch.tensor(0.05, device=device)
    config = TrainConfig()
    named = {"obs": obs, "actions": actions}
    assert fused_loss.settings(policy, config, named, None, ppo=True) is not None
    masks = torch.ones(total, 5, dtype=torch.bool, device=device)
    assert fused_loss.settings(policy, config, named, masks, ppo=True) is None, "action masks"
    assert (
        fused_loss.settings(policy, config, {"obs": obs[:, :3].T, "actions": actions}, None, ppo=True) is None
    )
    others = {
        "shared trunk": ActorCritic(6, gymnasium.spaces.Discrete(5), (24, 40), fused=True, shared_trunk=True),
        "normalised observations": ActorCritic(6, gymnasium.spaces.Discrete(5), (24, 40), fused=True,
                                               normalize_obs=True),
        "MultiDiscrete": ActorCritic(6, gymnasium.spaces.MultiDiscrete([2, 3]), (24, 40), fused=True),
        "Box": ActorCritic(6, gymnasium.spaces.Box(-1, 1, (2,)), (24, 40), fused=True),
        "not fused": ActorCritic(6, gymnasium.spaces.Discrete(5), (24, 40), fused=False),
    }  # fmt: skip
    for reason, other in others.items():
        assert fused_loss.settings(other.to(device), config, named, None, ppo=True) is None, reason
    parameters = list(policy.parameters())

    # Minibatches that do not divide the rows: the last is shorter, each with its own statistics.
    first = index[:137]
    for size, sizes in ((50, [50, 50, 37]), (137, [137])):
        minibatches = fused_loss.minibatch_indices(advantages, row_weights, first, size, norm_adv=True)
        assert [len(rows) for rows, _ in minibatches] == sizes
        for (rows, stats), start in zip(minibatches, range(0, 137, size), strict=True):
            assert torch.equal(rows, first[start : start + size])
            kept = advantages[rows][row_weights[rows] > 0]
            expected = torch.stack([kept.mean(), kept.std(), row_weights[rows].sum(), kept.new_zeros(())])
            assert torch.allclose(stats, expected), (size, stats, expected)
    # Minibatches keeping one row or none: the means divide by at least 1, as masked_mean's do.
    for kept_rows in (0, 1):
        weights = torch.zeros(4, device=device)
        weights[:kept_rows] = 1.0
        stats = fused_loss.statistics(advantages[:4], weights)
        assert stats[2] == 1.0, (kept_rows, stats)
        if kept_rows:
            assert stats[0] == advantages[0] / 2, "the advantages' mean divides by at least 2"

    reference = copy.deepcopy(policy).double()  # float64 autograd: what both paths approximate
    reference.fused = False

    def autograd(network: ActorCritic, losses, rollout: tuple) -> tuple[dict, list[torch.Tensor]]:
        if network is reference:
            rollout = tuple(t.double() if t is not None and t.is_floating_point() else t for t in rollout)
        for parameter in network.parameters():
            parameter.grad = None
        result = losses(network, rollout)
        result.pop("loss").backward()
        return result, [parameter.grad.double() for parameter in network.parameters()]

    def compare(losses, run_fused, rollout: tuple, label: tuple) -> dict:
        """Autograd's losses (float32) against the fused path's, and the fused gradients' error
        against float64 autograd within 1e-5 or 4 times float32 autograd's error; errors relative
        to the layer's whole gradient, weight and bias (a bias whose gradient is a sum that nearly
        cancels has a large error relative to itself, in float32 autograd too)."""
        policy.fused = False
        expected, expected_grads = autograd(policy, losses, rollout)
        _, exact_grads = autograd(reference, losses, rollout)
        for parameter in parameters:
            parameter.grad = None
        policy.fused = True
        result = run_fused(rollout)
        assert sorted(result) == sorted(expected), label
        # Both networks' gradients back to back in one buffer: averaged over GPUs in place.
        assert contiguous_span([parameter.grad for parameter in parameters]) is not None, label
        for name, value in expected.items():
            close = torch.allclose(result[name], value, rtol=1e-5, atol=1e-6)
            assert close, (label, name, result[name], value)
        for layer in range(0, len(parameters), 2):  # a weight and its bias
            indices = (layer, layer + 1)
            scale = torch.cat([exact_grads[i].flatten() for i in indices]).norm()
            for i in indices:
                error = ((parameters[i].grad.double() - exact_grads[i]).norm() / scale).item()
                autograd_error = ((expected_grads[i] - exact_grads[i]).norm() / scale).item()
                assert error < max(1e-5, 4 * autograd_error), (label, i, error, autograd_error)
        return expected

    def fused_ppo(
        rollout: tuple, config: TrainConfig, rows: torch.Tensor, stats: torch.Tensor | None
    ) -> dict:
        named = dict(zip(fused_loss.PPO_FIELDS, rollout, strict=False))
        launch = fused_loss.settings(policy, config, named, None, ppo=True)
        return fused_loss.ppo_gradient_sums(policy, config, named, rows, stats, ent_coef, launch).losses()

    def fused_a2c(rollout: tuple, config: TrainConfig) -> dict:
        named = dict(zip(fused_loss.A2C_FIELDS, rollout, strict=False))
        launch = fused_loss.settings(policy, config, named, None, ppo=False)
        return fused_loss.a2c_gradients(policy, config, named, ent_coef, launch)

    options = ((True, False), (True, False)) if every_option else ((True,), (True,))
    for norm_adv, clip_vloss, weights in itertools.product(*options, (None, row_weights)):
        config = dataclasses.replace(TrainConfig(), norm_adv=norm_adv, clip_vloss=clip_vloss, vf_coef=0.7)
        label = (norm_adv, clip_vloss, weights is not None)
        [(rows, stats)] = fused_loss.minibatch_indices(advantages, weights, index, index.numel(), norm_adv)
        expected = compare(
            lambda network, rollout, config=config: ppo_losses(
                network, config, rollout, index, ent_coef.to(rollout[3].dtype)
            ),
            functools.partial(fused_ppo, config=config, rows=rows, stats=stats),
            (obs, actions, old_log_probs, advantages, returns, old_values, weights, None),
            ("ppo", *label),
        )
        assert 0 < expected["losses/clipfrac"] < 1, "the minibatch must straddle the clip range"
        if clip_vloss:  # A2C has no value clipping
            compare(
                lambda network, rollout, config=config: a2c_losses(
                    network, config, rollout, ent_coef.to(rollout[2].dtype)
                ),
                functools.partial(fused_a2c, config=config),
                (obs, actions, advantages, returns, weights, None),
                ("a2c", *label),
            )


CHECKS = (
    forward_and_gradients_match_float64,
    rounded_tf32_is_unbiased,
    bf16_products_round_their_operands,
    leading_dimensions_are_kept,
    only_supported_networks_are_fused,
    actor_critic_equals_unfused,
    training_equals_unfused,
    eager_calls_do_not_import_dynamo,
    compiled_loss_keeps_the_kernels,
    loss_gradients_equal_autograd,
)
