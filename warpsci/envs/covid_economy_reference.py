"""Pure-NumPy reference of ``CovidEconomy-v0`` dynamics and rewards (spec sections 6-8, 12).

One environment, float32 state like the reference's CPU code; used to check the golden values of
spec 15 and, later, the agent-function implementation. Actions are applied at every step whatever
the masks say (spec 7.3: masks are advisory); masks are still tracked (``agent_mask_open``,
``planner_mask_open``).
"""

from __future__ import annotations

import math

import numpy as np

from warpsci.envs.covid_economy_data import MODULATIONS, CovidEconomyParams, real_subsidy_levels

F32 = np.float32


def _scalar(value) -> float:
    if isinstance(value, tuple):
        raise ValueError("the reference simulates one environment: give each modulation as one number")
    return value


def crra(x: np.ndarray | float, eta: float) -> np.ndarray:
    """``C(x)`` of spec 8: CRRA utility of a daily fraction of annual output."""
    y = np.clip(F32(365) * np.asarray(x, dtype=F32), F32(0.1), F32(3))
    return ((F32(1) + (y ** F32(1 - eta) - F32(1)) / F32(1 - eta)) / F32(365)).astype(F32)


def min_max(x, lo, hi):
    """``M(x; lo, hi)`` of spec 8 (not clipped)."""
    return (x - lo) / (hi - lo + 1e-10)


def softplus(x: np.ndarray) -> np.ndarray:
    return np.where(x <= 20, np.log1p(np.exp(np.minimum(x, 20))), x).astype(F32)


