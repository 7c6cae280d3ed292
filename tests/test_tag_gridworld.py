"""TagGridworld-v0 against its specification (``shared/envs/tag_gridworld.md``): the golden cases of
section 12.1, the invariants of section 12 under random actions (checked step by step against a NumPy
transcription of the spec), the reset pool, and parameter validation. CPU backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from warpsci.envs.tag_gridworld import TAG_GRIDWORLD, TagGridworldParams, reset_pool, start_positions
from warpsci.multi_agent_env import MultiAgentVectorEnv as _ENV_TYPE
from warpsci.vector_env import WarpVectorEnv

MOVES = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]])
GOLDEN_A = dict(
    num_taggers=4,
    grid_length=4,
    episode_length=10,
    starting_location_x=(0, 0, 0, 0, 1),
    starting_location_y=(0, 0, 0, 0, 1),
)


def make_env(num_envs: int = 1, **params) -> WarpVectorEnv:
    return _ENV_TYPE(
        TAG_GRIDWORLD,
        num_envs=num_envs,
        device="cpu",
        params=TagGridworldParams(**params),
        check_actions=False,
    )


def step(env: WarpVectorEnv, actions) -> None:
    actions = torch.as_tensor(np.asarray(actions), dtype=torch.int32).reshape(env.buffers.actions.shape)
    env.buffers.actions.copy_(actions)
    env.step_in_place()


def positions(env: WarpVectorEnv) -> tuple[np.ndarray, np.ndarray]:
    return env.state_tensors["x"].numpy().copy(), env.state_tensors["y"].numpy().copy()


# ----------------------------------------------------------------------------- the spec in NumPy


def reference_step(x, y, t, actions, p: TagGridworldParams):
    """One step of one environment (spec section 5): new x, y, t, rewards, tagged."""
    moved_x = x + MOVES[actions, 0]
    moved_y = y + MOVES[actions, 1]
    new_x = np.clip(moved_x, 0, p.grid_length)
    new_y = np.clip(moved_y, 0, p.grid_length)
    wall = (new_x != moved_x) | (new_y != moved_y)
    tagged = bool(np.any((new_x[:-1] == new_x[-1]) & (new_y[:-1] == new_y[-1])))
    rewards = np.full(len(x), p.tag_reward_for_tagger if tagged else -p.step_cost_for_tagger)
    rewards[-1] = -p.tag_penalty_for_runner if tagged else p.step_cost_for_tagger
    rewards -= p.wall_hit_penalty * wall
    return new_x, new_y, t + 1, rewards, tagged


def reference_obs(x, y, t, p: TagGridworldParams) -> np.ndarray:
    """Every agent's observation (spec section 7), float64."""
    n, length = len(x), p.grid_length
    if p.use_full_observation:
        common = np.concatenate([x / length, y / length, np.eye(n)[-1]])
        return np.stack([np.concatenate([common, np.eye(n)[j], [t / p.episode_length]]) for j in range(n)])
    obs = np.zeros((n, 6))
    nearest = int(np.argmin((x[:-1] - x[-1]) ** 2 + (y[:-1] - y[-1]) ** 2))
    for j in range(n):
        other = nearest if j == n - 1 else n - 1
        own, seen = [x[j], y[j]], [x[other], y[other]]
        obs[j] = [*np.divide(own, length), *np.divide(seen, length), j == n - 1, t / p.episode_length]
    return obs


# ----------------------------------------------------------------------------- definition


@pytest.mark.parametrize("full", [True, False])
def test_groups_spaces_and_buffers(full):
    params = TagGridworldParams(num_taggers=3, grid_length=5, use_full_observation=full)
    groups = TAG_GRIDWORLD.agent_groups(params)
    assert [(group.name, group.agents) for group in groups] == [("tagger", (0, 1, 2)), ("runner", (3,))]
    width = 4 * 4 + 1 if full else 6
    for group in groups:
        assert group.action_space.n == 5
        assert group.observation_space.shape == (width,)
        assert group.observation_space.dtype == np.float32
        assert np.all(group.observation_space.low == 0.0) and np.all(group.observation_space.high == 1.0)
    assert TAG_GRIDWORLD.max_episode_steps(TagGridworldParams(episode_length=37)) == 37
    env = make_env(2, num_taggers=3, grid_length=5, use_full_observation=full)
    env.reset(seed=0)
    assert tuple(env.buffers.obs.shape) == (2, 4, width)
    assert env.buffers.actions.dtype == torch.int32 and tuple(env.buffers.actions.shape) == (2, 4)


