"""CovidEconomy-v0: the NumPy reference of the dynamics against spec 15's golden values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warpsci.envs.covid_economy_data import CovidEconomyParams
from warpsci.envs.covid_economy_reference import CovidEconomyReference, run_scripted

N = 51
#: The tutorial's setting (spec 15.1).
TUTORIAL = dict(episode_length=405, health_priority_scaling_agents=1.0, health_priority_scaling_planner=1.0)


def constant(action: int, planner: int = 0):
    return lambda t: (np.full(N, action), planner)


# -- golden values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, policy, welfare, deaths, california",
    [
        (dict(use_real_world_policies=True, use_real_world_data=True), constant(0), 347.60, None, None),
        (dict(use_real_world_policies=True), constant(0), 349.1, 583_676, 359.3),
        ({}, constant(1, 0), 183.8, 4_660_264, 175.2),
        ({}, constant(10, 20), 317.8, 92_847, 446.3),
        ({}, lambda t: (np.full(N, 10 if t <= 180 else 1), 0), 334.2, 642_072, 301.6),
    ],
    ids=["replay", "real-policies", "open", "closed-full-subsidy", "closed-6-months"],
)
def test_published_tutorial_social_welfare(kwargs, policy, welfare, deaths, california):
    """Spec 15.1: the AI Economist tutorial's printed planner returns, to the printed precision."""
    result = run_scripted(CovidEconomyParams(**TUTORIAL, **kwargs), policy)
    digits = 2 if welfare == 347.60 else 1
    assert round(result["planner_return"], digits) == pytest.approx(welfare, abs=1e-9)
    if deaths is not None:
        assert result["us_deaths"] == pytest.approx(deaths, rel=1e-5)
        assert round(result["agent_returns"][4], 1) == pytest.approx(california, abs=1e-9)


def test_yaml_configuration_first_step_g1():
    env = CovidEconomyReference(CovidEconomyParams())
    agent, planner = env.step(np.zeros(N, dtype=np.int64), 0)
    expected = (0.10026966, 4_901_190, 1_356.384, 638.520, 12.7704, 313_561.5, 8.431622e8)
    got = (env.beta[0], env.S[0], env.I[0], env.R[0], env.D[0], env.U[0], env.post[0])
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert agent[0] == pytest.approx(0.846737, rel=1e-5) and planner == pytest.approx(0.872530, rel=1e-5)


@pytest.mark.parametrize(
    "name, policy, first, final",
    [
        ("G1", constant(0), None, (1_025_541.75, 438.634, 431.590, 437.982)),
        (
            "G2",
            lambda t: (np.full(N, 10 if t == 1 else 0), 20 if t == 1 else 0),
            (525_106.6, 1.0439649e9, 1.337842, 0.740362),
            (92_961.7, 368.431, 438.081, 381.760),
        ),
        (
            "G3",
            lambda t: (np.full(N, 1 if t == 1 else 0), 0),
            (161_225.2, 8.920326e8, 0.986617, 0.960504),
            (4_662_527.5, 393.044, 379.970, 369.775),
        ),
    ],
)
def test_yaml_configuration_golden(name, policy, first, final):
    """Spec 15.2 (T = 540, m_a = 0.3, m_p = 0.45)."""
    params = CovidEconomyParams()
    if first is not None:
        env = CovidEconomyReference(params)
        agent, planner = env.step(*policy(1))
        np.testing.assert_allclose((env.U[0], env.post[0], agent[0], planner), first, rtol=1e-5)
    result = run_scripted(params, policy)
    got = (
        result["us_deaths"],
        result["agent_returns"][0],
        result["agent_returns"].mean(),
        result["planner_return"],
    )
    np.testing.assert_allclose(got, final, rtol=1e-4)
    if name == "G1":
        env = result["env"]
        assert float(env.I.sum()) == pytest.approx(824.29, rel=1e-3)
        assert float(env.V.sum()) == pytest.approx(2.3363955e8, rel=1e-5)


# -- invariants ---------------------------------------------------------------------------------


