"""One suite over every registered environment: registering an environment is enough to be covered.

For each id: the API contract (``warpsci.testing.check_env``: spaces, dtypes, shapes, observations in
their space, autoreset, determinism, bad actions refused), CUDA-kernel parity with the CPU kernels
under Numba's CUDA simulator (``warpsci.testing.check_parity``), the Gymnasium registry entry, and
one PPO and one A2C iteration with finite losses.
"""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from pathlib import Path

import pytest
from fresh_interpreter import run_script

import warpsci
from warpsci.algorithms import make_trainer
from warpsci.config import TrainConfig
from warpsci.testing import check_env

TESTS = Path(__file__).resolve().parent
ENV_IDS = warpsci.registered_ids()
#: Short episodes, so that autoresets happen within a few steps of every check.
SHORT_EPISODE = 12


def short_params(env_id: str) -> dict[str, int]:
    params = warpsci.get_definition(env_id).default_params()
    names = {field.name for field in dataclasses.fields(params)}
    return {name: SHORT_EPISODE for name in ("max_episode_steps", "episode_length") if name in names}


def is_multi_group(env_id: str) -> bool:
    definition = warpsci.get_definition(env_id)
    return len(definition.agent_groups(definition.default_params())) > 1


def test_every_builtin_environment_is_registered():
    from warpsci.envs import BUILTIN_ENVIRONMENTS

    expected = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"}
    assert expected <= {definition.name for definition in BUILTIN_ENVIRONMENTS}
    assert expected <= set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_api_contract(env_id):
    env = warpsci.make(env_id, num_envs=5, seed=3, params=short_params(env_id))
    passed = check_env(env, seed=3)
    assert passed == ["spaces", "reset", "step", "autoreset", "determinism", "bad actions refused"]
    assert isinstance(env, warpsci.MultiAgentVectorEnv) == is_multi_group(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_api_contract_with_default_params(env_id):
    """The real time limit: episodes end and reset within it, through the Gymnasium entry point."""
    import gymnasium

    env = gymnasium.make_vec(f"warpsci/{env_id}", num_envs=3, seed=5)
    assert isinstance(env, warpsci.WarpVectorEnv)
    check_env(env, seed=5)


@pytest.fixture(scope="module")
def parity_reports() -> dict[str, dict]:
    """Every environment's parity report, from one interpreter with the CUDA simulator switched on."""
    script = textwrap.dedent(
        f"""
        import dataclasses, json, sys
        sys.path.insert(0, {str(TESTS)!r})
        import warpsci, action_toys, multi_group_toy
        if multi_group_toy.TOY_GROUPS.name not in warpsci.registered_ids():
            warpsci.register(multi_group_toy.TOY_GROUPS)  # registered by another test module
        from warpsci.testing import check_parity
        for env_id in {ENV_IDS!r}:
            params = warpsci.get_definition(env_id).default_params()
            names = {{field.name for field in dataclasses.fields(params)}}
            short = {{n: {SHORT_EPISODE} for n in ("max_episode_steps", "episode_length") if n in names}}
            report = check_parity(env_id, num_envs=6, steps=30, params=short, threads_per_block=4,
                                  raise_on_failure=False)
            print(json.dumps(dataclasses.asdict(report)), flush=True)
        """
    )
    completed = run_script(script, simulator=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    reports = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    return {report["env_id"]: report for report in reports}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_cuda_kernels_match_cpu_kernels(env_id, parity_reports):
    report = parity_reports[env_id]
    assert report["backend"] == "cuda-simulator"
    assert report["divergence"] is None, report["divergence"]
    assert report["steps"] == 30
    # 30 steps of episodes at most 12 long: every environment went through at least two resets.
    assert report["episodes_ended"] >= 2 * 6, report


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_one_training_iteration(env_id, algo):
    config = TrainConfig(
        env_id=env_id,
        algo=algo,
        device="cpu",
        num_envs=4,
        num_steps=16,
        total_timesteps=64,
        num_minibatches=2,
        update_epochs=1,
        normalize_obs=True,
        normalize_reward=True,
    )
    trainer = make_trainer(config)
    parameters = [p for learner in trainer.learners for p in learner.policy.parameters()]
    before = [parameter.detach().clone() for parameter in parameters]
    result = trainer.train()
    metrics = result.history[-1]
    assert result.iterations == 1
    suffixes = [""] if len(trainer.learners) == 1 else [f"/{learner.name}" for learner in trainer.learners]
    for name in ("losses/value_loss", "losses/policy_loss", "losses/entropy"):
        for suffix in suffixes:
            assert math.isfinite(metrics[name + suffix]), (name + suffix, metrics[name + suffix])
    after = parameters
    assert any(not bool((a == b).all()) for a, b in zip(after, before, strict=True)), "nothing was learned"
