"""CartPole-v1: balance a pole on a cart by pushing the cart left or right.

Dynamics, observation, reward, termination thresholds, time limit (500 steps) and initial-state
distribution (every state variable uniform in [-0.05, 0.05]) are those of Gymnasium's
``CartPole-v1`` (Barto, Sutton and Anderson, 1983), Euler integration. State is single precision.

Observation: ``[x (m), x_dot (m/s), theta (rad), theta_dot (rad/s)]``.
Actions: ``0`` pushes the cart left, ``1`` pushes it right. Reward: 1 for every step, including the
step that terminates the episode.
"""

from __future__ import annotations

import dataclasses
import math

import gymnasium
import numpy as np

from warpsci.environment import EnvironmentDefinition, StateField, agent_function
from warpsci.random import uniform_range


@dataclasses.dataclass(frozen=True)
class CartPoleParams:
    """Physical constants of Cartpole; the defaults are Gymnasium's."""

    gravity: float = 9.8  #: m/s^2
    masscart: float = 1.0  #: kg
    masspole: float = 0.1  #: kg
    length: float = 0.5  #: half the pole's length, m
    force_mag: float = 10.0  #: N, magnitude of the push
    tau: float = 0.02  #: s between state updates
    theta_threshold_radians: float = 12 * 2 * math.pi / 360  #: |theta| above this terminates
    x_threshold: float = 2.4  #: |x| above this terminates, m
    reset_bound: float = 0.05  #: initial state variables are uniform in [-bound, bound]
    max_episode_steps: int = 500  #: time limit (truncation)


STATE_FIELDS = (
    StateField("x", np.float32),
    StateField("x_dot", np.float32),
    StateField("theta", np.float32),
    StateField("theta_dot", np.float32),
)


@agent_function
def reset_agent(state, params, env, agent, key):
    bound = params.reset_bound
    state.x[env, agent] = uniform_range(key, 0, -bound, bound)
    state.x_dot[env, agent] = uniform_range(key, 1, -bound, bound)
    state.theta[env, agent] = uniform_range(key, 2, -bound, bound)
    state.theta_dot[env, agent] = uniform_range(key, 3, -bound, bound)


@agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    x = state.x[env, agent]
    x_dot = state.x_dot[env, agent]
    theta = state.theta[env, agent]
    theta_dot = state.theta_dot[env, agent]

    force = params.force_mag if actions[env, agent] == 1 else -params.force_mag
    costheta = math.cos(theta)
    sintheta = math.sin(theta)
    total_mass = params.masspole + params.masscart
    polemass_length = params.masspole * params.length
    temp = (force + polemass_length * theta_dot * theta_dot * sintheta) / total_mass
    thetaacc = (params.gravity * sintheta - costheta * temp) / (
        params.length * (4.0 / 3.0 - params.masspole * costheta * costheta / total_mass)
    )
    xacc = temp - polemass_length * thetaacc * costheta / total_mass

    state.x[env, agent] = x + params.tau * x_dot
    state.x_dot[env, agent] = x_dot + params.tau * xacc
    state.theta[env, agent] = theta + params.tau * theta_dot
    state.theta_dot[env, agent] = theta_dot + params.tau * thetaacc
    return 1.0


@agent_function
def observe_agent(state, params, obs, env, agent):
    obs[env, agent, 0] = state.x[env, agent]
    obs[env, agent, 1] = state.x_dot[env, agent]
    obs[env, agent, 2] = state.theta[env, agent]
    obs[env, agent, 3] = state.theta_dot[env, agent]


@agent_function
def is_terminal(state, params, env):
    x = state.x[env, 0]
    theta = state.theta[env, 0]
    return (
        x < -params.x_threshold
        or x > params.x_threshold
        or theta < -params.theta_threshold_radians
        or theta > params.theta_threshold_radians
    )


def observation_space(params: CartPoleParams) -> gymnasium.spaces.Box:
    high = np.array(
        [params.x_threshold * 2, np.inf, params.theta_threshold_radians * 2, np.inf],
        dtype=np.float32,
    )
    return gymnasium.spaces.Box(-high, high, dtype=np.float32)


CARTPOLE = EnvironmentDefinition(
    name="CartPole-v1",
    params_type=CartPoleParams,
    state_fields=STATE_FIELDS,
    reset_agent=reset_agent,
    step_agent=step_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=observation_space,
    action_space=lambda params: gymnasium.spaces.Discrete(2),
    max_episode_steps=lambda params: params.max_episode_steps,
    reference="gymnasium.envs.classic_control.CartPoleEnv (CartPole-v1)",
)
