"""Write your own environment once, run it on the CPU or a GPU, and train on it.

A corridor of ``length`` cells: the agent starts at a random cell and must walk to the right end.
Actions: 0 = left, 1 = right. Reward: +1 on reaching the end, -0.01 per step otherwise.

    python examples/custom_environment.py            # CPU
    python examples/custom_environment.py cuda       # GPU
"""

import dataclasses
import sys

import gymnasium
import numpy as np

import warpsci
from warpsci.config import TrainConfig
from warpsci.ppo import PPOTrainer
from warpsci.random import integer


@dataclasses.dataclass(frozen=True)
class CorridorParams:
    length: int = 10  #: cells
    max_episode_steps: int = 50  #: time limit


@warpsci.agent_function
def reset_agent(state, params, env, agent, key):
    state.position[env, agent] = integer(key, 0, params.length - 1)


@warpsci.agent_function
def step_agent(state, params, actions, env, agent, phase, key):
    move = 1 if actions[env, agent] == 1 else -1
    state.position[env, agent] = max(0, state.position[env, agent] + move)
    return 1.0 if state.position[env, agent] >= params.length - 1 else -0.01


@warpsci.agent_function
def observe_agent(state, params, obs, env, agent):
    obs[env, agent, 0] = state.position[env, agent] / (params.length - 1)


@warpsci.agent_function
def is_terminal(state, params, env):
    return state.position[env, 0] >= params.length - 1


CORRIDOR = warpsci.EnvironmentDefinition(
    name="Corridor-v0",
    params_type=CorridorParams,
    state_fields=(warpsci.StateField("position", np.int32),),
    reset_agent=reset_agent,
    step_agent=step_agent,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=lambda params: gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32),
    action_space=lambda params: gymnasium.spaces.Discrete(2),
    max_episode_steps=lambda params: params.max_episode_steps,
)


def main(device: str = "cpu", total_timesteps: int = 40_000) -> float:
    warpsci.register(CORRIDOR)
    env = warpsci.make("Corridor-v0", num_envs=4, device=device, seed=0)
    obs, _ = env.reset()
    print("first observations:", obs.flatten().tolist())

    config = TrainConfig(
        env_id="Corridor-v0",
        device=device,
        num_envs=16,
        num_steps=32,
        total_timesteps=total_timesteps,
        learning_rate=1e-3,
    )
    result = PPOTrainer(config).train()
    print(f"mean episodic return after {result.global_step} steps: {result.mean_episodic_return:.3f}")
    return result.mean_episodic_return


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
