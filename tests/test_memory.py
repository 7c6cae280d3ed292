"""Memory planned before it is allocated: ``warpsci.memory_plan`` equals what an environment
places, and an environment or a rollout buffer that cannot fit in the free memory is refused with
one line naming the largest arrays and what to change."""

from __future__ import annotations

import pytest
import torch

import warpsci
from warpsci import memory
from warpsci.cli import main
from warpsci.rollout import RolloutBuffer

TAG = {"num_taggers": 3, "num_runners": 17, "num_other_agents_observed": 4, "use_full_observation": False}


@pytest.mark.parametrize(("env_id", "params"), [("CartPole-v1", None), ("TagContinuous-v0", TAG)])
def test_the_plan_is_what_is_allocated(env_id, params):
    env = warpsci.make(env_id, num_envs=6, params=params)
    placed = {f"state.{name}": tensor.nbytes for name, tensor in env.state_tensors.items()}
    placed |= {f"buffers.{name}": tensor.nbytes for name, tensor in env.buffers._asdict().items()}
    assert warpsci.memory_plan(env_id, 6, params) == placed


def test_partial_observations_grow_with_k_and_full_ones_with_the_agents():
    def per_agent(runners: int, full: bool) -> float:
        params = {**TAG, "num_runners": runners, "use_full_observation": full}
        return warpsci.memory_plan("TagContinuous-v0", 10, params)["buffers.obs"] / (10 * (runners + 3))

    assert per_agent(97, False) == per_agent(997, False) == 4 * (7 * 4 + 1)  # 7 k + 1 floats
    assert per_agent(997, True) == 4 * (7 * 999 + 1)  # 7 (N - 1) + 1 floats


def test_an_environment_that_cannot_fit_is_refused_before_allocation(monkeypatch):
    monkeypatch.setattr(memory, "free_bytes", lambda device: 10_000)
    with pytest.raises(MemoryError) as caught:
        warpsci.make("TagContinuous-v0", num_envs=64, params=TAG)
    message = str(caught.value)
    plan = warpsci.memory_plan("TagContinuous-v0", 64, TAG)
    planned = memory.human(sum(plan.values()))
    assert message.startswith(
        f"TagContinuous-v0 with 64 environments of 20 agents needs {planned} of host memory ("
    )
    largest = sorted(plan, key=plan.get, reverse=True)[:3]
    assert all(f"{name} {memory.human(plan[name])}" in message for name in largest), (largest, message)
    assert "use fewer environments (--num-envs)" in message


def test_a_rollout_buffer_that_cannot_fit_is_refused(monkeypatch):
    monkeypatch.setattr(memory, "free_bytes", lambda device: 1_000_000)
    with pytest.raises(MemoryError, match=r"a rollout buffer of 128 steps x 4,096 agent rows needs 62\.9 MB"):
        RolloutBuffer(128, 4096, (8,), (), torch.device("cpu"))
    RolloutBuffer(2, 16, (8,), (), torch.device("cpu"))  # small enough


def test_the_cli_says_it_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(memory, "free_bytes", lambda device: 1000)
    argv = ["train", "CartPole-v1", "--device", "cpu", "--num-envs", "64", "--no-progress"]
    assert main(argv + ["--run-dir", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("warpsci train: error: CartPole-v1 with 64 environments of 1 agent needs")
    assert "\n" not in error and "Traceback" not in error
