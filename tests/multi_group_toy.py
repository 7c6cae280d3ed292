"""A five-agent, two-group toy environment that exercises every feature of environment model v2.

Agents and groups (non-contiguous indices)::

    group "even": agents 0, 2, 4   Discrete(3) actions   observation (counter, last_action)
    group "odd":  agents 1, 3      Discrete(4) actions   observation (counter, score, clock)

State: per agent ``counter`` (int32), ``last_action`` (int32), ``score`` (float32); per environment
``clock`` (int32) and ``pot`` (int32).

Kernel params (``kernel_params``): ``weights``, one float32 weight per agent (default
``1 + 0.5 * agent``: 1, 1.5, 2, 2.5, 3; give ``weights=`` five values to change them), ``leave_above``,
``goal`` and ``bonus``. ``bonus`` is a replica param (``replica_params``): one value per environment
replica, read as ``params.bonus[env]``.

Reset: ``reset_environment`` sets ``clock = pot = 0``; ``reset_agent`` draws ``counter`` uniformly
from {0, 1, 2} with its ``key`` and sets ``last_action = -1`` and ``score = weights[agent] * counter``.

Step, three stages, in order (an agent that left the game skips the agent stages):

1. ``AgentStage`` act: ``counter += action``, ``last_action = action``,
   ``score = weights[agent] * counter``; reward 0.
2. ``EnvironmentStage`` settle: ``clock += 1``; ``pot = sum(counter)`` over all five agents (those
   that left included, with their frozen counters); every agent of the "even" group gets
   ``bonus[env] * pot`` added to its reward.
3. ``AgentStage`` compare: reward ``score[agent] - score[(agent + 1) % 5]``, the neighbour's score
   from stage 1 (agent 4 reads agent 0; a neighbour that left keeps its last score).

So the reward of an agent in the game is
``(bonus * pot if agent is even else 0) + score[agent] - score[(agent + 1) % 5]``, and 0 for an
agent that left before the step.

Termination: the episode terminates when ``pot >= goal`` (default 30); it is truncated after
``max_episode_steps`` (default 8) steps. ``is_agent_done``: an "odd" agent leaves the game when its
``counter > leave_above`` (default 5) after a step; "even" agents never leave.

Action masks (width 4, the largest ``n``): an "even" agent may not repeat its last action
(``mask[i] = i != last_action`` for its 3 actions; all allowed after a reset, where
``last_action = -1``); "odd" agents may take any of their 4 actions. Masks are advice only: an
action against the mask is applied like any other.
"""

import dataclasses

import gymnasium
import numpy as np

import warpsci
from warpsci.environment import AgentGroup, AgentStage, EnvironmentStage
from warpsci.random import integer

NUM_AGENTS = 5
EVEN_AGENTS = (0, 2, 4)
ODD_AGENTS = (1, 3)


@dataclasses.dataclass(frozen=True)
class MultiGroupToyParams:
    weights: tuple[float, ...] | None = None  # None: 1 + 0.5 * agent
    leave_above: int = 5
    goal: int = 30
    bonus: float = 0.5
    max_episode_steps: int = 8


def default_weights() -> np.ndarray:
    """The default per-agent weights, ``1 + 0.5 * agent``."""
    return (1.0 + 0.5 * np.arange(NUM_AGENTS)).astype(np.float32)


def kernel_params(params: MultiGroupToyParams) -> dict:
    weights = default_weights() if params.weights is None else np.asarray(params.weights, np.float32)
    if weights.shape != (NUM_AGENTS,):
        raise ValueError(f"weights must hold {NUM_AGENTS} values, got {params.weights!r}")
    return {
        "weights": weights,
        "leave_above": params.leave_above,
        "goal": params.goal,
        "bonus": params.bonus,
    }


@warpsci.agent_function
def reset_environment(state, params, env, key):
    state.clock[env] = 0
    state.pot[env] = 0


@warpsci.agent_function
def reset_agent(state, params, env, agent, key):
    counter = integer(key, 0, 3)
    state.counter[env, agent] = counter
    state.last_action[env, agent] = -1
    state.score[env, agent] = params.weights[agent] * counter


@warpsci.agent_function
def act(state, params, actions, env, agent, key):
    action = actions[env, agent]
    state.counter[env, agent] += action
    state.last_action[env, agent] = action
    state.score[env, agent] = params.weights[agent] * state.counter[env, agent]
    return 0.0


@warpsci.agent_function
def settle(state, params, actions, rewards, env, key):
    state.clock[env] += 1
    pot = 0
    for agent in range(state.counter.shape[1]):
        pot += state.counter[env, agent]
    state.pot[env] = pot
    for agent in range(0, state.counter.shape[1], 2):
        rewards[env, agent] += params.bonus[env] * pot


@warpsci.agent_function
def compare(state, params, actions, env, agent, key):
    neighbour = (agent + 1) % state.score.shape[1]
    return state.score[env, agent] - state.score[env, neighbour]


@warpsci.agent_function
def observe_agent(state, params, obs, env, agent):
    obs[env, agent, 0] = state.counter[env, agent]
    if agent % 2 == 0:
        obs[env, agent, 1] = state.last_action[env, agent]
    else:
        obs[env, agent, 1] = state.score[env, agent]
        obs[env, agent, 2] = state.clock[env]


@warpsci.agent_function
def is_terminal(state, params, env):
    return state.pot[env] >= params.goal


@warpsci.agent_function
def is_agent_done(state, params, env, agent):
    return agent % 2 == 1 and state.counter[env, agent] > params.leave_above


@warpsci.agent_function
def action_mask(state, params, mask, env, agent):
    if agent % 2 == 0:
        for action in range(3):
            mask[env, agent, action] = action != state.last_action[env, agent]
    else:
        for action in range(4):
            mask[env, agent, action] = True


def groups(params: MultiGroupToyParams) -> tuple[AgentGroup, ...]:
    return (
        AgentGroup(
            "even",
            EVEN_AGENTS,
            gymnasium.spaces.Box(-1.0, np.inf, (2,), np.float32),
            gymnasium.spaces.Discrete(3),
        ),
        AgentGroup(
            "odd",
            ODD_AGENTS,
            gymnasium.spaces.Box(0.0, np.inf, (3,), np.float32),
            gymnasium.spaces.Discrete(4),
        ),
    )


TOY_GROUPS = warpsci.EnvironmentDefinition(
    name="MultiGroupToy-v0",
    params_type=MultiGroupToyParams,
    state_fields=(
        warpsci.StateField("counter", np.int32),
        warpsci.StateField("last_action", np.int32),
        warpsci.StateField("score", np.float32),
        warpsci.StateField("clock", np.int32, per_agent=False),
        warpsci.StateField("pot", np.int32, per_agent=False),
    ),
    reset_agent=reset_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    max_episode_steps=lambda params: params.max_episode_steps,
    step_stages=(AgentStage(act), EnvironmentStage(settle), AgentStage(compare)),
    groups=groups,
    reset_environment=reset_environment,
    is_agent_done=is_agent_done,
    action_mask=action_mask,
    kernel_params=kernel_params,
    replica_params=("bonus",),
)
