"""CovidEconomy-v0, the environment: the published welfare values and spec 15.2 through the vector
environment and the PettingZoo adapter, random actions against the NumPy reference, per-replica
modulations, masks, PettingZoo's API test, the scripted runs of ``warpsci eval`` and their plots."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from pettingzoo.test import parallel_api_test

import warpsci
from warpsci.covid_episodes import SCRIPTED_POLICIES, play_episode, play_scripted, scripted_params
from warpsci.envs.covid_economy_data import CovidEconomyParams
from warpsci.envs.covid_economy_reference import CovidEconomyReference
from warpsci.pettingzoo_adapter import parallel_env

N = 51
ENV_ID = "CovidEconomy-v0"
#: A governor's reward is a difference of terms of order 1 computed in float32 (the reference in
#: float64): a reward near zero keeps the terms' absolute rounding (CI saw 1.2e-6 at a reward of 0.05).
REWARD_ATOL = 1e-5

#: Spec 15.1: published welfare, then US deaths and California's return computed from the spec.
PUBLISHED = {
    "real-world-data": (347.60, None, None),
    "real-world-policies": (349.1, 583_676, 359.3),
    "open": (183.8, 4_660_264, 175.2),
    "closed": (317.8, 92_847, 446.3),
    "closed-6-months": (334.2, 642_072, 301.6),
}


def group_actions(states: np.ndarray, planner: np.ndarray) -> dict[str, torch.Tensor]:
    """``(num_envs, 51)`` and ``(num_envs,)`` actions as the vector environment takes them."""
    return {
        "governor": torch.as_tensor(np.asarray(states), dtype=torch.int64),
        "planner": torch.as_tensor(np.asarray(planner), dtype=torch.int64).reshape(-1, 1),
    }


def flat_observations(obs: dict[str, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    return obs["governor"].numpy(), obs["planner"].numpy()[:, 0]


@pytest.mark.parametrize("policy", SCRIPTED_POLICIES)
def test_the_published_social_welfare_through_the_vector_env(policy):
    welfare, deaths, california = PUBLISHED[policy]
    episode = play_scripted(policy)
    digits = 2 if policy == "real-world-data" else 1
    assert round(episode.social_welfare, digits) == pytest.approx(welfare, abs=1e-9)
    assert episode.planner_rewards.size == 405
    if deaths is not None:
        assert episode.us_deaths == pytest.approx(deaths, rel=1e-5)
        assert round(float(episode.agent_rewards[:, 4].sum()), 1) == pytest.approx(california, abs=1e-9)


def test_the_published_welfare_through_pettingzoo_with_named_agents():
    """closed-6-months through ``warpsci.parallel_env``: agents governor_0 .. governor_50, planner_0."""
    env = parallel_env(ENV_ID, **scripted_params("closed-6-months"))
    observations, infos = env.reset(seed=0)
    assert env.agents == [f"governor_{i}" for i in range(N)] + ["planner_0"]
    assert observations["governor_4"].shape == (64,) and observations["planner_0"].shape == (463,)
    welfare, california = 0.0, 0.0
    for t in range(1, 406):
        level = 10 if t <= 180 else 1
        actions = {f"governor_{i}": level for i in range(N)} | {"planner_0": 0}
        observations, rewards, terminations, truncations, infos = env.step(actions)
        welfare += rewards["planner_0"]
        california += rewards["governor_4"]
    assert all(truncations.values()) and not any(terminations.values())
    assert round(welfare, 1) == 334.2 and round(california, 1) == 301.6


@pytest.mark.parametrize(
    "name, first_day, final",
    [
        ("G1", lambda t: (0, 0), (1_025_541.75, 438.634, 431.590, 437.982, 8.0726)),
        ("G2", lambda t: (10, 20) if t == 1 else (0, 0), (92_961.7, 368.431, 438.081, 381.760, None)),
        ("G3", lambda t: (1, 0) if t == 1 else (0, 0), (4_662_527.5, 393.044, 379.970, 369.775, None)),
    ],
)
def test_the_yaml_configuration_golden_values(name, first_day, final):
    """Spec 15.2 (T = 540, m_a = 0.3, m_p = 0.45): deaths, returns and mean unemployment."""

    def actor(observations, masks, t):
        state, planner = first_day(t)
        return group_actions(np.full((1, N), state), np.full(1, planner))

    episode = play_episode(name, actor)
    deaths, agent0, mean_agents, planner, unemployment = final
    returns = episode.agent_rewards.sum(axis=0, dtype=np.float64)
    got = (episode.us_deaths, returns[0], returns.mean(), episode.social_welfare)
    np.testing.assert_allclose(got, (deaths, agent0, mean_agents, planner), rtol=1e-4)
    if unemployment is not None:
        assert float(episode.us_unemployment_rate.mean()) == pytest.approx(unemployment, rel=1e-4)


def test_random_actions_follow_the_reference_with_its_masks():
    """Unmasked random actions (masks are advice, spec 7.3): rewards, observations and masks equal the
    NumPy reference's every step, in both replicas."""
    env = warpsci.make(ENV_ID, num_envs=2, device="cpu", params={"episode_length": 150})
    reference = CovidEconomyReference(CovidEconomyParams(episode_length=150))
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(1)
    for _ in range(1, 150):
        agent_obs, agent_mask, planner_obs, planner_mask = reference.observations()
        governors, planner = flat_observations(obs)
        for replica in range(2):
            np.testing.assert_allclose(governors[replica], agent_obs, rtol=2e-5, atol=1e-7)
            np.testing.assert_allclose(planner[replica], planner_obs, rtol=2e-5, atol=1e-7)
        masks = env.buffers.action_mask.numpy()
        np.testing.assert_array_equal(masks[:, :N, :11], np.broadcast_to(agent_mask > 0, (2, N, 11)))
        np.testing.assert_array_equal(masks[:, N, :21], np.broadcast_to(planner_mask > 0, (2, 21)))
        states = rng.integers(0, 11, N) * (rng.random(N) < 0.15)
        planner_action = int(rng.integers(0, 21))
        agent_rewards, planner_reward = reference.step(states, planner_action)
        obs, rewards, terminated, truncated, _ = env.step(
            group_actions(np.tile(states, (2, 1)), np.full(2, planner_action))
        )
        for replica in range(2):
            np.testing.assert_allclose(
                rewards["governor"][replica].numpy(), agent_rewards, rtol=2e-5, atol=REWARD_ATOL
            )
            assert float(rewards["planner"][replica, 0]) == pytest.approx(planner_reward, rel=2e-5)
        assert not terminated["planner"].any() and not truncated["planner"].any()
    state = env.state()
    np.testing.assert_allclose(state["deaths"][0, :N].numpy(), reference.D, rtol=2e-5)
    np.testing.assert_array_equal(state["level"][1, :N].numpy(), reference.levels[-1])


