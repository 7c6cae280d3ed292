"""warpsci's Adam and RMSprop against torch.optim's: the same numbers, the same checkpoint layout,
and no torch._dynamo import."""

import copy

import pytest
import torch
from fresh_interpreter import run_script

from warpsci.optimizers import Adam, RMSprop


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
