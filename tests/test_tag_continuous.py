"""TagContinuous-v0 against its spec (../shared/envs/tag_continuous.md): the reference set-up, the
action tables, golden trajectories test1, test2 and test5 through the PettingZoo adapter, the
invariants of section 13 under random play, CUDA (simulated) against the CPU, and bad params. The
block observations under the simulator: ``tests/test_tag_continuous_simulator.py``."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
from fresh_interpreter import run_script
from pettingzoo.test import parallel_api_test

import warpsci
from warpsci.envs.tag_continuous import TagContinuousParams, action_tables, kernel_params, setup

COMMON = {"grid_length": 10.0, "episode_length": 100, "num_acceleration_levels": 3, "num_turn_levels": 3,
          "max_speed": 1.0}  # fmt: skip
TEST1 = {**COMMON, "num_taggers": 2, "num_runners": 3, "max_acceleration": 1.0, "max_turn": math.pi / 4,
         "seed": 274880, "use_full_observation": True, "runner_exits_game_after_tagged": True,
         "tagging_distance": 0.0}  # fmt: skip
TEST2 = {**COMMON, "num_taggers": 4, "num_runners": 1, "max_acceleration": 0.05, "max_turn": math.pi / 4,
         "step_penalty_for_tagger": -0.1, "seed": 428096, "skill_level_tagger": 2.0,
         "use_full_observation": False, "num_other_agents_observed": 2,
         "runner_exits_game_after_tagged": False, "tagging_distance": 0.25}  # fmt: skip
TEST5 = {**COMMON, "num_taggers": 2, "num_runners": 3, "max_acceleration": 1.0, "max_turn": math.pi / 4,
         "seed": 7, "use_full_observation": False, "num_other_agents_observed": 2,
         "runner_exits_game_after_tagged": True, "tagging_distance": 0.3, "tag_reward_for_tagger": 10.0,
         "tag_penalty_for_runner": -10.0, "end_of_game_reward_for_runner": 1.0, "edge_hit_penalty": -0.1,
         "step_penalty_for_tagger": -0.01, "step_reward_for_runner": 0.01}  # fmt: skip


class Play:
    """One environment through the PettingZoo adapter with the spec's action schedule: agent ``i``
    at step ``t`` (1 for the first step) plays acceleration ``(i + t) mod (n_acc + 1)`` and turn
    ``(2 i + t) mod (n_turn + 1)``. Keeps, per step, rewards and observations by agent index."""

    def __init__(self, params: dict) -> None:
        self.env = warpsci.parallel_env("TagContinuous-v0", **params)
        self.n = len(self.env.possible_agents)
        self.index = self.env.agent_index
        observations, _ = self.env.reset(seed=0)
        self.observations = [self._by_index(observations)]
        self.rewards: list[np.ndarray] = []
        self.t = 0
        self.params = params

    def _by_index(self, values: dict) -> dict[int, np.ndarray]:
        return {self.index[name]: value for name, value in values.items()}

    def state(self, name: str) -> np.ndarray:
        return self.env.vector_env.state_tensors[name][0].numpy().copy()

    def step(self) -> None:
        self.t += 1
        n_acc, n_turn = self.params["num_acceleration_levels"] + 1, self.params["num_turn_levels"] + 1
        actions = {
            name: np.array([(i + self.t) % n_acc, (2 * i + self.t) % n_turn])
            for name, i in self.index.items()
            if name in self.env.agents
        }
        observations, rewards, _, _, _ = self.env.step(actions)
        row = np.zeros(self.n)
        for name, value in rewards.items():
            row[self.index[name]] = value
        self.rewards.append(row)
        self.observations.append(self._by_index(observations))


def test_reference_setup_and_action_tables():
    params = TagContinuousParams(**{**TEST1})
    start = setup(params)
    assert start["tagger_ids"].tolist() == [0, 2]
    np.testing.assert_allclose(start["x"], [9.52839, 3.251477, 7.544405, 9.854873, 8.103487], atol=1e-6)
    np.testing.assert_allclose(start["y"], [8.657172, 4.739887, 8.897691, 5.591575, 4.625935], atol=1e-6)
    np.testing.assert_allclose(start["theta"], np.float32([math.pi, 0, 0, 1.5 * math.pi, 0.5 * math.pi]))
    acceleration, turn = action_tables(params)
    np.testing.assert_allclose(acceleration, [0, -1, 0, 1])
    np.testing.assert_allclose(turn, np.float32([0, -math.pi / 2, -math.pi / 8, math.pi / 4]))
    yaml = TagContinuousParams(max_acceleration=0.1, min_acceleration=-0.1, max_turn=2.356, min_turn=-2.356,
                               num_acceleration_levels=20, num_turn_levels=20)  # fmt: skip
    yaml_tables = action_tables(yaml)
    assert len(yaml_tables[0]) == 21 and yaml_tables[0][0] == 0 and yaml_tables[0][-1] == np.float32(0.1)
    np.testing.assert_allclose(yaml_tables[0][1:4], [-0.1, -0.089474, -0.078947], atol=1e-6)
    np.testing.assert_allclose(yaml_tables[1][1:3], [-2.356, -2.108], atol=1e-3)
    five = setup(TagContinuousParams(**TEST5))
    assert five["tagger_ids"].tolist() == [0, 3]
    np.testing.assert_allclose(five["x"], [9.782229, 4.555849, 3.080128, 2.638708, 0.867434], atol=1e-6)


def test_golden_test1():
    play = Play(TEST1)
    first = play.observations[0][0]
    assert first.shape == (29,)
    np.testing.assert_allclose(first[0:4], [-0.443845, -0.140289, 0.023086, -0.100756], atol=1e-5)
    np.testing.assert_allclose(first[4:8], [-0.276994, 0.017007, -0.21677, -0.285052], atol=1e-5)
    np.testing.assert_allclose(first[8:16], 0, atol=1e-7)
    np.testing.assert_allclose(first[16:20], [-0.5, -0.5, 0.25, -0.25], atol=1e-6)
    np.testing.assert_array_equal(first[20:24], [0, 1, 0, 0])
    np.testing.assert_array_equal(first[24:28], [1, 1, 1, 1])
    assert first[28] == 0
    play.step()
    np.testing.assert_allclose(play.state("y"), [8.657172, 4.739888, 7.897691, 5.591576, 4.625935], atol=1e-5)
    quarter = math.pi / 4
    np.testing.assert_allclose(
        play.state("theta"), [2 * quarter, quarter, 6 * quarter, 7 * quarter, 0], atol=1e-5
    )
    play.step()
    np.testing.assert_allclose(play.state("x"), [9.52839, 3.958584, 7.161721, 9.854873, 8.103487], atol=1e-5)
    np.testing.assert_allclose(play.state("y"), [8.657172, 5.446994, 6.973811, 5.591576, 4.625935], atol=1e-5)
    while play.env.agents:
        play.step()
    assert play.t == 100
    rewards = np.array(play.rewards)
    np.testing.assert_allclose(rewards[:-1], 0)
    np.testing.assert_allclose(rewards.sum(axis=0), [0, 1, 0, 1, 1])


def test_golden_test2():
    play = Play(TEST2)
    np.testing.assert_allclose(
        play.observations[0][0],
        [0.112178, 0.168783, -0.012499, -0.142463, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0],
        atol=1e-5,
    )
    while play.env.agents:
        play.step()
    rewards = np.array(play.rewards)
    assert rewards.shape == (100, 5)
    np.testing.assert_allclose(rewards[:-1], np.tile([-0.1, -1, -0.1, 0.9, -0.1], (99, 1)), atol=1e-5)
    np.testing.assert_allclose(rewards.sum(axis=0), [-10, -99, -10, 90, -10], atol=1e-3)


def test_golden_test5():
    play = Play(TEST5)
    np.testing.assert_allclose(
        play.observations[0][0],
        [-0.369561, -0.47391, -0.285291, 0.076645, 0, 0, 0, 0, 0.75, 0.75, 0, 0, 1, 1, 0],
        atol=1e-5,
    )
    play.step()
    np.testing.assert_allclose(
        play.observations[1][0],
        [-0.369561, -0.544621, -0.285291, 0.076645, 0, 1, 0, 0, 0.125, -0.25, 0, 0, 1, 1, 0.01],
        atol=1e-5,
    )
    while play.env.agents:
        play.step()
    rewards = np.array(play.rewards)
    np.testing.assert_allclose(rewards[5], [-0.01, -0.09, -9.99, 9.99, 0.01], atol=1e-5)
    np.testing.assert_allclose(rewards[26], [-0.01, 0.01, 0, 9.99, -9.99], atol=1e-5)
    np.testing.assert_allclose(rewards[99], [-0.01, 1.01, 0, -0.01, 0], atol=1e-5)
    np.testing.assert_allclose(rewards.sum(axis=0), [-1.2, 1.6, -9.94, 18.6, -9.73], atol=1e-3)


FINAL_X = np.array([6.469265, 2.439333, 0.773565, 3.670242, 0.484751])
FINAL_Y = np.array([3.048282, 2.472481, 7.584211, 9.076118, 5.377727])


def test_golden_test5_with_full_observations_plays_the_same():
    partial, full = Play(TEST5), Play({**TEST5, "use_full_observation": True})
    while partial.env.agents:
        partial.step()
        full.step()
    np.testing.assert_allclose(np.array(full.rewards), np.array(partial.rewards))
    last = full.observations[-1][0]
    assert last.shape == (29,)
    np.testing.assert_array_equal(last[24:28], [1, 0, 1, 0])
    # The final positions (the environment has reset since): agent 0's view of the others, the
    # exited ones included, against the spec's final x and y.
    diagonal = math.sqrt(2) * 10.0
    np.testing.assert_allclose(last[0:4] * diagonal, FINAL_X[1:] - FINAL_X[0], atol=1e-4)
    np.testing.assert_allclose(last[4:8] * diagonal, FINAL_Y[1:] - FINAL_Y[0], atol=1e-4)


def test_random_play_keeps_the_invariants():
    """Section 13 under uniform random actions, six environments at once (autoresets included)."""
    params = {"num_taggers": 3, "num_runners": 9, "grid_length": 5.0, "episode_length": 60, "seed": 11,
              "tagging_distance": 0.08, "use_full_observation": False, "num_other_agents_observed": 4,
              "edge_hit_penalty": -0.5, "skill_level_tagger": 1.5}  # fmt: skip
    env = warpsci.make("TagContinuous-v0", num_envs=6, seed=3, params=params)
    tables = kernel_params(env.params)
    caps, runners = tables["speed_cap"], tables["is_tagger"] == 0
    diagonal = math.sqrt(2) * 5.0
    state = env.state_tensors
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    tags = 0
    for _ in range(200):
        playing = state["in_game"].numpy().copy()
        x_before, left_before = state["x"].numpy().copy(), state["runners_left"].numpy().copy()
        actions = {group.name: rng.integers(0, 11, size=(6, group.size, 2)) for group in env.groups}
        obs, rewards, terminated, truncated, _ = env.step(actions)
        ended = (env.buffers.terminated | env.buffers.truncated).numpy()
        x, y = state["x"].numpy(), state["y"].numpy()
        v, a, theta = state["v"].numpy(), state["accel"].numpy(), state["theta"].numpy()
        in_game = state["in_game"].numpy()
        assert (x >= 0).all() and (x <= 5).all() and (y >= 0).all() and (y <= 5).all()
        assert (v >= 0).all() and (v <= caps + 1e-6).all()
        assert (a[(v == 0) | (v >= caps)] == 0).all()
        assert (theta >= 0).all() and (theta <= 2 * np.pi + 1e-6).all()
        assert (state["runners_left"].numpy() == in_game[:, runners].sum(axis=1)).all()
        going = ~ended
        assert (state["runners_left"].numpy()[going] <= left_before[going]).all()
        tags += int((left_before[going] - state["runners_left"].numpy()[going]).sum())
        out = (playing == 0) & going[:, None]  # out of the game for the whole step
        assert (v[out] == 0).all() and (theta[out] == 0).all() and (a[out] == 0).all()
        assert (x[out] == x_before[out]).all()
        by_agent = np.zeros((6, 12), np.float32)
        observed = np.zeros((6, 12, 29), np.float32)
        for group in env.groups:
            by_agent[:, list(group.agents)] = rewards[group.name].numpy()
            observed[:, list(group.agents)] = obs[group.name].numpy()
        assert (by_agent[out] == 0).all() and (observed[out] == 0).all()
        assert np.isin(observed[..., 20:28], [0.0, 1.0]).all()
        filled = observed[..., 24:28] == 1  # in-game flags of the four slots
        distances = np.hypot(observed[..., 0:4], observed[..., 4:8]) * diagonal
        for env_index, agent in zip(*np.nonzero(filled[..., 1]), strict=True):
            count = int(filled[env_index, agent].sum())
            assert (np.diff(distances[env_index, agent, :count]) >= -1e-4).all()
            padded = [feature * 4 + slot for feature in range(7) for slot in range(count, 4)]
            assert (observed[env_index, agent, padded] == 0).all()
    assert tags > 0  # the test saw tags, not only free running


def test_pettingzoo_api():
    parallel_api_test(
        warpsci.parallel_env("TagContinuous-v0", num_runners=3, episode_length=20, seed=1), num_cycles=30
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_taggers": 0}, "num_taggers must be an integer >= 1"),
        ({"tag_penalty_for_runner": 1.0}, "tag_penalty_for_runner must be a number <= 0"),
        ({"tag_reward_for_tagger": -1.0}, "tag_reward_for_tagger must be a number >= 0"),
        ({"tagging_distance": 1.5}, "tagging_distance must be a fraction"),
        ({"num_other_agents_observed": 12}, "num_other_agents_observed must be an integer in [1, 11]"),
        ({"starting_location_x": (1.0,) * 11}, "given both or neither"),
        ({"starting_directions": (0.0, 1.0)}, "must hold 11 finite numbers"),
        ({"grid_length": 0.0}, "grid_length must be a positive number"),
    ],
)
def test_bad_params_are_refused(changes, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        TagContinuousParams(**changes)


def test_an_unseeded_setup_is_drawn_once_and_kept():
    first = TagContinuousParams()
    assert isinstance(first.seed, int)
    assert setup(first)["tagger_ids"].tolist() == setup(first)["tagger_ids"].tolist()


def test_cuda_kernels_equal_the_cpu_under_the_simulator():
    """One block, and split over blocks of two threads, against the CPU backend after every step
    (test5's game, partial and full observations, runners leaving, autoresets); under the simulator
    every agent observes by ``observe_agent``."""
    script = textwrap.dedent(
        f"""
        from warpsci.testing import check_parity
        for threads in (None, 2):
            for full in (False, True):
                params = dict({TEST5!r}, episode_length=12, use_full_observation=full)
                report = check_parity("TagContinuous-v0", num_envs=3, steps=30, threads_per_block=threads,
                                      atol=1e-5, params=params)
                print("tag", threads, full, report.ok, report.episodes_ended)
        from warpsci.backends.cuda import CudaKernels
        from warpsci.envs.tag_continuous import TAG_CONTINUOUS
        print("observes by block", CudaKernels(TAG_CONTINUOUS, 3, 5).observes_by_block)
        """
    )
    completed = run_script(script, simulator=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    # The simulator has no warp shuffles: the block observation is for GPUs (test_tag_continuous_gpu).
    assert "observes by block False" in completed.stdout
    lines = [line.split() for line in completed.stdout.splitlines() if line.startswith("tag")]
    assert len(lines) == 4
    for _, threads, full, ok, episodes in lines:
        assert ok == "True", (threads, full)
        assert int(episodes) >= 3


def test_a_run_records_the_seed_it_drew():
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig

    config = TrainConfig(env_id="TagContinuous-v0", num_envs=2, num_steps=4, total_timesteps=8,
                         env_params={"num_runners": 3})  # fmt: skip
    trainer = make_trainer(config)
    assert trainer.config.env_params["seed"] == trainer.env.params.seed
