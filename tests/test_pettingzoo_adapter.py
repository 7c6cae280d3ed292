"""The PettingZoo adapter: API test, agent names, masks in infos, agents leaving, episode ends, params,
and the multi-group toy's rules checked step by step against a model written from its docstring."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from multi_group_toy import NUM_AGENTS, TOY_GROUPS, MultiGroupToyParams, default_weights
from pettingzoo.test import parallel_api_test

from warpsci.pettingzoo_adapter import parallel_env

TOY_AGENTS = ["even_0", "odd_0", "even_1", "odd_1", "even_2"]


def run_api_test(env) -> None:
    """PettingZoo's parallel API test, with its warnings (problems it found) as failures."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(env, num_cycles=1000)
    problems = [str(warning.message) for warning in caught if "pettingzoo" in warning.filename]
    assert not problems


def test_parallel_api_test_passes_on_the_multi_group_toy():
    run_api_test(parallel_env(TOY_GROUPS))


def test_parallel_api_test_passes_on_cartpole():
    run_api_test(parallel_env("CartPole-v1"))


@pytest.mark.parametrize("env_id", ["Target-v0", "PickPair-v0"])
def test_box_and_multi_discrete_actions_reach_the_action_buffer(env_id):
    env = parallel_env(env_id)
    run_api_test(env)
    env.reset(seed=0)
    action = env.action_space("agent_0").sample()
    env.step({"agent_0": action})
    assert env.vector_env.buffers.actions[0, 0].numpy().tolist() == pytest.approx(action.tolist())
    with pytest.raises(ValueError, match="shape"):
        env.reset(seed=0)
        env.step({"agent_0": np.zeros(3, action.dtype)})


def test_reset_seeds_the_trajectory_and_the_spaces():
    env = parallel_env(TOY_GROUPS)

    def run(seed):
        observations, _ = env.reset(seed=seed)
        samples = [env.action_space(agent).sample() for agent in TOY_AGENTS]
        return [observations[agent].tolist() for agent in TOY_AGENTS], samples

    assert run(11) == run(11)
    unseeded = [env.reset()[0] for _ in range(4)]
    assert len({str([obs[agent].tolist() for agent in TOY_AGENTS]) for obs in unseeded}) > 1


def test_single_agent_environment_has_one_agent_named_agent_0():
    env = parallel_env("CartPole-v1", max_episode_steps=3)
    assert env.possible_agents == ["agent_0"]
    observations, infos = env.reset(seed=0)
    assert env.agents == ["agent_0"]
    assert infos == {"agent_0": {}}  # CartPole has no action masks
    assert observations["agent_0"].shape == (4,) and observations["agent_0"].dtype == np.float32
    assert env.action_space("agent_0") == gymnasium.spaces.Discrete(2)
    for step in range(3):
        observations, rewards, terminations, truncations, infos = env.step({"agent_0": step % 2})
        assert rewards == {"agent_0": 1.0}
    assert truncations == {"agent_0": True} and terminations == {"agent_0": False}
    assert env.agents == []


def test_agents_are_named_by_group_in_agent_index_order():
    env = parallel_env(TOY_GROUPS)
    assert env.possible_agents == TOY_AGENTS
    assert env.agent_index == {"even_0": 0, "odd_0": 1, "even_1": 2, "odd_1": 3, "even_2": 4}
    assert env.agents == []  # until reset
    observations, infos = env.reset(seed=1)
    assert env.agents == TOY_AGENTS and set(observations) == set(infos) == set(TOY_AGENTS)
    for agent in TOY_AGENTS:
        even = agent.startswith("even")
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)
        assert env.action_space(agent) == gymnasium.spaces.Discrete(3 if even else 4)
        assert observations[agent].shape == ((2,) if even else (3,))
        assert observations[agent].dtype == np.float32
        assert env.observation_space(agent).contains(observations[agent])


