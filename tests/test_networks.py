"""The policy networks: CleanRL's separate tanh MLPs and WarpDrive's shared ReLU trunk."""

from __future__ import annotations

import gymnasium
import pytest
import torch
from torch import nn

from warpsci import networks
from warpsci.config import ACTIVATION_NAMES, GROUP_KEYS, TrainConfig
from warpsci.networks import ACTIVATIONS, ActorCritic, both_heads
from warpsci.ppo import PPOTrainer

SPACES = [
    gymnasium.spaces.Discrete(3),
    gymnasium.spaces.MultiDiscrete([4, 2]),
    gymnasium.spaces.Box(-1, 1, (2,)),
]


@pytest.mark.parametrize("action_space", SPACES, ids=["discrete", "multi_discrete", "box"])
def test_a_shared_trunk_is_one_module_under_both_heads_and_runs_once_for_both(action_space):
    torch.manual_seed(0)
    policy = ActorCritic(5, action_space, (16, 8), activation="relu", shared_trunk=True)
    assert policy.actor[0] is policy.critic[0]
    assert [type(layer) for layer in policy.actor[0]] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU]
    # Trunk 5 -> 16 -> 8, then the two heads; shared parameters are counted once.
    outputs = policy.actor[1].out_features
    expected = (5 * 16 + 16) + (16 * 8 + 8) + (8 * outputs + outputs) + (8 + 1)
    expected += outputs if isinstance(action_space, gymnasium.spaces.Box) else 0  # log std
    assert sum(parameter.numel() for parameter in policy.parameters()) == expected

    obs = torch.randn(6, 5)
    calls = []
    policy.actor[0].register_forward_hook(lambda *_: calls.append(1))
    out, value = policy.act_and_value(obs)
    assert len(calls) == 1
    assert torch.allclose(out, policy.actor_output(obs)) and torch.allclose(value, policy.value(obs))
    actions, log_prob = policy.act(obs)
    new_log_prob, _, new_value = policy.evaluate(obs, actions)
    assert torch.allclose(new_log_prob, log_prob, atol=1e-6) and torch.allclose(new_value, value)


def test_both_losses_reach_the_shared_trunk():
    policy = ActorCritic(3, gymnasium.spaces.Discrete(2), (8,), shared_trunk=True)
    obs, actions = torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    trunk = policy.actor[0][0].weight
    log_prob, _, value = policy.evaluate(obs, actions)
    (from_actor,) = torch.autograd.grad(log_prob.sum(), trunk, retain_graph=True)
    (from_critic,) = torch.autograd.grad(value.sum(), trunk)
    assert from_actor.abs().sum() > 0 and from_critic.abs().sum() > 0


def test_the_activation_is_chosen_by_name_and_unknown_names_are_refused():
    policy = ActorCritic(3, gymnasium.spaces.Discrete(2), (8, 8), activation="relu")
    assert [type(layer) for layer in policy.critic] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU, nn.Linear]
    assert set(ACTIVATION_NAMES) == set(ACTIVATIONS)
    assert {"activation", "shared_trunk"} <= set(GROUP_KEYS)
    with pytest.raises(ValueError, match="activation must be one of \\['tanh', 'relu'\\], got 'gelu'"):
        TrainConfig(activation="gelu")
    with pytest.raises(ValueError, match="activation must be one of"):
        ActorCritic(3, gymnasium.spaces.Discrete(2), (8,), activation="gelu")


def test_a_shared_trunk_records_the_values_in_the_rollout_as_a_critic_pass_would():
    config = TrainConfig(num_envs=4, num_steps=16, total_timesteps=64, shared_trunk=True, activation="relu")
    trainer = PPOTrainer(config)
    trainer.collect_rollout()
    trainer.compute_advantages()
    buffer = trainer.buffer
    with torch.no_grad():
        assert torch.allclose(buffer.values, trainer.policy.value(buffer.obs), atol=1e-6)
    assert buffer.values.abs().sum() > 0


