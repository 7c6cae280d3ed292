"""MountainCar-v0: drive an underpowered car out of a valley by rocking it back and forth.

Dynamics, observation, reward, termination, time limit (200 steps) and initial-state distribution
(position uniform in [-0.6, -0.4], velocity 0) are those of Gymnasium's ``MountainCar-v0``
(Moore, 1990). The hill's height is ``sin(3 x)``; one step is

    velocity += (action - 1) * force - cos(3 * position) * gravity, clipped to [-max_speed, max_speed]
    position += velocity, clipped to [min_position, max_position]

and the left wall is inelastic (hitting it sets a negative velocity to 0). State is single precision;
the step is computed in double precision, as Gymnasium does.

Observation: ``[position (m), velocity (m/step)]``.
Actions: ``0`` accelerates left, ``1`` does not accelerate, ``2`` accelerates right. Reward: -1 for
every step. The episode terminates when ``position >= goal_position`` and
``velocity >= goal_velocity``.
"""

from __future__ import annotations

import dataclasses
import math

import gymnasium
import numpy as np

from warpsci.environment import EnvironmentDefinition, StateField, agent_function
from warpsci.random import uniform_range


@dataclasses.dataclass(frozen=True)
class MountainCarParams:
    """Constants of MountainCar; the defaults are Gymnasium's."""

    min_position: float = -1.2  #: left wall, m
    max_position: float = 0.6  #: right end of the track, m
    max_speed: float = 0.07  #: |velocity| is clipped to this, m/step
    goal_position: float = 0.5  #: position at or beyond which the episode may terminate, m
    goal_velocity: float = 0.0  #: velocity the car must have (at least) at the goal (Gymnasium's kwarg)
    force: float = 0.001  #: velocity change of a push per step
    gravity: float = 0.0025  #: scale of the slope's pull per step
    reset_low: float = -0.6  #: initial position is uniform in [reset_low, reset_high], m
    reset_high: float = -0.4
    max_episode_steps: int = 200  #: time limit (truncation)


STATE_FIELDS = (
    StateField("position", np.float32),
    StateField("velocity", np.float32),
)


@agent_function
def reset_agent(state, params, env, agent, key):
    state.position[env, agent] = uniform_range(key, 0, params.reset_low, params.reset_high)
    state.velocity[env, agent] = 0.0


@agent_function
def move_car(state, params, env, agent, engine):
    """Advance the car one step with ``engine`` (velocity added by the engine); shared with
    MountainCarContinuous-v0, whose params carry the same names."""
    position = np.float64(state.position[env, agent])
    velocity = np.float64(state.velocity[env, agent])
    min_position = np.float64(params.min_position)
    max_position = np.float64(params.max_position)
    max_speed = np.float64(params.max_speed)

    velocity += engine - np.float64(params.gravity) * math.cos(3.0 * position)
    velocity = min(max(velocity, -max_speed), max_speed)
    position += velocity
    position = min(max(position, min_position), max_position)
    if position == min_position and velocity < 0.0:
        velocity = 0.0

    state.position[env, agent] = position
    state.velocity[env, agent] = velocity


@agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    move_car(state, params, env, agent, np.float64(actions[env, agent] - 1) * np.float64(params.force))
    return -1.0


@agent_function
def observe_agent(state, params, obs, env, agent):
    obs[env, agent, 0] = state.position[env, agent]
    obs[env, agent, 1] = state.velocity[env, agent]


@agent_function
def is_terminal(state, params, env):
    return state.position[env, 0] >= params.goal_position and state.velocity[env, 0] >= params.goal_velocity


def observation_space(params: MountainCarParams) -> gymnasium.spaces.Box:
    low = np.array([params.min_position, -params.max_speed], dtype=np.float32)
    high = np.array([params.max_position, params.max_speed], dtype=np.float32)
    return gymnasium.spaces.Box(low, high, dtype=np.float32)


MOUNTAIN_CAR = EnvironmentDefinition(
    name="MountainCar-v0",
    params_type=MountainCarParams,
    state_fields=STATE_FIELDS,
    reset_agent=reset_agent,
    step_agent=step_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=observation_space,
    action_space=lambda params: gymnasium.spaces.Discrete(3),
    max_episode_steps=lambda params: params.max_episode_steps,
    reference="gymnasium.envs.classic_control.MountainCarEnv (MountainCar-v0)",
)
