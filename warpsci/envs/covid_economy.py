"""CovidEconomy-v0: 51 state governors and a federal planner in a COVID-19 and economy simulation.

The AI Economist's ``CovidAndEconomyEnvironment`` (Trott et al., arXiv 2108.02904), rules in
``shared/envs/covid19_economy.md`` (cited as "spec 7.3" etc.), data and params in
:mod:`warpsci.envs.covid_economy_data`. One step is one day. Agents ``0 .. 50`` are the states in the
data's order (group ``"governor"``, Discrete(11): 0 keeps the stringency level, ``k`` sets level
``k``); agent 51 is the planner (group ``"planner"``, Discrete(21): the subsidy level, read every 90
days). Each state runs an SIR epidemic with vaccination whose transmission rate follows its
stringency 29 days earlier, and an unemployment model driven by its stringency changes of the last
600 days; productivity falls with unemployment, sickness and deaths and is topped up by the
subsidy. Rewards weigh a normalised health index against a CRRA economic index, per state and, for
the planner, for the nation minus the cost of borrowing the subsidy. Deterministic: an episode is a
function of the actions; every replica and every episode starts from the data's state at
``start_date``. The episode always runs ``episode_length`` days (truncation; nothing terminates).

The step (spec 7.2), one stage each: the clock and the planner's level (environment); each state's
stringency, cooldown, subsidy, vaccines, SIR, unemployment, productivity and reward (agents); the
planner's reward, a reduction over this step's states (environment). Action masks are advice (spec
7.3): a governor whose cooldown runs may only keep its level, the planner may only choose on
decision days; an action against the mask is applied all the same.

Observations, float32, keys flattened in sorted order (spec 9.4): governor (64 entries) its level /
K, subsidy level / L_s, days until the next subsidy decision / I_s, the vaccination timer, t / T,
the one-hot of its index, post-subsidy productivity / maximum, ``[S, I, R, D, V, U] / population``,
the level that sets tomorrow's transmission / K. Planner (463): every state's level / K, the four
clocks, every state's productivity, the six state features (feature-major, 6 x 51), every state's
lagged level.

Implementation choices (results agree with the reference to float32 rounding): the unemployment
filter responses are updated recursively in float64 from a 600-day ring buffer of level changes
instead of recomputing the 600-day sums; histories are int8 ring buffers.
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np

from warpsci.environment import (
    AgentGroup,
    AgentStage,
    EnvironmentDefinition,
    EnvironmentStage,
    StateField,
    agent_function,
)
from warpsci.envs.covid_economy_data import (
    CHANGE_HISTORY,
    LEVEL_HISTORY,
    MODULATIONS,
    CovidEconomyParams,
    real_subsidy_levels,
)

#: Number of unemployment response filters (``CONV_LAMBDAS``).
FILTERS = 5
#: Columns of the per-state constants table ``params.states`` (float32, one row per state).
(
    POPULATION, BETA_INTERCEPT, BETA_SLOPE, UNEMPLOYMENT_BIAS, FILTER_WEIGHT,  # FILTER_WEIGHT .. + 4
) = (0, 1, 2, 3, 4)  # fmt: skip
(
    MAX_PRODUCTIVITY, NORM, HEALTH_MIN, HEALTH_MAX, ECONOMIC_MIN, ECONOMIC_MAX, HEALTH_WEIGHT,
    VACCINES_PER_DELIVERY, MAX_DAILY_SUBSIDY, START_S, START_I, START_R, START_V, START_U,
) = range(FILTER_WEIGHT + FILTERS, FILTER_WEIGHT + FILTERS + 14)  # fmt: skip
STATE_COLUMNS = START_U + 1
#: Rows of the replay table (``use_real_world_data``): the data's S, I, R, V, deaths, unemployed.
REPLAY_S, REPLAY_I, REPLAY_R, REPLAY_V, REPLAY_D, REPLAY_U = range(6)
#: Observation sizes (spec 9.4) for ``n`` states.
STATE_FEATURES = 6


def governor_observation_size(num_states: int) -> int:
    """Entries of a governor's observation: 5 scalars, the one-hot, productivity, 6 features, lag."""
    return 13 + num_states


def planner_observation_size(num_states: int) -> int:
    """Entries of the planner's observation: levels, 4 clocks, productivity, 6 x n features, lags."""
    return 4 + num_states * (3 + STATE_FEATURES)


