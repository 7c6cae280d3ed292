"""TagContinuous-v0's neighbour grid (issue 12): partial observations searched in a uniform grid of
cells, and in one pass over every agent, equal, bit for bit, the brute-force successive minima over
every agent (``observe_nearest_by_scan``),
for random positions, agents out of the game, ties, agents on the edges and fewer than k agents in
the game; the grid the step rebuilds (and the reset copies) is the agents in the game by cell then
id; CUDA (simulated) equals the CPU on a game whose grid has several cells, in one block and in
several."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from fresh_interpreter import run_script
from numba import njit

from warpsci.envs import tag_continuous
from warpsci.envs.tag_continuous import (
    MAX_NEAREST,
    NO_AGENT,
    TAG_CONTINUOUS,
    TagContinuousParams,
    cell_coordinate,
    count_agent,
    file_agent,
    grid_cells_per_side,
    observe_nearest,
    observe_nearest_by_scan,
    observe_nearest_in_one_pass,
    sort_cell,
    start_cells,
)
from warpsci.local_arrays import local_array
from warpsci.testing.kernel_runner import HostKernelRunner


@njit
def rebuild_grid(state, params):
    """The step's four grid stages, in order, agents one after another."""
    num_envs, num_agents = state.x.shape
    cells = params.grid_cells * params.grid_cells
    for env_index in range(num_envs):
        env = np.uint32(env_index)
        for agent in range(num_agents):
            count_agent(state, params, env, np.uint32(agent))
        start_cells(state, params, env)
        for agent in range(num_agents):
            file_agent(state, params, env, np.uint32(agent))
        for cell in range(cells):
            sort_cell(state, env, np.uint32(cell))


new_gaps = local_array(MAX_NEAREST, np.float32)
new_ids = local_array(MAX_NEAREST, np.int32)


@njit
def observe_through(state, params, obs, search):
    """Every observer in the game through one search: 0 the grid, 1 one pass, 2 the brute force."""
    num_envs, num_agents = state.x.shape
    slots = params.num_other_agents_observed
    gaps, ids = new_gaps(), new_ids()
    for env_index in range(num_envs):
        env = np.uint32(env_index)
        for agent_index in range(num_agents):
            agent = np.uint32(agent_index)
            if state.in_game_before[env, agent] == 1:
                if search == 0:
                    observe_nearest(state, params, obs, env, agent, slots, gaps, ids)
                elif search == 1:
                    observe_nearest_in_one_pass(state, params, obs, env, agent, slots, gaps, ids)
                else:
                    observe_nearest_by_scan(state, params, obs, env, agent, slots)


def observe_both(state, params, grid_obs, scan_obs, one_pass_obs) -> None:
    """Every observer in the game, through the grid, by brute force (k passes) and in one pass."""
    observe_through(state, params, grid_obs, 0)
    observe_through(state, params, scan_obs, 2)
    observe_through(state, params, one_pass_obs, 1)


def nearest_ids(state, k: int) -> np.ndarray:
    """The k nearest others in the game of every observer in the game, by (float32 distance, id),
    then NO_AGENT: what its hints should hold after a search."""
    num_envs, num_agents = state.x.shape
    expected = np.full((num_envs, num_agents, k), NO_AGENT, np.int32)
    for env in range(num_envs):
        x, y, playing = state.x[env], state.y[env], state.in_game_before[env] == 1
        for agent in np.flatnonzero(playing):
            dx, dy = x - x[agent], y - y[agent]
            gaps = np.sqrt(dx * dx + dy * dy)
            others = np.flatnonzero(playing & (np.arange(num_agents) != agent))
            order = others[np.lexsort((others, gaps[others]))][:k]
            expected[env, agent, : len(order)] = order
    return expected


def expected_grid(x, y, in_game, params) -> tuple[np.ndarray, np.ndarray]:
    """``(cell_start, cell_agents)`` of one environment, from the definition: the agents in the
    game ordered by (cell, id)."""
    cells = params.grid_cells
    column = np.array([cell_coordinate(np.float32(v), params.grid_inverse_cell, cells) for v in x])
    row = np.array([cell_coordinate(np.float32(v), params.grid_inverse_cell, cells) for v in y])
    cell = row * cells + column
    playing = np.flatnonzero(in_game == 1)
    order = playing[np.argsort(cell[playing], kind="stable")]
    start = np.zeros(cells * cells + 1, np.int64)
    start[1:] = np.cumsum(np.bincount(cell[playing], minlength=cells * cells))
    return start, order


