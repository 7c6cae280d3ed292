"""Training several agent groups: a policy per group (or one shared), per-group hyperparameters,
masked rows of agents that left, action masks in sampling and the loss, checkpoints of every group,
and learning asserted on a small Tag gridworld."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from multi_group_toy import TOY_GROUPS

import warpsci
from warpsci.algorithms import make_trainer, resume_trainer
from warpsci.config import TrainConfig, load_yaml
from warpsci.evaluation import evaluate_groups

SMALL_TAG = Path(__file__).resolve().parents[1] / "examples" / "configs" / "tag_gridworld_small.yaml"
if TOY_GROUPS.name not in warpsci.registered_ids():
    warpsci.register(TOY_GROUPS)


def tiny(env_id: str = "TagGridworld-v0", **changes) -> TrainConfig:
    settings = dict(
        env_id=env_id, num_envs=4, num_steps=8, total_timesteps=64, num_minibatches=2, update_epochs=1
    )
    return TrainConfig(**{**settings, **changes})


@pytest.mark.slow
def test_trained_taggers_tag_sooner_than_random_taggers_against_the_same_runner():
    """The small preset trains both groups on the CPU (60K steps, seconds). Against the trained
    runner, trained taggers end episodes in 8.4-9.1 steps on average and random taggers in
    13.9-14.6 (seeds 1-3, 1,000 episodes each, on the 2-core machine; BENCHMARKS.md): the test asks
    for a third fewer steps."""
    config = TrainConfig.from_dict(load_yaml(SMALL_TAG))
    trainer = make_trainer(config)
    trainer.train()
    policies = {group.name: learner.policy for learner in trainer.learners for group in learner.groups}
    params = config.env_params
    trained = evaluate_groups("TagGridworld-v0", policies, 1000, env_params=params)
    baseline = evaluate_groups(
        "TagGridworld-v0", {"tagger": "random", "runner": policies["runner"]}, 1000, env_params=params
    )
    print(f"steps to tag: trained {trained.mean_length:.2f}, random {baseline.mean_length:.2f}")
    assert trained.mean_length < (2 / 3) * baseline.mean_length
    assert trained.terminated.mean() > baseline.terminated.mean()


def test_each_group_has_its_policy_and_its_overrides():
    config = tiny("TagGridworld-v0", groups={"runner": {"learning_rate": 1e-4, "ent_coef": 0.1}})
    trainer = make_trainer(config)
    learners = {learner.name: learner for learner in trainer.learners}
    assert set(learners) == {"tagger", "runner"}
    assert (
        learners["runner"].config.learning_rate == 1e-4 and learners["tagger"].config.learning_rate == 2.5e-4
    )
    assert learners["runner"].buffer.num_rows == 4 * 1 and learners["tagger"].buffer.num_rows == 4 * 10
    metrics = trainer.train().history[-1]
    assert math.isfinite(metrics["losses/value_loss/runner"]) and "charts/episodic_return/tagger" in metrics
    assert metrics["charts/learning_rate/runner"] < metrics["charts/learning_rate/tagger"]


def test_the_learning_rate_anneals_to_each_groups_final_value():
    config = tiny(
        "TagGridworld-v0",
        learning_rate=1e-3,
        learning_rate_final=2e-4,
        groups={"runner": {"learning_rate_final": 0.0}},
    )
    learners = {learner.name: learner for learner in make_trainer(config).learners}
    last = learners["tagger"].config.num_iterations
    assert learners["tagger"].learning_rate_at(0) == pytest.approx(1e-3)
    assert learners["tagger"].learning_rate_at(last // 2) == pytest.approx(1e-3 - 8e-4 * (last // 2) / last)
    assert learners["tagger"].learning_rate_at(last) == pytest.approx(2e-4)
    assert learners["runner"].learning_rate_at(last) == pytest.approx(0.0)


def test_a_shared_policy_plays_every_group():
    trainer = make_trainer(tiny("TagGridworld-v0", shared_policy=True))
    (learner,) = trainer.learners
    assert learner.name == "shared" and learner.agents == tuple(range(11))
    assert math.isfinite(trainer.train().history[-1]["losses/value_loss"])


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"groups": {"hunter": {"learning_rate": 1e-3}}}, "unknown group"),
        ({"groups": {"tagger": {"num_envs": 3}}}, "unknown key"),
        ({"env_id": TOY_GROUPS.name, "shared_policy": True}, "equal spaces"),
        ({"target_return": 1.0}, "target_return"),
        ({"groups": {"tagger": {"activation": "gelu"}}}, "groups.tagger: activation must be one of"),
        ({"groups": {"runner": {"learning_rate": -1.0}}}, "groups.runner: learning_rate"),
    ],
)
def test_bad_group_settings_are_refused_with_a_clear_message(changes, message):
    with pytest.raises(ValueError, match=message):
        make_trainer(tiny(**{"env_id": "TagGridworld-v0", **changes}))


def test_rows_of_agents_out_of_the_game_are_masked_and_masks_are_obeyed():
    trainer = make_trainer(tiny(TOY_GROUPS.name, num_envs=6, num_steps=16, total_timesteps=96 * 3))
    trainer.train()
    learners = {learner.name: learner for learner in trainer.learners}
    odd = learners["odd"].buffer
    assert learners["odd"].masked_rows
    assert 0 < float(odd.valid.mean()) < 1, "some odd agents left during the rollout"
    assert bool((odd.rewards[odd.valid == 0] == 0).all()), "agents out of the game get no reward"
    even = learners["even"].buffer
    allowed = even.action_masks.gather(-1, even.actions.unsqueeze(-1)).squeeze(-1)
    assert bool(allowed.all()), "a masked action was sampled"
    assert not bool(even.action_masks.all()), "the toy masks some actions"


def test_only_agents_still_in_the_game_are_bootstrapped_when_the_time_limit_ends_an_episode():
    """With a goal never reached every episode is truncated after 8 steps; odd agents that left
    before that have nothing to bootstrap (their rows were not valid), those still in do."""
    config = tiny(TOY_GROUPS.name, num_envs=6, num_steps=16, total_timesteps=96, env_params={"goal": 10_000})
    trainer = make_trainer(config)
    trainer.collect_rollout()
    odd = {learner.name: learner for learner in trainer.learners}["odd"].buffer
    time_limit = odd.episode_ends > 0
    assert bool(time_limit.any()) and bool((odd.valid[time_limit] == 0).any()), "some left before the limit"
    truncated = odd.truncated > 0
    assert not bool((truncated & (odd.valid == 0)).any()), "an agent that had left was bootstrapped"
    assert bool((truncated == (truncated & time_limit)).all()) and bool(truncated.any())


@pytest.mark.parametrize(
    "runner", [{}, {"shared_trunk": True, "activation": "relu"}], ids=["separate", "trunk"]
)
def test_checkpoints_hold_every_group_and_resume(tmp_path, runner):
    """Also with the runner's network one ReLU trunk (WarpDrive's) beside the taggers' two."""
    config = tiny("TagGridworld-v0", total_timesteps=64, groups={"runner": runner} if runner else {})
    trainer = make_trainer(config, tmp_path / "run")
    trainer.train()
    resumed = resume_trainer(tmp_path / "run", total_timesteps=128)
    for original, loaded in zip(trainer.learners, resumed.learners, strict=True):
        for a, b in zip(original.policy.parameters(), loaded.policy.parameters(), strict=True):
            assert torch.equal(a, b)
    assert resumed.train().iterations == 4
