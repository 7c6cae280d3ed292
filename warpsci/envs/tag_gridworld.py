"""TagGridworld-v0: taggers chase one runner on a square lattice (WarpDrive's ``TagGridWorld``).

``num_taggers`` taggers (agents ``0 .. n_t - 1``, group ``"tagger"``) and one runner (agent
``N - 1``, group ``"runner"``) live on the cells ``{0, ..., L}^2`` (``L = grid_length``: ``L + 1``
cells per axis). Every step all agents move at once by at most one cell (action ``0`` stay, ``1``
+x, ``2`` -x, ``3`` +y, ``4`` -y), clipped to ``[0, L]``; a clipped move costs ``wall_hit_penalty``.
If a tagger ends the step on the runner's cell the runner is tagged and the episode terminates:
every tagger earns ``tag_reward_for_tagger`` and the runner pays ``tag_penalty_for_runner``.
Otherwise every tagger pays ``step_cost_for_tagger`` and the runner earns it. Episodes are
truncated after ``episode_length`` steps (the time limit of the framework; when the runner is tagged
at the last step both flags are set, as Gymnasium's ``TimeLimit`` does).

Observations (float32, every entry in ``[0, 1]``), positions divided by ``L``, time ``t / T``:

* full (``use_full_observation``, default), ``4N + 1`` entries: every agent's x, every agent's y,
  every agent's type (0 tagger, 1 runner), the one-hot of the observer, ``t / T``;
* partial, 6 entries: own x, y; the runner's x, y (taggers) or the nearest tagger's x, y (runner:
  least squared distance, ties to the lowest id); own type; ``t / T``.

Start: taggers at ``(L // 2, L // 2)`` and the runner at ``(0, 0)``, or the explicit
``starting_location_x`` / ``_y``. With ``use_reset_pool`` (WarpDrive's
``CUDATagGridWorldWithResetPool``) every reset picks one of ``P = 5`` start tables drawn on the host
from ``np.random.RandomState(seed)`` (``seed=None``: fresh OS entropy, so two vector environments get
different pools): first the x pool, then the y pool, each one ``randint(1, L, size=(P, N))`` call
(taggers strictly inside the grid) with the runner's column then set to 0. A reset draws one pool
row for x and, independently, one for y, per environment (shared by all its agents) from the
framework's counter-based generator. Unlike the reference, whose first (host) reset uses the
default centre/corner start and whose first observation after a pool reset describes that default
start, every reset here, the first included, uses a pool entry, and the observation always
describes the actual reset state.

Differences from the reference worth knowing: the reference's time limit tests ``t >= T`` and has one
``done`` flag; here ``terminated`` is "tagged" and ``truncated`` is "``t = T``" (both may be set).
"""

from __future__ import annotations

import dataclasses
import numbers

import gymnasium
import numpy as np

from warpsci.atomics import atomic_min
from warpsci.environment import (
    AgentGroup,
    AgentStage,
    EnvironmentDefinition,
    EnvironmentStage,
    StateField,
    agent_function,
)
from warpsci.envs.param_checks import check_int
from warpsci.random import integer

#: Number of start tables of the reset pool (hard-coded in the reference).
RESET_POOL_SIZE = 5
#: Number of actions: stay, +x, -x, +y, -y.
NUM_ACTIONS = 5
#: Largest ``grid_length`` and ``num_taggers``: a squared distance times the agent count, plus an
#: agent id, must fit an int64 (the runner's nearest tagger is an atomic min over such keys).
MAX_GRID_LENGTH = 2**20
MAX_TAGGERS = 2**21 - 2
#: "No tagger yet" for the nearest-tagger key.
NO_KEY = np.int64(2**63 - 1)


