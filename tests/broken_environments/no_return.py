"""``step_agent`` that moves the agent but returns no reward."""

import dataclasses

import warpsci
from examples.custom_environment import CORRIDOR


@warpsci.agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    move = 1 if actions[env, agent] == 1 else -1
    state.position[env, agent] = max(0, state.position[env, agent] + move)


CORRIDOR = dataclasses.replace(CORRIDOR, name="NoReturnCorridor-v0", step_agent=step_agent)
