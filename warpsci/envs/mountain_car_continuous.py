"""MountainCarContinuous-v0: MountainCar with a continuous force and an energy penalty.

Dynamics, observation, reward, termination, time limit (999 steps) and initial-state distribution
(position uniform in [-0.6, -0.4], velocity 0) are those of Gymnasium's ``MountainCarContinuous-v0``
(Moore, 1990). One step is

    force = action clipped to [min_action, max_action]
    velocity += force * power - gravity * cos(3 * position), clipped to [-max_speed, max_speed]
    position += velocity, clipped to [min_position, max_position]

and the left wall is inelastic (hitting it sets a negative velocity to 0). State is single precision;
the step is computed in double precision.

Observation: ``[position (m), velocity (m/step)]``.
Action: a ``Box(-1, 1, (1,))`` force; values outside the box are clipped for the dynamics.
Reward: ``-0.1 * action**2`` for every step, computed, as in Gymnasium, from the action *before*
clipping, plus 100 on the step that reaches the goal (``position >= goal_position`` and
``velocity >= goal_velocity``), which terminates the episode.
"""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np

from warpsci.environment import EnvironmentDefinition, agent_function
from warpsci.envs.mountain_car import (
    STATE_FIELDS,
    is_terminal,
    move_car,
    observation_space,
    observe_agent,
    reset_agent,
)


@dataclasses.dataclass(frozen=True)
class MountainCarContinuousParams:
    """Constants of MountainCarContinuous; the defaults are Gymnasium's."""

    min_action: float = -1.0  #: the force is clipped to [min_action, max_action]
    max_action: float = 1.0
    min_position: float = -1.2  #: left wall, m
    max_position: float = 0.6  #: right end of the track, m
    max_speed: float = 0.07  #: |velocity| is clipped to this, m/step
    goal_position: float = 0.45  #: position at or beyond which the episode may terminate, m
    goal_velocity: float = 0.0  #: velocity the car must have (at least) at the goal (Gymnasium's kwarg)
    power: float = 0.0015  #: velocity change per step per unit of force
    gravity: float = 0.0025  #: scale of the slope's pull per step
    goal_reward: float = 100.0  #: reward added on the step that reaches the goal
    action_cost: float = 0.1  #: reward -= action_cost * action**2 (unclipped action)
    reset_low: float = -0.6  #: initial position is uniform in [reset_low, reset_high], m
    reset_high: float = -0.4
    max_episode_steps: int = 999  #: time limit (truncation)


@agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    action = np.float64(actions[env, agent, 0])
    force = min(max(action, np.float64(params.min_action)), np.float64(params.max_action))
    move_car(state, params, env, agent, force * np.float64(params.power))

    # The goal bonus is decided on the stored (single-precision) state, as is_terminal decides.
    reward = 0.0
    if (
        state.position[env, agent] >= params.goal_position
        and state.velocity[env, agent] >= params.goal_velocity
    ):
        reward = np.float64(params.goal_reward)
    return reward - action * action * np.float64(params.action_cost)


def action_space(params: MountainCarContinuousParams) -> gymnasium.spaces.Box:
    return gymnasium.spaces.Box(params.min_action, params.max_action, shape=(1,), dtype=np.float32)


MOUNTAIN_CAR_CONTINUOUS = EnvironmentDefinition(
    name="MountainCarContinuous-v0",
    params_type=MountainCarContinuousParams,
    state_fields=STATE_FIELDS,
    reset_agent=reset_agent,
    step_agent=step_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=observation_space,
    action_space=action_space,
    max_episode_steps=lambda params: params.max_episode_steps,
    reference="gymnasium.envs.classic_control.Continuous_MountainCarEnv (MountainCarContinuous-v0)",
)