def check_grid(state, params) -> None:
    cells = params.grid_cells * params.grid_cells
    for env in range(state.x.shape[0]):
        start, order = expected_grid(state.x[env], state.y[env], state.in_game_before[env], params)
        np.testing.assert_array_equal(state.cell_start[env, : cells + 1], start)
        np.testing.assert_array_equal(state.cell_agents[env, : len(order)], order)
        np.testing.assert_array_equal(state.cell_fill[env, :cells], 0)


def runner(num_envs: int, **changes) -> HostKernelRunner:
    settings = {"use_full_observation": False, "seed": 5, "neighbour_search": "grid", **changes}
    params = TagContinuousParams(**settings)
    return HostKernelRunner(TAG_CONTINUOUS, num_envs, "cpu", params=params)


def scatter_positions(run: HostKernelRunner, rng: np.random.Generator) -> None:
    """Hard cases, one per environment (then plain random ones): random with some out of the game;
    positions on a coarse lattice (many ties, identical positions); on the edges; fewer than k in
    the game; the observer alone; everyone at one point."""
    state, length = run.state, float(run.params.grid_length)
    num_envs, num_agents = state.x.shape
    k = int(run.params.num_other_agents_observed)
    state.x[...] = rng.uniform(0, length, (num_envs, num_agents)).astype(np.float32)
    state.y[...] = rng.uniform(0, length, (num_envs, num_agents)).astype(np.float32)
    state.in_game_before[...] = (rng.random((num_envs, num_agents)) < 0.8).astype(np.int32)
    lattice = np.float32(length / 4)
    state.x[1] = lattice * rng.integers(0, 5, num_agents)
    state.y[1] = lattice * rng.integers(0, 5, num_agents)
    edges = rng.integers(0, 4, num_agents)
    state.x[2] = np.where(edges == 0, 0.0, np.where(edges == 1, length, state.x[2]))
    state.y[2] = np.where(edges == 2, 0.0, np.where(edges == 3, length, state.y[2]))
    state.x[2, :4], state.y[2, :4] = [0, length, 0, length], [0, 0, length, length]  # corners
    state.in_game_before[3] = 0
    state.in_game_before[3, rng.choice(num_agents, min(k, num_agents) - 1 or 1, replace=False)] = 1
    state.in_game_before[4] = 0
    state.in_game_before[4, 0] = 1
    state.x[5], state.y[5] = np.float32(length / 3), np.float32(length)
    state.in_game_before[5] = 1


@pytest.mark.parametrize(
    ("taggers", "runners", "k", "length"),
    [
        (3, 57, 5, 10.0),
        (10, 190, 10, 20.0),
        (2, 10, 11, 5.0),
        (1, 40, 1, 7.0),
        (10, 2090, 10, 20.0),
        (4, 296, 32, 20.0),
    ],  # the last: the whole thread-local list (MAX_NEAREST)
)
def test_grid_search_equals_brute_force(taggers, runners, k, length):
    run = runner(8, num_taggers=taggers, num_runners=runners, num_other_agents_observed=k, grid_length=length)
    params = run.params
    assert params.grid_cells == grid_cells_per_side(
        TagContinuousParams(num_taggers=taggers, num_runners=runners)
    )
    assert params.grid_cells > 1 or taggers + runners < 12
    rng = np.random.default_rng(taggers + runners + k)
    for _ in range(2):
        scatter_positions(run, rng)
        rebuild_grid(run.state, params)
        check_grid(run.state, params)
        grid_obs = np.full_like(run.buffers.obs, np.nan)
        scan_obs = np.full_like(run.buffers.obs, np.nan)
        one_pass_obs = np.full_like(run.buffers.obs, np.nan)
        observe_both(run.state, params, grid_obs, scan_obs, one_pass_obs)
        np.testing.assert_array_equal(grid_obs, scan_obs)  # NaN where not observed, on all three
        np.testing.assert_array_equal(one_pass_obs, scan_obs)
    filled = np.isfinite(scan_obs[..., 0])
    assert filled.sum() > 0


