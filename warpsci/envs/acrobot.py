"""Acrobot-v1: swing the tip of a two-link pendulum above a line by torquing the joint between the links.

Dynamics ("book" equations of Sutton and Barto by default, or those of Sutton's 1996 NeurIPS paper),
fourth-order Runge-Kutta integration over one step of ``dt = 0.2`` s, angle wrapping, velocity
bounds, observation, reward, termination, time limit (500 steps) and initial-state distribution
(every state variable uniform in [-0.1, 0.1]) are those of Gymnasium's ``Acrobot-v1``
(``gymnasium.envs.classic_control.AcrobotEnv``, after RLPy). The state is single precision; a step
is computed in double precision from it, as Gymnasium computes it.

State: ``theta1`` (rad, angle of the first link, 0 pointing down), ``theta2`` (rad, angle of the
second link relative to the first), both wrapped into [-pi, pi], and their angular velocities
``dtheta1`` (rad/s, bounded to +-4 pi) and ``dtheta2`` (rad/s, bounded to +-9 pi).
Observation: ``[cos theta1, sin theta1, cos theta2, sin theta2, dtheta1 (rad/s), dtheta2 (rad/s)]``.
Actions: ``0``, ``1``, ``2`` apply a torque of -1, 0, +1 N m to the joint between the links (plus
uniform noise in [-torque_noise_max, torque_noise_max] if that is positive; 0 as in Gymnasium).
Reward: -1 for every step, 0 for the step that terminates the episode. The episode terminates when
the tip is higher than one link length above the fixed joint: ``-cos(theta1) - cos(theta2 + theta1) > 1``.
"""

from __future__ import annotations

import dataclasses
import math

import gymnasium
import numpy as np

from warpsci.environment import EnvironmentDefinition, StateField, agent_function
from warpsci.random import uniform_range

GRAVITY = 9.8  #: m/s^2, a constant of Gymnasium's equations (not a parameter there either)
DEFAULT_DT = 0.2  #: s, Gymnasium's time step


@dataclasses.dataclass(frozen=True)
class AcrobotParams:
    """Physical constants of Acrobot; the defaults are Gymnasium's.

    Gymnasium's ``LINK_LENGTH_2`` only draws the second link (the dynamics use the centre of mass
    ``link_com_pos_2``, and the goal height is fixed at 1), so it has no field here. Floats reach the
    kernels in float64 (``params_float_dtype``): one Runge-Kutta step of 0.2 s is so coarse that at
    high velocities its result moves by up to ~5e4 times a change of ``dt``, so ``float32(0.2)`` alone
    would cost ~1e-4 of accuracy.
    """

    link_length_1: float = 1.0  #: m, length of the first link
    link_mass_1: float = 1.0  #: kg
    link_mass_2: float = 1.0  #: kg
    link_com_pos_1: float = 0.5  #: m, position of the first link's centre of mass
    link_com_pos_2: float = 0.5  #: m, position of the second link's centre of mass
    link_moi: float = 1.0  #: kg m^2, moment of inertia of either link
    max_vel_1: float = 4 * math.pi  #: rad/s, |dtheta1| is bounded by this after each step
    max_vel_2: float = 9 * math.pi  #: rad/s, |dtheta2| is bounded by this after each step
    dt: float = DEFAULT_DT  #: s, one Runge-Kutta step of this size per environment step
    torque_noise_max: float = 0.0  #: N m, uniform noise added to the torque if positive
    book_dynamics: bool = True  #: the book's equations (Gymnasium's default "book"); False: "nips"
    reset_bound: float = 0.1  #: initial state variables are uniform in [-bound, bound]
    max_episode_steps: int = 500  #: time limit (truncation)


STATE_FIELDS = (
    StateField("theta1", np.float32),
    StateField("theta2", np.float32),
    StateField("dtheta1", np.float32),
    StateField("dtheta2", np.float32),
)


@agent_function
def reset_agent(state, params, env, agent, key):
    bound = params.reset_bound
    state.theta1[env, agent] = uniform_range(key, 0, -bound, bound)
    state.theta2[env, agent] = uniform_range(key, 1, -bound, bound)
    state.dtheta1[env, agent] = uniform_range(key, 2, -bound, bound)
    state.dtheta2[env, agent] = uniform_range(key, 3, -bound, bound)


@agent_function
def _derivatives(params, theta1, theta2, dtheta1, dtheta2, torque):
    """Time derivatives of ``(theta1, theta2, dtheta1, dtheta2)``, in float64 (Gymnasium's ``_dsdt``)."""
    m1 = np.float64(params.link_mass_1)
    m2 = np.float64(params.link_mass_2)
    l1 = np.float64(params.link_length_1)
    lc1 = np.float64(params.link_com_pos_1)
    lc2 = np.float64(params.link_com_pos_2)
    moi1 = np.float64(params.link_moi)
    moi2 = np.float64(params.link_moi)
    g = GRAVITY
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * math.cos(theta2)) + moi1 + moi2
    d2 = m2 * (lc2**2 + l1 * lc2 * math.cos(theta2)) + moi2
    phi2 = m2 * lc2 * g * math.cos(theta1 + theta2 - math.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * math.sin(theta2)
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * math.sin(theta2)
        + (m1 * lc1 + m2 * l1) * g * math.cos(theta1 - math.pi / 2)
        + phi2
    )
    if params.book_dynamics:
        ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * math.sin(theta2) - phi2) / (
            m2 * lc2**2 + moi2 - d2**2 / d1
        )
    else:
        ddtheta2 = (torque + d2 / d1 * phi1 - phi2) / (m2 * lc2**2 + moi2 - d2**2 / d1)
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