def test_class_defaults_and_default_start():
    params = TagGridworldParams()
    assert (params.num_taggers, params.grid_length, params.episode_length) == (10, 10, 100)
    assert params.starting_location_x is None and params.starting_location_y is None and params.seed is None
    assert (params.wall_hit_penalty, params.tag_reward_for_tagger) == (0.1, 10.0)
    assert (params.tag_penalty_for_runner, params.step_cost_for_tagger) == (2.0, 0.01)
    assert params.use_full_observation is True and params.use_reset_pool is False
    start_x, start_y = start_positions(params)
    assert start_x.tolist() == [5] * 10 + [0] and start_y.tolist() == [5] * 10 + [0]
    start_x, _ = start_positions(TagGridworldParams(num_taggers=2, grid_length=101))
    assert start_x.tolist() == [50, 50, 0]


# ----------------------------------------------------------------------------- golden cases (12.1)


def test_golden_case_a():
    full = make_env(1, **GOLDEN_A)
    partial = make_env(1, **GOLDEN_A, use_full_observation=False)
    full.reset(seed=0)
    partial.reset(seed=0)
    assert partial.buffers.obs[0, 4].tolist() == pytest.approx([0.25, 0.25, 0, 0, 1, 0], abs=1e-6)
    for env in (full, partial):
        step(env, [2, 0, 3, 4, 2])
        assert env.buffers.rewards[0].tolist() == pytest.approx([9.9, 10.0, 10.0, 9.9, -2.0], abs=1e-6)
        assert env.buffers.terminated.tolist() == [True] and env.buffers.truncated.tolist() == [False]
        assert env.buffers.final_return[0].tolist() == pytest.approx([9.9, 10.0, 10.0, 9.9, -2.0], abs=1e-6)
    final = full.buffers.final_obs[0].numpy()
    expected_0 = [0, 0, 0, 0, 0, 0, 0, 0.25, 0, 0.25, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0.1]
    assert final[0].tolist() == pytest.approx(expected_0, abs=1e-6)
    # Positions after the step, read from the final observation: x = 0, y = [0, 0, 1, 0, 1].
    assert np.round(final[0, :5] * 4).tolist() == [0, 0, 0, 0, 0]
    assert np.round(final[0, 5:10] * 4).tolist() == [0, 0, 1, 0, 1]
    final = partial.buffers.final_obs[0].numpy()
    assert final[0].tolist() == pytest.approx([0, 0, 0, 0.25, 0, 0.1], abs=1e-6)
    assert final[4].tolist() == pytest.approx([0, 0.25, 0, 0.25, 1, 0.1], abs=1e-6)
    # Autoreset: back at the explicit start, time 0.
    assert [p.tolist() for p in positions(full)] == [[[0, 0, 0, 0, 1]], [[0, 0, 0, 0, 1]]]
    assert full.state_tensors["t"].tolist() == [0]
    assert partial.buffers.obs[0, 4].tolist() == pytest.approx([0.25, 0.25, 0, 0, 1, 0], abs=1e-6)


GOLDEN_B_ROWS = {  # t: (actions, x after, y after)
    1: ([2, 1, 0, 4], [1, 3, 2, 0], [2, 2, 2, 0]),
    2: ([4, 4, 4, 4], [1, 3, 2, 0], [1, 1, 1, 0]),
    3: ([1, 2, 3, 4], [2, 2, 2, 0], [1, 1, 2, 0]),
    4: ([3, 0, 2, 4], [2, 2, 1, 0], [2, 1, 2, 0]),
    5: ([0, 3, 1, 4], [2, 2, 2, 0], [2, 2, 2, 0]),
}