@dataclasses.dataclass(frozen=True)
class TagGridworldParams:
    """Constants of the game; the defaults are those of WarpDrive's ``TagGridWorld`` class (its
    shipped ``tag_gridworld.yaml`` uses ``num_taggers=4, grid_length=100, tag_penalty_for_runner=5.0,
    seed=20``)."""

    num_taggers: int = 10  #: taggers (agents 0 .. num_taggers - 1); the runner is agent num_taggers
    grid_length: int = 10  #: L: coordinates lie in 0 .. L (L + 1 cells per axis)
    episode_length: int = 100  #: T: time limit (truncation), also the time feature's scale
    starting_location_x: tuple[int, ...] | None = None  #: N start x's, or None: centre/corner start
    starting_location_y: tuple[int, ...] | None = None  #: N start y's (given with the x's or not at all)
    seed: int | None = None  #: seed of the reset pool's tables (None: OS entropy)
    wall_hit_penalty: float = 0.1  #: subtracted from the reward of an agent whose move was clipped
    tag_reward_for_tagger: float = 10.0  #: every tagger's reward in the step the runner is tagged
    tag_penalty_for_runner: float = 2.0  #: subtracted from the runner's reward when it is tagged
    step_cost_for_tagger: float = 0.01  #: taggers pay it, the runner earns it, each untagged step
    use_full_observation: bool = True  #: 4N + 1 entries (every agent) or 6 (partial)
    use_reset_pool: bool = False  #: resets pick start tables from a pool of 5 (needs L >= 2)

    def __post_init__(self) -> None:
        check_int("num_taggers", self.num_taggers, 1, MAX_TAGGERS)
        check_int("grid_length", self.grid_length, 1, MAX_GRID_LENGTH)
        check_int("episode_length", self.episode_length, 1)
        if self.seed is not None:
            check_int("seed", self.seed, 0)
            if self.seed >= 2**32:
                raise ValueError(f"seed must be below 2**32 (numpy's RandomState), got {self.seed}")
        if self.use_reset_pool and self.grid_length < 2:
            raise ValueError(
                f"use_reset_pool needs grid_length >= 2 (taggers start in 1 .. L-1), got {self.grid_length}"
            )
        given_x, given_y = self.starting_location_x is not None, self.starting_location_y is not None
        if given_x != given_y:
            raise ValueError(
                "starting_location_x and starting_location_y must be given both or neither, "
                f"got x={self.starting_location_x!r}, y={self.starting_location_y!r}"
            )
        if given_x:
            for name in ("starting_location_x", "starting_location_y"):
                start = _start_tuple(name, getattr(self, name), self.num_agents, self.grid_length)
                object.__setattr__(self, name, start)

    @property
    def num_agents(self) -> int:
        """N: the taggers and the runner."""
        return self.num_taggers + 1


def _start_tuple(name: str, value: object, num_agents: int, grid_length: int) -> tuple[int, ...]:
    """``value`` as a tuple of ``num_agents`` ints in ``[0, grid_length]``, or a ValueError."""
    try:
        entries = list(value)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"{name} must be a sequence of {num_agents} integers, got {value!r}") from None
    if len(entries) != num_agents:
        raise ValueError(
            f"{name} must hold num_taggers + 1 = {num_agents} entries (one per agent), got {len(entries)}"
        )
    result = []
    for entry in entries:
        integral = isinstance(entry, numbers.Integral) and not isinstance(entry, bool)
        if not integral or not 0 <= entry <= grid_length:
            accepted = f"integers in [0, grid_length={grid_length}]"
            raise ValueError(f"{name} entries must be {accepted}, got {entry!r}")
        result.append(int(entry))
    return tuple(result)


def start_positions(params: TagGridworldParams) -> tuple[np.ndarray, np.ndarray]:
    """The default-reset start ``(x, y)``, int32 arrays of N: explicit, or every tagger at
    ``(L // 2, L // 2)`` and the runner at ``(0, 0)``."""
    if params.starting_location_x is not None:
        return (
            np.asarray(params.starting_location_x, np.int32),
            np.asarray(params.starting_location_y, np.int32),
        )
    centre = params.grid_length // 2
    start = np.full(params.num_agents, centre, np.int32)
    start[-1] = 0
    return start, start.copy()


def reset_pool(params: TagGridworldParams) -> tuple[np.ndarray, np.ndarray]:
    """The reset pool ``(pool_x, pool_y)``, two ``(5, N)`` int32 arrays: from
    ``np.random.RandomState(seed)``, x then y, each ``randint(1, L, size=(5, N))`` (uniform in
    ``1 .. L-1``) with the runner's column set to 0."""
    rng = np.random.RandomState(params.seed)
    pools = []
    for _ in range(2):
        pool = rng.randint(1, params.grid_length, size=(RESET_POOL_SIZE, params.num_agents)).astype(np.int32)
        pool[:, -1] = 0
        pools.append(pool)
    return pools[0], pools[1]