def test_masks_are_in_infos_and_an_action_against_the_mask_is_applied():
    env = parallel_env(TOY_GROUPS)
    observations, infos = env.reset(seed=2)
    for agent in TOY_AGENTS:
        mask = infos[agent]["action_mask"]
        assert mask.dtype == np.int8
        assert mask.tolist() == ([1, 1, 1] if agent.startswith("even") else [1, 1, 1, 1])
    counter = observations["even_0"][0]
    actions = {agent: 0 for agent in TOY_AGENTS} | {"even_0": 2}
    observations, _, _, _, infos = env.step(actions)
    assert infos["even_0"]["action_mask"].tolist() == [1, 1, 0]  # may not repeat action 2
    assert infos["even_1"]["action_mask"].tolist() == [0, 1, 1]
    assert infos["odd_0"]["action_mask"].tolist() == [1, 1, 1, 1]
    assert observations["even_0"].tolist() == [counter + 2, 2]
    observations, _, _, _, infos = env.step(actions)  # action 2 again, against the mask
    assert observations["even_0"].tolist() == [counter + 4, 2]
    assert infos["even_0"]["action_mask"].tolist() == [1, 1, 0]


def test_an_agent_that_leaves_is_removed_and_never_reported_again():
    env = parallel_env(TOY_GROUPS, goal=1000, max_episode_steps=6)
    env.reset(seed=3)
    seen_after_leaving = []
    left = False
    for _ in range(6):
        if not env.agents:
            break
        # odd_0 races ahead and leaves once its counter passes 5 (at the second step at the latest).
        actions = {agent: 3 if agent == "odd_0" else 0 for agent in env.agents}
        if left:
            actions["odd_0"] = 1  # an action for an agent that left is ignored
        observations, rewards, terminations, truncations, infos = env.step(actions)
        if left:
            seen_after_leaving += [
                output
                for output in (observations, rewards, terminations, truncations, infos)
                if "odd_0" in output
            ]
            assert "odd_0" not in env.agents
        elif "odd_0" in terminations and terminations["odd_0"]:
            left = True
            assert observations["odd_0"][0] > 5
            assert truncations["odd_0"] is False
            assert infos["odd_0"]["action_mask"].tolist() == [0, 0, 0, 0]
            assert env.agents == ["even_0", "even_1", "odd_1", "even_2"]
    assert left and not seen_after_leaving
    # The episode ran into its time limit: everyone left in the game is truncated.
    assert env.agents == []
    assert truncations == {agent: True for agent in ["even_0", "even_1", "odd_1", "even_2"]}


def test_the_episode_end_empties_agents_and_shows_the_final_observations():
    env = parallel_env(TOY_GROUPS, goal=12)
    env.reset(seed=4)
    for _ in range(20):
        actions = {agent: 3 if agent.startswith("odd") else 2 for agent in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)
        if not env.agents:
            break
    assert all(terminations.values()) and not any(truncations.values())
    # The final observations, not the autoreset's: the odd agents see a clock past 0.
    clock = [observations[agent][2] for agent in ("odd_0", "odd_1") if agent in observations]
    assert all(value > 0 for value in clock)
    assert env.step({}) == ({}, {}, {}, {}, {})
    assert env.step({"even_0": 0}) == ({}, {}, {}, {}, {})  # actions for agents that are done: ignored
    observations, _ = env.reset()
    assert env.agents == TOY_AGENTS
    assert observations["odd_0"][2] == 0  # a fresh episode


def test_step_checks_the_actions_of_live_agents():
    env = parallel_env(TOY_GROUPS)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"odd_0.*odd_1"):
        env.step({"even_0": 0, "even_1": 0, "even_2": 0})
    with pytest.raises(ValueError, match="nobody"):
        env.step(dict.fromkeys(TOY_AGENTS, 0) | {"nobody": 0})
    with pytest.raises(ValueError, match="outside"):
        env.step(dict.fromkeys(TOY_AGENTS, 0) | {"even_0": 3})


def test_params_by_keyword_and_unknown_params():
    with pytest.raises(ValueError, match="accepted") as error:
        parallel_env(TOY_GROUPS, nonsense=1)
    assert "leave_above" in str(error.value) and "nonsense" in str(error.value)
    with pytest.raises(ValueError, match="max_episode_steps"):
        parallel_env("CartPole-v1", nonsense=1)
    env = parallel_env(TOY_GROUPS, weights=(1.0,) * NUM_AGENTS, bonus=0.0)
    assert env.params == MultiGroupToyParams(weights=(1.0,) * NUM_AGENTS, bonus=0.0)
    observations, _ = env.reset(seed=5)
    counters = [observations[agent][0] for agent in TOY_AGENTS]
    _, rewards, _, _, _ = env.step(dict.fromkeys(TOY_AGENTS, 0))
    # No bonus, unit weights: each reward is the agent's counter minus its neighbour's.
    assert [rewards[agent] for agent in TOY_AGENTS] == [
        counters[agent] - counters[(agent + 1) % NUM_AGENTS] for agent in range(NUM_AGENTS)
    ]