def test_the_cell_count_follows_the_agents(monkeypatch):
    assert grid_cells_per_side(TagContinuousParams(num_taggers=2, num_runners=3)) == 1
    assert grid_cells_per_side(TagContinuousParams(num_taggers=10, num_runners=100)) == 6
    assert grid_cells_per_side(TagContinuousParams(num_taggers=10, num_runners=990)) == 18
    assert grid_cells_per_side(TagContinuousParams(num_taggers=10, num_runners=9990)) == 32
    # Fewer cells than agents whatever the density (resets copy cells + 1 offsets, one per agent).
    for density in (0.25, 1.0, 2.0, 3.0):
        monkeypatch.setattr(tag_continuous, "GRID_AGENTS_PER_CELL", density)
        for agents in (2, 3, 4, 5, 9, 16, 17, 100, 1024, 1025):
            cells = grid_cells_per_side(TagContinuousParams(num_taggers=1, num_runners=agents - 1))
            assert 1 <= cells <= 32 and cells * cells < agents, (density, agents)


def test_steps_keep_the_grid_and_observe_as_the_brute_force():
    """Random play on the CPU backend with tags, runners leaving and autoresets: after the reset
    and every step the grid is the agents in the game by cell then id, the observations equal the
    brute force on the same state, and every observer's hints are its nearest."""
    run = runner(4, num_taggers=4, num_runners=46, num_other_agents_observed=6, grid_length=4.0,
                 tagging_distance=0.1, episode_length=15, skill_level_tagger=2.0)  # fmt: skip
    params = run.params
    assert params.grid_cells == 4
    rng = np.random.default_rng(1)
    run.reset(seed=2)
    tagged = 0
    for step in range(40):
        if step:
            actions = rng.integers(0, 11, size=run.buffers.actions.shape).astype(run.buffers.actions.dtype)
            run.step(actions, seed=2)
            tagged += int((run.state.in_game == 0).sum())
        check_grid(run.state, params)
        playing = run.state.in_game_before == 1
        hints = run.state.nearest_hint[:, :, :6]  # the step's own search left its nearest
        np.testing.assert_array_equal(hints[playing], nearest_ids(run.state, 6)[playing])
        scan_obs = np.zeros_like(run.buffers.obs)
        observe_both(run.state, params, np.zeros_like(scan_obs), scan_obs, np.zeros_like(scan_obs))
        np.testing.assert_array_equal(run.buffers.obs[playing][:, :-1], scan_obs[playing][:, :-1])
        np.testing.assert_array_equal(run.buffers.obs[~playing], 0)
    assert tagged > 0 and int(run.buffers.final_length.max()) > 0


