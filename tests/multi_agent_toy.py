"""A two-phase, three-agent toy environment that exercises barriers and agents reading each other.

Phase 0: each agent adds its action (0, 1 or 2) to its own counter. Phase 1: each agent's reward is
the sum of the other agents' counters, which it can only read correctly after every agent finished
phase 0. The episode ends when agent 0's counter exceeds ``limit``.
"""

import dataclasses

import gymnasium
import numpy as np

import warpsci
from warpsci.random import integer


@dataclasses.dataclass(frozen=True)
class ToyParams:
    num_agents: int = 3
    limit: int = 6
    max_episode_steps: int = 7


@warpsci.agent_function
def reset_agent(state, params, env, agent, key):
    state.counter[env, agent] = integer(key, 0, 3)


@warpsci.agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    if phase == 0:
        state.counter[env, agent] += actions[env, agent]
        return 0.0
    total = 0.0
    for other in range(state.counter.shape[1]):
        if other != agent:
            total += state.counter[env, other]
    return total


@warpsci.agent_function
def observe_agent(state, params, obs, env, agent):
    obs[env, agent, 0] = state.counter[env, agent]


@warpsci.agent_function
def is_terminal(state, params, env):
    return state.counter[env, 0] > params.limit


TOY = warpsci.EnvironmentDefinition(
    name="MultiAgentToy-v0",
    params_type=ToyParams,
    state_fields=(warpsci.StateField("counter", np.int32),),
    reset_agent=reset_agent,
    step_agent=step_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=lambda params: gymnasium.spaces.Box(0, np.inf, (1,), np.float32),
    action_space=lambda params: gymnasium.spaces.Discrete(3),
    max_episode_steps=lambda params: params.max_episode_steps,
    num_agents=lambda params: params.num_agents,
    num_step_phases=2,
)