@pytest.mark.parametrize("shared_trunk", [False, True], ids=["separate", "shared_trunk"])
def test_bf16_products_give_float32_outputs_close_to_float32_and_gradients_reach_every_weight(shared_trunk):
    torch.manual_seed(0)
    options = {"activation": "relu", "shared_trunk": shared_trunk}
    exact = ActorCritic(6, gymnasium.spaces.MultiDiscrete([3, 3]), (64, 64), **options)
    halved = ActorCritic(6, gymnasium.spaces.MultiDiscrete([3, 3]), (64, 64), bf16=True, **options)
    halved.load_state_dict(exact.state_dict())
    obs = torch.randn(256, 6)
    out, value = halved.act_and_value(obs)
    assert out.dtype == value.dtype == torch.float32
    reference_out, reference_value = exact.act_and_value(obs)
    # bfloat16 keeps 8 bits of mantissa: products good to about 0.4%, not to float32's 1e-7.
    scale = reference_value.abs().max()
    assert 0 < (value - reference_value).abs().max() < 0.02 * scale
    assert (out - reference_out).abs().max() < 0.02 * reference_out.abs().max()
    actions = torch.randint(0, 3, (256, 2))
    log_prob, entropy, value = halved.evaluate(obs, actions)
    (log_prob.sum() + entropy.sum() + value.sum()).backward()
    for name, parameter in halved.named_parameters():
        assert parameter.grad is not None and parameter.grad.dtype == torch.float32, name
        assert parameter.grad.abs().sum() > 0, name


def test_bf16_is_a_config_and_group_setting_and_reaches_the_network():
    assert "bf16" in GROUP_KEYS
    config = TrainConfig(num_envs=4, num_steps=8, total_timesteps=32, bf16=True, hidden_sizes=(16, 16))
    trainer = PPOTrainer(config)
    assert trainer.policy.bf16
    trainer.collect_rollout()
    trainer.compute_advantages()
    assert trainer.buffer.values.dtype == torch.float32 and trainer.buffer.values.abs().sum() > 0


@pytest.mark.parametrize(
    ("activation", "shared_trunk", "bf16"),
    [
        ("relu", True, False),
        ("relu", False, False),
        ("tanh", False, False),
        ("relu", True, True),
        ("relu", False, True),
    ],
)
def test_passes_without_gradients_fuse_relu_into_the_products_and_equal_the_layers(
    activation, shared_trunk, bf16, monkeypatch
):
    """Without gradients (the rollout's passes), each Linear that a ReLU follows is one product with
    the bias and the ReLU applied as it is written (``torch._addmm_activation``); the outputs equal
    PyTorch's layers. Tanh networks run as they are. With bf16 the products take bfloat16 operands
    (cast before the call: autocast casts them on the CPU but not on CUDA), and a shared trunk's
    output goes to the heads in bfloat16 (no float32 copy)."""
    calls = []
    fused = torch._addmm_activation
    monkeypatch.setattr(
        torch, "_addmm_activation", lambda *args: calls.append({arg.dtype for arg in args}) or fused(*args)
    )
    hidden_dtypes = []
    heads = networks.both_heads

    def recorded_heads(actor, critic, hidden):
        hidden_dtypes.append(hidden.dtype)
        return heads(actor, critic, hidden)

    monkeypatch.setattr(networks, "both_heads", recorded_heads)
    torch.manual_seed(0)
    policy = ActorCritic(7, gymnasium.spaces.MultiDiscrete([3, 4]), (16, 8), activation=activation,
                         shared_trunk=shared_trunk, bf16=bf16)  # fmt: skip
    obs = torch.randn(3, 5, 7)
    with torch.no_grad():
        actor_output, value = policy.act_and_value(obs)
        logits = policy.actor_output(obs)
    layers_output, layers_value = policy.act_and_value(obs)  # with gradients: the layers
    assert actor_output.dtype == value.dtype == torch.float32
    torch.testing.assert_close(actor_output, layers_output.detach(), rtol=0, atol=0)
    torch.testing.assert_close(value, layers_value.detach(), rtol=0, atol=0)
    # The actor's own head: one product (in bfloat16, rounded apart from the stacked heads').
    tolerance = {"rtol": 1e-2, "atol": 1e-2} if bf16 else {}
    torch.testing.assert_close(logits, layers_output.detach(), **tolerance)
    if shared_trunk:
        assert hidden_dtypes == [torch.bfloat16 if bf16 else torch.float32] * 2
    two_hidden_layers = 2
    passes = 1 if shared_trunk else 2  # the trunk once, or the actor and the critic
    expected = 0 if activation == "tanh" else two_hidden_layers * (passes + 1)  # then actor_output
    assert len(calls) == expected
    assert all(dtypes == {torch.bfloat16 if bf16 else torch.float32} for dtypes in calls)


