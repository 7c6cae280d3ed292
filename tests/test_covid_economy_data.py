"""CovidEconomy-v0: data loading, params validation and the derived constants (spec 3-5)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from warpsci.envs.covid_economy_data import (
    DATA_FILES,
    PACKAGED_DATA_DIR,
    CovidDataError,
    CovidEconomyParams,
    load_covid_data,
)

# -- data and params ---------------------------------------------------------------------------


def test_packaged_data_and_license_are_shipped():
    for name in (*DATA_FILES, "README.md", "LICENSE.txt"):
        assert (PACKAGED_DATA_DIR / name).is_file(), name
    assert "Salesforce.com" in (PACKAGED_DATA_DIR / "LICENSE.txt").read_text()


def test_default_params_are_the_yaml_configuration_and_derived_constants_match_spec():
    p = CovidEconomyParams()
    assert (p.episode_length, p.health_priority_scaling_agents, p.health_priority_scaling_planner) == (
        540,
        0.3,
        0.45,
    )
    assert (p.daily_vaccines_per_million_people, p.vaccine_delivery_start_date) == (3000, "2021-01-12")
    assert (
        p.num_agents == 51
        and p.data.state_names[4] == "California"
        and p.data.state_names[8] == "District of Columbia"
    )
    d = p.derived
    assert (d.s0, d.t_vac, d.workforce) == (81, 296, 183_327_410)
    assert d.baseline_unemployed[0] == pytest.approx(137_623.46, rel=1e-6)
    assert d.productivity_per_worker == pytest.approx(320.80615, rel=1e-7)
    assert d.max_productivity[0] == pytest.approx(8.996327e8, rel=1e-6)
    assert float(d.max_productivity.sum()) == pytest.approx(5.8812563e10, rel=1e-6)
    assert d.planner_norm == pytest.approx(2.1466586e13, rel=1e-6)
    assert d.agent_health_weight[0] == pytest.approx(0.3948127, rel=1e-6)
    assert d.planner_health_weight == pytest.approx(0.5836546, rel=1e-6)
    assert float(d.agent_health_weight.min()) == pytest.approx(0.17369, abs=1e-5)
    assert float(d.agent_health_weight.max()) == pytest.approx(0.90074, abs=1e-5)
    assert d.vaccines_per_delivery[0] == 14_709 and int(d.vaccines_per_delivery.sum()) == 986_190
    assert d.max_daily_subsidy[0] == pytest.approx(2.6866767e8, rel=1e-6)


def test_unscaled_weights_equal_the_files():
    p = CovidEconomyParams(health_priority_scaling_agents=1.0, health_priority_scaling_planner=1.0)
    np.testing.assert_allclose(p.derived.agent_health_weight, p.data.agent_health_weight, rtol=1e-6)
    assert p.derived.planner_health_weight == pytest.approx(p.data.planner_health_weight)
    assert CovidEconomyParams(vaccine_delivery_start_date="2020-12-22").derived.t_vac == 275


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(start_date="2020-01-28"), "start_date must lie in"),
        (dict(start_date="2021-05-01"), "start_date must lie in"),
        (dict(start_date="2020-3-xx"), "start_date must be a date string"),
        (dict(vaccine_delivery_start_date="2020-03-22"), "vaccine_delivery_start_date must be after"),
        (
            dict(start_date="2021-04-01"),
            r"'2021-01-12' \(the default\): set a later vaccine_delivery_start_date",
        ),
        (dict(use_real_world_data=True), "needs use_real_world_policies"),
        (dict(use_real_world_policies=True, episode_length=438), "episode_length must be <= 437"),
        (dict(economic_reward_crra_eta=1.0), "economic_reward_crra_eta"),
        (dict(n_stringency_levels=9), "NUM_STRINGENCY_LEVELS"),
        (dict(episode_length=0), "episode_length"),
        (dict(reward_normalization_factor=0.0), "reward_normalization_factor"),
        (dict(path_to_data_and_fitted_params="/nonexistent/covid"), "does not exist"),
    ],
)
def test_bad_params_give_one_line_errors(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        CovidEconomyParams(**kwargs)
    assert "\n" not in str(info.value)


def test_start_date_bounds_are_accepted():
    assert CovidEconomyParams(start_date="2020-02-21").derived.s0 == 51
    CovidEconomyParams(start_date="2021-04-30", vaccine_delivery_start_date="2021-06-01", episode_length=1)
    assert CovidEconomyParams(use_real_world_policies=True, episode_length=437).derived.s0 == 81


def _copy_data(tmp_path):
    for name in DATA_FILES:
        shutil.copy(PACKAGED_DATA_DIR / name, tmp_path / name)
    return tmp_path


def test_user_data_directory(tmp_path):
    directory = _copy_data(tmp_path)
    p = CovidEconomyParams(path_to_data_and_fitted_params=str(directory))
    assert p.data.directory == str(directory) and p.derived.workforce == 183_327_410


def _break(tmp_path, file, edit):
    directory = _copy_data(tmp_path)
    if file.endswith(".json"):
        content = json.loads((directory / file).read_text())
        (directory / file).write_text(json.dumps(edit(content)) if edit else "{not json")
    else:
        if edit is None:
            (directory / file).write_bytes(b"not a zip")
        else:
            with np.load(directory / file) as archive:
                arrays = edit({key: archive[key] for key in archive.files})
            np.savez(directory / file, **arrays)
    return str(directory)


@pytest.mark.parametrize(
    "file, edit, message",
    [
        ("model_constants.json", None, "not valid JSON"),
        ("fitted_params.json", None, "not valid JSON"),
        ("real_world_data.npz", None, "not a readable .npz"),
        (
            "fitted_params.json",
            lambda c: {k: v for k, v in c.items() if k != "BETA_SLOPES"},
            "BETA_SLOPES is missing",
        ),
        ("fitted_params.json", lambda c: {**c, "BETA_SLOPES": c["BETA_SLOPES"][:-1]}, "must have 51 numbers"),
        ("fitted_params.json", lambda c: {**c, "POLICY_START_DATE": "Jan 1"}, "POLICY_START_DATE"),
        (
            "model_constants.json",
            lambda c: {**c, "US_STATE_POPULATION": c["US_STATE_POPULATION"][:3]},
            "must have 51",
        ),
        ("real_world_data.npz", lambda a: {k: v for k, v in a.items() if k != "infected"}, "infected"),
        ("real_world_data.npz", lambda a: {**a, "policy": a["policy"][:, :3]}, "policy must be"),
        ("real_world_data.npz", lambda a: {**a, "policy": a["policy"] * 0}, "stringency levels"),
    ],
)
def test_malformed_data_give_one_line_errors(tmp_path, file, edit, message):
    directory = _break(tmp_path, file, edit)
    with pytest.raises(CovidDataError, match=message) as info:
        load_covid_data(directory)
    assert "\n" not in str(info.value) and file in str(info.value)


@pytest.mark.parametrize("file", DATA_FILES)
def test_missing_file(tmp_path, file):
    directory = _copy_data(tmp_path)
    (directory / file).unlink()
    with pytest.raises(CovidDataError, match=f"{file}: missing"):
        CovidEconomyParams(path_to_data_and_fitted_params=str(directory))