def test_cuda_kernels_with_a_grid_equal_the_cpu_under_the_simulator():
    """A game with a 2 x 2 grid, ties to the start positions: one block, and blocks of 4 threads
    (three blocks an environment), against the CPU backend after every step (autoresets included)."""
    params = {"num_taggers": 2, "num_runners": 10, "grid_length": 3.0, "episode_length": 6, "seed": 9,
              "use_full_observation": False, "num_other_agents_observed": 3, "tagging_distance": 0.15,
              "num_acceleration_levels": 3, "num_turn_levels": 3, "neighbour_search": "grid"}  # fmt: skip
    assert grid_cells_per_side(TagContinuousParams(**params)) == 2
    script = textwrap.dedent(
        f"""
        from warpsci.testing import check_parity
        for threads in (None, 4):
            report = check_parity("TagContinuous-v0", num_envs=2, steps=14, threads_per_block=threads,
                                  atol=1e-5, params={params!r})
            print("grid", threads, report.ok, report.episodes_ended)
        """
    )
    completed = run_script(script, simulator=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = [line.split() for line in completed.stdout.splitlines() if line.startswith("grid")]
    assert len(lines) == 2
    for _, threads, ok, episodes in lines:
        assert ok == "True", threads
        assert int(episodes) >= 2


def test_auto_search_uses_the_grid_for_wide_games_only():
    from warpsci.envs.tag_continuous import GRID_MIN_AGENTS, uses_grid

    assert not uses_grid(TagContinuousParams(num_taggers=10, num_runners=100, use_full_observation=False))
    assert uses_grid(TagContinuousParams(num_taggers=10, num_runners=990, use_full_observation=False))
    wide = {"num_taggers": 1, "num_runners": GRID_MIN_AGENTS - 1, "use_full_observation": False}
    assert uses_grid(TagContinuousParams(**wide))
    assert not uses_grid(TagContinuousParams(**wide, neighbour_search="scan"))
    assert not uses_grid(TagContinuousParams(**{**wide, "use_full_observation": True}))
    assert uses_grid(TagContinuousParams(num_taggers=2, num_runners=3, neighbour_search="grid",
                                         use_full_observation=False))  # fmt: skip
    with pytest.raises(ValueError, match="neighbour_search must be 'auto', 'grid' or 'scan', got 'kd'"):
        TagContinuousParams(neighbour_search="kd")
    # The grid's working list holds MAX_NEAREST: beyond it "auto" scans and "grid" is refused.
    many = {"num_taggers": 10, "num_runners": 990, "use_full_observation": False}
    assert uses_grid(TagContinuousParams(**many, num_other_agents_observed=MAX_NEAREST))
    assert not uses_grid(TagContinuousParams(**many, num_other_agents_observed=MAX_NEAREST + 1))
    with pytest.raises(ValueError, match=f"keeps at most {MAX_NEAREST} nearest others.*use 'scan' or 'auto'"):
        TagContinuousParams(**many, num_other_agents_observed=MAX_NEAREST + 1, neighbour_search="grid")
    full = {**many, "use_full_observation": True}  # k unused: no limit
    assert not uses_grid(TagContinuousParams(**full, num_other_agents_observed=40, neighbour_search="grid"))


def test_grid_and_scan_games_play_alike():
    """The same game stepped with each search: the same observations, rewards and states."""
    runs = [runner(3, num_taggers=3, num_runners=37, num_other_agents_observed=5, grid_length=5.0,
                   tagging_distance=0.08, episode_length=12, neighbour_search=search)
            for search in ("grid", "scan")]  # fmt: skip
    assert runs[0].params.use_grid and not runs[1].params.use_grid
    rng = np.random.default_rng(4)
    for run in runs:
        run.reset(seed=3)
    for _ in range(30):
        actions = rng.integers(0, 11, size=runs[0].buffers.actions.shape).astype(
            runs[0].buffers.actions.dtype
        )
        for run in runs:
            run.step(actions, seed=3)
        for name in ("obs", "rewards", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(runs[0].buffers, name), getattr(runs[1].buffers, name))
        for name in ("x", "y", "v", "theta", "in_game"):
            np.testing.assert_array_equal(getattr(runs[0].state, name), getattr(runs[1].state, name))


@pytest.mark.parametrize("hints", ["none", "garbage", "repeats", "stale", "exact"])
def test_any_hints_give_the_brute_force_nearest(hints):
    """A search starts from the limit its observer's hints give (the k nearest it found last time).
    Whatever they hold (nothing; random ids, the observer's, ids past the last agent, agents out of
    the game; one agent k times, a too-tight limit; the nearest of other positions; the true
    nearest) the grid and the one pass observe exactly as the brute force, and leave the nearest
    ids, nearest first, as the next hints."""
    run = runner(8, num_taggers=4, num_runners=96, num_other_agents_observed=6, grid_length=8.0)
    state, params, k = run.state, run.params, 6
    num_envs, num_agents = state.x.shape
    rng = np.random.default_rng(["none", "garbage", "repeats", "stale", "exact"].index(hints))
    scatter_positions(run, rng)
    rebuild_grid(state, params)
    if hints in ("stale", "exact"):
        observe_through(state, params, np.zeros_like(run.buffers.obs), 1)
        assert (state.nearest_hint[:, :, :k] != NO_AGENT).any()
    if hints == "stale":
        scatter_positions(run, rng)
        rebuild_grid(state, params)
    start = state.nearest_hint.copy()
    if hints == "none":
        start[...] = NO_AGENT
    elif hints == "garbage":
        start[...] = rng.integers(0, num_agents + 3, start.shape)
        start[:, :, 0] = np.arange(num_agents)  # the observer itself (agent, slot)
    elif hints == "repeats":
        start[...] = rng.integers(0, num_agents, (num_envs, num_agents, 1))
    expected = nearest_ids(state, k)
    brute = np.full_like(run.buffers.obs, np.nan)
    observe_through(state, params, brute, 2)
    for search in (0, 1):
        state.nearest_hint[...] = start
        obs = np.full_like(run.buffers.obs, np.nan)
        observe_through(state, params, obs, search)
        np.testing.assert_array_equal(obs, brute)
        playing = state.in_game_before == 1
        np.testing.assert_array_equal(state.nearest_hint[:, :, :k][playing], expected[playing])
