"""warpsci's Adam and RMSprop against torch.optim's: the same numbers, the same checkpoint layout,
and no torch._dynamo import."""

import copy
import importlib.util

import pytest
import torch
from fresh_interpreter import run_script

from warpsci.optimizers import Adam, RMSprop, flatten_parameters


def _network(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _train(network: torch.nn.Module, optimizer, steps: int, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(64, 5, generator=generator)
        target = torch.randn(64, 3, generator=generator)
        optimizer.zero_grad(set_to_none=True)
        ((network(x) - target) ** 2).mean().backward()
        optimizer.step()


def _ours_and_torch(kind: str, lr: float = 3e-3):
    ours_net, torch_net = _network(1), _network(1)
    if kind == "adam":
        ours = Adam(ours_net.parameters(), lr=lr, eps=1e-5)
        theirs = torch.optim.Adam(torch_net.parameters(), lr=lr, eps=1e-5)
    else:
        ours = RMSprop(ours_net.parameters(), lr=lr, alpha=0.99, eps=1e-5)
        theirs = torch.optim.RMSprop(torch_net.parameters(), lr=lr, alpha=0.99, eps=1e-5)
    return ours_net, ours, torch_net, theirs


@pytest.mark.parametrize("kind", ["adam", "rmsprop"])
def test_cpu_steps_equal_torch_optim_bit_for_bit(kind):
    ours_net, ours, torch_net, theirs = _ours_and_torch(kind)
    for lr in (3e-3, 1e-3):  # a learning-rate change between steps, as the annealing makes
        ours.param_groups[0]["lr"] = theirs.param_groups[0]["lr"] = lr
        _train(ours_net, ours, 25)
        _train(torch_net, theirs, 25)
    for a, b in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["adam", "rmsprop"])
def test_state_dicts_load_both_ways_and_training_continues_identically(kind):
    ours_net, ours, torch_net, theirs = _ours_and_torch(kind)
    _train(ours_net, ours, 10)
    _train(torch_net, theirs, 10)
    # Copied, as a checkpoint's round trip through torch.save copies them.
    ours_state, torch_state = copy.deepcopy(ours.state_dict()), copy.deepcopy(theirs.state_dict())
    assert ours_state["param_groups"][0].keys() == torch_state["param_groups"][0].keys()
    assert ours_state["state"].keys() == torch_state["state"].keys()
    # Swap: torch's state into ours, ours into torch's; both go on as before.
    ours_net2, ours2, torch_net2, theirs2 = _ours_and_torch(kind, lr=1.0)
    ours_net2.load_state_dict(torch_net.state_dict())
    torch_net2.load_state_dict(ours_net.state_dict())
    ours2.load_state_dict(torch_state)
    theirs2.load_state_dict(ours_state)
    assert ours2.param_groups[0]["lr"] == pytest.approx(3e-3)
    for network, optimizer in (
        (ours_net, ours),
        (torch_net, theirs),
        (ours_net2, ours2),
        (torch_net2, theirs2),
    ):
        _train(network, optimizer, 5, seed=7)
    for a, b, c in zip(ours_net.parameters(), ours_net2.parameters(), torch_net2.parameters(), strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_fused_adam_equals_torch_fused_adam():
    """The capturable branch's kernel call, checked where it can run here: torch's fused Adam on the
    CPU, against torch.optim.Adam(fused=True)."""
    ours_net, torch_net = _network(2), _network(2)
    ours = Adam(ours_net.parameters(), lr=2e-3, eps=1e-5)
    ours.capturable = True  # the CUDA branch, on CPU tensors
    theirs = torch.optim.Adam(torch_net.parameters(), lr=2e-3, eps=1e-5, fused=True)
    _train(ours_net, ours, 20)
    _train(torch_net, theirs, 20)
    for a, b in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_foreach_rmsprop_with_a_tensor_learning_rate_equals_torch():
    ours_net, torch_net = _network(3), _network(3)
    ours = RMSprop(ours_net.parameters(), lr=torch.tensor(2e-3), alpha=0.99, eps=1e-5)
    ours.capturable = True  # the CUDA branch, on CPU tensors
    theirs = torch.optim.RMSprop(torch_net.parameters(), lr=2e-3, alpha=0.99, eps=1e-5, foreach=True)
    _train(ours_net, ours, 20)
    _train(torch_net, theirs, 20)
    for a, b in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="no parameters"):
        Adam([])
    with pytest.raises(ValueError, match="CUDA"):
        Adam(_network(0).parameters(), capturable=True)
    ours = Adam(_network(0).parameters())
    with pytest.raises(ValueError, match="holds 2 parameters"):
        ours.load_state_dict(Adam(torch.nn.Linear(2, 2).parameters()).state_dict())
    other = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with pytest.raises(
        ValueError, match=r"exp_avg of parameter 0 has shape \(8, 5\); the parameter has \(16, 5\)"
    ):
        ours.load_state_dict(Adam(other.parameters()).state_dict())


def test_a_parameter_without_saved_state_starts_afresh():
    network = _network(4)
    ours = Adam(network.parameters(), lr=1e-2)
    _train(network, ours, 3)
    fresh = torch.optim.Adam(_network(4).parameters(), lr=1e-2).state_dict()  # no state before a step
    ours.load_state_dict(fresh)
    assert all(float(entry["step"]) == 0 and not entry["exp_avg"].any() for entry in ours.state.values())


def test_training_does_not_import_torch_dynamo():
    """torch.optim's wrappers import torch._dynamo (a second of start-up); a CPU run must not."""
    script = (
        "import sys\n"
        "from warpsci.algorithms import make_trainer\n"
        "from warpsci.config import TrainConfig\n"
        "config = TrainConfig(env_id='CartPole-v1', num_envs=4, num_steps=8, total_timesteps=64,"
        " checkpoint_every=0)\n"
        "make_trainer(config).train()\n"
        "print('dynamo imported:', 'torch._dynamo' in sys.modules)\n"
    )
    result = run_script(script, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "dynamo imported: False" in result.stdout


def test_zero_grad_keeps_gradients_that_are_views():
    """Gradients set as views of one flat tensor (as the fused loss path sets them) are zeroed in
    place by ``zero_grad(set_to_none=False)``, as torch.optim zeroes them, and step afterwards."""
    network = _network(2)
    optimizer = Adam(network.parameters(), lr=1e-3)
    flat = torch.randn(sum(p.numel() for p in network.parameters()))
    parameters = list(network.parameters())
    for parameter, grad in zip(parameters, flat.split([p.numel() for p in parameters]), strict=True):
        parameter.grad = grad.view(parameter.shape)
    optimizer.zero_grad(set_to_none=False)
    assert torch.count_nonzero(flat) == 0
    before = [p.detach().clone() for p in parameters]
    optimizer.step()
    assert all(torch.equal(p, b) for p, b in zip(parameters, before, strict=True)), (
        "zero gradients move nothing"
    )


def test_flattened_parameters_keep_their_values_and_share_one_buffer():
    network = _network(5)
    before = [parameter.detach().clone() for parameter in network.parameters()]
    x = torch.randn(7, 5)
    expected = network(x)
    parameters = list(network.parameters())
    flat = flatten_parameters(parameters)
    assert flat.numel() == sum(parameter.numel() for parameter in parameters)
    for parameter, value in zip(network.parameters(), before, strict=True):
        assert torch.equal(parameter, value)
        assert parameter.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
    torch.testing.assert_close(network(x), expected, rtol=0, atol=0)
    flat.zero_()  # the parameters are views of the buffer
    assert all(not parameter.detach().any() for parameter in network.parameters())


def test_clipped_step_on_the_cpu_is_torch_clipping_then_the_step():
    ours_net, torch_net = _network(6), _network(6)
    ours = Adam(ours_net.parameters(), lr=3e-3, eps=1e-5)
    theirs = torch.optim.Adam(torch_net.parameters(), lr=3e-3, eps=1e-5)
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        x = torch.randn(64, 5, generator=generator) * 30  # large gradients: clipped
        for network, optimizer in ((ours_net, None), (torch_net, theirs)):
            network.zero_grad(set_to_none=True)
            (network(x) ** 2).mean().backward()
            if optimizer is not None:
                torch.nn.utils.clip_grad_norm_(list(network.parameters()), 0.5)
                optimizer.step()
        ours.clipped_step(0.5)
    for a, b in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        assert torch.equal(a, b)


CLIPPED_ADAM_CHECK = """
import torch
from warpsci.optimizers import clipped_adam_step

torch.manual_seed(0)
n = 5000  # more than the kernel's block: several programs, each reading every gradient
param = torch.randn(n)
reference = param.clone().requires_grad_(True)
theirs = torch.optim.Adam([reference], lr=2e-3, eps=1e-5)
exp_avg, exp_avg_sq, step = torch.zeros(n), torch.zeros(n), torch.zeros(())
lr = torch.tensor(2e-3)
for scale in (10.0, 0.001, 3.0):  # clipped, not clipped, clipped
    step += 1
    grad = torch.randn(n) * scale
    given = grad.clone()
    reference.grad = grad.clone()
    torch.nn.utils.clip_grad_norm_([reference], 0.5)
    theirs.step()
    clipped_adam_step(grad, param, exp_avg, exp_avg_sq, step, lr, 0.5, (0.9, 0.999), 1e-5)
    assert torch.equal(grad, given)  # read, not written
    torch.testing.assert_close(param, reference.detach(), rtol=1e-5, atol=1e-6)
    state = theirs.state[reference]
    torch.testing.assert_close(exp_avg, state["exp_avg"], rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(exp_avg_sq, state["exp_avg_sq"], rtol=1e-5, atol=1e-10)

# A NaN gradient makes every weight NaN, as torch's clipping (a product with the NaN norm) does.
grad = torch.randn(n)
grad[7] = float("nan")
step += 1
clipped_adam_step(grad, param, exp_avg, exp_avg_sq, step, lr, 0.5, (0.9, 0.999), 1e-5)
assert param.isnan().all()
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton")
def test_clipped_adam_kernel_equals_torch_clipping_and_adam_under_the_triton_interpreter():
    completed = run_script(CLIPPED_ADAM_CHECK, timeout=600, TRITON_INTERPRET="1")
    assert completed.returncode == 0, completed.stderr[-4000:]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_flat_clipped_step_on_the_gpu_equals_torch_and_checkpoints_alike():
    ours_net, torch_net = _network(7).cuda(), _network(7).cuda()
    parameters = list(ours_net.parameters())
    flatten_parameters(parameters)
    ours = Adam(parameters, lr=torch.tensor(3e-3, device="cuda"), eps=1e-5, capturable=True)
    theirs = torch.optim.Adam(torch_net.parameters(), lr=3e-3, eps=1e-5, fused=True)
    generator = torch.Generator(device="cuda").manual_seed(0)
    for step in range(6):
        flat_grad = torch.randn(sum(p.numel() for p in parameters), device="cuda", generator=generator)
        flat_grad *= 10.0 if step % 2 else 0.001  # clipped, then not
        offset = 0
        for mine, other in zip(parameters, torch_net.parameters(), strict=True):
            mine.grad = flat_grad[offset : offset + mine.numel()].view_as(mine)  # as the fused loss's
            if step % 3 == 2:
                mine.grad = mine.grad.clone()  # as autograd's: gathered by the step
            other.grad = mine.grad.clone()
            offset += mine.numel()
        ours.clipped_step(0.5)
        torch.nn.utils.clip_grad_norm_(list(torch_net.parameters()), 0.5)
        theirs.step()
    for a, b in zip(parameters, torch_net.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert float(ours.state[parameters[0]]["step"]) == 6.0
    # The flat state saves and loads in torch.optim's layout, both ways.
    restored = torch.optim.Adam(_network(7).cuda().parameters(), lr=3e-3, eps=1e-5)
    restored.load_state_dict(copy.deepcopy(ours.state_dict()))
    for a, b in zip(restored.state.values(), theirs.state.values(), strict=True):
        torch.testing.assert_close(a["exp_avg_sq"], b["exp_avg_sq"], rtol=1e-5, atol=1e-10)
    ours.load_state_dict(theirs.state_dict())
    for param, other in zip(parameters, torch_net.parameters(), strict=True):
        assert torch.equal(ours.state[param]["exp_avg"], theirs.state[other]["exp_avg"])
