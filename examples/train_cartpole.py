"""Train PPO on Cartpole from Python instead of the CLI, then evaluate the greedy policy.

python examples/train_cartpole.py [cpu|cuda]

Each run writes a new run folder, runs/example_cartpole-<date>-<time> (a run folder that holds a run
is never overwritten).
"""

import sys
import time

import warpsci  # noqa: F401  (registers the environments)
from warpsci.cli import preset
from warpsci.config import TrainConfig
from warpsci.ppo import PPOTrainer
from warpsci.trainer import evaluate_policy

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
config = TrainConfig.from_dict({**preset("CartPole-v1"), "device": device})
trainer = PPOTrainer(config, run_dir=f"runs/example_cartpole-{time.strftime('%Y%m%d-%H%M%S')}")
result = trainer.train(progress_bar=True)
returns = evaluate_policy(trainer.policy, "CartPole-v1", num_episodes=100, device=device)
print(f"training return {result.mean_episodic_return:.1f}, greedy evaluation {returns.mean():.1f}")