def test_golden_case_b():
    params = dict(num_taggers=3, grid_length=4, episode_length=12)
    full = make_env(1, **params)
    partial = make_env(1, **params, use_full_observation=False)
    for env in (full, partial):
        env.reset(seed=0)
        for t in range(1, 13):
            actions = [(3 * i + 2 * t + i * t) % 5 for i in range(4)]
            row = GOLDEN_B_ROWS[(t - 1) % 5 + 1]
            assert actions == row[0]
            step(env, actions)
            assert env.buffers.rewards[0].tolist() == pytest.approx([-0.01, -0.01, -0.01, -0.09], abs=1e-6)
            last = t == 12
            assert env.buffers.terminated.tolist() == [False]
            assert env.buffers.truncated.tolist() == [last]
            if not last:
                x, y = positions(env)
                assert (x[0].tolist(), y[0].tolist()) == (row[1], row[2]), t
        assert env.buffers.final_return[0].tolist() == pytest.approx([-0.12, -0.12, -0.12, -1.08], abs=1e-5)
    runner_full = [0.25, 0.75, 0.5, 0, 0.25, 0.25, 0.25, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1.0]
    assert full.buffers.final_obs[0, 3].tolist() == pytest.approx(runner_full, abs=1e-6)
    assert partial.buffers.final_obs[0, 3].tolist() == pytest.approx([0, 0, 0.25, 0.25, 1, 1], abs=1e-6)
    assert partial.buffers.final_obs[0, 0].tolist() == pytest.approx([0.25, 0.25, 0, 0, 0, 1], abs=1e-6)
    # Truncation reset to the default start: taggers at (2, 2), the runner at (0, 0).
    assert [p[0].tolist() for p in positions(full)] == [[2, 2, 2, 0], [2, 2, 2, 0]]


def test_golden_case_c():
    env = make_env(1, num_taggers=2, grid_length=4, episode_length=20)
    env.reset(seed=0)
    expected = [[-0.01, -0.01, 0.01]] * 3 + [[10.0, 10.0, -2.0]]
    for t, action in enumerate([2, 2, 4, 4], start=1):
        step(env, [action, 0, 0])
        assert env.buffers.rewards[0].tolist() == pytest.approx(expected[t - 1], abs=1e-6)
        assert env.buffers.terminated.tolist() == [t == 4]
        assert env.buffers.truncated.tolist() == [False]
    assert env.buffers.final_return[0].tolist() == pytest.approx([9.97, 9.97, -1.97], abs=1e-5)
    assert env.buffers.final_length.tolist() == [4]
    final = env.buffers.final_obs[0, 0].numpy()
    assert np.round(final[:3] * 4).tolist() == [0, 2, 0] and np.round(final[3:6] * 4).tolist() == [0, 2, 0]


# ----------------------------------------------------------------------------- invariants (12)


