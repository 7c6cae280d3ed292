"""A first learning probe of TagContinuous-v0 on the CPU: PPO with a policy per group on a small
game, then 200 evaluation episodes with the trained taggers and with uniformly random taggers,
both against the trained runners.

    python benchmarks/tag_continuous_probe.py 300000 [SEED]

2026-11-23, this project's 2-core CPU machine (while other jobs ran): 299,520 steps in 108.6 s;
trained taggers 2.765 tags per tagger per episode (tag reward 1, no other tagger reward), random
taggers 2.283; episodes 47.2 and 55.6 steps long (a game ends when every runner is tagged).
"""

import sys
import time

import warpsci  # noqa: F401  (registers the environments)
from warpsci.algorithms import make_trainer
from warpsci.config import TrainConfig
from warpsci.evaluation import evaluate_groups

PARAMS = {
    "num_taggers": 2,
    "num_runners": 6,
    "grid_length": 5.0,
    "episode_length": 60,
    "seed": 3,
    "max_acceleration": 0.2,
    "min_acceleration": -0.2,
    "num_acceleration_levels": 4,
    "num_turn_levels": 4,
    "max_turn": 1.5,
    "min_turn": -1.5,
    "use_full_observation": False,
    "num_other_agents_observed": 4,
    "tagging_distance": 0.1,
    "tag_reward_for_tagger": 1.0,
    "tag_penalty_for_runner": -1.0,
    "end_of_game_reward_for_runner": 0.0,
}


def main(total_timesteps: int, seed: int = 1) -> None:
    config = TrainConfig(
        env_id="TagContinuous-v0",
        num_envs=64,
        num_steps=60,
        total_timesteps=total_timesteps,
        learning_rate=3e-3,
        ent_coef=0.01,
        hidden_sizes=(64, 64),
        env_params=PARAMS,
        seed=seed,
    )
    start = time.time()
    trainer = make_trainer(config)
    result = trainer.train()
    print("trained", result.global_step, f"{time.time() - start:.1f}s")
    policies = {group.name: learner.policy for learner in trainer.learners for group in learner.groups}
    for label, tagger in (("trained", policies["tagger"]), ("random", "random")):
        players = {"tagger": tagger, "runner": policies["runner"]}
        evaluation = evaluate_groups("TagContinuous-v0", players, 200, env_params=PARAMS)
        print(
            f"{label} taggers: tagger return {evaluation.mean_return('tagger'):.3f}, runner return "
            f"{evaluation.mean_return('runner'):.3f}, episode length {evaluation.mean_length:.1f}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300_000, int(sys.argv[2]) if len(sys.argv) > 2 else 1)
