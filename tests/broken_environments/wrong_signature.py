"""``is_terminal`` with an ``agent`` argument it is never given."""

import dataclasses

import warpsci
from examples.custom_environment import CORRIDOR


@warpsci.agent_function
def is_terminal(state, params, env, agent):
    return state.position[env, agent] >= params.length - 1


CORRIDOR = dataclasses.replace(CORRIDOR, name="WrongSignatureCorridor-v0", is_terminal=is_terminal)