@pytest.mark.parametrize("full", [True, False])
def test_random_play_matches_the_spec_and_keeps_the_invariants(full):
    p = TagGridworldParams(num_taggers=3, grid_length=3, episode_length=6, use_full_observation=full)
    n, length, num_envs = p.num_agents, p.grid_length, 4
    c, r_tag = p.step_cost_for_tagger, p.tag_reward_for_tagger
    p_tag, p_wall = p.tag_penalty_for_runner, p.wall_hit_penalty
    tagger_rewards = [-c, -c - p_wall, r_tag, r_tag - p_wall]
    runner_rewards = [c, c - p_wall, -p_tag, -p_tag - p_wall]
    env = make_env(num_envs, num_taggers=3, grid_length=3, episode_length=6, use_full_observation=full)
    env.reset(seed=0)
    start_x, start_y = start_positions(p)
    ref_x = np.tile(start_x, (num_envs, 1)).astype(np.int64)
    ref_y = np.tile(start_y, (num_envs, 1)).astype(np.int64)
    ref_t = np.zeros(num_envs, np.int64)
    returns = np.zeros((num_envs, n))
    rng = np.random.default_rng(1)
    tags = truncations = 0
    for _ in range(300):
        actions = rng.integers(0, 5, size=(num_envs, n))
        before_x, before_y = positions(env)
        step(env, actions)
        obs, final_obs = env.buffers.obs.numpy(), env.buffers.final_obs.numpy()
        rewards = env.buffers.rewards.numpy()
        x_now, y_now = positions(env)
        for e in range(num_envs):
            new_x, new_y, t, expected, tagged = reference_step(ref_x[e], ref_y[e], ref_t[e], actions[e], p)
            terminated, truncated = bool(env.buffers.terminated[e]), bool(env.buffers.truncated[e])
            done = terminated or truncated
            assert rewards[e] == pytest.approx(expected, abs=1e-6)
            returns[e] += expected
            # 3: reward sets; 4: a tag pays every tagger and ends the episode; 5: time limit.
            for k in range(n):
                allowed = runner_rewards if k == n - 1 else tagger_rewards
                assert min(abs(rewards[e, k] - value) for value in allowed) < 1e-6
            assert terminated == tagged
            assert done == (tagged or t == p.episode_length)
            if not tagged:
                assert truncated == (t == p.episode_length)
            if tagged:
                assert np.all(rewards[e, :-1] >= r_tag - p_wall - 1e-6)
            seen = final_obs[e] if done else obs[e]
            assert seen == pytest.approx(reference_obs(new_x, new_y, t, p), abs=1e-6)
            assert seen[:, -1 if full else 5] == pytest.approx(np.full(n, t / p.episode_length), abs=1e-6)
            if full:
                # Positions after the step from the env itself (the final observation if it ended).
                after_x = np.round(seen[0, :n] * length) if done else x_now[e]
                after_y = np.round(seen[0, n : 2 * n] * length) if done else y_now[e]
                # 1: on the grid; 2: at most one cell; a non-stay action that did not move paid the wall.
                assert np.all((after_x >= 0) & (after_x <= length) & (after_y >= 0) & (after_y <= length))
                moved = np.abs(after_x - before_x[e]) + np.abs(after_y - before_y[e])
                assert np.all(moved <= 1)
                stuck = (actions[e] != 0) & (moved == 0)
                base = np.where(np.arange(n) < n - 1, r_tag if tagged else -c, -p_tag if tagged else c)
                assert rewards[e][stuck] == pytest.approx(base[stuck] - p_wall, abs=1e-6)
                # 6: shared blocks, one-hot of the observer, types.
                assert np.all(seen[:, : 3 * n] == seen[0, : 3 * n]) and np.all(seen[:, -1] == seen[0, -1])
                assert np.array_equal(seen[:, 3 * n : 4 * n], np.eye(n))
                assert seen[0, 3 * n - 1] == 1.0 and np.all(seen[0, 2 * n : 3 * n - 1] == 0.0)
            else:
                # 7: the taggers see the runner where the runner sees itself.
                assert np.all(seen[:-1, 2:4] == seen[-1, 0:2])
                assert np.all(seen[:, 4] == np.eye(n)[-1])
            if done:
                tags += terminated
                truncations += truncated and not terminated
                assert env.buffers.final_return[e] == pytest.approx(returns[e], abs=1e-4)
                returns[e] = 0
                # 4 and 7.3: reset at once (no step of the old episode follows), time feature 0.
                new_x, new_y, t = start_x, start_y, 0
                assert x_now[e].tolist() == start_x.tolist() and y_now[e].tolist() == start_y.tolist()
                assert obs[e] == pytest.approx(reference_obs(new_x, new_y, 0, p), abs=1e-6)
            assert env.state_tensors["t"][e] == t
            assert x_now[e].tolist() == list(new_x) and y_now[e].tolist() == list(new_y)
            ref_x[e], ref_y[e], ref_t[e] = new_x, new_y, t
    assert tags > 10 and truncations > 10, (tags, truncations)


def test_default_reset_is_deterministic():
    env = make_env(3, num_taggers=2, grid_length=5, episode_length=8)
    env.reset(seed=0)
    first = {name: tensor.clone() for name, tensor in env.state_tensors.items()}, env.buffers.obs.clone()
    rng = np.random.default_rng(0)
    for _ in range(5):
        step(env, rng.integers(0, 5, size=(3, 3)))
    env.reset(seed=12345)
    assert all(torch.equal(env.state_tensors[name], first[0][name]) for name in first[0])
    assert torch.equal(env.buffers.obs, first[1])
    # Taggers at 5 // 2 = 2, the runner at 0: x / L = 0.4, 0.4, 0.
    assert env.buffers.obs[:, 0, :3].flatten().tolist() == pytest.approx([0.4, 0.4, 0.0] * 3)


# ----------------------------------------------------------------------------- reset pool (9.2)


def test_reset_pool_tables():
    params = TagGridworldParams(num_taggers=3, grid_length=6, seed=20, use_reset_pool=True)
    pool_x, pool_y = reset_pool(params)
    rng = np.random.RandomState(20)
    expected_x = rng.randint(1, 6, size=(5, 4))
    expected_y = rng.randint(1, 6, size=(5, 4))
    expected_x[:, -1] = expected_y[:, -1] = 0
    assert pool_x.dtype == np.int32 and pool_x.shape == (5, 4)
    assert np.array_equal(pool_x, expected_x) and np.array_equal(pool_y, expected_y)
    again_x, again_y = reset_pool(params)
    assert np.array_equal(again_x, pool_x) and np.array_equal(again_y, pool_y)