def test_render_mode_other_than_none_is_refused_and_options_are_ignored():
    with pytest.raises(ValueError, match="render_mode"):
        parallel_env(TOY_GROUPS, render_mode="human")
    env = parallel_env(TOY_GROUPS)
    first, _ = env.reset(seed=7, options={"anything": 1})
    again, _ = env.reset(seed=7)
    assert all(np.array_equal(first[agent], again[agent]) for agent in TOY_AGENTS)


class ToyModel:
    """The toy's rules, from its docstring, for one episode starting from the reset observations."""

    def __init__(self, observations, params: MultiGroupToyParams) -> None:
        self.params = params
        self.weights = default_weights().astype(np.float64)
        self.counter = [int(observations[agent][0]) for agent in TOY_AGENTS]
        self.last_action = [-1] * NUM_AGENTS
        self.score = [self.weights[agent] * self.counter[agent] for agent in range(NUM_AGENTS)]
        self.active = [True] * NUM_AGENTS
        self.clock = 0

    def step(self, actions: dict[str, int]):
        for agent in range(NUM_AGENTS):
            if self.active[agent]:
                action = actions[TOY_AGENTS[agent]]
                self.counter[agent] += action
                self.last_action[agent] = action
                self.score[agent] = self.weights[agent] * self.counter[agent]
        self.clock += 1
        pot = sum(self.counter)
        rewards, terminations, truncations = {}, {}, {}
        terminated = pot >= self.params.goal
        truncated = self.clock >= self.params.max_episode_steps
        for agent in range(NUM_AGENTS):
            if not self.active[agent]:
                continue
            name = TOY_AGENTS[agent]
            bonus = self.params.bonus * pot if agent % 2 == 0 else 0.0
            rewards[name] = bonus + self.score[agent] - self.score[(agent + 1) % NUM_AGENTS]
            leaves = agent % 2 == 1 and self.counter[agent] > self.params.leave_above
            terminations[name] = leaves or terminated
            truncations[name] = truncated and not terminations[name]
            if leaves:
                self.active[agent] = False
        return rewards, terminations, truncations

    def observation(self, agent: int) -> list[float]:
        if agent % 2 == 0:
            return [self.counter[agent], self.last_action[agent]]
        return [self.counter[agent], self.score[agent], self.clock]

    def mask(self, agent: int) -> list[int]:
        if agent % 2 == 0:
            return [int(action != self.last_action[agent]) for action in range(3)]
        return [1, 1, 1, 1]


def test_the_toy_follows_its_rules_step_by_step():
    rng = np.random.default_rng(0)
    endings = set()
    for episode in range(6):
        # Every other episode with an unreachable goal, which only the time limit ends.
        params = MultiGroupToyParams(goal=30 if episode % 2 == 0 else 1000)
        env = parallel_env(TOY_GROUPS, goal=params.goal)
        observations, infos = env.reset(seed=episode)
        model = ToyModel(observations, params)
        assert all(observations[agent][0] in (0, 1, 2) for agent in TOY_AGENTS)  # the reset's draw
        while env.agents:
            actions = {agent: int(rng.integers(0, env.action_space(agent).n)) for agent in env.agents}
            observations, rewards, terminations, truncations, infos = env.step(actions)
            expected_rewards, expected_terminations, expected_truncations = model.step(actions)
            assert rewards == pytest.approx(expected_rewards)
            assert terminations == expected_terminations
            assert truncations == expected_truncations
            for name in observations:
                agent = TOY_AGENTS.index(name)
                assert observations[name].tolist() == pytest.approx(model.observation(agent))
                done = terminations[name] or truncations[name]
                expected_mask = [0] * (3 if agent % 2 == 0 else 4) if done else model.mask(agent)
                assert infos[name]["action_mask"].tolist() == expected_mask
            if any(terminations[name] for name in terminations if name.startswith("odd")) and env.agents:
                endings.add("left")
        endings.add("terminated" if any(terminations.values()) else "truncated")
    assert endings == {"left", "terminated", "truncated"}