def test_both_heads_are_one_product_equal_to_each_head_and_train_both():
    """A shared trunk's policy and value heads run as one product of their stacked weights: the
    same outputs as each head on its own, and gradients reach each head's weights as they would."""
    torch.manual_seed(1)
    actor_head, critic_head = nn.Linear(16, 5), nn.Linear(16, 1)
    hidden = torch.randn(4, 3, 16)
    out, value = both_heads(actor_head, critic_head, hidden)
    torch.testing.assert_close(out, actor_head(hidden))
    torch.testing.assert_close(value, critic_head(hidden).squeeze(-1))
    (out.square().sum() + 2 * value.sum()).backward()
    expected = [parameter.grad.clone() for parameter in (*actor_head.parameters(), *critic_head.parameters())]
    for parameter in (*actor_head.parameters(), *critic_head.parameters()):
        parameter.grad = None
    (actor_head(hidden).square().sum() + 2 * critic_head(hidden).sum()).backward()
    for grad, parameter in zip(expected, (*actor_head.parameters(), *critic_head.parameters()), strict=True):
        torch.testing.assert_close(grad, parameter.grad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bf16_rollout_pass_on_the_gpu_takes_bfloat16_operands_and_equals_float64(monkeypatch):
    """On CUDA, where autocast leaves ``torch._addmm_activation``'s operands as they are, the
    bf16 rollout's ReLU products take bfloat16 operands (not float32 ones in TF32), and the
    outputs equal the network in float64 within bfloat16's rounding. (That the shared trunk's
    output reaches the heads in bfloat16 is checked on the CPU, above.)"""
    dtypes = []
    fused = torch._addmm_activation
    monkeypatch.setattr(
        torch, "_addmm_activation", lambda *args: dtypes.append({arg.dtype for arg in args}) or fused(*args)
    )
    torch.manual_seed(3)
    policy = ActorCritic(71, gymnasium.spaces.MultiDiscrete([11, 11]), (256, 256), activation="relu",
                         shared_trunk=True, bf16=True).cuda()  # fmt: skip
    obs = torch.randn(20_000, 71, device="cuda")
    with torch.no_grad():
        actor_output, value = policy.act_and_value(obs)
    assert dtypes == [{torch.bfloat16}] * 2  # the trunk's two ReLU products
    assert actor_output.dtype == value.dtype == torch.float32
    reference = policy.double()
    with torch.no_grad():
        expected_output = reference.actor(obs.double()).reshape(actor_output.shape)
        expected_value = reference.critic(obs.double()).squeeze(-1)
    for got, expected in ((actor_output, expected_output), (value, expected_value)):
        error = ((got.double() - expected).norm() / expected.norm()).item()
        assert 1e-5 < error < 3e-2  # bfloat16's rounding (8 bits of mantissa), not float32's


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fused_relu_products_and_both_heads_on_the_gpu_equal_float64():
    """On CUDA the rollout's pass (bias and ReLU in cuBLASLt's epilogue, both heads one product)
    equals the network in float64, with full float32 products."""
    torch.manual_seed(2)
    policy = ActorCritic(71, gymnasium.spaces.MultiDiscrete([11, 11]), (256, 256), activation="relu",
                         shared_trunk=True).cuda()  # fmt: skip
    obs = torch.randn(20_000, 71, device="cuda")
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with torch.no_grad():
            actor_output, value = policy.act_and_value(obs)
    finally:
        torch.set_float32_matmul_precision(previous)
    reference = policy.double()
    with torch.no_grad():
        expected_output = reference.actor(obs.double()).reshape(actor_output.shape)
        expected_value = reference.critic(obs.double()).squeeze(-1)
    for got, expected in ((actor_output, expected_output), (value, expected_value)):
        assert ((got.double() - expected).norm() / expected.norm()).item() < 1e-5
