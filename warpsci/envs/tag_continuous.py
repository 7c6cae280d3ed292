"""TagContinuous-v0: taggers chase runners on a continuous square (WarpDrive's ``TagContinuous``).

``num_taggers`` taggers and ``num_runners`` runners (which agent ids are taggers is drawn at set-up,
see below; groups ``"tagger"`` and ``"runner"``) move on ``[0, L]^2``, ``L = grid_length``. Every
agent has a position, a heading ``theta``, a speed ``v`` and an acceleration ``a``; its action
(``MultiDiscrete([n_acc + 1, n_turn + 1])``) picks a *change* of acceleration and a turn from two
tables (index 0: no change). One step, in the spec's order (``../shared/envs/tag_continuous.md``):

1. every agent (in the game): ``theta <- (theta + turn) mod 2 pi``, ``a <- a + change``,
   ``v <- clip(v + a, 0, max_speed * skill)`` (``a <- 0`` when ``v`` sits on a bound), then moves
   by ``v (cos theta, sin theta)`` and is clipped to the square (crossing costs
   ``edge_hit_penalty``); agents out of the game get heading and speed 0 and stay put;
2. the clock advances;
3. every runner still in the game finds its nearest tagger (float32 distance, ties to the lower
   id); closer than ``tagging_distance * L`` it is tagged: it gets ``tag_penalty_for_runner``, that
   tagger ``tag_reward_for_tagger``, and with ``runner_exits_game_after_tagged`` it leaves the game
   (``is_agent_done``); at the time limit every runner still in the game gets
   ``end_of_game_reward_for_runner``;
4. taggers collect their tag rewards.

Every agent in the game also gets ``step_penalty_for_tagger`` or ``step_reward_for_runner`` each
step. The episode terminates when no runner is left and is truncated at ``episode_length``.

Observations (float32) describe other agents with seven features each, feature-major (every slot's
``dx / D``, then every ``dy / D``, ``dv / max_speed``, ``da / max_speed``, ``dtheta / 2 pi``, type
(1 tagger), in-game flag; ``D = sqrt(2) L``), then ``t / T``: all ``N - 1`` others in id order
(``use_full_observation``, ``7 (N - 1) + 1`` entries), or the ``k = num_other_agents_observed``
nearest others still in the game, nearest first, ties to the lower id, missing slots zero
(``7 k + 1``). They use the in-game flags from before the step's tags, as the reference does.
An observer out of the game sees zeros (full observation: the others' type and flag blocks stay).

The k nearest are searched in a uniform grid of cells over the square (cell lists, issue 12):
about :data:`GRID_AGENTS_PER_CELL` agents a cell at uniform density, at most
:data:`MAX_GRID_CELLS_PER_SIDE` a side. The step rebuilds it after the moves, spread over its
stages (each agent counts itself into its cell; the clock stage turns the counts into where each
cell's run starts; each agent files itself into its cell's run; each run is sorted by id); a reset
copies the grid of the start positions, computed once on the host. The search
(``observe_nearest``) grows a square of cells until it holds k others, bounds the k-th nearest
distance by theirs, and keeps the k nearest (distance, id) of the cells within that bound in one
pass (a list of k that replaces its farthest entry, sorted once at the end, in the observer's
thread-local memory, :mod:`warpsci.local_arrays`; so the grid holds k <= :data:`MAX_NEAREST`):
exactly the brute force's choice and order (``observe_nearest_by_scan``, k passes over all ``N``),
from one pass over a few ``k`` agents.

Set-up, as the reference's section 9.1: ``np.random.RandomState(seed)`` draws the tagger ids
(``choice(N, n_t, replace=False)``), then unless given the start ``x`` (``L * rand(N)``), the start
``y``, and the headings (``choice({0, pi/2, pi, 3 pi/2}, N)``). ``seed=None`` (the reference's
default) draws a seed from the operating system once, when the params are made, and keeps it in them
(a training run records it in its config): two environments made with ``seed=None`` play different
games, as two reference objects do; give ``seed`` for a reproducible game. Every environment and
every reset starts from the set-up.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import gymnasium
import numpy as np
from numba import cuda

from warpsci.atomics import atomic_add, atomic_fetch_add
from warpsci.environment import (
    AgentGroup,
    AgentStage,
    BlockObservation,
    EnvironmentDefinition,
    EnvironmentStage,
    StateField,
    agent_function,
)
from warpsci.envs.param_checks import check_int
from warpsci.envs.tag_continuous_order import (
    INVERSE_TWO_PI,
    NO_AGENT,
    cell_coordinate,
    cell_span,
    comes_after,
    gap_between,
)
from warpsci.envs.tag_continuous_threads import (
    THREAD_SLOTS,
    observe_nearest_by_threads,
    observe_nearest_in_grid_by_threads,
)
from warpsci.envs.tag_continuous_warps import MAX_AGENTS as MAX_WARP_AGENTS
from warpsci.envs.tag_continuous_warps import MAX_GRID_AGENTS as MAX_WARP_GRID_AGENTS
from warpsci.envs.tag_continuous_warps import MAX_OBSERVED as MAX_WARP_OBSERVED
from warpsci.envs.tag_continuous_warps import (
    SEARCH_AGAIN,
    grid_shared_bytes,
    observe_nearest_by_warps,
    observe_nearest_in_grid_by_warps,
)
from warpsci.envs.tag_continuous_warps import THREADS as WARP_THREADS
from warpsci.local_arrays import local_array

TWO_PI = np.float32(2.0 * np.pi)
#: The reference's guard against a zero ``max_speed`` in the speed features.
SPEED_EPSILON = 1e-10
#: Start headings the set-up draws from.
START_HEADINGS = (0.0, np.pi / 2, np.pi, 3 * np.pi / 2)
#: Agents per cell of the neighbour grid at uniform density (partial observations, see below).
#: H100, 2,000 x 1,000, k = 10, every step observed, env steps/s: 1 0.91M, 1.5 0.96M, 2 0.99M,
#: 2.5 1.00M, 3 1.00M, 4 0.99M (BENCHMARKS.md, 2026-11-27).
GRID_AGENTS_PER_CELL = 3.0
#: The most cells per side of the neighbour grid; its state arrays hold this many squared.
MAX_GRID_CELLS_PER_SIDE = 32
#: ``neighbour_search="auto"`` uses the grid from this many agents on: games wider than the block
#: observation of a warp per observer over every agent (``tag_continuous_warps.MAX_AGENTS``).
GRID_MIN_AGENTS = MAX_WARP_AGENTS + 1
MAX_GRID_CELLS = MAX_GRID_CELLS_PER_SIDE * MAX_GRID_CELLS_PER_SIDE
#: The most others (k) the grid search keeps: the length of its thread-local working list.
MAX_NEAREST = 32
_new_nearest_gaps = local_array(MAX_NEAREST, np.float32)
_new_nearest_ids = local_array(MAX_NEAREST, np.int32)
#: Cells whose counts ``start_cells`` reads at once.
COUNTS_AT_ONCE = 8
_new_counts = local_array(COUNTS_AT_ONCE, np.int32)


@dataclasses.dataclass(frozen=True)
class TagContinuousParams:
    """The game's constants; defaults are WarpDrive's ``TagContinuous`` class defaults (its
    published configuration is the preset ``configs/*/TagContinuous-v0.yaml``)."""

    num_taggers: int = 1  #: taggers
    num_runners: int = 10  #: runners
    grid_length: float = 10.0  #: L: side of the square
    episode_length: int = 100  #: T: time limit (truncation)
    starting_location_x: tuple[float, ...] | None = None  #: N start x's (else drawn)
    starting_location_y: tuple[float, ...] | None = None  #: N start y's (given with the x's)
    starting_directions: tuple[float, ...] | None = None  #: N start headings, radians (else drawn)
    seed: int | None = None  #: seed of the set-up draws (None: drawn from the OS, then kept)
    max_speed: float = 1.0  #: speed cap before skill
    skill_level_runner: float = 1.0  #: runners' speed cap is max_speed times this
    skill_level_tagger: float = 1.0  #: taggers' speed cap is max_speed times this
    max_acceleration: float = 1.0  #: largest acceleration change
    min_acceleration: float = -1.0  #: smallest acceleration change
    max_turn: float = np.pi / 2  #: largest turn, radians
    min_turn: float = -np.pi / 2  #: smallest turn, radians
    num_acceleration_levels: int = 10  #: evenly spaced acceleration changes (plus the no-op)
    num_turn_levels: int = 10  #: evenly spaced turns (plus the no-op)
    edge_hit_penalty: float = -0.0  #: reward (<= 0) of a step that crossed the boundary
    use_full_observation: bool = True  #: every other agent, or the k nearest in the game
    num_other_agents_observed: int = 2  #: k of the partial observation
    tagging_distance: float = 0.01  #: tagging radius as a fraction of L (strictly closer tags)
    tag_reward_for_tagger: float = 1.0  #: reward (>= 0) of the nearest tagger per tag
    step_penalty_for_tagger: float = -0.0  #: reward (<= 0) of every tagger every step
    tag_penalty_for_runner: float = -1.0  #: reward (<= 0) of a tagged runner
    step_reward_for_runner: float = 0.0  #: reward (>= 0) of every runner in the game every step
    end_of_game_reward_for_runner: float = 1.0  #: reward (>= 0) of runners still in at the time limit
    runner_exits_game_after_tagged: bool = True  #: tagged runners leave the game
    #: How partial observations find the k nearest (warpsci's choice, not the reference's; every
    #: choice gives the same observations): ``"grid"`` (a neighbour grid rebuilt every step),
    #: ``"scan"`` (every agent: one pass, or k passes for k above MAX_NEAREST), ``"auto"`` (the
    #: grid from GRID_MIN_AGENTS agents on, for k up to MAX_NEAREST).
    neighbour_search: str = "auto"

    def __post_init__(self) -> None:
        check_int("num_taggers", self.num_taggers, 1)
        check_int("num_runners", self.num_runners, 1)
        check_int("episode_length", self.episode_length, 1)
        check_int("num_acceleration_levels", self.num_acceleration_levels, 1)
        check_int("num_turn_levels", self.num_turn_levels, 1)
        check_int("num_other_agents_observed", self.num_other_agents_observed, 1, self.num_agents)
        for name in ("grid_length", "max_speed"):
            if not _finite(getattr(self, name)) or getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive number, got {getattr(self, name)!r}")
        for name in ("skill_level_runner", "skill_level_tagger"):
            if not _finite(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be a number >= 0, got {getattr(self, name)!r}")
        signs = {
            "edge_hit_penalty": -1,
            "step_penalty_for_tagger": -1,
            "tag_penalty_for_runner": -1,
            "tag_reward_for_tagger": 1,
            "step_reward_for_runner": 1,
            "end_of_game_reward_for_runner": 1,
        }
        for name, sign in signs.items():
            value = getattr(self, name)
            if not _finite(value) or value * sign < 0:
                accepted = "<= 0" if sign < 0 else ">= 0"
                raise ValueError(
                    f"{name} must be a number {accepted} (as the reference asserts), got {value!r}"
                )
        if not _finite(self.tagging_distance) or not 0.0 <= self.tagging_distance <= 1.0:
            raise ValueError(
                f"tagging_distance must be a fraction of grid_length in [0, 1], got {self.tagging_distance!r}"
            )
        for name in ("max_acceleration", "min_acceleration", "max_turn", "min_turn"):
            if not _finite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)!r}")
        given_x, given_y = self.starting_location_x is not None, self.starting_location_y is not None
        if given_x != given_y:
            raise ValueError("starting_location_x and starting_location_y must be given both or neither")
        for name in ("starting_location_x", "starting_location_y", "starting_directions"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _float_tuple(name, getattr(self, name), self.num_agents))
        if self.neighbour_search not in ("auto", "grid", "scan"):
            raise ValueError(
                f"neighbour_search must be 'auto', 'grid' or 'scan', got {self.neighbour_search!r}"
            )
        too_many = self.num_other_agents_observed > MAX_NEAREST and not self.use_full_observation
        if self.neighbour_search == "grid" and too_many:
            raise ValueError(
                f"neighbour_search='grid' keeps at most {MAX_NEAREST} nearest others, got "
                f"num_other_agents_observed={self.num_other_agents_observed}: use 'scan' or 'auto'"
            )
        if self.seed is None:
            object.__setattr__(self, "seed", int(np.random.SeedSequence().generate_state(1)[0]))
        check_int("seed", self.seed, 0, 2**32 - 1)

    @property
    def num_agents(self) -> int:
        """N: taggers and runners."""
        return self.num_taggers + self.num_runners


def _finite(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _float_tuple(name: str, value: object, count: int) -> tuple[float, ...]:
    try:
        entries = [float(entry) for entry in value]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of {count} numbers, got {value!r}") from None
    if len(entries) != count or not all(math.isfinite(entry) for entry in entries):
        raise ValueError(f"{name} must hold {count} finite numbers (one per agent), got {value!r}")
    return tuple(entries)


def setup(params: TagContinuousParams) -> dict[str, np.ndarray]:
    """The set-up of section 9.1: ``tagger_ids`` (sorted), start ``x``, ``y`` and ``theta``
    (float32), from ``np.random.RandomState(seed)`` in the reference's order."""
    rng = np.random.RandomState(params.seed)
    n = params.num_agents
    tagger_ids = np.sort(rng.choice(n, params.num_taggers, replace=False))
    if params.starting_location_x is None:
        x = params.grid_length * rng.rand(n)
        y = params.grid_length * rng.rand(n)
    else:
        x, y = np.asarray(params.starting_location_x), np.asarray(params.starting_location_y)
    if params.starting_directions is None:
        theta = rng.choice(np.asarray(START_HEADINGS), n)
    else:
        theta = np.asarray(params.starting_directions)
    return {
        "tagger_ids": tagger_ids,
        "x": x.astype(np.float32),
        "y": y.astype(np.float32),
        "theta": theta.astype(np.float32),
    }


def action_tables(params: TagContinuousParams) -> tuple[np.ndarray, np.ndarray]:
    """The acceleration-change and turn tables of section 4: 0, then ``linspace`` between the end
    points rounded to float32 first, stored as float32."""
    acceleration = np.linspace(
        np.float32(params.min_acceleration),
        np.float32(params.max_acceleration),
        params.num_acceleration_levels,
    )
    turn = np.linspace(np.float32(params.min_turn), np.float32(params.max_turn), params.num_turn_levels)
    return (
        np.concatenate([[0.0], acceleration]).astype(np.float32),
        np.concatenate([[0.0], turn]).astype(np.float32),
    )


def kernel_params(params: TagContinuousParams) -> dict:
    """What the kernels see: the numbers, per-agent tables (type, speed cap, step reward, start)
    and the two action tables."""
    start = setup(params)
    n = params.num_agents
    is_tagger = np.zeros(n, np.int32)
    is_tagger[start["tagger_ids"]] = 1
    skill = np.where(is_tagger == 1, params.skill_level_tagger, params.skill_level_runner)
    step_reward = np.where(is_tagger == 1, params.step_penalty_for_tagger, params.step_reward_for_runner)
    acceleration_table, turn_table = action_tables(params)
    return {
        "grid_length": np.float32(params.grid_length),
        "episode_length": params.episode_length,
        "num_runners": params.num_runners,
        "max_speed": np.float32(params.max_speed),
        "inverse_diagonal": np.float32(1.0 / (math.sqrt(2.0) * params.grid_length)),
        "inverse_speed_scale": np.float32(1.0 / (params.max_speed + SPEED_EPSILON)),
        "edge_hit_penalty": np.float32(params.edge_hit_penalty),
        "use_full_observation": bool(params.use_full_observation),
        "num_other_agents_observed": params.num_other_agents_observed,
        "tagging_radius": np.float32(params.tagging_distance * params.grid_length),
        "tag_reward_for_tagger": np.float32(params.tag_reward_for_tagger),
        "tag_penalty_for_runner": np.float32(params.tag_penalty_for_runner),
        "end_of_game_reward_for_runner": np.float32(params.end_of_game_reward_for_runner),
        "runner_exits_game_after_tagged": bool(params.runner_exits_game_after_tagged),
        "is_tagger": is_tagger,
        "tagger_ids": np.asarray(start["tagger_ids"], np.int32),
        "use_grid": uses_grid(params),
        "speed_cap": (np.float32(params.max_speed) * skill.astype(np.float32)).astype(np.float32),
        "step_reward": step_reward.astype(np.float32),
        "start_x": start["x"],
        "start_y": start["y"],
        "start_theta": start["theta"],
        "acceleration_table": acceleration_table,
        "turn_table": turn_table,
        **start_grid(params, start["x"], start["y"]),
    }


def uses_grid(params: TagContinuousParams) -> bool:
    """Whether partial observations search the neighbour grid (rebuilt every step): with
    ``neighbour_search="auto"`` from :data:`GRID_MIN_AGENTS` agents on (H100, 2,000 environments,
    every step observed, graph-replayed, env steps/s: at 200 agents the grid's block observation
    3.43M against the per-agent scan's 2.18M, and per agent the grid 2.28M against the scan's
    2.22M; at 110 agents a warp per observer scans every agent, without a grid to rebuild)."""
    if params.use_full_observation or params.neighbour_search == "scan":
        return False
    if params.neighbour_search == "grid":
        return True
    return params.num_agents >= GRID_MIN_AGENTS and params.num_other_agents_observed <= MAX_NEAREST


def grid_cells_per_side(params: TagContinuousParams) -> int:
    """Cells per side of the neighbour grid: about :data:`GRID_AGENTS_PER_CELL` agents a cell at
    uniform density, at most :data:`MAX_GRID_CELLS_PER_SIDE`, and fewer cells than agents (a reset
    copies the start grid's ``cells + 1`` offsets one per agent; a step sorts cell ``i`` on agent
    ``i``)."""
    cells = max(1, min(MAX_GRID_CELLS_PER_SIDE, int(math.sqrt(params.num_agents / GRID_AGENTS_PER_CELL))))
    while cells > 1 and cells * cells >= params.num_agents:
        cells -= 1
    return cells


def start_grid(params: TagContinuousParams, x: np.ndarray, y: np.ndarray) -> dict:
    """The neighbour grid of the start positions (every agent in the game), which every reset
    copies: ``grid_cells``, ``grid_inverse_cell`` (``cells / L``, float32), and ``start_cell``,
    ``start_cell_start``, ``start_cell_agents`` as the state fields ``cell``, ``cell_start`` and
    ``cell_agents`` hold them. Cells come from the kernels' own :func:`cell_coordinate`."""
    cells = grid_cells_per_side(params)
    inverse = np.float32(np.float32(cells) / np.float32(params.grid_length))
    column = np.array([cell_coordinate(np.float32(value), inverse, cells) for value in x], np.int64)
    row = np.array([cell_coordinate(np.float32(value), inverse, cells) for value in y], np.int64)
    cell = (row * cells + column).astype(np.int32)
    cell_start = np.zeros(cells * cells + 1, np.int32)
    cell_start[1:] = np.cumsum(np.bincount(cell, minlength=cells * cells))
    return {
        "grid_cells": cells,
        "grid_inverse_cell": inverse,
        "start_cell": cell,
        "start_cell_start": cell_start,
        "start_cell_agents": np.argsort(cell, kind="stable").astype(np.int32),
    }


STATE_FIELDS = (
    StateField("x", np.float32),
    StateField("y", np.float32),
    StateField("v", np.float32),
    StateField("theta", np.float32),
    StateField("accel", np.float32),
    StateField("in_game", np.int32),
    StateField("in_game_before", np.int32),  # the flags before this step's tags (what is observed)
    StateField("edge", np.float32),  # this step's edge penalty
    StateField("tag_reward", np.float32),  # tag rewards a tagger collects this step
    StateField("t", np.int32, per_agent=False),
    StateField("runners_left", np.int32, per_agent=False),
    # The neighbour grid of partial observations (see ``observe_nearest``): the agent's cell, and
    # per environment the agents in the game (in_game_before) by cell then id, where each cell's
    # run of them starts, and the cells' fill counters (zero between steps).
    StateField("cell", np.int32),
    StateField("cell_agents", np.int32),
    StateField("cell_start", np.int32, shape=(MAX_GRID_CELLS + 1,), per_agent=False),
    StateField("cell_fill", np.int32, shape=(MAX_GRID_CELLS,), per_agent=False),
    # The k nearest others an observer found last time, nearest first (NO_AGENT past them): where
    # its next search starts (``hinted_limit``). A hint only speeds the search: any values give the
    # same observations (a first hint of SEARCH_AGAIN, past every id, is the grid's block observation asking
    # for an observer's search within the same kernel). Agent-major (an observer's hints side by
    # side): the block observations' warps read and write one observer's hints in one cache line
    # (H100, every step observed, graph-replayed: 2,000 x 110 10.41M-10.45M against 10.07M-10.09M
    # slot-major, 2,000 x 1,000 492K-498K against 479K-485K); the per-agent search, where a warp's
    # threads are observers, reads a cache line per observer instead (4.20M against 4.39M at 110,
    # 372K against 399K at 1,000).
    StateField("nearest_hint", np.int32, shape=(MAX_NEAREST,)),
)


@agent_function
def reset_environment(state, params, env, key):
    state.t[env] = 0
    state.runners_left[env] = params.num_runners


@agent_function
def reset_agent(state, params, env, agent, key):
    state.x[env, agent] = params.start_x[agent]
    state.y[env, agent] = params.start_y[agent]
    state.theta[env, agent] = params.start_theta[agent]
    state.v[env, agent] = np.float32(0.0)
    state.accel[env, agent] = np.float32(0.0)
    state.in_game[env, agent] = 1
    state.in_game_before[env, agent] = 1
    state.edge[env, agent] = np.float32(0.0)
    state.tag_reward[env, agent] = np.float32(0.0)
    if params.use_grid:
        # Every reset starts from the set-up with everyone in the game: the start grid, copied
        # (N > cells, so agent i copies offset i).
        state.cell[env, agent] = params.start_cell[agent]
        state.cell_agents[env, agent] = params.start_cell_agents[agent]
        cells = params.grid_cells * params.grid_cells
        if agent <= cells:
            state.cell_start[env, agent] = params.start_cell_start[agent]
        if agent < cells:
            state.cell_fill[env, agent] = 0


@agent_function
def move_agent(state, params, actions, env, agent, key):
    """Section 5.2, float32 throughout; returns the edge penalty plus the step reward.

    Everything is read before anything is written: on a GPU a read placed after a write to another
    array waits for it (the compiler cannot rule out that they overlap)."""
    playing = state.in_game[env, agent]
    turn = params.turn_table[actions[env, agent, 1]]
    change = params.acceleration_table[actions[env, agent, 0]]
    theta_before = state.theta[env, agent]
    accel_before = state.accel[env, agent]
    v_before = state.v[env, agent]
    x_before = state.x[env, agent]
    y_before = state.y[env, agent]
    cap = params.speed_cap[agent]
    step_reward = params.step_reward[agent]
    state.in_game_before[env, agent] = playing
    g = np.float32(playing)
    theta = ((theta_before + turn) % TWO_PI) * g
    accel = accel_before + change
    v = min(max(v_before + accel, np.float32(0.0)), cap) * g
    if v <= np.float32(0.0) or v >= cap:
        accel = np.float32(0.0)
    x = x_before + v * np.float32(math.cos(theta))
    y = y_before + v * np.float32(math.sin(theta))
    length = params.grid_length
    crossed = x < np.float32(0.0) or x > length or y < np.float32(0.0) or y > length
    state.theta[env, agent] = theta
    state.accel[env, agent] = accel
    state.v[env, agent] = v
    state.x[env, agent] = min(max(x, np.float32(0.0)), length)
    state.y[env, agent] = min(max(y, np.float32(0.0)), length)
    edge = params.edge_hit_penalty if crossed else np.float32(0.0)
    state.edge[env, agent] = edge
    if playing == 0:
        return np.float32(0.0)
    return edge + step_reward


@agent_function
def grid_cell(state, params, env, agent):
    """The cell of the agent's position: ``row * cells + column``."""
    cells = params.grid_cells
    column = cell_coordinate(state.x[env, agent], params.grid_inverse_cell, cells)
    row = cell_coordinate(state.y[env, agent], params.grid_inverse_cell, cells)
    return row * cells + column


@agent_function
def move_and_count(state, params, actions, env, agent, key):
    """Move (``move_agent``); with partial observations, count the agent into its new cell when it
    is in the game."""
    reward = move_agent(state, params, actions, env, agent, key)
    if params.use_grid:
        count_agent(state, params, env, agent)
    return reward


@agent_function
def count_agent(state, params, env, agent):
    """Note the agent's cell; count it there if it is in the game."""
    cell = grid_cell(state, params, env, agent)
    state.cell[env, agent] = cell
    if state.in_game_before[env, agent] == 1:
        atomic_add(state.cell_fill, (env, cell), 1)


@agent_function
def start_cells(state, params, env):
    """Where each cell's agents start in ``cell_agents`` (prefix sums of the counts); the counters
    are cleared for the filing that follows.

    The counts are read :data:`COUNTS_AT_ONCE` cells at a time, before those cells' starts are
    written: a read placed after a write to another array cannot be moved above it (the compiler
    cannot rule out that they overlap). On a GPU each count, left in the L2 cache by the counting
    atomics, then took a round trip there, cell after cell, while the block's other agents waited
    (H100, 2,000 x 1,000: about 8% of the step kernel's stall samples)."""
    fill, starts = state.cell_fill[env], state.cell_start[env]
    cells = np.uint32(params.grid_cells * params.grid_cells)
    counts = _new_counts()
    total = np.int32(0)
    first = np.uint32(0)
    while first < cells:
        for i in range(COUNTS_AT_ONCE):
            cell = np.uint32(first + i)
            counts[i] = fill[cell] if cell < cells else 0
        for i in range(COUNTS_AT_ONCE):
            cell = np.uint32(first + i)
            if cell < cells:
                starts[cell] = total
                fill[cell] = 0
                total += counts[i]
        first = np.uint32(first + COUNTS_AT_ONCE)
    starts[cells] = total


@agent_function
def advance_clock(state, params, actions, rewards, env, key):
    state.t[env] += 1
    if params.use_grid:
        start_cells(state, params, env)


@agent_function
def file_and_tag(state, params, actions, env, agent, key):
    """File the agent (in the game) into its cell's run of ``cell_agents`` (in arrival order: the
    next stage sorts each run), then ``tag_runner``."""
    if params.use_grid:
        file_agent(state, params, env, agent)
    return tag_runner(state, params, actions, env, agent, key)


@agent_function
def file_agent(state, params, env, agent):
    """Take a slot in the run of the agent's cell (in the game only; cells started)."""
    if state.in_game_before[env, agent] == 1:
        cell = state.cell[env, agent]
        slot = state.cell_start[env, cell] + atomic_fetch_add(state.cell_fill, (env, cell), np.int32(1))
        state.cell_agents[env, slot] = agent


@agent_function
def sort_cell(state, env, cell):
    """Sort one cell's run of ``cell_agents`` by id (insertion sort: runs are short) and clear its
    counter, so that the grid is the same whatever order the agents were filed in."""
    first = state.cell_start[env, cell]
    end = state.cell_start[env, cell + 1]
    for index in range(first + 1, end):
        value = state.cell_agents[env, index]
        place = index
        while place > first and state.cell_agents[env, place - 1] > value:
            state.cell_agents[env, place] = state.cell_agents[env, place - 1]
            place -= 1
        state.cell_agents[env, place] = value
    state.cell_fill[env, cell] = 0


@agent_function
def sort_and_collect(state, params, actions, env, agent, key):
    """Agent ``i`` sorts cell ``i`` (there are fewer cells than agents), then
    ``collect_tag_rewards``."""
    if params.use_grid and agent < params.grid_cells * params.grid_cells:
        sort_cell(state, env, agent)
    return collect_tag_rewards(state, params, actions, env, agent, key)


@agent_function
def distance(state, env, first, second):
    """Float32 Euclidean distance between two agents (squared differences of float32 positions).
    The agents index as uint32: a signed index costs a wrap-around check per read on a GPU."""
    xs, ys = state.x[env], state.y[env]
    one, other = np.uint32(first), np.uint32(second)
    return gap_between(xs[one], ys[one], xs[other], ys[other])


@agent_function
def tag_runner(state, params, actions, env, agent, key):
    """Section 6.2-6.3 for one runner still in the game: the nearest tagger (ties to the lower id)
    tags it when strictly closer than the radius; at the time limit the end-of-game reward."""
    if params.is_tagger[agent] == 1 or state.in_game[env, agent] == 0:
        return np.float32(0.0)
    reward = np.float32(0.0)
    taggers = params.tagger_ids  # in increasing id: ties to the lower id (num_taggers >= 1)
    nearest = np.uint32(taggers[0])
    best = distance(state, env, agent, nearest)
    index = np.uint32(1)
    while index < np.uint32(taggers.shape[0]):
        other = np.uint32(taggers[index])
        gap = distance(state, env, agent, other)
        if gap < best:
            nearest, best = other, gap
        index = np.uint32(index + 1)
    if best < params.tagging_radius:
        reward += params.tag_penalty_for_runner
        atomic_add(state.tag_reward, (env, nearest), params.tag_reward_for_tagger)
        if params.runner_exits_game_after_tagged:
            state.in_game[env, agent] = 0
            atomic_add(state.runners_left, env, -1)
    if state.t[env] == params.episode_length and state.in_game[env, agent] == 1:
        reward += params.end_of_game_reward_for_runner
    return reward


@agent_function
def collect_tag_rewards(state, params, actions, env, agent, key):
    """Each tagger's tag rewards of this step (summed by the runners it tagged)."""
    reward = state.tag_reward[env, agent]
    state.tag_reward[env, agent] = np.float32(0.0)
    return reward


@agent_function
def is_terminal(state, params, env):
    return state.runners_left[env] == 0


@agent_function
def is_agent_done(state, params, env, agent):
    return state.in_game[env, agent] == 0


@agent_function
def write_features(state, params, obs, env, agent, other, slot, slots):
    """The seven features of ``other`` seen from ``agent`` into slot ``slot`` of ``slots``.

    Every value is read before any feature is written: a read placed after a write to the
    observations cannot be moved above it (the compiler cannot rule out that they overlap), so on
    a GPU each feature's reads waited for the feature before to be written. The scales are
    multiplied by their reciprocals (the kernel params ``inverse_diagonal`` and
    ``inverse_speed_scale``, rounded once from float64): within about 1.3 float32 ulps of the
    quotient (the reference computes in float64), where a float32 division, correctly rounded,
    cost about ten instructions on a GPU, and a call for some values."""
    seen, me = np.uint32(other), np.uint32(agent)
    xs, ys, vs, accels, thetas = state.x[env], state.y[env], state.v[env], state.accel[env], state.theta[env]
    dx, dy = xs[seen] - xs[me], ys[seen] - ys[me]
    dv, da, dtheta = vs[seen] - vs[me], accels[seen] - accels[me], thetas[seen] - thetas[me]
    tagger, playing = np.float32(params.is_tagger[seen]), np.float32(state.in_game_before[env, seen])
    # The observer's row, and uint32 places in it: signed ones cost a wrap-around check.
    row, place, stride = obs[env, agent], np.uint32(slot), np.uint32(slots)
    row[place] = dx * params.inverse_diagonal
    row[np.uint32(place + stride)] = dy * params.inverse_diagonal
    row[np.uint32(place + 2 * stride)] = dv * params.inverse_speed_scale
    row[np.uint32(place + 3 * stride)] = da * params.inverse_speed_scale
    row[np.uint32(place + 4 * stride)] = dtheta * INVERSE_TWO_PI
    row[np.uint32(place + 5 * stride)] = tagger
    row[np.uint32(place + 6 * stride)] = playing


@agent_function
def observe_everyone(state, params, obs, env, agent):
    """Full observation: every other agent in id order, then the time."""
    num_agents = state.x.shape[1]
    playing = state.in_game_before[env, agent] == 1
    slots = num_agents - 1
    slot = 0
    for other in range(num_agents):
        if other == agent:
            continue
        if playing:
            write_features(state, params, obs, env, agent, other, slot, slots)
        else:
            for feature in range(5):
                obs[env, agent, feature * slots + slot] = np.float32(0.0)
            obs[env, agent, 5 * slots + slot] = np.float32(params.is_tagger[other])
            obs[env, agent, 6 * slots + slot] = np.float32(state.in_game_before[env, other])
        slot += 1
    obs[env, agent, 7 * slots] = observed_time(state, params, env) if playing else np.float32(0.0)


@agent_function
def observed_time(state, params, env):
    return np.float32(state.t[env]) / np.float32(params.episode_length)


@agent_function
def blank_slots(obs, env, agent, slots):
    for slot in range(slots):
        for feature in range(7):
            obs[env, agent, feature * slots + slot] = np.float32(0.0)


@agent_function
def observe_agent(state, params, obs, env, agent):
    """Full observation, or the k nearest others in the game, then the time; an observer out of
    the game sees zeros. The k nearest are found in the neighbour grid (``observe_nearest``), else
    in one pass over every agent (``observe_nearest_in_one_pass``), or for k above
    :data:`MAX_NEAREST` by k passes (``observe_nearest_by_scan``): the same observations."""
    if params.use_full_observation:
        observe_everyone(state, params, obs, env, agent)
        return
    slots = params.num_other_agents_observed
    playing = state.in_game_before[env, agent] == 1
    gaps = _new_nearest_gaps()
    ids = _new_nearest_ids()
    if playing and params.use_grid:
        observe_nearest(state, params, obs, env, agent, slots, gaps, ids)
    elif playing and slots <= MAX_NEAREST:
        observe_nearest_in_one_pass(state, params, obs, env, agent, slots, gaps, ids)
    elif playing:
        observe_nearest_by_scan(state, params, obs, env, agent, slots)
    else:
        blank_slots(obs, env, agent, slots)
    obs[env, agent, 7 * slots] = observed_time(state, params, env) if playing else np.float32(0.0)


@agent_function
def count_in_cells(state, params, env, x0, x1, y0, y1):
    """Agents filed in the cells ``[x0, x1] x [y0, y1]`` (a row of cells is one run)."""
    count = 0
    for row in range(y0, y1 + 1):
        base = row * params.grid_cells
        count += state.cell_start[env, base + x1 + 1] - state.cell_start[env, base + x0]
    return count


@agent_function
def start_nearest(limit_gap, limit_id):
    """The state of an empty k-nearest list, as :func:`offer_nearest` takes it, that accepts the
    agents coming strictly before ``(limit_gap, limit_id)`` (``(inf, NO_AGENT)``: any agent)."""
    return np.uint32(0), np.float32(-1.0), np.int32(-1), np.uint32(0), limit_gap, limit_id


@agent_function
def offer_nearest(gaps, ids, slots, nearest, gap, other):
    """Keep ``other`` (int32) at distance ``gap`` in the k-nearest list (``gaps`` and ``ids``,
    ``slots`` places, unordered) if it comes before the list's limit; returns the list's new state.

    ``nearest`` = ``(place, far_gap, far_id, filled, limit_gap, limit_id)``: the farthest kept
    entry (its place, distance and id), how many places hold an agent (they fill in order), and the
    limit: an agent is kept only if it comes strictly before it. Until the list is full the limit is
    the one it started with (:func:`start_nearest`), then the farthest kept, which a newcomer
    replaces; the farthest is then found again by a pass over every place, the same ``slots`` steps
    for every thread. (An insertion-sorted list, which shifted each thread's entries by its own
    count, left a warp's threads mostly idle: H100, 2,000 x 110 agents, k = 10, 4 of 27 busy in
    that loop on average, 54% of an observed step's instructions.) The farthest's distance and id
    travel with its place, so that a candidate after the limit reads nothing from the list; places
    are uint32 (signed indices cost a wrap-around check each)."""
    place, far_gap, far_id, filled, limit_gap, limit_id = nearest
    if not comes_after(limit_gap, limit_id, gap, other):
        return nearest
    if filled < slots:
        gaps[filled] = gap
        ids[filled] = other
        if comes_after(gap, other, far_gap, far_id):
            place, far_gap, far_id = filled, gap, other
        filled = np.uint32(filled + 1)
        if filled < slots:
            return place, far_gap, far_id, filled, limit_gap, limit_id
        return place, far_gap, far_id, filled, far_gap, far_id
    gaps[place] = gap
    ids[place] = other
    far_gap, far_id = gap, other
    index = np.uint32(0)
    while index < slots:
        if comes_after(gaps[index], ids[index], far_gap, far_id):
            place, far_gap, far_id = index, gaps[index], ids[index]
        index = np.uint32(index + 1)
    return place, far_gap, far_id, slots, far_gap, far_id


@agent_function
def hinted_limit(state, env, agent, slots, x, y):
    """A limit for the observer's k-nearest list (:func:`start_nearest`) from its hints
    (``state.nearest_hint``, the k nearest it found last time): the farthest of them in
    (distance, id) order at their present positions, with its id plus one, so that the list
    accepts it. It comes at or after the true k-th nearest when the hints name k different
    agents in the game other than the observer (``(x, y)``), so the search that starts from it
    keeps what a search from no limit keeps, and reads next to nothing from its list: the hints
    are mostly still the nearest. Returns no limit (``(inf, NO_AGENT)``) unless all ``slots``
    hints name agents in the game other than the observer; a hint that repeats an agent can make
    the limit too tight, which the search sees (it finds fewer than ``slots``: see
    :func:`search_is_complete`)."""
    xs, ys, playing, hints = state.x[env], state.y[env], state.in_game_before[env], state.nearest_hint[env]
    count = np.uint32(xs.shape[0])
    observer = np.uint32(agent)
    far_gap, far_id = np.float32(-1.0), np.int32(-1)
    slot = np.uint32(0)
    while slot < slots:
        other = np.uint32(hints[observer, slot])
        if other >= count or other == observer or playing[other] != 1:
            return np.float32(np.inf), NO_AGENT
        gap = gap_between(x, y, xs[other], ys[other])
        if comes_after(gap, np.int32(other), far_gap, far_id):
            far_gap, far_id = gap, np.int32(other)
        slot = np.uint32(slot + 1)
    return far_gap, np.int32(far_id + 1)


@agent_function
def search_is_complete(nearest, slots):
    """Whether a search that kept ``nearest`` (:func:`offer_nearest`'s state) kept what a search
    without a limit would: it started without one, or it filled its ``slots`` places (then every
    agent it did not keep comes after ``slots`` agents it saw)."""
    return nearest[3] == slots or nearest[4] == np.float32(np.inf)


@agent_function
def remember_nearest(state, env, agent, ids, found, slots):
    """The observer's hints for its next search: the ``found`` nearest (``ids``), then
    :data:`NO_AGENT`."""
    hints = state.nearest_hint[env]
    for slot in range(slots):
        hints[agent, slot] = ids[slot] if slot < found else NO_AGENT


@agent_function
def sort_nearest(gaps, ids, nearest):
    """Order the k-nearest list by (distance, id), nearest first (insertion sort of its filled
    places, once per observer); ``nearest``: :func:`offer_nearest`'s state. Returns how many
    places hold an agent."""
    filled = np.uint32(nearest[3])
    place = np.uint32(1)  # uint32 places: signed ones cost a wrap-around check each
    while place < filled:
        gap, other = gaps[place], ids[place]
        position = place
        while position > np.uint32(0):
            before = np.uint32(position - 1)
            if not comes_after(gaps[before], ids[before], gap, other):
                break
            gaps[position] = gaps[before]
            ids[position] = ids[before]
            position = before
        gaps[position] = gap
        ids[position] = other
        place = np.uint32(place + 1)
    return filled


@agent_function
def keep_nearest(state, params, env, agent, x0, x1, y0, y1, slots, gaps, ids, limit_gap, limit_id):
    """The ``slots`` nearest others, before the limit ``(limit_gap, limit_id)``, among the agents
    filed in the cells ``[x0, x1] x [y0, y1]``, found in one pass over them into ``gaps`` and
    ``ids`` (the observer's thread-local arrays of at least ``slots``), unordered. Returns the
    list's state (:func:`offer_nearest`)."""
    # The walker may hand the agent as uint64: against a signed id Numba compares through float64.
    observer = np.int32(agent)
    places = np.uint32(slots)
    nearest = start_nearest(limit_gap, limit_id)
    # The environment's rows, and uint32 indices into them: signed ones cost a wrap-around check.
    xs, ys, filed, starts = state.x[env], state.y[env], state.cell_agents[env], state.cell_start[env]
    x, y = xs[agent], ys[agent]
    for row in range(y0, y1 + 1):
        base = row * params.grid_cells
        index, end = np.uint32(starts[base + x0]), np.uint32(starts[base + x1 + 1])
        # Each candidate's id is read one candidate ahead, so that on a GPU its position's reads
        # need not first wait for it.
        following = np.int32(filed[index]) if index < end else np.int32(0)
        while index < end:
            other = following
            index = np.uint32(index + 1)
            if index < end:
                following = np.int32(filed[index])
            if other != observer:
                gap = gap_between(x, y, xs[np.uint32(other)], ys[np.uint32(other)])
                nearest = offer_nearest(gaps, ids, places, nearest, gap, other)
    return nearest


@agent_function
def write_nearest(state, params, obs, env, agent, ids, found, slots):
    """The features of the ``found`` nearest (``ids``, nearest first), then zeros."""
    for slot in range(slots):
        if slot < found:
            write_features(state, params, obs, env, agent, ids[slot], slot, slots)
        else:
            for feature in range(7):
                obs[env, agent, feature * slots + slot] = np.float32(0.0)


@agent_function
def observe_nearest(state, params, obs, env, agent, slots, gaps, ids):
    """The ``slots`` nearest others in the game, nearest first, ties to the lower id, missing slots
    zero, for an observer in the game: exactly what ``observe_nearest_by_scan`` writes, searched
    in the neighbour grid (which holds the agents in the game, the observer included).

    Every agent within ``reach`` of the observer lies in the cells of ``[x - pad, x + pad] x
    [y - pad, y + pad]`` (``pad`` = ``reach`` widened past float32 rounding, :func:`cells_within`;
    cells are monotone in the coordinate), so with ``reach`` at or beyond the ``slots``-th nearest
    distance the ``slots`` nearest of those cells (:func:`keep_nearest`) are the true nearest.
    ``reach`` comes from the observer's hints (:func:`hinted_limit`), searched with their limit;
    when they give none, or too tight a one, from a square of cells grown around the observer's
    cell until it holds ``slots`` others (or is the whole grid): the distance of the ``slots``-th
    nearest of them. The found nearest become the next hints.

    ``gaps`` and ``ids``: the observer's thread-local working list (at least ``slots`` long).
    """
    x = state.x[env, agent]
    y = state.y[env, agent]
    limit_gap, limit_id = hinted_limit(state, env, agent, slots, x, y)
    nearest = start_nearest(limit_gap, limit_id)
    hinted = limit_gap < np.float32(np.inf)
    if hinted:
        x0, x1, y0, y1 = cells_within(params, x, y, limit_gap)
        nearest = keep_nearest(
            state, params, env, agent, x0, x1, y0, y1, slots, gaps, ids, limit_gap, limit_id
        )
    if not hinted or not search_is_complete(nearest, slots):
        x0, x1, y0, y1, enough = square_with_enough(state, params, env, x, y, slots)
        if enough:
            nearest = keep_nearest(
                state, params, env, agent, x0, x1, y0, y1, slots, gaps, ids, np.float32(np.inf), NO_AGENT
            )
            x0, x1, y0, y1 = cells_within(params, x, y, nearest[1])
        nearest = keep_nearest(
            state, params, env, agent, x0, x1, y0, y1, slots, gaps, ids, np.float32(np.inf), NO_AGENT
        )
    found = sort_nearest(gaps, ids, nearest)
    remember_nearest(state, env, agent, ids, found, slots)
    write_nearest(state, params, obs, env, agent, ids, found, slots)


@agent_function
def square_with_enough(state, params, env, x, y, slots):
    """The smallest square of cells around the cell of ``(x, y)`` holding more than ``slots``
    agents in the game (the observer counts), or the whole grid: ``(x0, x1, y0, y1, enough)``."""
    cells = params.grid_cells
    last = cells - 1
    column = cell_coordinate(x, params.grid_inverse_cell, cells)
    row = cell_coordinate(y, params.grid_inverse_cell, cells)
    radius = 0
    while True:
        x0, x1 = max(column - radius, 0), min(column + radius, last)
        y0, y1 = max(row - radius, 0), min(row + radius, last)
        enough = count_in_cells(state, params, env, x0, x1, y0, y1) > slots
        if enough or (x0 == 0 and y0 == 0 and x1 == last and y1 == last):
            return x0, x1, y0, y1, enough
        radius += 1


@agent_function
def cells_within(params, x, y, reach):
    """The cells ``(x0, x1, y0, y1)`` that hold every point within ``reach`` of ``(x, y)``, the
    reach widened past float32 rounding."""
    return cell_span(x, y, reach, params.grid_inverse_cell, params.grid_cells, params.grid_length)


@agent_function
def scan_nearest(state, env, agent, slots, gaps, ids, limit_gap, limit_id):
    """The ``slots`` nearest others in the game before the limit, in one pass over every agent,
    into the observer's thread-local ``gaps`` and ``ids``; returns the list's state."""
    observer = np.uint32(agent)
    places = np.uint32(slots)
    nearest = start_nearest(limit_gap, limit_id)
    # The environment's rows, and uint32 indices into them: signed ones cost a wrap-around check.
    xs, ys, playing = state.x[env], state.y[env], state.in_game_before[env]
    x, y = xs[observer], ys[observer]
    count = np.uint32(xs.shape[0])
    other = np.uint32(0)
    while other < count:
        # The flag and the position read together (one wait on a GPU, where the flag's test
        # before the position's reads made two).
        flag, gap = playing[other], gap_between(x, y, xs[other], ys[other])
        if other != observer and flag == 1:
            nearest = offer_nearest(gaps, ids, places, nearest, gap, np.int32(other))
        other = np.uint32(other + 1)
    return nearest


@agent_function
def observe_nearest_in_one_pass(state, params, obs, env, agent, slots, gaps, ids):
    """``observe_nearest`` without a grid: one pass over every agent in the game, ``O(N)``, keeping
    the ``slots`` nearest in the observer's thread-local ``gaps`` and ``ids``, from the limit its
    hints give (:func:`hinted_limit`; a second pass from none when that limit was too tight)."""
    limit_gap, limit_id = hinted_limit(state, env, agent, slots, state.x[env, agent], state.y[env, agent])
    nearest = scan_nearest(state, env, agent, slots, gaps, ids, limit_gap, limit_id)
    if not search_is_complete(nearest, slots):
        nearest = scan_nearest(state, env, agent, slots, gaps, ids, np.float32(np.inf), NO_AGENT)
    found = sort_nearest(gaps, ids, nearest)
    remember_nearest(state, env, agent, ids, found, slots)
    write_nearest(state, params, obs, env, agent, ids, found, slots)


@agent_function
def observe_nearest_by_scan(state, params, obs, env, agent, slots):
    """``observe_nearest`` by brute force, ``O(k N)``: successive minima of (distance, id) over every
    agent in the game, for any k (no working list). The reference the searches are tested
    against."""
    num_agents = state.x.shape[1]
    previous = np.float32(-1.0)
    previous_id = -1
    for slot in range(slots):
        chosen = -1
        best = np.float32(0.0)
        for other in range(num_agents):
            if other == agent or state.in_game_before[env, other] == 0:
                continue
            gap = distance(state, env, agent, other)
            after_previous = gap > previous or (gap == previous and other > previous_id)
            if after_previous and (chosen < 0 or gap < best):
                chosen, best = other, gap
        if chosen < 0:
            for feature in range(7):
                obs[env, agent, feature * slots + slot] = np.float32(0.0)
        else:
            write_features(state, params, obs, env, agent, chosen, slot, slots)
            previous, previous_id = best, chosen


def observes_by_warps(params: TagContinuousParams) -> bool:
    """Whether the block observation of games of up to :data:`MAX_WARP_AGENTS`
    agents takes these params: partial observations of at most :data:`MAX_WARP_OBSERVED` others.
    Full observations stay with ``observe_agent``, several environments to a block."""
    return not params.use_full_observation and params.num_other_agents_observed <= MAX_WARP_OBSERVED


def observes_in_grid_by_block(params: TagContinuousParams) -> bool:
    """Whether the block observation of wider games takes these params: those of
    :func:`observes_by_warps` searched in the neighbour grid."""
    return observes_by_warps(params) and uses_grid(params)


def grid_block_registers(params: TagContinuousParams) -> int:
    """Registers per thread of the kernels that end with the grid's block observation: 96 where a
    thread per observer searches (H100, 2,000 x 1,000, k = 10, every step observed, graph-replayed,
    env steps/s: 72 0.94M, 80 1.00M, 88 1.00M, 96 1.01M; 2026-11-27), 64 where a warp per observer
    does (the warps measured 0.53M at 64, 0.50M-0.51M at 56, 0.46M at 72)."""
    return 96 if params.num_other_agents_observed <= THREAD_SLOTS else 64


def grid_block_shared_bytes(num_agents: int) -> int:
    """The wide block observation's dynamic shared memory, in bytes: the grid's copy (at most
    :data:`MAX_GRID_CELLS` cells)."""
    return grid_shared_bytes(num_agents, MAX_GRID_CELLS)


@cuda.jit(device=True)
def observe_each_agent(state, params, obs, env):
    """``observe_agent`` for every agent of the environment, an agent a thread of the block."""
    agent = np.uint32(cuda.threadIdx.x)
    while agent < state.x.shape[1]:
        observe_agent(state, params, obs, env, agent)
        agent = np.uint32(agent + cuda.blockDim.x)


@cuda.jit(device=True)
def observe_by_block(state, params, obs, env):
    """The block observation of games of up to :data:`MAX_WARP_AGENTS` agents (CUDA,
    :data:`tag_continuous_warps.THREADS` threads an environment): partial observations of up to
    :data:`THREAD_SLOTS` others by a thread per observer (:func:`observe_nearest_by_threads`), of
    more by a warp per observer (:func:`observe_nearest_by_warps`); full ones by ``observe_agent``,
    an agent a thread. The same observations as ``observe_agent``."""
    slots = params.num_other_agents_observed
    if params.use_full_observation or slots > MAX_WARP_OBSERVED:
        observe_each_agent(state, params, obs, env)
        return
    if slots <= THREAD_SLOTS:
        observe_nearest_by_threads(
            state.x[env], state.y[env], state.v[env], state.accel[env], state.theta[env],
            state.in_game_before[env], params.is_tagger, state.nearest_hint[env], obs[env], slots,
            observed_time(state, params, env), params.inverse_diagonal, params.inverse_speed_scale,
        )  # fmt: skip
        return
    observe_nearest_by_warps(
        state.x[env], state.y[env], state.v[env], state.accel[env], state.theta[env],
        state.in_game_before[env], params.is_tagger, state.nearest_hint[env], obs[env], slots,
        observed_time(state, params, env), params.inverse_diagonal, params.inverse_speed_scale,
    )  # fmt: skip


@cuda.jit(device=True)
def observe_in_grid_by_block(state, params, obs, env):
    """The grid's block observation over the environment's state, by a thread per observer
    (:func:`observe_nearest_in_grid_by_threads`) for up to :data:`THREAD_SLOTS` others, by a warp
    per observer (:func:`observe_nearest_in_grid_by_warps`) for more: the observers they settle,
    and :data:`SEARCH_AGAIN` in the first hint of the others."""
    slots = params.num_other_agents_observed
    if slots <= THREAD_SLOTS:
        observe_nearest_in_grid_by_threads(
            state.x[env], state.y[env], state.v[env], state.accel[env], state.theta[env],
            state.in_game_before[env], params.is_tagger, state.nearest_hint[env], obs[env], slots,
            observed_time(state, params, env), params.inverse_diagonal, params.inverse_speed_scale,
            state.cell_agents[env], state.cell_start[env], params.grid_cells, params.grid_inverse_cell,
            params.grid_length,
        )  # fmt: skip
        return
    observe_nearest_in_grid_by_warps(
        state.x[env], state.y[env], state.v[env], state.accel[env], state.theta[env],
        state.in_game_before[env], params.is_tagger, state.nearest_hint[env], obs[env], slots,
        observed_time(state, params, env), params.inverse_diagonal, params.inverse_speed_scale,
        state.cell_agents[env], state.cell_start[env], params.grid_cells, params.grid_inverse_cell,
        params.grid_length,
    )  # fmt: skip


@cuda.jit(device=True)
def observe_wide_by_block(state, params, obs, env):
    """The block observation of wider games (up to :data:`MAX_WARP_GRID_AGENTS` agents, threads
    taking several agents in the step): partial observations searched in the neighbour grid by
    a thread or a warp per observer (:func:`observe_in_grid_by_block`), then the observers they leave by
    ``observe_agent``, an agent a thread; others by ``observe_agent``. The same observations as
    ``observe_agent``."""
    # applies(params) keeps other params from here when asked (WarpVectorEnv asks; CudaKernels
    # made directly does not).
    if (
        params.use_full_observation
        or params.num_other_agents_observed > MAX_WARP_OBSERVED
        or not params.use_grid
    ):
        observe_each_agent(state, params, obs, env)
        return
    observe_in_grid_by_block(state, params, obs, env)
    cuda.syncthreads()
    agent = np.uint32(cuda.threadIdx.x)
    while agent < state.x.shape[1]:
        if state.nearest_hint[env, agent, 0] == SEARCH_AGAIN:
            observe_agent(state, params, obs, env, agent)
        agent = np.uint32(agent + cuda.blockDim.x)


def observation_size(params: TagContinuousParams) -> int:
    """``7 (N - 1) + 1`` (full) or ``7 k + 1`` (partial)."""
    others = params.num_agents - 1 if params.use_full_observation else params.num_other_agents_observed
    return 7 * others + 1


def groups(params: TagContinuousParams) -> tuple[AgentGroup, ...]:
    tagger_ids = tuple(int(agent) for agent in setup(params)["tagger_ids"])
    runner_ids = tuple(agent for agent in range(params.num_agents) if agent not in set(tagger_ids))
    size = observation_size(params)
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float32)
    action_space = gymnasium.spaces.MultiDiscrete(
        [params.num_acceleration_levels + 1, params.num_turn_levels + 1]
    )
    return (
        AgentGroup("tagger", tagger_ids, observation_space, action_space),
        AgentGroup("runner", runner_ids, observation_space, action_space),
    )


TAG_CONTINUOUS = EnvironmentDefinition(
    name="TagContinuous-v0",
    params_type=TagContinuousParams,
    state_fields=STATE_FIELDS,
    reset_environment=reset_environment,
    reset_agent=reset_agent,
    step_stages=(
        # Out-of-game agents move too: the reference stops them (heading and speed 0).
        # The neighbour grid is rebuilt along the way (partial observations): count, prefix sums,
        # file, sort. Tagging and collecting run for every agent so as to file and sort; they do
        # nothing for agents out of the game.
        AgentStage(move_and_count, all_agents=True),
        EnvironmentStage(advance_clock),
        AgentStage(file_and_tag, all_agents=True),
        AgentStage(sort_and_collect, all_agents=True),
    ),
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    is_agent_done=is_agent_done,
    groups=groups,
    max_episode_steps=lambda params: params.episode_length,
    kernel_params=kernel_params,
    finite_state_fields=("x", "y", "v", "theta", "accel"),
    # Wide games (threads take several agents): the k-nearest search spills at the default 64
    # registers (H100, 2,000 x 1,000, every step observed, env steps/s: 64 302K, 80 361K, 96 374K,
    # uncapped 359K).
    wide_max_registers=96,
    # On CUDA, partial observations of games of up to 128 agents are written by a thread per
    # observer (up to 10 others) or a warp per observer, in kernels capped at 64 registers (H100,
    # 2,000 x 110, k = 10, every step observed, replayed from a CUDA graph, env steps/s: 16.2M
    # before the fixed offsets of k = 10, 15.3M at 56 registers; a warp per observer at 56
    # registers 12.7M; observe_agent 4.36M); those of wider games searched in the grid by a thread
    # (up to 10 others) or a warp per observer, capped by the params (grid_block_registers: 96 for
    # the threads, 64 for the warps; 64 where the params are not known). In a CUDA graph these caps
    # are the observation's own launch's; the stages' kernel is capped at 48 (warpsci.backends.cuda).
    block_observation=(
        BlockObservation(observe_by_block, threads=WARP_THREADS, applies=observes_by_warps, max_registers=64),
        BlockObservation(
            observe_wide_by_block,
            threads=WARP_THREADS,
            applies=observes_in_grid_by_block,
            max_registers=64,
            registers_for=grid_block_registers,
            max_agents=MAX_WARP_GRID_AGENTS,
            shared_bytes=grid_block_shared_bytes,
        ),
    ),
    reference=(
        "salesforce/warp-drive @ bac017ebb481714bee8f6b0ec75a67d3a2e034d3: "
        "example_envs/tag_continuous/tag_continuous.py (TagContinuous), "
        "tag_continuous_step_pycuda.cu, tag_continuous_step_numba.py"
    ),
)
