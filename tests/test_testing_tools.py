"""warpsci.testing catches what it is meant to catch: broken contracts and diverging kernels."""

import dataclasses

import gymnasium
import numpy as np
import pytest
from action_toys import TARGET

import warpsci
from warpsci.testing import EnvCheckError, ParityReport, check_env
from warpsci.testing.kernel_runner import HostKernelRunner
from warpsci.testing.parity import _first_divergence, random_actions


def test_check_env_rejects_observations_outside_the_declared_space():
    lying = dataclasses.replace(
        TARGET,
        name="LyingTarget-v0",
        observation_space=lambda params: gymnasium.spaces.Box(-0.5, 0.5, (1,), np.float32),
    )
    env = warpsci.WarpVectorEnv(lying, num_envs=64, seed=1)
    with pytest.raises(EnvCheckError, match="outside the observation space"):
        check_env(env)


def test_check_env_rejects_a_non_warpsci_environment():
    with pytest.raises(EnvCheckError, match="expects a WarpVectorEnv"):
        check_env(gymnasium.make_vec("CartPole-v1", num_envs=2))


def _empty_report() -> ParityReport:
    return ParityReport("CartPole-v1", "cpu-vs-cpu", 8, 0, 0, 0.0, None)


def test_first_divergence_names_step_env_agent_and_field():
    definition = warpsci.get_definition("CartPole-v1")
    first = HostKernelRunner(definition, 8, "cpu")
    second = HostKernelRunner(definition, 8, "cpu")
    first.reset(5)
    second.reset(5)
    actions = random_actions(
        definition.action_space(definition.default_params()), (8, 1), np.random.default_rng(0)
    )
    first.step(actions, 5)
    second.step(actions, 5)
    report = _empty_report()
    assert _first_divergence(first, second, 1, 1e-5, report) is None

    second.state.theta[3, 0] += 1e-3  # beyond atol
    second.buffers.terminated[6] = not second.buffers.terminated[6]
    divergence = _first_divergence(first, second, 1, 1e-5, report)
    assert (divergence.step, divergence.field, divergence.env, divergence.agent) == (1, "state.theta", 3, 0)
    assert divergence.cuda_value == pytest.approx(divergence.cpu_value + 1e-3, abs=1e-6)
    assert report.max_abs_diff == pytest.approx(1e-3, rel=1e-3)
    assert "step 1, env 3, agent 0, state.theta" in str(divergence)

    second.state.theta[3, 0] = first.state.theta[3, 0] + 5e-6  # within atol
    divergence = _first_divergence(first, second, 1, 1e-5, report)
    assert (divergence.field, divergence.env, divergence.agent) == ("buffers.terminated", 6, None)


def test_random_box_actions_reach_beyond_the_bounds():
    actions = random_actions(gymnasium.spaces.Box(-2.0, 2.0, (1,)), (4000, 1), np.random.default_rng(0))
    assert actions.min() < -2.5 and actions.max() > 2.5 and actions.dtype == np.float32