def test_parameter_modulations_are_per_replica():
    """Spec 12's modulations: replica 1 follows the reference with its factors, replica 0 the plain one."""
    factors = {"beta_intercept_modulation": 0.8, "beta_slope_modulation": 1.5, "unemployment_modulation": 0.5}
    env = warpsci.make(
        ENV_ID,
        num_envs=2,
        device="cpu",
        params={"episode_length": 60, **{name: (1.0, value) for name, value in factors.items()}},
    )
    references = [
        CovidEconomyReference(CovidEconomyParams(episode_length=60)),
        CovidEconomyReference(CovidEconomyParams(episode_length=60, **factors)),
    ]
    env.reset(seed=0)
    for t in range(1, 60):
        states = np.full(N, 8 if t == 1 else 0)
        expected = [reference.step(states, 5) for reference in references]
        _, rewards, *_ = env.step(group_actions(np.tile(states, (2, 1)), np.full(2, 5)))
        for replica in range(2):
            np.testing.assert_allclose(
                rewards["governor"][replica].numpy(), expected[replica][0], rtol=2e-5, atol=REWARD_ATOL
            )
    state = env.state()
    for replica, reference in enumerate(references):
        np.testing.assert_allclose(state["unemployed"][replica, :N].numpy(), reference.U, rtol=2e-5)
        np.testing.assert_allclose(state["infected"][replica, :N].numpy(), reference.I, rtol=2e-5)
    assert not np.allclose(references[0].U, references[1].U, rtol=1e-3)


def test_a_replica_param_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="one value per environment"):
        warpsci.make(ENV_ID, num_envs=3, device="cpu", params={"unemployment_modulation": (1.0, 0.5)})
    with pytest.raises(ValueError, match="unemployment_modulation must be a number >= 0"):
        CovidEconomyParams(unemployment_modulation=-1.0)