def _ring_histories(params: CovidEconomyParams) -> tuple[np.ndarray, np.ndarray]:
    """The start's level ring ``(n, d)`` (slot ``tau mod d`` holds ``sigma(tau)``, tau = -d+1 .. 0)
    and change ring ``(n, L_u)`` (slot ``tau mod L_u`` holds ``sigma(tau) - sigma(tau - 1)``), from
    the data's policy before ``start_date`` (level 1 before the data; spec 6)."""
    data, s0 = params.data, params.derived.s0
    delay, length = data.beta_delay, data.filter_len

    def level(tau: int) -> np.ndarray:
        row = s0 + tau
        return data.arrays["policy"][row] if row >= 0 else np.ones(data.num_states, dtype=np.int64)

    levels = np.zeros((data.num_states, delay), dtype=np.int8)
    for tau in range(-delay + 1, 1):
        levels[:, tau % delay] = level(tau)
    changes = np.zeros((data.num_states, length), dtype=np.int8)
    for tau in range(-length + 1, 1):
        changes[:, tau % length] = level(tau) - level(tau - 1)
    return levels, changes


def state_constants(params: CovidEconomyParams) -> np.ndarray:
    """The ``(n, STATE_COLUMNS)`` float32 table of per-state constants and start values."""
    data, derived, s0 = params.data, params.derived, params.derived.s0
    table = np.zeros((data.num_states, STATE_COLUMNS), dtype=np.float32)
    table[:, POPULATION] = data.population
    table[:, BETA_INTERCEPT] = data.beta_intercepts
    table[:, BETA_SLOPE] = data.beta_slopes
    table[:, UNEMPLOYMENT_BIAS] = data.unemployment_bias
    table[:, FILTER_WEIGHT : FILTER_WEIGHT + FILTERS] = data.filter_weights
    table[:, MAX_PRODUCTIVITY] = derived.max_productivity
    table[:, NORM] = derived.agent_norm
    table[:, HEALTH_MIN] = data.agent_health_min
    table[:, HEALTH_MAX] = data.agent_health_max
    table[:, ECONOMIC_MIN] = data.agent_economic_min
    table[:, ECONOMIC_MAX] = data.agent_economic_max
    table[:, HEALTH_WEIGHT] = derived.agent_health_weight
    table[:, VACCINES_PER_DELIVERY] = derived.vaccines_per_delivery
    table[:, MAX_DAILY_SUBSIDY] = derived.max_daily_subsidy
    for column, key in ((START_S, "susceptible"), (START_I, "infected"), (START_R, "recovered"),
                        (START_V, "vaccinated"), (START_U, "unemployed")):  # fmt: skip
        table[:, column] = data.arrays[key][s0].astype(np.float32)
    return table


def kernel_params(params: CovidEconomyParams) -> dict:
    """What the kernels see: scalars, the per-state table, the start histories, the real-world
    tables (one dummy row when their mode is off) and the modulations (replica params)."""
    data, derived = params.data, params.derived
    levels, changes = _ring_histories(params)
    num_steps = params.episode_length
    if params.use_real_world_policies:
        s0 = derived.s0
        real_policy = data.arrays["policy"][s0 : s0 + num_steps].astype(np.int32)
        real_subsidy = real_subsidy_levels(params).astype(np.int32)
    else:
        real_policy = np.zeros((1, data.num_states), dtype=np.int32)
        real_subsidy = np.zeros(1, dtype=np.int32)
    if params.use_real_world_data:
        rows = slice(derived.s0, derived.s0 + num_steps + 1)
        keys = ("susceptible", "infected", "recovered", "vaccinated", "deaths")
        replay = np.stack(
            [np.maximum(data.arrays[key][rows], 0) for key in keys] + [data.arrays["unemployed"][rows]]
        )
        replay = np.ascontiguousarray(replay.transpose(1, 0, 2), dtype=np.float32)  # (T + 1, 6, n)
    else:
        replay = np.zeros((1, STATE_FEATURES, data.num_states), dtype=np.float32)
    values = {
        "num_states": data.num_states,
        "episode_length": num_steps,
        "use_real_world_policies": params.use_real_world_policies,
        "use_real_world_data": params.use_real_world_data,
        "stringency_levels": params.n_stringency_levels,
        "cooldown_period": params.action_cooldown_period,
        "subsidy_levels": params.num_subsidy_levels,
        "subsidy_interval": params.subsidy_interval,
        "delivery_interval": params.delivery_interval,
        "first_delivery": derived.t_vac,
        "beta_delay": data.beta_delay,
        "filter_len": data.filter_len,
        "mortality": data.mortality,
        "gamma": data.gamma,
        "value_of_life": data.value_of_life,
        "working_age_share": params.pop_between_age_18_65,
        "too_sick_to_work_rate": params.infection_too_sick_to_work_rate,
        "interest_rate": params.risk_free_interest_rate,
        "crra_eta": params.economic_reward_crra_eta,
        "reward_normalization_factor": params.reward_normalization_factor,
        "productivity_per_worker": derived.productivity_per_worker,
        "planner_norm": derived.planner_norm,
        "planner_health_weight": derived.planner_health_weight,
        "planner_health_min": data.planner_health_min,
        "planner_health_max": data.planner_health_max,
        "planner_economic_min": data.planner_economic_min,
        "planner_economic_max": data.planner_economic_max,
        "conv_lambdas": data.conv_lambdas.astype(np.float32),
        "states": state_constants(params),
        "start_levels": levels,
        "start_changes": changes,
        "real_policy": real_policy,
        "real_subsidy": real_subsidy,
        "replay": replay,
    }
    for name in MODULATIONS:
        values[name] = getattr(params, name)
    return values


