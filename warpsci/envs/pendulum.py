"""Pendulum-v1: swing a frictionless pendulum up and hold it upright with a limited torque.

Dynamics, observation, reward, time limit (200 steps, no termination) and initial-state
distribution (angle uniform in [-pi, pi], angular velocity uniform in [-1, 1]) are those of
Gymnasium's ``Pendulum-v1``. One step, with the torque ``u`` clipped to [-max_torque, max_torque]:

    thdot += (3 g / (2 l) * sin(th) + 3 / (m l^2) * u) * dt, clipped to [-max_speed, max_speed]
    th += thdot * dt   (semi-implicit Euler; th is not wrapped, as in Gymnasium)

State is single precision; the step is computed in double precision, as Gymnasium does.

Observation: ``[cos th, sin th, thdot (rad/s)]``, with ``th = 0`` upright.
Action: a ``Box(-max_torque, max_torque, (1,))`` torque (N m); values outside it are clipped.
Reward: ``-(normalize(th)**2 + 0.1 * thdot**2 + 0.001 * u**2)`` of the state before the step and the
clipped torque, where ``normalize`` maps the angle into [-pi, pi).
"""

from __future__ import annotations

import dataclasses
import math

import gymnasium
import numpy as np

from warpsci.environment import EnvironmentDefinition, StateField, agent_function
from warpsci.random import uniform_range


@dataclasses.dataclass(frozen=True)
class PendulumParams:
    """Constants of Pendulum; the defaults are Gymnasium's (``m`` and ``l`` are spelt out)."""

    max_speed: float = 8.0  #: |thdot| is clipped to this, rad/s
    max_torque: float = 2.0  #: the torque is clipped to [-max_torque, max_torque], N m
    dt: float = 0.05  #: s between state updates
    g: float = 10.0  #: gravitational acceleration, m/s^2 (Gymnasium's ``g`` kwarg)
    mass: float = 1.0  #: kg (Gymnasium's ``m``)
    length: float = 1.0  #: m (Gymnasium's ``l``)
    reset_max_angle: float = math.pi  #: initial th is uniform in [-reset_max_angle, reset_max_angle]
    reset_max_speed: float = 1.0  #: initial thdot is uniform in [-reset_max_speed, reset_max_speed]
    max_episode_steps: int = 200  #: time limit (truncation)


STATE_FIELDS = (
    StateField("th", np.float32),
    StateField("thdot", np.float32),
)


@agent_function
def reset_agent(state, params, env, agent, key):
    state.th[env, agent] = uniform_range(key, 0, -params.reset_max_angle, params.reset_max_angle)
    state.thdot[env, agent] = uniform_range(key, 1, -params.reset_max_speed, params.reset_max_speed)


@agent_function
def angle_normalize(x):
    """``x`` mapped into [-pi, pi) with Python's floored modulo, as Gymnasium's ``angle_normalize``."""
    return ((x + math.pi) % (2.0 * math.pi)) - math.pi


@agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    th = np.float64(state.th[env, agent])
    thdot = np.float64(state.thdot[env, agent])
    g = np.float64(params.g)
    mass = np.float64(params.mass)
    length = np.float64(params.length)
    dt = np.float64(params.dt)
    max_torque = np.float64(params.max_torque)
    max_speed = np.float64(params.max_speed)

    u = min(max(np.float64(actions[env, agent, 0]), -max_torque), max_torque)
    costs = angle_normalize(th) ** 2 + 0.1 * thdot * thdot + 0.001 * (u * u)

    newthdot = thdot + (3.0 * g / (2.0 * length) * math.sin(th) + 3.0 / (mass * length * length) * u) * dt
    newthdot = min(max(newthdot, -max_speed), max_speed)
    newth = th + newthdot * dt

    state.th[env, agent] = newth
    state.thdot[env, agent] = newthdot
    return -costs


@agent_function
def observe_agent(state, params, obs, env, agent):
    th = np.float64(state.th[env, agent])
    obs[env, agent, 0] = math.cos(th)
    obs[env, agent, 1] = math.sin(th)
    obs[env, agent, 2] = state.thdot[env, agent]


@agent_function
def is_terminal(state, params, env):
    return False


def observation_space(params: PendulumParams) -> gymnasium.spaces.Box:
    high = np.array([1.0, 1.0, params.max_speed], dtype=np.float32)
    return gymnasium.spaces.Box(-high, high, dtype=np.float32)


def action_space(params: PendulumParams) -> gymnasium.spaces.Box:
    return gymnasium.spaces.Box(-params.max_torque, params.max_torque, shape=(1,), dtype=np.float32)


PENDULUM = EnvironmentDefinition(
    name="Pendulum-v1",
    params_type=PendulumParams,
    state_fields=STATE_FIELDS,
    reset_agent=reset_agent,
    step_agent=step_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=observation_space,
    action_space=action_space,
    max_episode_steps=lambda params: params.max_episode_steps,
    reference="gymnasium.envs.classic_control.PendulumEnv (Pendulum-v1)",
)
