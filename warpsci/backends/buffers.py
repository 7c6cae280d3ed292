"""The framework-owned arrays of a vector environment, passed to every kernel as one namedtuple.

Passing all arrays inside tuples is also what lets Numba's CUDA simulator hand plain numpy arrays to
the compiled environment functions.
"""

from collections import namedtuple

import numpy as np

EnvBuffers = namedtuple(
    "EnvBuffers",
    [
        "obs",  # (num_envs, num_agents, *obs_shape) float32: observation after the step (post reset)
        "final_obs",  # same shape: observation that ended the episode, where one ended
        "actions",  # (num_envs, num_agents[, action_width]): actions applied by the next step
        "rewards",  # (num_envs, num_agents) float32
        "terminated",  # (num_envs,) bool
        "truncated",  # (num_envs,) bool
        "elapsed",  # (num_envs,) int32: steps taken in the current episode
        "tick",  # (num_envs,) int64: steps taken since the environment was seeded
        "episode_return",  # (num_envs, num_agents) float32: return of the running episode
        "final_return",  # (num_envs, num_agents) float32: return of the episode that just ended
        "final_length",  # (num_envs,) int32: length of the episode that just ended
        "active",  # (num_envs, num_agents) bool: the agent is in the game (acts at the next step)
        "agent_terminated",  # (num_envs, num_agents) bool: the agent's game ended with this step
        "action_mask",  # (num_envs, num_agents, mask_width) bool: allowed actions (width 1 if unused)
    ],
)

#: The buffers that hold one value per agent or per environment: ``name: (dtype, per_agent)``, in
#: ``EnvBuffers``' order (``obs``, ``final_obs``, ``actions`` and ``action_mask`` have shapes of their
#: own).
SCALAR_BUFFERS = {
    "rewards": (np.float32, True),
    "terminated": (np.bool_, False),
    "truncated": (np.bool_, False),
    "elapsed": (np.int32, False),
    "tick": (np.int64, False),
    "episode_return": (np.float32, True),
    "final_return": (np.float32, True),
    "final_length": (np.int32, False),
    "active": (np.bool_, True),
    "agent_terminated": (np.bool_, True),
}
