"""CovidEconomy-v0 on a CUDA GPU (skipped without one): the CUDA kernels follow the CPU backend for
a whole episode of random actions, and the published welfare values come out on the GPU too.

Run on a GPU host: ``python -m pytest -q -m gpu tests/test_covid_economy_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import warpsci
from warpsci.covid_episodes import play_scripted

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
N = 51


def test_cuda_follows_the_cpu_backend_for_an_episode_of_random_actions():
    """Rewards and states agree to float32 rounding (the GPU contracts multiply-adds into FMAs)."""
    envs = {device: warpsci.make("CovidEconomy-v0", num_envs=16, device=device) for device in ("cpu", "cuda")}
    for env in envs.values():
        env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(540):
        states = rng.integers(0, 11, (16, N)) * (rng.random((16, N)) < 0.1)
        planner = rng.integers(0, 21, (16, 1))
        rewards = {}
        for device, env in envs.items():
            actions = {
                "governor": torch.as_tensor(states, device=device),
                "planner": torch.as_tensor(planner, device=device),
            }
            _, reward, _, truncated, _ = env.step(actions)
            rewards[device] = {group: value.cpu().numpy() for group, value in reward.items()}
        for group in ("governor", "planner"):
            np.testing.assert_allclose(rewards["cuda"][group], rewards["cpu"][group], rtol=1e-4, atol=1e-5)
    assert bool(truncated["planner"].all())
    for field in ("susceptible", "infected", "deaths", "unemployed"):
        cpu, cuda = (envs[d].state()[field].cpu().numpy() for d in ("cpu", "cuda"))
        np.testing.assert_allclose(cuda, cpu, rtol=1e-4, err_msg=field)  # the reset state: exact


@pytest.mark.parametrize(
    "policy, welfare",
    [("real-world-policies", 349.1), ("open", 183.8), ("closed", 317.8), ("closed-6-months", 334.2)],
)
def test_the_published_welfare_on_the_gpu(policy, welfare):
    assert round(play_scripted(policy, device="cuda").social_welfare, 1) == pytest.approx(welfare, abs=1e-9)