def test_a_governor_that_changes_its_level_waits_28_days_and_the_planner_90():
    env = warpsci.make(ENV_ID, num_envs=1, device="cpu")
    env.reset(seed=0)
    for t in range(1, 92):
        states = np.zeros((1, N), dtype=np.int64)
        states[0, 0] = 9 if t == 1 else 0
        env.step(group_actions(states, np.full(1, 7 if t in (1, 91) else 0)))
        mask = env.buffers.action_mask.numpy()[0]
        assert mask[0, 1:11].any() == (t >= 28), t  # changed at step 1: next change at step 29
        assert mask[1:N, 1:11].all()  # a state that keeps its level may act every day
        assert mask[N, 1:21].any() == (t % 90 == 0), t
        assert mask[:, 0].all()
    state = env.state()
    assert int(state["subsidy_level"][0]) == 7 and int(state["level"][0, 0]) == 9


def test_pettingzoo_parallel_api_test_passes():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(parallel_env(ENV_ID, episode_length=30), num_cycles=100)
    assert not [str(w.message) for w in caught if "pettingzoo" in w.filename]


def test_eval_plays_a_scripted_policy_and_writes_its_plot(tmp_path, capsys):
    from warpsci.cli import main

    assert main(["eval", ENV_ID, "--policy", "open", "--output-dir", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert round(summary["social_welfare"], 1) == 183.8 and summary["days"] == 405
    assert summary["mean_unemployment_rate_percent"] < 5  # open: no stringency-driven unemployment
    assert (tmp_path / "covid_open.png").stat().st_size > 10_000
    rows = (tmp_path / "covid_open.csv").read_text().splitlines()
    assert len(rows) == 406 and rows[0].startswith("day,us_infected,us_deaths")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["eval", "CartPole-v1", "--policy", "open"], "--policy plays the scripted runs of CovidEconomy-v0"),
        (
            ["eval", ENV_ID, "--policy", "open", "--env-params", "{start_date: 2019-05-01}"],
            "start_date must lie in [2020-02-21, 2021-04-30]",
        ),
        (
            ["eval", ENV_ID, "--policy", "open", "--env-params", "{start_date: 2020-02-01}"],
            "start_date must lie in [2020-02-21, 2021-04-30]",
        ),
    ],
)
def test_bad_scripted_runs_are_refused_in_one_line(argv, message, capsys):
    from warpsci.cli import main

    assert main(argv) != 0
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1, error


def test_a_small_run_learns_governors_better_than_random_ones(tmp_path, capsys):
    """The small CPU preset: against the same planner (no subsidy), the trained governors earn more
    than governors acting at random and come within 1 of the best fixed level (computed by the
    reference); ``warpsci eval`` on the run plots it beside the real-world policies."""
    from warpsci.cli import main
    from warpsci.envs.covid_economy_reference import run_scripted
    from warpsci.evaluation import evaluate_groups

    run = tmp_path / "run"
    config = "examples/configs/covid_economy_small.yaml"
    assert main(["train", ENV_ID, "--config", config, "--run-dir", str(run), "--no-progress",
                 "--eval-episodes", "0"]) == 0  # fmt: skip
    setting = {
        "episode_length": 60,
        "health_priority_scaling_agents": 1.0,
        "health_priority_scaling_planner": 1.0,
    }

    def no_subsidy(obs, mask):
        return torch.zeros(obs.shape[:2], dtype=torch.int64)

    returns = {}
    for governors in (str(run), "random"):
        evaluation = evaluate_groups(
            ENV_ID, {"governor": governors, "planner": no_subsidy}, 16, env_params=setting, greedy=True
        )
        returns[governors] = evaluation.mean_return("governor")
    params = CovidEconomyParams(**setting)
    best_fixed = max(
        run_scripted(params, lambda t, level=level: (np.full(N, level if t == 1 else 0), 0))[
            "agent_returns"
        ].mean()
        for level in range(1, 11)
    )
    assert returns[str(run)] > returns["random"] + 2.0, returns
    assert returns[str(run)] > best_fixed - 1.0, (returns, best_fixed)
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "4"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["social_welfare/trained"] > 0 and summary["social_welfare/real-world-policies"] > 0
    assert (run / "covid_episode.png").is_file() and (run / "covid_episode_trained.csv").is_file()