def kernel_params(params: TagGridworldParams) -> dict:
    """What the kernels see: the numbers, the start tables (``start_x``, ``start_y``) and the pool
    (``pool_x``, ``pool_y``; without ``use_reset_pool`` five copies of the start, never read)."""
    start_x, start_y = start_positions(params)
    if params.use_reset_pool:
        pool_x, pool_y = reset_pool(params)
    else:
        pool_x = np.tile(start_x, (RESET_POOL_SIZE, 1))
        pool_y = np.tile(start_y, (RESET_POOL_SIZE, 1))
    return {
        "num_taggers": params.num_taggers,
        "grid_length": params.grid_length,
        "episode_length": params.episode_length,
        "wall_hit_penalty": float(params.wall_hit_penalty),
        "tag_reward_for_tagger": float(params.tag_reward_for_tagger),
        "tag_penalty_for_runner": float(params.tag_penalty_for_runner),
        "step_cost_for_tagger": float(params.step_cost_for_tagger),
        "use_full_observation": bool(params.use_full_observation),
        "use_reset_pool": bool(params.use_reset_pool),
        "start_x": start_x,
        "start_y": start_y,
        "pool_x": pool_x,
        "pool_y": pool_y,
    }


STATE_FIELDS = (
    StateField("x", np.int32),
    StateField("y", np.int32),
    StateField("t", np.int32, per_agent=False),  # steps taken in the episode
    StateField("tagged", np.int32, per_agent=False),  # 1 once a tagger shares the runner's cell
    # Partial observations: min over taggers of squared distance to the runner * N + tagger id.
    StateField("nearest_key", np.int64, per_agent=False),
    StateField("pool_index_x", np.int32, per_agent=False),  # pool row of this episode's start x
    StateField("pool_index_y", np.int32, per_agent=False),  # pool row of this episode's start y
)


@agent_function
def offer_nearest(state, env, tagger, x, y, runner_x, runner_y):
    """Take part in the atomic min that finds the tagger nearest the runner (ties: lowest id)."""
    dx = np.int64(x) - np.int64(runner_x)
    dy = np.int64(y) - np.int64(runner_y)
    num_agents = np.int64(state.x.shape[1])
    atomic_min(state.nearest_key, env, (dx * dx + dy * dy) * num_agents + np.int64(tagger))


@agent_function
def reset_environment(state, params, env, key):
    state.t[env] = 0
    state.tagged[env] = 0
    state.nearest_key[env] = NO_KEY
    if params.use_reset_pool:
        rows = params.pool_x.shape[0]
        state.pool_index_x[env] = integer(key, 0, rows)
        state.pool_index_y[env] = integer(key, 1, rows)
    else:
        state.pool_index_x[env] = 0
        state.pool_index_y[env] = 0


@agent_function
def reset_agent(state, params, env, agent, key):
    runner = state.x.shape[1] - 1
    if params.use_reset_pool:
        row_x, row_y = state.pool_index_x[env], state.pool_index_y[env]
        x, y = params.pool_x[row_x, agent], params.pool_y[row_y, agent]
        runner_x, runner_y = params.pool_x[row_x, runner], params.pool_y[row_y, runner]
    else:
        x, y = params.start_x[agent], params.start_y[agent]
        runner_x, runner_y = params.start_x[runner], params.start_y[runner]
    state.x[env, agent] = x
    state.y[env, agent] = y
    # The runner's start comes from the tables too, so no barrier is needed before comparing.
    if not params.use_full_observation and np.int64(agent) != runner:
        offer_nearest(state, env, agent, x, y, runner_x, runner_y)


@agent_function
def advance_clock(state, params, actions, rewards, env, key):
    """The clock, after the moves; clears the tag and the nearest-tagger search for this step."""
    state.t[env] += 1
    state.tagged[env] = 0
    state.nearest_key[env] = NO_KEY


@agent_function
def move_agent(state, params, actions, env, agent, key):
    """Move by the action's displacement, clipped to ``[0, L]``; a clipped move costs the penalty."""
    action = actions[env, agent]
    x = np.int64(state.x[env, agent])
    y = np.int64(state.y[env, agent])
    if action == 1:
        x += 1
    elif action == 2:
        x -= 1
    elif action == 3:
        y += 1
    elif action == 4:
        y -= 1
    clipped_x = min(max(x, 0), params.grid_length)
    clipped_y = min(max(y, 0), params.grid_length)
    state.x[env, agent] = clipped_x
    state.y[env, agent] = clipped_y
    if clipped_x != x or clipped_y != y:
        return -params.wall_hit_penalty
    return np.float32(0.0)