STATE_FIELDS = (
    StateField("susceptible", np.float32),
    StateField("infected", np.float32),
    StateField("recovered", np.float32),
    StateField("vaccinated", np.float32),
    StateField("deaths", np.float32),  # model deaths mu (R - V)
    StateField("unemployed", np.float32),
    StateField("new_deaths", np.float32),  # D(t) - D(t - 1), for the planner's reduction
    StateField("subsidy", np.float32),  # sub_i(t), US$ per day
    StateField("productivity", np.float32),  # post-subsidy productivity post_i(t), US$ per day
    StateField("level", np.int32),  # stringency sigma_i(t), 1 .. K
    StateField("cooldown", np.int32),  # c_i: all actions allowed from step c_i on
    StateField("level_history", np.int8, shape=(LEVEL_HISTORY,)),  # slot tau mod d: sigma(tau)
    StateField("change_history", np.int8, shape=(CHANGE_HISTORY,)),  # slot tau mod L_u: its change
    # X_f(t) = sum_k exp(-k / lambda_f) (sigma(t - k) - sigma(t - k - 1)), k < L_u
    StateField("filter_response", np.float64, shape=(FILTERS,)),
    StateField("t", np.int32, per_agent=False),
    StateField("subsidy_level", np.int32, per_agent=False),  # the planner's level l(t), 0 .. L_s
)


@agent_function
def reset_environment(state, params, env, key):
    state.t[env] = 0
    state.subsidy_level[env] = 0


@agent_function
def reset_agent(state, params, env, agent, key):
    state.new_deaths[env, agent] = 0.0
    state.subsidy[env, agent] = 0.0
    state.productivity[env, agent] = 0.0
    state.cooldown[env, agent] = 0
    if agent >= params.num_states:  # the planner keeps no state of its own
        return
    row = params.states[agent]
    state.susceptible[env, agent] = row[START_S]
    state.infected[env, agent] = row[START_I]
    state.recovered[env, agent] = row[START_R]
    state.vaccinated[env, agent] = row[START_V]
    state.deaths[env, agent] = np.float32(params.mortality) * row[START_R]
    state.unemployed[env, agent] = row[START_U]
    for slot in range(params.beta_delay):
        state.level_history[env, agent, slot] = params.start_levels[agent, slot]
    state.level[env, agent] = params.start_levels[agent, 0]  # slot 0 = tau 0
    length = params.filter_len
    for slot in range(length):
        state.change_history[env, agent, slot] = params.start_changes[agent, slot]
    # X_f(0) by Horner's rule, oldest change first: no exponentials but one per filter.
    for f in range(FILTERS):
        decay = math.exp(-1.0 / np.float64(params.conv_lambdas[f]))
        response = 0.0
        for age in range(length - 1, -1, -1):
            response = response * decay + np.float64(
                state.change_history[env, agent, (length - age) % length]
            )
        state.filter_response[env, agent, f] = response


@agent_function
def advance_clock(state, params, actions, rewards, env, key):
    """Spec 7.2 step 1 and 7.4: the day, and the planner's level on decision days."""
    t = state.t[env] + 1
    state.t[env] = t
    if params.use_real_world_policies:
        state.subsidy_level[env] = params.real_subsidy[t]
    elif (t - 1) % params.subsidy_interval == 0:
        state.subsidy_level[env] = actions[env, params.num_states]