class CovidEconomyReference:
    """``reset()`` then ``step(state_actions, planner_action)`` -> (agent rewards (n,), planner reward)."""

    def __init__(self, params: CovidEconomyParams | None = None) -> None:
        self.params = params if params is not None else CovidEconomyParams()
        data = self.params.data
        self.n = data.num_states
        self.pop = data.population.astype(F32)
        lam = data.conv_lambdas.astype(np.float64)
        # exp(-k / lambda_f), k = 0 .. L_u - 1: (L_u, 5)
        self.filter_decay = np.exp(-np.arange(data.filter_len)[:, None] / lam[None, :]).astype(F32)
        self.reset()

    # -- history helpers -------------------------------------------------------------------
    def _history_level(self, tau: int) -> np.ndarray:
        """sigma_i(tau) for tau <= 0 (spec 6): the data, or level 1 before the data."""
        row = self.params.derived.s0 + tau
        if row >= 0:
            return self.params.data.arrays["policy"][row].astype(np.int64)
        return np.ones(self.n, dtype=np.int64)

    def reset(self) -> None:
        p, data, derived = self.params, self.params.data, self.params.derived
        s0, d, length = derived.s0, data.beta_delay, data.filter_len
        a = data.arrays
        self.t = 0
        self.S = a["susceptible"][s0].astype(F32)
        self.I = a["infected"][s0].astype(F32)
        self.R = a["recovered"][s0].astype(F32)
        self.V = a["vaccinated"][s0].astype(F32)
        self.D = (F32(data.mortality) * self.R).astype(F32)
        self.U = a["unemployed"][s0].astype(F32)
        # levels sigma(tau) for tau = -(max(d, L_u)) .. 0, newest last
        depth = max(d, length) + 1
        self.levels = [self._history_level(tau) for tau in range(-depth + 1, 1)]
        self.cooldown = np.zeros(self.n, dtype=np.int64)
        self.subsidy_level = 0
        self.sub = np.zeros(self.n, dtype=F32)
        self.post = np.zeros(self.n, dtype=F32)
        self.prod = np.zeros(self.n, dtype=F32)
        self.agent_mask_open = np.ones(self.n, dtype=bool)
        self.planner_mask_open = True
        self.beta = np.zeros(self.n, dtype=F32)
        if p.use_real_world_policies:
            self.real_levels = real_subsidy_levels(p)

    # -- one step --------------------------------------------------------------------------
    def step(self, state_actions, planner_action: int) -> tuple[np.ndarray, float]:
        p, data, derived = self.params, self.params.data, self.params.derived
        self.t += 1
        t = self.t
        previous_D = self.D.copy()
        # 7.3 stringency
        if p.use_real_world_policies:
            actions = data.arrays["policy"][derived.s0 + t - 1].astype(np.int64)
        else:
            actions = np.asarray(state_actions, dtype=np.int64).reshape(self.n)
        level = np.where(actions != 0, actions, self.levels[-1])
        at_marker = t == self.cooldown + 1
        self.cooldown = np.where(
            at_marker, self.cooldown + np.where(actions != 0, p.action_cooldown_period, 1), self.cooldown
        )
        self.levels.append(level)
        self.levels.pop(0)
        # 7.4 subsidy
        if p.use_real_world_policies:
            self.subsidy_level = int(self.real_levels[t])
        elif (t - 1) % p.subsidy_interval == 0:
            self.subsidy_level = int(planner_action)
        self.sub = (F32(self.subsidy_level / p.num_subsidy_levels) * derived.max_daily_subsidy).astype(F32)
        # vaccines
        deliver = t >= derived.t_vac and t % p.delivery_interval == 0
        vac = derived.vaccines_per_delivery.astype(F32) if deliver else np.zeros(self.n, dtype=F32)
        if p.use_real_world_data:
            row = derived.s0 + t
            a = data.arrays
            self.S, self.I, self.R, self.V = (
                np.maximum(a[k][row], 0).astype(F32)
                for k in ("susceptible", "infected", "recovered", "vaccinated")
            )
            self.D = np.maximum(a["deaths"][row], 0).astype(F32)
            self.U = a["unemployed"][row].astype(F32)
        else:
            # 7.5 SIR
            lagged = self.levels[-1 - data.beta_delay].astype(F32)
            m_i, m_s, m_u = (F32(_scalar(getattr(p, name))) for name in MODULATIONS)
            self.beta = (m_i * data.beta_intercepts + m_s * data.beta_slopes * lagged).astype(F32)
            S, I, R, V = self.S, self.I, self.R, self.V  # noqa: E741
            f = np.minimum(F32(1), vac / (S + F32(1e-10)))
            v = np.minimum(vac, S)
            dS = -self.beta * (S / self.pop) * I * (F32(1) - f) - v
            dR = F32(data.gamma) * I + v
            dI = -dS - dR
            self.S = np.maximum(S + dS, 0).astype(F32)
            self.I = np.maximum(I + dI, 0).astype(F32)
            self.R = np.maximum(R + dR, 0).astype(F32)
            self.V = np.maximum(V + v, 0).astype(F32)
            self.D = (F32(data.mortality) * (self.R - self.V)).astype(F32)
            # unemployment: newest change first
            history = np.asarray(self.levels[-data.filter_len - 1 :], dtype=F32)  # (L_u + 1, n)
            changes = (history[1:] - history[:-1])[::-1]  # (L_u, n), k = 0 newest
            X = self.filter_decay.T @ changes  # (5, n)
            rate = (
                softplus(m_u * np.sum(data.filter_weights.T * X, axis=0).astype(F32)) + data.unemployment_bias
            )
            self.U = (rate * self.pop / F32(100)).astype(F32)
        # 7.6 economy
        phi, rho = F32(p.pop_between_age_18_65), F32(p.infection_too_sick_to_work_rate)
        cant_work = phi * (rho * self.I + self.D) + self.U
        can_work = np.maximum(F32(0), phi * self.pop - cant_work)
        self.prod = (can_work * F32(derived.productivity_per_worker)).astype(F32)
        self.post = (self.prod + self.sub).astype(F32)
        # masks for the observation at time t
        self.agent_mask_open = t >= self.cooldown
        self.planner_mask_open = t % p.subsidy_interval == 0
        return self._rewards(previous_D)

    def _rewards(self, previous_D: np.ndarray) -> tuple[np.ndarray, float]:
        p, data, derived = self.params, self.params.data, self.params.derived
        vol, eta = F32(data.value_of_life), p.economic_reward_crra_eta
        dD = (self.D - previous_D).astype(F32)
        h = -dD * vol / derived.agent_norm
        e = crra(self.post / derived.agent_norm, eta)
        hn = min_max(h, data.agent_health_min, data.agent_health_max)
        en = min_max(e, data.agent_economic_min, data.agent_economic_max)
        alpha = derived.agent_health_weight
        agent = (
            (alpha * hn + (1 - alpha) * en) / (alpha + (1 - alpha)) / p.reward_normalization_factor
        ).astype(F32)
        norm = F32(derived.planner_norm)
        hp = -np.sum(dD, dtype=F32) * vol / norm
        net = np.sum(self.post, dtype=F32) - F32(1 + p.risk_free_interest_rate) * np.sum(self.sub, dtype=F32)
        ep = crra(net / norm, eta)
        ap = derived.planner_health_weight
        planner = ap * min_max(hp, data.planner_health_min, data.planner_health_max) + (1 - ap) * min_max(
            ep, data.planner_economic_min, data.planner_economic_max
        )
        return agent, float(planner) / p.reward_normalization_factor

    # -- observations (spec 9) ------------------------------------------------------------------
    def observations(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(agent obs (n, 64), agent masks (n, K + 1), planner obs (463,), planner mask (L_s + 1,)),
        flattened in spec 9.4's sorted key order."""
        p, data, derived = self.params, self.params.data, self.params.derived
        n, t, K = self.n, self.t, F32(p.n_stringency_levels)
        state = np.stack([self.S, self.I, self.R, self.D, self.V, self.U]) / self.pop  # (6, n)
        productivity = self.post / derived.max_productivity
        lagged = self.levels[-data.beta_delay].astype(F32) / K
        indicator = self.levels[-1].astype(F32) / K
        time = F32(t / p.episode_length)
        until_subsidy = F32((p.subsidy_interval - t % p.subsidy_interval) / p.subsidy_interval)
        level = F32(self.subsidy_level / p.num_subsidy_levels)
        vaccine = F32(self.vaccine_timer())
        columns = np.full((n, 1), 1, dtype=F32)
        agent = np.concatenate(
            [
                indicator[:, None],
                columns * level,
                columns * until_subsidy,
                columns * vaccine,
                columns * time,
                np.eye(n, dtype=F32),
                productivity[:, None],
                state.T,
                lagged[:, None],
            ],
            axis=1,
        ).astype(F32)
        planner = np.concatenate(
            [indicator, [level, until_subsidy, vaccine, time], productivity, state.reshape(-1), lagged]
        ).astype(F32)
        agent_mask = np.ones((n, p.n_stringency_levels + 1), dtype=F32)
        agent_mask[~self.agent_mask_open, 1:] = 0
        planner_mask = np.ones(p.num_subsidy_levels + 1, dtype=F32)
        if not self.planner_mask_open:
            planner_mask[1:] = 0
        return agent, agent_mask, planner, planner_mask

    def vaccine_timer(self) -> float:
        """``VaccinationCampaign-t_until_next_vaccines`` (spec 9.3)."""
        interval, t_vac = self.params.delivery_interval, self.params.derived.t_vac
        first = -(-t_vac // interval) * interval
        n = self.t + 1
        if n <= first:
            return min(1.0, (first - n) / interval) / interval
        return (interval - n % interval) / interval


def run_scripted(params: CovidEconomyParams, policy) -> dict:
    """Run one episode with ``policy(t) -> (state_actions, planner_action)``; returns sums."""
    env = CovidEconomyReference(params)
    agent_returns = np.zeros(env.n, dtype=np.float64)
    planner_return = 0.0
    for t in range(1, params.episode_length + 1):
        actions, planner_action = policy(t)
        agent, planner = env.step(actions, planner_action)
        agent_returns += np.nan_to_num(agent.astype(np.float64))
        if not math.isnan(planner):
            planner_return += planner
    return {
        "agent_returns": agent_returns,
        "planner_return": planner_return,
        "us_deaths": float(np.sum(env.D, dtype=np.float64)),
        "env": env,
    }