def test_reset_pool_resets():
    p = dict(num_taggers=3, grid_length=5, episode_length=1, seed=7, use_reset_pool=True)
    env = make_env(4, **p)
    pool_x, pool_y = reset_pool(TagGridworldParams(**p))
    assert np.array_equal(env.param_tensors["pool_x"].numpy(), pool_x)
    assert np.array_equal(env.param_tensors["pool_y"].numpy(), pool_y)
    env.reset(seed=3)
    rows_x, rows_y = set(), set()
    rng = np.random.default_rng(2)
    for index in range(101):
        if index:
            step(env, rng.integers(0, 5, size=(4, 4)))
            assert env.buffers.truncated.all() or env.buffers.terminated.all()
        x, y = positions(env)
        px = env.state_tensors["pool_index_x"].numpy()
        py = env.state_tensors["pool_index_y"].numpy()
        for e in range(4):
            # 9: taggers strictly inside, runner in the corner, every agent from one pool row.
            assert np.all((x[e, :-1] >= 1) & (x[e, :-1] <= 4) & (y[e, :-1] >= 1) & (y[e, :-1] <= 4))
            assert (x[e, -1], y[e, -1]) == (0, 0)
            assert np.array_equal(x[e], pool_x[px[e]]) and np.array_equal(y[e], pool_y[py[e]])
            rows_x.add(int(px[e]))
            rows_y.add(int(py[e]))
            # The first observation describes the pooled positions, at time 0.
            expected = reference_obs(x[e], y[e], 0, TagGridworldParams(**p))
            assert env.buffers.obs[e].numpy() == pytest.approx(expected, abs=1e-6)
    assert rows_x == rows_y == set(range(5))


def test_without_reset_pool_every_reset_is_the_default_start():
    env = make_env(2, num_taggers=2, grid_length=4, episode_length=1, seed=7)
    env.reset(seed=1)
    for _ in range(5):
        step(env, [[1, 2, 3], [4, 0, 1]])
        assert positions(env)[0].tolist() == [[2, 2, 0], [2, 2, 0]]


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(num_taggers=0), "num_taggers must be an integer in \\[1, 2097150\\], got 0"),
        (dict(num_taggers=2.5), "num_taggers must be an integer in \\[1, 2097150\\], got 2.5"),
        (dict(num_taggers=2**21), "num_taggers must be an integer in \\[1, 2097150\\], got 2097152"),
        (dict(grid_length=0), "grid_length must be an integer in \\[1, 1048576\\], got 0"),
        (dict(grid_length=2**20 + 1), "grid_length must be an integer in \\[1, 1048576\\], got 1048577"),
        (dict(episode_length=0), "episode_length must be an integer >= 1, got 0"),
        (dict(seed=-1), "seed must be an integer >= 0, got -1"),
        (dict(seed=2**32), "seed must be below 2\\*\\*32"),
        (dict(starting_location_x=(0, 0, 0)), "given both or neither"),
        (dict(starting_location_y=(0, 0, 0)), "given both or neither"),
        (dict(starting_location_x=(0, 0), starting_location_y=(0, 0, 0)), "num_taggers \\+ 1 = 3 entries"),
        (
            dict(starting_location_x=(0, 0, 5), starting_location_y=(0, 0, 0)),
            "in \\[0, grid_length=4\\], got 5",
        ),
        (dict(starting_location_x=(0, 0, 0), starting_location_y=(0, -1, 0)), "got -1"),
        (dict(starting_location_x=(0, 0, 0), starting_location_y=(0, 1.5, 0)), "got 1.5"),
        (dict(starting_location_x=3, starting_location_y=(0, 0, 0)), "sequence of 3 integers"),
        (dict(grid_length=1, use_reset_pool=True), "use_reset_pool needs grid_length >= 2"),
    ],
)
def test_bad_params_raise(changes, message):
    params = {"num_taggers": 2, "grid_length": 4, **changes}
    with pytest.raises(ValueError, match=message):
        TagGridworldParams(**params)


def test_starting_locations_become_tuples_of_ints():
    params = TagGridworldParams(
        num_taggers=1,
        grid_length=3,
        starting_location_x=[np.int64(1), 3],
        starting_location_y=np.array([0, 2]),
    )
    assert params.starting_location_x == (1, 3) and params.starting_location_y == (0, 2)
    assert all(type(value) is int for value in params.starting_location_x + params.starting_location_y)
    assert [a.tolist() for a in start_positions(params)] == [[1, 3], [0, 2]]