@agent_function
def find_runner(state, params, actions, env, agent, key):
    """Each tagger, in parallel after every move: on the runner's cell, the runner is tagged; with
    partial observations, offer the distance for the runner's nearest tagger. No reward."""
    runner = state.x.shape[1] - 1
    if np.int64(agent) != runner:
        x, y = state.x[env, agent], state.y[env, agent]
        runner_x, runner_y = state.x[env, runner], state.y[env, runner]
        if x == runner_x and y == runner_y:
            state.tagged[env] = 1  # every writer writes the same value
        if not params.use_full_observation:
            offer_nearest(state, env, agent, x, y, runner_x, runner_y)
    return np.float32(0.0)


@agent_function
def reward_agent(state, params, actions, env, agent, key):
    is_runner = np.int64(agent) == state.x.shape[1] - 1
    if state.tagged[env] != 0:
        if is_runner:
            return -params.tag_penalty_for_runner
        return params.tag_reward_for_tagger
    if is_runner:
        return params.step_cost_for_tagger
    return -params.step_cost_for_tagger


@agent_function
def observe_agent(state, params, obs, env, agent):
    num_agents = state.x.shape[1]
    runner = num_agents - 1
    scale = np.float32(params.grid_length)
    time = np.float32(state.t[env]) / np.float32(params.episode_length)
    if params.use_full_observation:
        for k in range(num_agents):
            obs[env, agent, k] = np.float32(state.x[env, k]) / scale
            obs[env, agent, num_agents + k] = np.float32(state.y[env, k]) / scale
            obs[env, agent, 2 * num_agents + k] = np.float32(1.0) if k == runner else np.float32(0.0)
            obs[env, agent, 3 * num_agents + k] = np.float32(1.0) if k == np.int64(agent) else np.float32(0.0)
        obs[env, agent, 4 * num_agents] = time
        return
    own_x = state.x[env, agent]
    own_y = state.y[env, agent]
    if np.int64(agent) == runner:
        other = state.nearest_key[env] % np.int64(num_agents)
        agent_type = np.float32(1.0)
    else:
        other = runner
        agent_type = np.float32(0.0)
    obs[env, agent, 0] = np.float32(own_x) / scale
    obs[env, agent, 1] = np.float32(own_y) / scale
    obs[env, agent, 2] = np.float32(state.x[env, other]) / scale
    obs[env, agent, 3] = np.float32(state.y[env, other]) / scale
    obs[env, agent, 4] = agent_type
    obs[env, agent, 5] = time


@agent_function
def is_terminal(state, params, env):
    return state.tagged[env] != 0


def observation_size(params: TagGridworldParams) -> int:
    """Entries of one agent's observation: ``4N + 1`` (full) or 6 (partial)."""
    return 4 * params.num_agents + 1 if params.use_full_observation else 6


def groups(params: TagGridworldParams) -> tuple[AgentGroup, ...]:
    observation_space = gymnasium.spaces.Box(0.0, 1.0, (observation_size(params),), np.float32)
    action_space = gymnasium.spaces.Discrete(NUM_ACTIONS)
    return (
        AgentGroup("tagger", tuple(range(params.num_taggers)), observation_space, action_space),
        AgentGroup("runner", (params.num_taggers,), observation_space, action_space),
    )


TAG_GRIDWORLD = EnvironmentDefinition(
    name="TagGridworld-v0",
    params_type=TagGridworldParams,
    state_fields=STATE_FIELDS,
    reset_environment=reset_environment,
    reset_agent=reset_agent,
    step_stages=(
        AgentStage(move_agent),
        EnvironmentStage(advance_clock),
        AgentStage(find_runner),
        AgentStage(reward_agent),
    ),
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    groups=groups,
    max_episode_steps=lambda params: params.episode_length,
    kernel_params=kernel_params,
    reference=(
        "salesforce/warp-drive @ bac017ebb481714bee8f6b0ec75a67d3a2e034d3: "
        "example_envs/tag_gridworld/tag_gridworld.py (TagGridWorld, CUDATagGridWorld, "
        "CUDATagGridWorldWithResetPool), tag_gridworld_step_pycuda.cu, tag_gridworld_step_numba.py"
    ),
)