def test_invariants_over_an_episode_with_masked_random_actions():
    params = CovidEconomyParams()
    data, derived = params.data, params.derived
    rng = np.random.default_rng(0)
    env = CovidEconomyReference(params)
    pop = data.population.astype(np.float64)
    total0 = env.S.astype(np.float64) + env.I + env.R
    last_change = np.full(N, -(10**9))
    planner_levels = []
    floor_u = data.unemployment_bias.astype(np.float64) * pop / 100
    for t in range(1, params.episode_length + 1):
        mask_open = env.agent_mask_open.copy()
        actions = np.where(mask_open & (rng.random(N) < 0.2), rng.integers(1, 11, N), 0)
        planner_action = int(rng.integers(0, 21)) if env.planner_mask_open else 0
        before = (
            env.levels[-1].copy(),
            env.I.astype(np.float64),
            env.D.copy(),
            env.V.copy(),
            env.subsidy_level,
        )
        env.step(actions, planner_action)
        level_before, I_before, D_before, V_before, sub_before = before
        changed = env.levels[-1] != level_before
        assert np.all(t - last_change[changed] >= params.action_cooldown_period)
        last_change[changed] = t
        if env.subsidy_level != sub_before:
            assert (t - 1) % params.subsidy_interval == 0
        planner_levels.append(env.subsidy_level)
        total = env.S.astype(np.float64) + env.I + env.R
        # float32 rounding only (no clipping here); spec 15 quotes < 1e-6 for its runs
        np.testing.assert_allclose(total, total0, rtol=5e-6)
        assert np.all(env.D >= D_before) and np.all(env.V >= V_before)
        # float32: D = mu (R - V) with R, V up to ~4e7 (ulp 4) leaves ~0.1 persons of rounding
        np.testing.assert_allclose(
            env.D - D_before, data.mortality * data.gamma * I_before, rtol=2e-3, atol=0.25
        )
        if t < derived.t_vac:
            assert np.all(env.V == V_before)
        else:
            assert np.all(env.V - V_before <= derived.vaccines_per_delivery + np.spacing(env.V))
        assert np.all(env.U >= floor_u * (1 - 1e-6))
        np.testing.assert_allclose(env.post, env.prod.astype(np.float64) + env.sub, rtol=1e-6)  # float32 sum
        u_above = env.U >= derived.baseline_unemployed
        assert np.all(env.prod[u_above] <= derived.max_productivity[u_above] * (1 + 1e-6))
    assert len(set(planner_levels[:90])) == 1


def test_no_changes_for_600_days_gives_baseline_unemployment_and_determinism():
    params = CovidEconomyParams(
        episode_length=700, start_date="2020-02-21", vaccine_delivery_start_date="2021-06-01"
    )
    results = [run_scripted(params, constant(0)) for _ in range(2)]
    env = results[0]["env"]
    # action 0 keeps the start level: the last change is > 600 days old at t = 700 (invariant 5)
    levels = np.asarray(env.levels)
    quiet = np.all(levels[1:] == levels[:-1], axis=0)
    expected = (math.log(2) + params.data.unemployment_bias) * params.data.population / 100
    assert quiet.all()
    np.testing.assert_allclose(env.U[quiet], expected[quiet], rtol=1e-5)
    assert results[0]["planner_return"] == results[1]["planner_return"]
    np.testing.assert_array_equal(results[0]["agent_returns"], results[1]["agent_returns"])


def test_observations_at_reset_and_sizes():
    """Spec 9.4 sizes and order, 9.5 reset values."""
    params = CovidEconomyParams()
    env = CovidEconomyReference(params)
    agent, agent_mask, planner, planner_mask = env.observations()
    assert agent.shape == (N, 64) and planner.shape == (463,)
    assert agent_mask.shape == (N, 11) and planner_mask.shape == (21,)
    assert np.all(agent_mask == 1) and np.all(planner_mask == 1)
    a0 = agent[0]
    # order: indicator, subsidy level and timer, vaccine timer, time, one-hot, productivity, state, lagged
    assert a0[0] == pytest.approx(0.5) and a0[1] == 0 and a0[2] == 1 and a0[3] == 1 and a0[4] == 0
    np.testing.assert_array_equal(a0[5 : 5 + N], np.eye(N)[0])
    assert a0[5 + N] == 0
    expected_state = [0.99962004, 2.6888842e-4, 1.1101923e-4, 2.2203846e-6, 0, 0.026]
    np.testing.assert_allclose(a0[6 + N : 12 + N], expected_state, rtol=1e-5, atol=1e-9)
    assert a0[63] == pytest.approx(0.1)
    np.testing.assert_allclose(planner[:N], agent[:, 0])
    np.testing.assert_allclose(
        planner[N + 4 + N : N + 4 + N + 6 * N].reshape(6, N)[:, 0], expected_state, rtol=1e-5
    )
    # a change at step 1 is masked until the observation of t = 28 (next change at step 29 = 1 + P);
    # the planner's mask opens with the observation of t = 90 (decision at step 91)
    for t in range(1, 91):
        env.step(np.where(np.arange(N) == 0, 3 if t == 1 else 0, 0), 0)
        _, agent_mask, _, planner_mask = env.observations()
        assert bool(agent_mask[0, 1:].any()) == (t >= 28)
        assert np.all(agent_mask[1:] == 1)
        assert bool(planner_mask[1:].any()) == (t == 90)
    # vaccine timer: 0 only at t = t_vac - 1
    env = CovidEconomyReference(params)
    env.t = params.derived.t_vac - 1
    assert env.vaccine_timer() == 0
    env.t = params.derived.t_vac
    assert env.vaccine_timer() == 1
