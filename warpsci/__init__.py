"""warpsci: end-to-end reinforcement learning on GPUs, environments written once in Python.

Quick start::

    import warpsci
    env = warpsci.make("CartPole-v1", num_envs=4096, device="cuda", seed=0)
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
"""

import os as _os

# One of several training processes on this host (torchrun): a share of the cores for Numba's
# parallel loops, and idle threads that sleep instead of spinning, set before Numba and OpenMP load.
# Without it two processes on a 2-core host trained the small Tag gridworld config in 179 s, not 5 s.
if int(_os.environ.get("LOCAL_WORLD_SIZE", _os.environ.get("WORLD_SIZE", "1"))) > 1:
    _share = (_os.cpu_count() or 1) // int(_os.environ.get("LOCAL_WORLD_SIZE", "1"))
    _os.environ.setdefault("NUMBA_NUM_THREADS", str(max(1, _share)))
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import warpsci._numba_compat  # noqa: E402, F401  (before any module that imports Numba's array code)
from warpsci.environment import (  # noqa: E402
    AgentGroup,
    AgentStage,
    BlockObservation,
    EnvironmentDefinition,
    EnvironmentStage,
    StateField,
    agent_function,
)
from warpsci.envs import BUILTIN_ENVIRONMENTS  # noqa: E402
from warpsci.multi_agent_env import MultiAgentVectorEnv  # noqa: E402
from warpsci.pettingzoo_adapter import parallel_env  # noqa: E402
from warpsci.policy_api import TrainedPolicy, load_policy  # noqa: E402
from warpsci.registry import get_definition, make, memory_plan, register, registered_ids  # noqa: E402
from warpsci.vector_env import WarpVectorEnv  # noqa: E402

__version__ = "0.1.0"

for _definition in BUILTIN_ENVIRONMENTS:
    register(_definition)

__all__ = [
    "AgentGroup",
    "AgentStage",
    "BlockObservation",
    "EnvironmentDefinition",
    "EnvironmentStage",
    "MultiAgentVectorEnv",
    "StateField",
    "TrainedPolicy",
    "WarpVectorEnv",
    "agent_function",
    "get_definition",
    "load_policy",
    "make",
    "memory_plan",
    "parallel_env",
    "register",
    "registered_ids",
]
