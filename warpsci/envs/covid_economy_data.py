"""Parameters and data of ``CovidEconomy-v0`` (the AI Economist's ``CovidAndEconomyEnvironment``).

The specification is ``shared/envs/covid19_economy.md`` (sections cited as "spec 4.1" etc.). This
module holds the params dataclass (defaults: the published YAML configuration, spec 4.1/4.2), the
loader of the three data files (packaged under ``warpsci/data/covid19_economy``, BSD-3-Clause,
Copyright (c) 2020 Salesforce.com, Inc.; see the README and LICENSE there) and the constants
derived from them at construction (spec 5).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import numbers
import os
import zipfile
from pathlib import Path

import numpy as np

from warpsci.envs.param_checks import check_int

#: Directory of the packaged data (``path_to_data_and_fitted_params=""``).
PACKAGED_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "covid19_economy"
DATA_FILES = ("model_constants.json", "fitted_params.json", "real_world_data.npz")
DATE_FORMAT = "%Y-%m-%d"
#: Earliest start: the GPU path needs ``s0 >= BETA_DELAY - 1`` (spec 13.4; 28 days after 2020-01-01).
MIN_START_OFFSET_DAYS = 28

_NPZ_KEYS = (
    "policy",
    "subsidy",
    "susceptible",
    "infected",
    "recovered",
    "vaccinated",
    "unemployed",
    "deaths",
)
_CONSTANT_KEYS = (
    "NUM_STRINGENCY_LEVELS",
    "SIR_MORTALITY",
    "SIR_GAMMA",
    "US_STATE_IDX_TO_STATE_NAME",
    "US_STATE_POPULATION",
    "US_POPULATION",
    "GDP_PER_CAPITA",
)
# key -> length (None: scalar)
_FITTED_KEYS = {
    "POLICY_START_DATE": None,
    "BETA_DELAY": None,
    "BETA_SLOPES": "n",
    "BETA_INTERCEPTS": "n",
    "FILTER_LEN": None,
    "CONV_LAMBDAS": 5,
    "UNEMPLOYMENT_BIAS": "n",
    "GROUPED_CONVOLUTIONAL_FILTER_WEIGHTS": "5n",
    "VALUE_OF_LIFE": None,
    "INFERRED_WEIGHTAGE_ON_AGENT_HEALTH_INDEX": "n",
    "INFERRED_WEIGHTAGE_ON_PLANNER_HEALTH_INDEX": None,
    "MIN_MARGINAL_AGENT_HEALTH_INDEX": "n",
    "MAX_MARGINAL_AGENT_HEALTH_INDEX": "n",
    "MIN_MARGINAL_AGENT_ECONOMIC_INDEX": "n",
    "MAX_MARGINAL_AGENT_ECONOMIC_INDEX": "n",
    "MIN_MARGINAL_PLANNER_HEALTH_INDEX": None,
    "MAX_MARGINAL_PLANNER_HEALTH_INDEX": None,
    "MIN_MARGINAL_PLANNER_ECONOMIC_INDEX": None,
    "MAX_MARGINAL_PLANNER_ECONOMIC_INDEX": None,
}


#: Spec 12's parameter modulations (replica params of ``CovidEconomy-v0``).
MODULATIONS = ("beta_intercept_modulation", "beta_slope_modulation", "unemployment_modulation")
#: Capacity of the environment's per-state histories: the last ``BETA_DELAY`` stringency levels
#: and the last ``FILTER_LEN`` level changes (int8 ring buffers; the shipped data need 29 and 600).
LEVEL_HISTORY = 64
CHANGE_HISTORY = 600
#: Levels and their changes are stored as int8.
MAX_STRINGENCY_LEVELS = 100


def _modulation(name: str, value: object) -> float | tuple[float, ...]:
    """A modulation factor, or one per replica, checked (finite, >= 0)."""

    def factor(entry: object) -> float:
        if not isinstance(entry, numbers.Real) or isinstance(entry, bool) or not 0 <= entry < math.inf:
            raise ValueError(
                f"{name} must be a number >= 0 or a sequence of them (one per environment), got {value!r}"
            )
        return float(entry)

    if isinstance(value, (list, tuple, np.ndarray)):
        factors = tuple(factor(entry) for entry in np.asarray(value, dtype=object).reshape(-1))
        if not factors:
            raise ValueError(f"{name} must not be an empty sequence")
        return factors
    return factor(value)


class CovidDataError(ValueError):
    """A data file is missing or malformed, or the params do not fit the data (one-line message)."""


def _parse_date(name: str, value: object) -> datetime.date:
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value  # YAML reads an unquoted 2020-03-22 as a date
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a date string YYYY-MM-DD, got {value!r}")
    try:
        return datetime.datetime.strptime(value, DATE_FORMAT).date()
    except ValueError:
        raise ValueError(f"{name} must be a date string YYYY-MM-DD, got {value!r}") from None


@dataclasses.dataclass(frozen=True)
class CovidData:
    """The three data files, validated, as float32/int arrays (state axis last), plus spec 5."""

    directory: str
    state_names: tuple[str, ...]
    population: np.ndarray  # (n,) int32
    us_population: int
    num_stringency_levels: int
    mortality: float
    gamma: float
    gdp_per_capita: float
    policy_start_date: datetime.date
    beta_delay: int
    beta_slopes: np.ndarray  # (n,) float32
    beta_intercepts: np.ndarray
    filter_len: int
    conv_lambdas: np.ndarray  # (5,)
    unemployment_bias: np.ndarray  # (n,)
    filter_weights: np.ndarray  # (n, 5)
    value_of_life: float
    agent_health_weight: np.ndarray  # alpha0_i before scaling
    planner_health_weight: float
    agent_health_min: np.ndarray
    agent_health_max: np.ndarray
    agent_economic_min: np.ndarray
    agent_economic_max: np.ndarray
    planner_health_min: float
    planner_health_max: float
    planner_economic_min: float
    planner_economic_max: float
    arrays: dict  # npz key -> (rows, n) float64 / int64 (subsidy: (rows,))

    @property
    def num_states(self) -> int:
        return len(self.state_names)

    @property
    def num_rows(self) -> int:
        return int(self.arrays["policy"].shape[0])

    @property
    def last_date(self) -> datetime.date:
        return self.policy_start_date + datetime.timedelta(days=self.num_rows - 1)


def _fail(directory: str, file: str, what: str) -> CovidDataError:
    return CovidDataError(f"CovidEconomy data {os.path.join(directory, file)}: {what}")


def _read_json(directory: str, file: str) -> dict:
    path = os.path.join(directory, file)
    if not os.path.isfile(path):
        raise _fail(directory, file, f"missing (the directory must hold {', '.join(DATA_FILES)})")
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise _fail(directory, file, f"not valid JSON ({str(error).splitlines()[0]})") from None
    if not isinstance(content, dict):
        raise _fail(directory, file, "must hold a JSON object")
    return content


def _number_list(directory: str, file: str, key: str, value: object, length: int) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise _fail(directory, file, f"{key} must be a list of numbers") from None
    if array.size != length:
        raise _fail(directory, file, f"{key} must have {length} numbers, got {array.size}")
    if not np.all(np.isfinite(array)):
        raise _fail(directory, file, f"{key} has non-finite entries")
    return array


def _number(directory: str, file: str, key: str, value: object) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise _fail(directory, file, f"{key} must be a finite number, got {value!r}")
    return float(value)


@functools.lru_cache(maxsize=4)
def load_covid_data(directory: str = "") -> CovidData:
    """Load and check the three files of ``directory`` ("" = the packaged copy)."""
    directory = str(directory) if directory else str(PACKAGED_DATA_DIR)
    if not os.path.isdir(directory):
        raise CovidDataError(f"CovidEconomy data directory {directory!r} does not exist")
    constants = _read_json(directory, "model_constants.json")
    fitted = _read_json(directory, "fitted_params.json")
    for key in _CONSTANT_KEYS:
        if key not in constants:
            raise _fail(directory, "model_constants.json", f"key {key} is missing")
    for key in _FITTED_KEYS:
        if key not in fitted:
            raise _fail(directory, "fitted_params.json", f"key {key} is missing")
    cfile = "model_constants.json"
    names_map = constants["US_STATE_IDX_TO_STATE_NAME"]
    if not isinstance(names_map, dict) or sorted(names_map, key=str) != sorted(
        (str(i) for i in range(len(names_map))), key=str
    ):
        raise _fail(directory, cfile, 'US_STATE_IDX_TO_STATE_NAME must map "0".."n-1" to names')
    n = len(names_map)
    if n < 1:
        raise _fail(directory, cfile, "US_STATE_IDX_TO_STATE_NAME is empty")
    names = tuple(str(names_map[str(i)]) for i in range(n))
    population = _number_list(directory, cfile, "US_STATE_POPULATION", constants["US_STATE_POPULATION"], n)
    if np.any(population <= 0) or np.any(population != np.round(population)) or np.any(population >= 2**31):
        raise _fail(directory, cfile, "US_STATE_POPULATION must hold positive int32 integers")
    us_population = _number(directory, cfile, "US_POPULATION", constants["US_POPULATION"])
    if us_population <= 0 or us_population != round(us_population) or us_population >= 2**31:
        raise _fail(
            directory, cfile, f"US_POPULATION must be a positive int32 integer, got {us_population!r}"
        )
    levels = constants["NUM_STRINGENCY_LEVELS"]
    if not isinstance(levels, int) or isinstance(levels, bool) or levels < 1:
        raise _fail(directory, cfile, f"NUM_STRINGENCY_LEVELS must be a positive integer, got {levels!r}")

    ffile = "fitted_params.json"
    lists = {}
    for key, length in _FITTED_KEYS.items():
        if length is None:
            continue
        size = {"n": n, "5n": 5 * n}.get(length, length)
        lists[key] = _number_list(directory, ffile, key, fitted[key], size)
    scalars = {}
    for key, length in _FITTED_KEYS.items():
        if length is None and key != "POLICY_START_DATE":
            scalars[key] = _number(directory, ffile, key, fitted[key])
    for key in ("BETA_DELAY", "FILTER_LEN"):
        if scalars[key] < 1 or scalars[key] != round(scalars[key]):
            raise _fail(directory, ffile, f"{key} must be a positive integer, got {fitted[key]!r}")
    if np.any(lists["CONV_LAMBDAS"] <= 0):
        raise _fail(directory, ffile, "CONV_LAMBDAS must be positive")
    try:
        start = _parse_date("POLICY_START_DATE", fitted["POLICY_START_DATE"])
    except ValueError as error:
        raise _fail(directory, ffile, str(error)) from None

    nfile = "real_world_data.npz"
    npz_path = os.path.join(directory, nfile)
    if not os.path.isfile(npz_path):
        raise _fail(directory, nfile, f"missing (the directory must hold {', '.join(DATA_FILES)})")
    try:
        with np.load(npz_path, allow_pickle=False) as archive:
            missing = [key for key in _NPZ_KEYS if key not in archive.files]
            if missing:
                raise _fail(directory, nfile, f"arrays {missing} are missing")
            arrays = {key: np.array(archive[key]) for key in _NPZ_KEYS}
    except CovidDataError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise _fail(directory, nfile, f"not a readable .npz archive ({str(error).splitlines()[0]})") from None
    rows = arrays["policy"].shape[0] if arrays["policy"].ndim == 2 else -1
    for key, array in arrays.items():
        expected = (rows, 1) if key == "subsidy" else (rows, n)
        if rows < 1 or array.shape != expected or array.dtype.kind not in "iuf":
            raise _fail(
                directory,
                nfile,
                f"{key} must be a numeric array of shape (rows, {expected[1]}), got {array.shape}",
            )
    policy = arrays["policy"]
    if np.any(policy < 1) or np.any(policy > levels):
        raise _fail(directory, nfile, f"policy must hold stringency levels 1..{levels}")
    arrays["policy"] = policy.astype(np.int64)
    arrays["subsidy"] = arrays["subsidy"][:, 0].astype(np.float64)
    f32 = lambda key: lists[key].astype(np.float32)  # noqa: E731
    return CovidData(
        directory=directory,
        state_names=names,
        population=population.astype(np.int32),
        us_population=int(us_population),
        num_stringency_levels=levels,
        mortality=_number(directory, cfile, "SIR_MORTALITY", constants["SIR_MORTALITY"]),
        gamma=_number(directory, cfile, "SIR_GAMMA", constants["SIR_GAMMA"]),
        gdp_per_capita=_number(directory, cfile, "GDP_PER_CAPITA", constants["GDP_PER_CAPITA"]),
        policy_start_date=start,
        beta_delay=int(scalars["BETA_DELAY"]),
        beta_slopes=f32("BETA_SLOPES"),
        beta_intercepts=f32("BETA_INTERCEPTS"),
        filter_len=int(scalars["FILTER_LEN"]),
        conv_lambdas=f32("CONV_LAMBDAS"),
        unemployment_bias=f32("UNEMPLOYMENT_BIAS"),
        filter_weights=f32("GROUPED_CONVOLUTIONAL_FILTER_WEIGHTS").reshape(n, 5),
        value_of_life=scalars["VALUE_OF_LIFE"],
        agent_health_weight=f32("INFERRED_WEIGHTAGE_ON_AGENT_HEALTH_INDEX"),
        planner_health_weight=scalars["INFERRED_WEIGHTAGE_ON_PLANNER_HEALTH_INDEX"],
        agent_health_min=f32("MIN_MARGINAL_AGENT_HEALTH_INDEX"),
        agent_health_max=f32("MAX_MARGINAL_AGENT_HEALTH_INDEX"),
        agent_economic_min=f32("MIN_MARGINAL_AGENT_ECONOMIC_INDEX"),
        agent_economic_max=f32("MAX_MARGINAL_AGENT_ECONOMIC_INDEX"),
        planner_health_min=scalars["MIN_MARGINAL_PLANNER_HEALTH_INDEX"],
        planner_health_max=scalars["MAX_MARGINAL_PLANNER_HEALTH_INDEX"],
        planner_economic_min=scalars["MIN_MARGINAL_PLANNER_ECONOMIC_INDEX"],
        planner_economic_max=scalars["MAX_MARGINAL_PLANNER_ECONOMIC_INDEX"],
        arrays=arrays,
    )


def start_rows(data: CovidData) -> np.ndarray:
    """The data rows an episode may start on: at least ``max(28, BETA_DELAY - 1)`` days into the data
    (spec 13.4), before its last row, and with finite S, I, R, V and unemployment in every state."""
    first = max(MIN_START_OFFSET_DAYS, data.beta_delay - 1)
    keys = ("susceptible", "infected", "recovered", "vaccinated", "unemployed")
    finite = np.all([np.isfinite(data.arrays[key]).all(axis=1) for key in keys], axis=0)
    rows = np.flatnonzero(finite[: data.num_rows - 1])
    rows = rows[rows >= first]
    if rows.size == 0:
        raise CovidDataError(
            f"CovidEconomy data {data.directory}: no day has a full inferred state to start on"
        )
    return rows


@dataclasses.dataclass(frozen=True)
class CovidEconomyParams:
    """Settings of ``CovidEconomy-v0``; defaults are the published YAML configuration
    (``covid_and_economy_environment.yaml``, spec 4.1/4.2). The data are loaded and checked at
    construction (``data``); derived constants (spec 5) are in ``derived``."""

    episode_length: int = 540  #: T, days per episode
    start_date: str = "2020-03-22"  #: calendar day of t = 0
    use_real_world_data: bool = False  #: replay the data (spec 12; needs use_real_world_policies)
    use_real_world_policies: bool = False  #: ignore actions, apply the real policies (spec 12)
    path_to_data_and_fitted_params: str = ""  #: directory of the three files ("" = packaged copy)
    pop_between_age_18_65: float = 0.6  #: phi, working-age share
    infection_too_sick_to_work_rate: float = 0.1  #: rho, share of infected who cannot work
    risk_free_interest_rate: float = 0.03  #: r_f, cost of borrowing the subsidy
    economic_reward_crra_eta: float = 2.0  #: eta, CRRA curvature in [0, 20), not 1
    health_priority_scaling_agents: float = 0.3  #: m_a (class default 1)
    health_priority_scaling_planner: float = 0.45  #: m_p (class default 1)
    reward_normalization_factor: float = 1.0  #: rewards are divided by it
    n_stringency_levels: int = 10  #: K (must equal the data's NUM_STRINGENCY_LEVELS)
    action_cooldown_period: int = 28  #: P, days between a state's level changes
    num_subsidy_levels: int = 20  #: L_s
    subsidy_interval: int = 90  #: I_s, days between the planner's decisions
    max_annual_subsidy_per_person: float = 20000.0  #: S_max, US$
    daily_vaccines_per_million_people: int = 3000  #: r_v (class default 4500)
    delivery_interval: int = 1  #: I_v, days between vaccine deliveries
    vaccine_delivery_start_date: str = "2021-01-12"  #: first delivery (class default 2020-12-22)
    #: Spec 12's parameter modulations, one value per environment replica (a number, or a sequence
    #: of ``num_envs`` numbers >= 0): factors on beta's intercept and slope, and on the weighted
    #: stringency-change response of the unemployment model (``softplus(m_u * sum w X) + b``).
    beta_intercept_modulation: float | tuple[float, ...] = 1.0
    beta_slope_modulation: float | tuple[float, ...] = 1.0
    unemployment_modulation: float | tuple[float, ...] = 1.0

    def __post_init__(self) -> None:
        check_int("episode_length", self.episode_length, 1)
        check_int("n_stringency_levels", self.n_stringency_levels, 1)
        check_int("action_cooldown_period", self.action_cooldown_period, 1)
        check_int("num_subsidy_levels", self.num_subsidy_levels, 1)
        check_int("subsidy_interval", self.subsidy_interval, 1)
        check_int("daily_vaccines_per_million_people", self.daily_vaccines_per_million_people, 0)
        check_int("delivery_interval", self.delivery_interval, 1)
        for name in ("use_real_world_data", "use_real_world_policies"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.use_real_world_data and not self.use_real_world_policies:
            raise ValueError("use_real_world_data=True needs use_real_world_policies=True")
        for name, low, high in (
            ("pop_between_age_18_65", 0.0, 1.0),
            ("infection_too_sick_to_work_rate", 0.0, 1.0),
            ("risk_free_interest_rate", 0.0, math.inf),
            ("health_priority_scaling_agents", 0.0, math.inf),
            ("health_priority_scaling_planner", 0.0, math.inf),
            ("max_annual_subsidy_per_person", 0.0, math.inf),
        ):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
        eta = self.economic_reward_crra_eta
        if not isinstance(eta, numbers.Real) or isinstance(eta, bool) or not 0 <= eta < 20 or eta == 1:
            raise ValueError(f"economic_reward_crra_eta must be in [0, 20) and not 1, got {eta!r}")
        factor = self.reward_normalization_factor
        if (
            not isinstance(factor, numbers.Real)
            or isinstance(factor, bool)
            or not (factor > 0 and math.isfinite(factor))
        ):
            raise ValueError(f"reward_normalization_factor must be a positive number, got {factor!r}")
        if not isinstance(self.path_to_data_and_fitted_params, (str, os.PathLike)):
            raise ValueError(
                "path_to_data_and_fitted_params must be a path string, "
                f"got {self.path_to_data_and_fitted_params!r}"
            )
        for name in MODULATIONS:
            object.__setattr__(self, name, _modulation(name, getattr(self, name)))
        start = _parse_date("start_date", self.start_date)
        vaccine_start = _parse_date("vaccine_delivery_start_date", self.vaccine_delivery_start_date)
        object.__setattr__(self, "start_date", start.isoformat())
        object.__setattr__(self, "vaccine_delivery_start_date", vaccine_start.isoformat())
        data = load_covid_data(os.fspath(self.path_to_data_and_fitted_params))
        if self.n_stringency_levels > MAX_STRINGENCY_LEVELS:
            raise ValueError(
                f"n_stringency_levels must be <= {MAX_STRINGENCY_LEVELS}, got {self.n_stringency_levels}"
            )
        if data.beta_delay > LEVEL_HISTORY or data.filter_len > CHANGE_HISTORY:
            raise CovidDataError(
                f"CovidEconomy data {data.directory}: BETA_DELAY must be <= {LEVEL_HISTORY} and "
                f"FILTER_LEN <= {CHANGE_HISTORY} (the environment's history buffers), "
                f"got {data.beta_delay} and {data.filter_len}"
            )
        if data.num_stringency_levels != self.n_stringency_levels:
            raise ValueError(
                f"n_stringency_levels must equal the data's NUM_STRINGENCY_LEVELS "
                f"({data.num_stringency_levels}), got {self.n_stringency_levels}"
            )
        s0 = (start - data.policy_start_date).days
        rows = start_rows(data)
        if s0 not in rows:
            first, last = (
                data.policy_start_date + datetime.timedelta(days=int(r)) for r in (rows[0], rows[-1])
            )
            raise ValueError(
                f"start_date must lie in [{first}, {last}] (the days with a full inferred state in the "
                f"data, which cover {data.policy_start_date} .. {data.last_date}), got {self.start_date!r}"
            )
        t_vac = (vaccine_start - start).days
        if t_vac <= 0:
            default = self.vaccine_delivery_start_date == _field_default(
                type(self), "vaccine_delivery_start_date"
            )
            raise ValueError(
                f"vaccine_delivery_start_date must be after start_date {self.start_date}, "
                f"got {self.vaccine_delivery_start_date!r}"
                + (" (the default): set a later vaccine_delivery_start_date too" if default else "")
            )
        if self.use_real_world_policies and self.episode_length > data.num_rows - s0:
            raise ValueError(
                f"episode_length must be <= {data.num_rows - s0} with use_real_world_policies "
                f"(data rows left after start_date), got {self.episode_length}"
            )
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_derived", _derive(self, data, s0, t_vac))

    @property
    def data(self) -> CovidData:
        return self._data  # type: ignore[attr-defined]

    @property
    def derived(self) -> DerivedConstants:
        return self._derived  # type: ignore[attr-defined]

    @property
    def num_agents(self) -> int:
        """The states (governors); the planner is one more agent."""
        return self.data.num_states


@dataclasses.dataclass(frozen=True)
class DerivedConstants:
    """Spec 5, computed once."""

    s0: int  #: data row of t = 0
    t_vac: int  #: first vaccine delivery step
    baseline_unemployed: np.ndarray  #: U1_i (float32)
    workforce: int
    productivity_per_worker: float  #: pi_w, US$/day (float32 value)
    max_productivity: np.ndarray  #: P_i (float32)
    agent_norm: np.ndarray  #: N_i = 365 P_i
    planner_norm: float  #: N_p
    agent_health_weight: np.ndarray  #: alpha_i
    planner_health_weight: float  #: alpha_p
    vaccines_per_delivery: np.ndarray  #: V^d_i (int32)
    max_daily_subsidy: np.ndarray  #: sub^max_i (float32)


def _derive(params: CovidEconomyParams, data: CovidData, s0: int, t_vac: int) -> DerivedConstants:
    f32 = np.float32
    n = data.population.astype(f32)
    u1 = ((f32(math.log(2.0)) + data.unemployment_bias) * n / f32(100)).astype(f32)
    phi = f32(params.pop_between_age_18_65)
    workforce = int(
        np.int32(data.us_population * params.pop_between_age_18_65 - float(np.sum(u1, dtype=np.float64)))
    )
    workers_per_capita = f32(workforce / data.us_population)
    gdp_per_worker = f32(data.gdp_per_capita / workers_per_capita)
    pi_w = f32(gdp_per_worker / 365)
    max_prod = (np.maximum(f32(0), n * phi - u1) * pi_w).astype(f32)
    agent_norm = (f32(365) * max_prod).astype(f32)

    def scaled(alpha0, m):
        z = alpha0 / (1 - alpha0)
        return m * z / (1 + m * z)

    return DerivedConstants(
        s0=s0,
        t_vac=t_vac,
        baseline_unemployed=u1,
        workforce=workforce,
        productivity_per_worker=float(pi_w),
        max_productivity=max_prod,
        agent_norm=agent_norm,
        planner_norm=float(np.sum(agent_norm, dtype=np.float32)),
        agent_health_weight=scaled(
            data.agent_health_weight.astype(np.float64), params.health_priority_scaling_agents
        ).astype(f32),
        planner_health_weight=float(
            scaled(data.planner_health_weight, params.health_priority_scaling_planner)
        ),
        vaccines_per_delivery=np.floor(
            params.delivery_interval
            * data.population.astype(np.float64)
            / 1e6
            * params.daily_vaccines_per_million_people
        ).astype(np.int32),
        max_daily_subsidy=(
            data.population.astype(np.float64) * params.max_annual_subsidy_per_person / 365
        ).astype(f32),
    )


def real_subsidy_levels(params: CovidEconomyParams) -> np.ndarray:
    """The planner's level at steps ``0 .. T`` in real-policy mode (spec 12): each real payment on
    data row ``s0 + t - 1`` becomes ``round(amount / A)`` levels added to steps ``t .. t + I_s - 1``,
    ``A = n_US * S_max / L_s * I_s / 365``. Built per episode (the reference's second episode adds
    the payments again; here every episode is the first)."""
    data, s0 = params.data, params.derived.s0
    unit = (
        data.us_population
        * params.max_annual_subsidy_per_person
        / params.num_subsidy_levels
        * params.subsidy_interval
        / 365
    )
    levels = np.zeros(params.episode_length + 1, dtype=np.int64)
    for t in range(1, params.episode_length + 1):
        amount = data.arrays["subsidy"][s0 + t - 1]
        if amount > 0 and unit > 0:
            levels[t : t + params.subsidy_interval] += int(round(amount / unit))
    return levels


def _field_default(cls: type, name: str) -> object:
    """The default of the dataclass field ``name`` of ``cls``."""
    return next(field.default for field in dataclasses.fields(cls) if field.name == name)
