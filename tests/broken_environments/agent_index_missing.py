"""``step_agent`` that reads a per-agent field with the environment index alone."""

import dataclasses

import warpsci
from examples.custom_environment import CORRIDOR


@warpsci.agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    move = 1 if actions[env, agent] == 1 else -1
    state.position[env, agent] = max(0, state.position[env] + move)
    return 1.0 if state.position[env, agent] >= params.length - 1 else -0.01


CORRIDOR = dataclasses.replace(CORRIDOR, name="AgentIndexMissingCorridor-v0", step_agent=step_agent)
