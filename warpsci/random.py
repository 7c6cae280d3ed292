"""Counter-based random numbers, identical on every backend and launch layout.

A random number is a pure function of ``(seed, env, agent, tick, stream, draw)``: no generator state
is carried between calls, so a trajectory does not depend on which thread, block or CPU core computed
it. The mixing function is SplitMix64 (Steele, Lea and Flood, 2014), applied once per key component.

Environment code receives a ``key`` (a ``uint64``) and calls :func:`uniform` or :func:`normal` with
a draw index ``0, 1, 2, ...`` to get independent numbers from it.
"""

import math

import numpy as np
from numba import njit

_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFT_30 = np.uint64(30)
_SHIFT_27 = np.uint64(27)
_SHIFT_31 = np.uint64(31)
_SHIFT_40 = np.uint64(40)
_TWO_POW_MINUS_24 = np.float32(1.0 / 16777216.0)

#: Stream used for draws made while an environment steps.
STEP_STREAM = 0
#: Stream used for draws made while an environment resets.
RESET_STREAM = 1
#: Stream used for the uniform random actions of :meth:`WarpVectorEnv.random_rollout`.
ACTION_STREAM = 2
#: Stream used for the trainer's policy samples (:mod:`warpsci.rollout_kernels`).
POLICY_STREAM = 3


@njit(cache=True)
def mix64(value):
    """SplitMix64 finaliser: a bijective scramble of a ``uint64``."""
    z = np.uint64(value) + _GOLDEN_GAMMA
    z = (z ^ (z >> _SHIFT_30)) * _MIX_1
    z = (z ^ (z >> _SHIFT_27)) * _MIX_2
    return z ^ (z >> _SHIFT_31)


@njit(cache=True)
def make_key(seed, env, agent, tick, stream):
    """Key for the random draws of one agent of one environment at one tick.

    ``seed`` is the run's seed, ``env`` and ``agent`` the indices, ``tick`` the number of steps the
    environment has taken since it was seeded, and ``stream`` tells apart draws made for different
    purposes within the same tick (:data:`STEP_STREAM`, :data:`RESET_STREAM`).
    """
    key = mix64(np.uint64(seed))
    key = mix64(key ^ np.uint64(env))
    key = mix64(key ^ np.uint64(agent))
    key = mix64(key ^ np.uint64(tick))
    return mix64(key ^ np.uint64(stream))


@njit(cache=True)
def uniform(key, draw):
    """Uniform float32 in ``[0, 1)`` with 24 random bits: draw number ``draw`` of ``key``."""
    bits = mix64(key ^ mix64(np.uint64(draw)))
    return np.float32(bits >> _SHIFT_40) * _TWO_POW_MINUS_24


@njit(cache=True)
def uniform_range(key, draw, low, high):
    """Uniform float32 in ``[low, high)``."""
    return np.float32(low + (high - low) * uniform(key, draw))


@njit(cache=True)
def normal(key, draw):
    """Standard normal float32 (Box-Muller), using draws ``2 * draw`` and ``2 * draw + 1``."""
    u1 = np.float32(1.0) - uniform(key, 2 * draw)  # in (0, 1], so the log is finite
    u2 = uniform(key, 2 * draw + 1)
    return np.float32(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))


@njit(cache=True)
def integer(key, draw, upper):
    """Uniform integer in ``[0, upper)``."""
    return min(np.int64(uniform(key, draw) * upper), upper - 1)
