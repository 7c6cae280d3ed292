"""One-step toy environments for the action kinds the built-in suite lacks or tests slowly.

``Target-v0`` (Box action): the observation is a target in [-1, 1]; the reward is
``-(clip(a, -1, 1) - target)^2``. ``PickPair-v0`` (MultiDiscrete([3, 4]) action): the observation
encodes two targets ``i < 3`` and ``j < 4``; the reward counts the components chosen right. Every
episode is one step long (terminated), so a learned policy is judged by its mean reward.
"""

import dataclasses

import gymnasium
import numpy as np

import warpsci
from warpsci.random import integer, uniform_range


@dataclasses.dataclass(frozen=True)
class ToyParams:
    max_episode_steps: int = 1


def _terminal(state, params, env):
    return True


def _observe_target(state, params, obs, env, agent):
    obs[env, agent, 0] = state.target[env, agent]


def _reset_target(state, params, env, agent, key):
    state.target[env, agent] = uniform_range(key, 0, -1.0, 1.0)


def _step_target(state, params, actions, env, agent, phase, key):
    action = min(max(actions[env, agent, 0], -1.0), 1.0)
    error = action - state.target[env, agent]
    return -error * error


TARGET = warpsci.EnvironmentDefinition(
    name="Target-v0",
    params_type=ToyParams,
    state_fields=(warpsci.StateField("target", np.float32),),
    reset_agent=warpsci.agent_function(_reset_target),
    step_agent=warpsci.agent_function(_step_target),
    observe_agent=warpsci.agent_function(_observe_target),
    is_terminal=warpsci.agent_function(_terminal),
    observation_space=lambda params: gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32),
    action_space=lambda params: gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32),
    max_episode_steps=lambda params: params.max_episode_steps,
)


def _reset_pair(state, params, env, agent, key):
    state.pair[env, agent, 0] = integer(key, 0, 3)
    state.pair[env, agent, 1] = integer(key, 1, 4)


def _observe_pair(state, params, obs, env, agent):
    obs[env, agent, 0] = state.pair[env, agent, 0] / 2.0
    obs[env, agent, 1] = state.pair[env, agent, 1] / 3.0


def _step_pair(state, params, actions, env, agent, phase, key):
    reward = 0.0
    for component in range(2):
        if actions[env, agent, component] == state.pair[env, agent, component]:
            reward += 1.0
    return reward


PICK_PAIR = warpsci.EnvironmentDefinition(
    name="PickPair-v0",
    params_type=ToyParams,
    state_fields=(warpsci.StateField("pair", np.int32, shape=(2,)),),
    reset_agent=warpsci.agent_function(_reset_pair),
    step_agent=warpsci.agent_function(_step_pair),
    observe_agent=warpsci.agent_function(_observe_pair),
    is_terminal=warpsci.agent_function(_terminal),
    observation_space=lambda params: gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32),
    action_space=lambda params: gymnasium.spaces.MultiDiscrete([3, 4]),
    max_episode_steps=lambda params: params.max_episode_steps,
)

for _definition in (TARGET, PICK_PAIR):
    if _definition.name not in warpsci.registered_ids():
        warpsci.register(_definition)