@agent_function
def crra(fraction, eta):
    """``C(x)`` of spec 8: CRRA utility of a daily fraction of annual output (float32)."""
    y = min(max(np.float32(365.0) * fraction, np.float32(0.1)), np.float32(3.0))
    power = np.float32(1.0) - eta
    return (np.float32(1.0) + (y**power - np.float32(1.0)) / power) / np.float32(365.0)


@agent_function
def normalized(value, low, high):
    """``M(x; lo, hi)`` of spec 8, not clipped."""
    return (value - low) / (high - low + np.float32(1e-10))


@agent_function
def at_least_zero(x):
    """``max(x, 0)`` that keeps NaN, as NumPy's ``maximum`` does (replayed data end in NaN)."""
    return np.float32(0.0) if x < np.float32(0.0) else x


@agent_function
def softplus(x):
    if x <= np.float32(20.0):
        return np.float32(math.log1p(math.exp(x)))
    return x


@agent_function
def update_stringency(state, params, actions, env, agent, t):
    """Spec 7.3 and 7.5's histories: the new level, the cooldown, the level ``d`` days ago
    (returned: it sets today's transmission rate) and the unemployment filter responses."""
    if params.use_real_world_policies:
        action = params.real_policy[t - 1, agent]
    else:
        action = actions[env, agent]
    previous = state.level[env, agent]
    level = action if action != 0 else previous
    if t == state.cooldown[env, agent] + 1:
        state.cooldown[env, agent] += params.cooldown_period if action != 0 else 1
    state.level[env, agent] = level
    slot = t % params.beta_delay
    lagged = state.level_history[env, agent, slot]
    state.level_history[env, agent, slot] = level
    length = params.filter_len
    slot = t % length
    change = np.float64(level - previous)
    forgotten = np.float64(state.change_history[env, agent, slot])
    state.change_history[env, agent, slot] = level - previous
    for f in range(FILTERS):
        scale = np.float64(params.conv_lambdas[f])
        response = state.filter_response[env, agent, f]
        response = change + math.exp(-1.0 / scale) * response - math.exp(-length / scale) * forgotten
        state.filter_response[env, agent, f] = response
    return lagged


@agent_function
def simulate_epidemic(state, params, env, agent, lagged, vaccines):
    """Spec 7.5: SIR with vaccination, deaths and unemployment of one state."""
    row = params.states[agent]
    beta = params.beta_intercept_modulation[env] * row[BETA_INTERCEPT] + (
        params.beta_slope_modulation[env] * row[BETA_SLOPE] * np.float32(lagged)
    )
    population = row[POPULATION]
    s = state.susceptible[env, agent]
    i = state.infected[env, agent]
    r = state.recovered[env, agent]
    v = state.vaccinated[env, agent]
    covered = min(np.float32(1.0), vaccines / (s + np.float32(1e-10)))
    vaccinated = min(vaccines, s)
    d_s = -beta * (s / population) * i * (np.float32(1.0) - covered) - vaccinated
    d_r = np.float32(params.gamma) * i + vaccinated
    d_i = -d_s - d_r
    s = at_least_zero(s + d_s)
    i = at_least_zero(i + d_i)
    r = at_least_zero(r + d_r)
    v = at_least_zero(v + vaccinated)
    state.susceptible[env, agent] = s
    state.infected[env, agent] = i
    state.recovered[env, agent] = r
    state.vaccinated[env, agent] = v
    state.deaths[env, agent] = np.float32(params.mortality) * (r - v)
    response = np.float32(0.0)
    for f in range(FILTERS):
        response += row[FILTER_WEIGHT + f] * np.float32(state.filter_response[env, agent, f])
    rate = softplus(params.unemployment_modulation[env] * response) + row[UNEMPLOYMENT_BIAS]
    state.unemployed[env, agent] = rate * population / np.float32(100.0)


@agent_function
def replay_data(state, params, env, agent, t):
    """Spec 12, ``use_real_world_data``: the day's data instead of the model (NaN past the data)."""
    day = params.replay[t]
    state.susceptible[env, agent] = day[REPLAY_S, agent]
    state.infected[env, agent] = day[REPLAY_I, agent]
    state.recovered[env, agent] = day[REPLAY_R, agent]
    state.vaccinated[env, agent] = day[REPLAY_V, agent]
    state.deaths[env, agent] = day[REPLAY_D, agent]
    state.unemployed[env, agent] = day[REPLAY_U, agent]