@agent_function
def _wrap(x, low, high):
    """Gymnasium's ``wrap``: shift ``x`` by whole periods ``high - low`` into ``[low, high]``."""
    diff = high - low
    if not abs(x) <= 1.0e6:  # only broken params get here; never loop without end (or for long)
        if not math.isfinite(x):
            return x
        x = x - diff * math.floor((x - low) / diff)
    while x > high:
        x = x - diff
    while x < low:
        x = x + diff
    return x


@agent_function
def _reached_goal(theta1, theta2):
    """Whether the tip is above the goal line (Gymnasium's ``_terminal``), computed in float64."""
    return -math.cos(theta1) - math.cos(theta2 + theta1) > 1.0


@agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    # np.float64, not float(): Numba's float() of a float32 stays float32.
    s0 = np.float64(state.theta1[env, agent])
    s1 = np.float64(state.theta2[env, agent])
    s2 = np.float64(state.dtheta1[env, agent])
    s3 = np.float64(state.dtheta2[env, agent])

    torque = np.float64(actions[env, agent]) - 1.0  # actions 0, 1, 2 -> -1, 0, +1 N m
    noise_max = np.float64(params.torque_noise_max)
    if noise_max > 0.0:
        torque += np.float64(uniform_range(key, 0, -noise_max, noise_max))

    # One classical Runge-Kutta step of size dt, in the order of Gymnasium's rk4 (t = [0, dt]).
    dt = params.dt
    dt2 = dt / 2.0
    a0, a1, a2, a3 = _derivatives(params, s0, s1, s2, s3, torque)
    b0, b1, b2, b3 = _derivatives(params, s0 + dt2 * a0, s1 + dt2 * a1, s2 + dt2 * a2, s3 + dt2 * a3, torque)
    c0, c1, c2, c3 = _derivatives(params, s0 + dt2 * b0, s1 + dt2 * b1, s2 + dt2 * b2, s3 + dt2 * b3, torque)
    e0, e1, e2, e3 = _derivatives(params, s0 + dt * c0, s1 + dt * c1, s2 + dt * c2, s3 + dt * c3, torque)
    n0 = s0 + dt / 6.0 * (a0 + 2 * b0 + 2 * c0 + e0)
    n1 = s1 + dt / 6.0 * (a1 + 2 * b1 + 2 * c1 + e1)
    n2 = s2 + dt / 6.0 * (a2 + 2 * b2 + 2 * c2 + e2)
    n3 = s3 + dt / 6.0 * (a3 + 2 * b3 + 2 * c3 + e3)

    max_vel_1 = np.float64(params.max_vel_1)
    max_vel_2 = np.float64(params.max_vel_2)
    state.theta1[env, agent] = _wrap(n0, -math.pi, math.pi)
    state.theta2[env, agent] = _wrap(n1, -math.pi, math.pi)
    state.dtheta1[env, agent] = min(max(n2, -max_vel_1), max_vel_1)
    state.dtheta2[env, agent] = min(max(n3, -max_vel_2), max_vel_2)

    # Judged on the stored (float32) state, exactly as is_terminal judges it, so reward and flag agree.
    if _reached_goal(np.float64(state.theta1[env, agent]), np.float64(state.theta2[env, agent])):
        return 0.0
    return -1.0


@agent_function
def observe_agent(state, params, obs, env, agent):
    theta1 = np.float64(state.theta1[env, agent])
    theta2 = np.float64(state.theta2[env, agent])
    obs[env, agent, 0] = math.cos(theta1)
    obs[env, agent, 1] = math.sin(theta1)
    obs[env, agent, 2] = math.cos(theta2)
    obs[env, agent, 3] = math.sin(theta2)
    obs[env, agent, 4] = state.dtheta1[env, agent]
    obs[env, agent, 5] = state.dtheta2[env, agent]


@agent_function
def is_terminal(state, params, env):
    return _reached_goal(np.float64(state.theta1[env, 0]), np.float64(state.theta2[env, 0]))


def observation_space(params: AcrobotParams) -> gymnasium.spaces.Box:
    high = np.array([1.0, 1.0, 1.0, 1.0, params.max_vel_1, params.max_vel_2], dtype=np.float32)
    return gymnasium.spaces.Box(-high, high, dtype=np.float32)


ACROBOT = EnvironmentDefinition(
    name="Acrobot-v1",
    params_type=AcrobotParams,
    state_fields=STATE_FIELDS,
    reset_agent=reset_agent,
    step_agent=step_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=observation_space,
    action_space=lambda params: gymnasium.spaces.Discrete(3),
    max_episode_steps=lambda params: params.max_episode_steps,
    reference="gymnasium.envs.classic_control.AcrobotEnv (Acrobot-v1)",
    params_float_dtype=np.float64,
)
