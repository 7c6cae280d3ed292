"""Shared fixtures for warpsci's CPU tests."""

from __future__ import annotations

import os

# Numba's CPU kernels run in an OpenMP parallel region. With OpenMP's default (spinning) wait policy,
# idle worker threads of torch and numba compete for the few cores of a CI machine between steps,
# which slows each tiny step from microseconds to milliseconds. Waiting passively changes nothing
# but speed; it must be set before torch or numba load their OpenMP runtime.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Register the toy environments for the action kinds, so the registry-driven suite covers them too.
import action_toys  # noqa: E402,F401
import numpy as np
import pytest
import torch

import warpsci

STATE_NAMES = ("x", "x_dot", "theta", "theta_dot")


@pytest.fixture
def make_cartpole():
    """Factory for CPU CartPole vector environments with copying and action checks on."""

    def factory(num_envs: int = 8, seed: int = 0, **options):
        options.setdefault("copy", True)
        options.setdefault("check_actions", True)
        return warpsci.make("CartPole-v1", num_envs=num_envs, device="cpu", seed=seed, **options)

    return factory


@pytest.fixture
def balancing_policy():
    """A linear controller that keeps CartPole balanced (and the cart near the centre) for 500 steps."""
    gains = torch.tensor([0.05, 0.2, 1.0, 0.5])

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return (obs.to(torch.float32) @ gains > 0).to(torch.int64)

    return policy


@pytest.fixture
def state_matrix():
    """Returns ``env -> (num_envs, 4) float64 numpy array`` of (x, x_dot, theta, theta_dot), a copy."""

    def read(env) -> np.ndarray:
        columns = [env.state_tensors[name].reshape(-1) for name in STATE_NAMES]
        return torch.stack(columns, dim=1).to(torch.float64).numpy().copy()

    return read