@agent_function
def step_state(state, params, actions, env, agent, key):
    """One state's day (spec 7.3-7.6) and its reward (spec 8); the planner's row does nothing here."""
    if agent >= params.num_states:
        return np.float32(0.0)
    t = np.int64(state.t[env])
    lagged = update_stringency(state, params, actions, env, agent, t)
    row = params.states[agent]
    level = np.float32(np.float64(state.subsidy_level[env]) / np.float64(params.subsidy_levels))
    subsidy = level * row[MAX_DAILY_SUBSIDY]
    deliver = t >= params.first_delivery and t % params.delivery_interval == 0
    vaccines = row[VACCINES_PER_DELIVERY] if deliver else np.float32(0.0)
    previous_deaths = state.deaths[env, agent]
    if params.use_real_world_data:
        replay_data(state, params, env, agent, t)
    else:
        simulate_epidemic(state, params, env, agent, lagged, vaccines)
    population = row[POPULATION]
    share = np.float32(params.working_age_share)
    incapacitated = (
        np.float32(params.too_sick_to_work_rate) * state.infected[env, agent] + state.deaths[env, agent]
    )
    cant_work = share * incapacitated + state.unemployed[env, agent]
    can_work = at_least_zero(share * population - cant_work)
    productivity = can_work * np.float32(params.productivity_per_worker) + subsidy
    state.subsidy[env, agent] = subsidy
    state.productivity[env, agent] = productivity
    new_deaths = state.deaths[env, agent] - previous_deaths
    state.new_deaths[env, agent] = new_deaths
    norm = row[NORM]
    health = normalized(
        -new_deaths * np.float32(params.value_of_life) / norm, row[HEALTH_MIN], row[HEALTH_MAX]
    )
    economic = normalized(crra(productivity / norm, params.crra_eta), row[ECONOMIC_MIN], row[ECONOMIC_MAX])
    weight = row[HEALTH_WEIGHT]
    reward = (weight * health + (np.float32(1.0) - weight) * economic) / (weight + (np.float32(1.0) - weight))
    return reward / params.reward_normalization_factor


@agent_function
def planner_reward(state, params, actions, rewards, env, key):
    """Spec 8, the planner: the nation's deaths and productivity of this step, less the subsidy
    repaid with interest; a reduction over every state's result of this step."""
    new_deaths = np.float32(0.0)
    productivity = np.float32(0.0)
    subsidy = np.float32(0.0)
    for agent in range(params.num_states):
        new_deaths += state.new_deaths[env, agent]
        productivity += state.productivity[env, agent]
        subsidy += state.subsidy[env, agent]
    norm = np.float32(params.planner_norm)
    health = -new_deaths * np.float32(params.value_of_life) / norm
    net = productivity - (np.float32(1.0) + params.interest_rate) * subsidy
    economic = crra(net / norm, params.crra_eta)
    weight = np.float32(params.planner_health_weight)
    reward = weight * normalized(health, params.planner_health_min, params.planner_health_max) + (
        np.float32(1.0) - weight
    ) * normalized(economic, params.planner_economic_min, params.planner_economic_max)
    rewards[env, params.num_states] += reward / params.reward_normalization_factor


@agent_function
def vaccine_timer(params, t):
    """``VaccinationCampaign-t_until_next_vaccines`` (spec 9.3)."""
    interval = np.int64(params.delivery_interval)
    first = (np.int64(params.first_delivery) + interval - 1) // interval * interval
    upcoming = t + 1
    if upcoming <= first:
        return np.float32(min(1.0, (first - upcoming) / interval) / interval)
    return np.float32((interval - upcoming % interval) / interval)


@agent_function
def state_feature(state, env, agent, feature):
    """``[S, I, R, D, V, U][feature]`` of state ``agent`` (persons)."""
    if feature == 0:
        return state.susceptible[env, agent]
    if feature == 1:
        return state.infected[env, agent]
    if feature == 2:
        return state.recovered[env, agent]
    if feature == 3:
        return state.deaths[env, agent]
    if feature == 4:
        return state.vaccinated[env, agent]
    return state.unemployed[env, agent]


@agent_function
def lagged_level(state, params, env, agent, t):
    """``sigma(t - d + 1)``: the level that sets tomorrow's transmission rate."""
    return state.level_history[env, agent, (t + 1) % params.beta_delay]


