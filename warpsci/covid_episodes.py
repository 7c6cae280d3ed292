"""Whole episodes of ``CovidEconomy-v0``: scripted policies, trained ones, their records and plots.

``warpsci eval CovidEconomy-v0 --policy NAME`` plays one of the five runs of the AI Economist's
tutorial (spec 15.1) and ``warpsci eval RUN_DIR`` on a trained run plays its policies beside the
real-world policies; both go through :func:`play_episode`, which records every day's infections,
deaths, unemployment, stringency and subsidy level, and :func:`plot_episodes` draws them.

The five scripted runs:

``real-world-data``      the data replayed (``use_real_world_policies`` and ``use_real_world_data``)
``real-world-policies``  the simulation under the real stringency levels and payments
``open``                 every state at level 1, no subsidy
``closed``               every state at level 10, full subsidy (level 20)
``closed-6-months``      level 10 for 180 days, then level 1, no subsidy

Actions are applied every day whatever the masks say, as the tutorial does (spec 7.3).
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ENV_ID = "CovidEconomy-v0"
SCRIPTED_POLICIES = ("real-world-data", "real-world-policies", "open", "closed", "closed-6-months")
#: The setting of the tutorial's published welfare values (spec 15.1).
TUTORIAL_SETTING = {
    "episode_length": 405,
    "health_priority_scaling_agents": 1.0,
    "health_priority_scaling_planner": 1.0,
}
#: ``actor(observations, masks, t) -> actions``, dicts by group of ``(1, group_size, ...)`` tensors.
Actor = Callable[[dict[str, torch.Tensor], dict[str, torch.Tensor], int], dict[str, torch.Tensor]]


@dataclasses.dataclass
class CovidEpisode:
    """One episode, day by day (rows ``t = 1 .. T``; per-state columns in the data's state order).

    Attributes:
        name: What played (a scripted policy's name, or ``"trained"``).
        state_names: The 51 states.
        population: Persons per state.
        infected, deaths, unemployed: Persons per state, ``(T, 51)``.
        stringency: Levels 1 .. 10, ``(T, 51)``.
        subsidy_level: The planner's level 0 .. 20, ``(T,)``.
        agent_rewards: ``(T, 51)``; planner_rewards: ``(T,)``.
    """

    name: str
    state_names: tuple[str, ...]
    population: np.ndarray
    infected: np.ndarray
    deaths: np.ndarray
    unemployed: np.ndarray
    stringency: np.ndarray
    subsidy_level: np.ndarray
    agent_rewards: np.ndarray
    planner_rewards: np.ndarray

    @property
    def social_welfare(self) -> float:
        """The planner's return, NaN days skipped (the data end before some replays do)."""
        return float(np.nansum(self.planner_rewards.astype(np.float64)))

    @property
    def us_deaths(self) -> float:
        """Deaths in the United States on the last day (persons)."""
        return float(np.sum(self.deaths[-1], dtype=np.float64))

    @property
    def us_unemployment_rate(self) -> np.ndarray:
        """The national unemployment rate each day (percent)."""
        total = np.sum(self.population, dtype=np.float64)
        return np.sum(self.unemployed, axis=1, dtype=np.float64) / total * 100

    def summary(self) -> dict[str, Any]:
        return {
            "policy": self.name,
            "days": int(self.planner_rewards.size),
            "social_welfare": round(self.social_welfare, 4),
            "us_deaths": round(self.us_deaths, 1),
            "mean_unemployment_rate_percent": round(float(np.nanmean(self.us_unemployment_rate)), 4),
            "mean_governor_return": round(float(np.nanmean(np.nansum(self.agent_rewards, axis=0))), 4),
        }

    def write_csv(self, path: str | Path) -> None:
        """One row per day: national totals, the mean stringency, the subsidy level, the rewards."""
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(
                ["day", "us_infected", "us_deaths", "us_unemployment_rate_percent", "mean_stringency",
                 "subsidy_level", "planner_reward", "mean_governor_reward"]
            )  # fmt: skip
            rate = self.us_unemployment_rate
            for day in range(self.planner_rewards.size):
                writer.writerow(
                    [
                        day + 1,
                        float(np.sum(self.infected[day], dtype=np.float64)),
                        float(np.sum(self.deaths[day], dtype=np.float64)),
                        float(rate[day]),
                        float(self.stringency[day].mean()),
                        int(self.subsidy_level[day]),
                        float(self.planner_rewards[day]),
                        float(np.mean(self.agent_rewards[day])),
                    ]
                )


def scripted_params(policy: str, env_params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The env params of a scripted run: the tutorial's setting, ``env_params`` over it, and the
    real-world flags the run needs."""
    check_policy(policy)
    params = {**TUTORIAL_SETTING, **(env_params or {})}
    params["use_real_world_policies"] = policy in ("real-world-data", "real-world-policies")
    params["use_real_world_data"] = policy == "real-world-data"
    return params


def check_policy(policy: str) -> None:
    if policy not in SCRIPTED_POLICIES:
        raise ValueError(f"unknown scripted policy {policy!r}; accepted: {', '.join(SCRIPTED_POLICIES)}")


def scripted_actor(policy: str) -> Actor:
    """The fixed actions of a scripted run (the real-world runs ignore actions: zeros)."""
    check_policy(policy)

    def act(observations: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], t: int) -> dict:
        governors, planner = observations["governor"], observations["planner"]
        level, subsidy = 0, 0
        if policy == "open" or (policy == "closed-6-months" and t > 180):
            level = 1
        elif policy in ("closed", "closed-6-months"):
            level = 10
            subsidy = 20 if policy == "closed" else 0
        return {
            "governor": torch.full(governors.shape[:2], level, dtype=torch.int64, device=governors.device),
            "planner": torch.full(planner.shape[:2], subsidy, dtype=torch.int64, device=planner.device),
        }

    return act


def trained_actor(run: str | Path, device: str | torch.device = "cpu") -> Actor:
    """A trained run's policies, greedy, through the action masks."""
    from warpsci.evaluation import load_policies

    policies = load_policies(run, device)

    def act(observations: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], t: int) -> dict:
        actions = {}
        for group, obs in observations.items():
            rows = obs.reshape(obs.shape[0] * obs.shape[1], -1)
            mask = masks[group].reshape(rows.shape[0], -1)
            with torch.no_grad():
                actions[group] = policies[group].act_greedy(rows, mask).reshape(obs.shape[:2])
        return actions

    return act


def play_episode(
    name: str,
    actor: Actor,
    env_params: dict[str, Any] | None = None,
    device: str | torch.device = "cpu",
    progress: Callable[[str], None] | None = None,
) -> CovidEpisode:
    """Play one episode of one environment with ``actor`` and record it day by day; ``progress`` is
    told what is being played once the environment's parameters are checked."""
    from warpsci.registry import make

    env = make(ENV_ID, num_envs=1, device=device, params=env_params or None)
    if progress is not None:
        progress(f"playing one {ENV_ID} episode ({env.max_episode_steps} days) with the {name} policy ...")
    observations, _ = env.reset(seed=0)
    data, params = env.params.data, env.params
    n = data.num_states
    records: dict[str, list] = {key: [] for key in ("obs", "agent", "planner")}
    for t in range(1, env.max_episode_steps + 1):
        masks = {group.name: env.group_action_mask(group) for group in env.groups}
        observations, rewards, terminated, truncated, info = env.step(actor(observations, masks, t))
        # The day's state, read from the governors' observations (the last day's from final_obs:
        # the environment has reset by then).
        seen = info["final_obs"] if bool(truncated["planner"][0, 0]) else observations
        records["obs"].append(seen["governor"][0].cpu().numpy().astype(np.float64))
        records["agent"].append(rewards["governor"][0].cpu().numpy())
        records["planner"].append(float(rewards["planner"][0, 0]))
    obs = np.asarray(records["obs"])  # (T, n, 64); layout: covid_economy.observe_agent
    population = data.population.astype(np.float64)
    feature = lambda k: obs[:, :, 6 + n + k] * population  # noqa: E731  (S, I, R, D, V, U)
    return CovidEpisode(
        name=name,
        state_names=data.state_names,
        population=population,
        infected=feature(1),
        deaths=feature(3),
        unemployed=feature(5),
        stringency=np.rint(obs[:, :, 0] * params.n_stringency_levels).astype(np.int64),
        subsidy_level=np.rint(obs[:, 0, 1] * params.num_subsidy_levels).astype(np.int64),
        agent_rewards=np.asarray(records["agent"]),
        planner_rewards=np.asarray(records["planner"]),
    )


def play_scripted(
    policy: str,
    env_params: dict[str, Any] | None = None,
    device: str | torch.device = "cpu",
    progress: Callable[[str], None] | None = None,
) -> CovidEpisode:
    """One of the tutorial's five runs (``SCRIPTED_POLICIES``), in the tutorial's setting unless
    ``env_params`` say otherwise (``progress``: as :func:`play_episode`'s)."""
    actor, params = scripted_actor(policy), scripted_params(policy, env_params)
    return play_episode(policy, actor, params, device, progress)


def plot_episodes(episodes: list[CovidEpisode], path: str | Path) -> None:
    """Infections, deaths, unemployment, stringency (every state thin, the mean bold) and the
    subsidy level over time, one column per episode, written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ("infected (millions)", "deaths (thousands)", "unemployment (%)", "stringency level",
            "subsidy level")  # fmt: skip
    figure, axes = plt.subplots(
        len(rows), len(episodes), figsize=(5 * len(episodes), 12), sharex=True, sharey="row", squeeze=False
    )
    for column, episode in enumerate(episodes):
        days = np.arange(1, episode.planner_rewards.size + 1)
        per_state = (
            (episode.infected / 1e6, np.sum(episode.infected, axis=1) / 1e6),
            (episode.deaths / 1e3, np.sum(episode.deaths, axis=1) / 1e3),
            (episode.unemployed / episode.population * 100, episode.us_unemployment_rate),
            (episode.stringency, episode.stringency.mean(axis=1)),
        )
        for row, (states, total) in enumerate(per_state):
            ax = axes[row, column]
            if row >= 2:  # rates and levels: every state, thin; US figures: the total alone
                ax.plot(days, states, color="tab:gray", linewidth=0.4, alpha=0.5)
            ax.plot(days, total, color="tab:red", linewidth=2, label="United States" if row < 3 else "mean")
        axes[4, column].step(days, episode.subsidy_level, where="post", color="tab:blue", linewidth=2)
        axes[0, column].set_title(f"{episode.name}: welfare {episode.social_welfare:.1f}")
        axes[-1, column].set_xlabel("day")
    for row, label in enumerate(rows):
        axes[row, 0].set_ylabel(label)
    axes[2, 0].legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_episodes(episodes: list[CovidEpisode], folder: str | Path, stem: str) -> dict[str, str]:
    """``<stem>.png`` (every episode side by side) and a CSV per episode: ``<stem>.csv`` for one,
    ``<stem>_<name>.csv`` for several."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for episode in episodes:
        path = folder / (f"{stem}.csv" if len(episodes) == 1 else f"{stem}_{episode.name}.csv")
        episode.write_csv(path)
        files[f"csv_{episode.name}"] = str(path)
    try:
        plot_episodes(episodes, folder / f"{stem}.png")
        files["plot"] = str(folder / f"{stem}.png")
    except ImportError:
        files["plot"] = "not written: matplotlib is not installed (pip install matplotlib)"
    return files
