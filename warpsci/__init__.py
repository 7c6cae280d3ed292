"""warpsci: end-to-end reinforcement learning on GPUs, environments written once in Python.

Quick start::

    import warpsci
    env = warpsci.make("CartPole-v1", num_envs=4096, device="cuda", seed=0)
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
"""

from warpsci.environment import (
    AgentGroup,
    AgentStage,
    EnvironmentDefinition,
    EnvironmentStage,
    StateField,
    agent_function,
)
from warpsci.envs import BUILTIN_ENVIRONMENTS
from warpsci.multi_agent_env import MultiAgentVectorEnv
from warpsci.pettingzoo_adapter import parallel_env
from warpsci.policy_api import TrainedPolicy, load_policy
from warpsci.registry import get_definition, make, register, registered_ids
from warpsci.vector_env import WarpVectorEnv

__version__ = "0.1.0"

for _definition in BUILTIN_ENVIRONMENTS:
    register(_definition)

__all__ = [
    "AgentGroup",
    "AgentStage",
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
    "parallel_env",
    "register",
    "registered_ids",
]