@agent_function
def observe_agent(state, params, obs, env, agent):
    """Spec 9. A governor writes its own row and its own entries of the planner's row (the planner
    sees every state; 51 threads write those entries at once instead of the planner's one thread),
    the planner the four clocks of its row."""
    n = params.num_states
    t = np.int64(state.t[env])
    levels = np.float32(params.stringency_levels)
    interval = params.subsidy_interval
    subsidy_level = np.float32(np.float64(state.subsidy_level[env]) / np.float64(params.subsidy_levels))
    until_subsidy = np.float32((interval - t % interval) / interval)
    vaccines = vaccine_timer(params, t)
    time = np.float32(t / params.episode_length)
    if agent >= n:
        obs[env, agent, n] = subsidy_level
        obs[env, agent, n + 1] = until_subsidy
        obs[env, agent, n + 2] = vaccines
        obs[env, agent, n + 3] = time
        return
    row = params.states[agent]
    level = np.float32(state.level[env, agent]) / levels
    productivity = state.productivity[env, agent] / row[MAX_PRODUCTIVITY]
    lag = np.float32(lagged_level(state, params, env, agent, t)) / levels
    obs[env, agent, 0] = level
    obs[env, agent, 1] = subsidy_level
    obs[env, agent, 2] = until_subsidy
    obs[env, agent, 3] = vaccines
    obs[env, agent, 4] = time
    for k in range(n):
        obs[env, agent, 5 + k] = np.float32(1.0) if k == agent else np.float32(0.0)
    obs[env, agent, 5 + n] = productivity
    obs[env, agent, 12 + n] = lag
    planner = n
    obs[env, planner, agent] = level
    obs[env, planner, n + 4 + agent] = productivity
    obs[env, planner, 8 * n + 4 + agent] = lag  # after the 6 x n features
    for feature in range(STATE_FEATURES):
        value = state_feature(state, env, agent, feature) / row[POPULATION]
        obs[env, agent, 6 + n + feature] = value
        obs[env, planner, 2 * n + 4 + feature * n + agent] = value


@agent_function
def action_mask(state, params, mask, env, agent):
    """Spec 7.3/7.4: a governor may change its level from step ``c_i`` on; the planner chooses a level
    on the observation before a decision day. Action 0 is always allowed."""
    t = np.int64(state.t[env])
    if agent < params.num_states:
        choices = params.stringency_levels + 1
        open_ = t >= state.cooldown[env, agent]
    else:
        choices = params.subsidy_levels + 1
        open_ = t % params.subsidy_interval == 0
    open_ = open_ or params.use_real_world_policies
    mask[env, agent, 0] = True
    for action in range(1, choices):
        mask[env, agent, action] = open_


@agent_function
def is_terminal(state, params, env):
    return False


def groups(params: CovidEconomyParams) -> tuple[AgentGroup, ...]:
    n = params.num_agents
    return (
        AgentGroup(
            "governor",
            tuple(range(n)),
            gymnasium.spaces.Box(-np.inf, np.inf, (governor_observation_size(n),), np.float32),
            gymnasium.spaces.Discrete(params.n_stringency_levels + 1),
        ),
        AgentGroup(
            "planner",
            (n,),
            gymnasium.spaces.Box(-np.inf, np.inf, (planner_observation_size(n),), np.float32),
            gymnasium.spaces.Discrete(params.num_subsidy_levels + 1),
        ),
    )


COVID_ECONOMY = EnvironmentDefinition(
    name="CovidEconomy-v0",
    params_type=CovidEconomyParams,
    state_fields=STATE_FIELDS,
    reset_environment=reset_environment,
    reset_agent=reset_agent,
    step_stages=(
        EnvironmentStage(advance_clock),
        AgentStage(step_state),
        EnvironmentStage(planner_reward),
    ),
    observe_agent=observe_agent,
    action_mask=action_mask,
    is_terminal=is_terminal,
    groups=groups,
    max_episode_steps=lambda params: params.episode_length,
    kernel_params=kernel_params,
    replica_params=MODULATIONS,
    finite_state_fields=("susceptible", "infected", "recovered", "unemployed", "productivity"),
    reference=(
        "salesforce/ai-economist @ a84d5f3fdcabb207d9fde7754d34906903b3e184: "
        "ai_economist/foundation/scenarios/covid19/covid19_env.py (CovidAndEconomyEnvironment), "
        "components/covid19_components.py; shared/envs/covid19_economy.md"
    ),
)
