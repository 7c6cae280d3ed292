"""Sampling, GAE, truncation bootstrapping, configs and checkpoints."""

import math
import os
import shutil

import gymnasium
import numpy as np
import pytest
import torch

from warpsci.checkpoint import atomic_write_bytes, load_checkpoint, save_checkpoint
from warpsci.config import TrainConfig, load_yaml
from warpsci.ppo import PPOTrainer
from warpsci.rollout import compute_gae
from warpsci.sampling import categorical_log_prob_entropy, sample_categorical
from warpsci.trainer import truncated_values


def test_categorical_sampling_matches_the_softmax_probabilities():
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5]]).repeat(200_000, 1)
    generator = torch.Generator().manual_seed(0)
    actions, log_prob = sample_categorical(logits, generator)
    frequencies = torch.bincount(actions, minlength=4).double() / actions.numel()
    probabilities = torch.softmax(logits[0].double(), dim=0)
    # Four standard errors of a binomial proportion at n = 200K.
    tolerance = 4 * torch.sqrt(probabilities * (1 - probabilities) / actions.numel())
    assert torch.all((frequencies - probabilities).abs() < tolerance), (frequencies, probabilities)
    assert torch.allclose(log_prob, torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1))


def test_sampling_is_reproducible_from_the_generator_seed():
    logits = torch.randn(1000, 5)
    first, _ = sample_categorical(logits, torch.Generator().manual_seed(3))
    second, _ = sample_categorical(logits, torch.Generator().manual_seed(3))
    third, _ = sample_categorical(logits, torch.Generator().manual_seed(4))
    assert torch.equal(first, second)
    assert not torch.equal(first, third)


def test_log_prob_and_entropy_match_torch_distributions():
    logits = torch.randn(64, 6)
    actions = torch.randint(0, 6, (64,))
    log_prob, entropy = categorical_log_prob_entropy(logits, actions)
    reference = torch.distributions.Categorical(logits=logits)
    assert torch.allclose(log_prob, reference.log_prob(actions), atol=1e-6)
    assert torch.allclose(entropy, reference.entropy(), atol=1e-6)


def _reference_gae(rewards, values, dones, next_value, gamma, lam):
    """Textbook GAE, written with explicit sums: A_t = sum_k (gamma*lam)^k delta_{t+k} within an episode."""
    steps, envs = rewards.shape
    values_ext = np.concatenate([values, next_value[None]], axis=0)
    deltas = rewards + gamma * values_ext[1:] * (1 - dones) - values
    advantages = np.zeros_like(rewards)
    for env in range(envs):
        for t in range(steps):
            total, factor = 0.0, 1.0
            for k in range(t, steps):
                total += factor * deltas[k, env]
                if dones[k, env]:
                    break
                factor *= gamma * lam
            advantages[t, env] = total
    return advantages


def test_gae_matches_the_textbook_sum_across_episode_boundaries():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(20, 5))
    values = rng.normal(size=(20, 5))
    dones = (rng.random((20, 5)) < 0.2).astype(np.float64)
    next_value = rng.normal(size=5)
    expected = _reference_gae(rewards, values, dones, next_value, 0.97, 0.9)
    actual = compute_gae(
        *(torch.tensor(array) for array in (rewards, values, dones, next_value)), gamma=0.97, gae_lambda=0.9
    )
    assert np.allclose(actual.numpy(), expected, atol=1e-10)


def test_truncated_steps_bootstrap_from_the_final_observation_value():
    config = TrainConfig(
        num_envs=2, num_steps=3, total_timesteps=6, num_minibatches=1, gamma=0.9, gae_lambda=1.0
    )
    trainer = PPOTrainer(config)
    constant = 2.0
    critic_output = trainer.policy.critic[-1]
    torch.nn.init.zeros_(critic_output.weight)
    torch.nn.init.constant_(critic_output.bias, constant)
    buffer = trainer.buffer
    buffer.rewards.fill_(1.0)
    buffer.dones.zero_()
    buffer.truncated.zero_()
    buffer.dones[1, 0] = 1.0  # env 0 truncated at step 1
    buffer.truncated[1, 0] = 1.0
    buffer.dones[1, 1] = 1.0  # env 1 terminated at step 1
    trainer.compute_advantages(torch.zeros(2, 4))
    # Truncated: r + gamma * V(final_obs) - V(obs); terminated: r - V(obs).
    assert buffer.advantages[1, 0].item() == pytest.approx(1.0 + 0.9 * constant - constant)
    assert buffer.advantages[1, 1].item() == pytest.approx(1.0 - constant)
    # The last step bootstraps from next_value for both.
    assert buffer.advantages[2, 0].item() == pytest.approx(1.0 + 0.9 * constant - constant)


@pytest.mark.parametrize("max_episode_steps", [None, 3, 5, 100])
def test_only_truncated_rows_are_evaluated_and_agree_with_a_full_pass(max_episode_steps):
    """With a time limit of L steps a row is truncated at most ceil(5 / L) times in a 5-step rollout:
    those slots are gathered (unused ones read row 0, which must not be disturbed by them)."""
    trainer = PPOTrainer(TrainConfig(num_envs=4, num_steps=5, total_timesteps=20, num_minibatches=1))
    buffer = trainer.buffer
    buffer.final_obs.copy_(torch.randn(buffer.final_obs.shape, generator=torch.Generator().manual_seed(3)))
    buffer.truncated.zero_()
    values = truncated_values(trainer.policy, buffer, max_episode_steps)
    assert torch.equal(values, torch.zeros_like(buffer.truncated))
    buffer.truncated[0, 0] = buffer.truncated[1, 2] = buffer.truncated[4, 0] = 1.0
    calls = []
    original = trainer.policy.value
    trainer.policy.value = lambda obs: calls.append(obs.shape[:-1]) or original(obs)
    with torch.no_grad():
        sparse = truncated_values(trainer.policy, buffer, max_episode_steps)
        full = original(buffer.final_obs)
    assert torch.allclose(sparse, full * buffer.truncated, atol=1e-6)
    assert sparse[0, 0] != 0 and sparse[1, 2] != 0 and sparse[4, 0] != 0
    slots_per_row = {None: 5, 3: 2, 5: 1, 100: 1}[max_episode_steps]
    assert calls == [(slots_per_row, 4)], "one pass over the gathered slots (or every row)"


def test_a_critic_pass_too_large_for_memory_goes_in_slices_with_the_same_values(monkeypatch):
    from warpsci import networks

    policy = networks.ActorCritic(4, gymnasium.spaces.Discrete(2), (8, 8))
    obs = torch.randn(7, 5, 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = policy.value(obs)
        calls = []
        original = policy.value
        monkeypatch.setattr(policy, "value", lambda x: calls.append(x.shape[0]) or original(x))
        # Two steps of 5 rows x 8 wide x 4 bytes fit: slices of 2, 2, 2 and 1 steps.
        monkeypatch.setattr(networks, "VALUE_PASS_BYTES", 2 * 5 * 8 * 4)
        sliced = policy.rollout_values(obs)
    assert calls == [2, 2, 2, 1]
    assert torch.allclose(sliced, whole, atol=1e-6) and sliced.shape == (7, 5)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_envs": 0}, "num_envs"),
        ({"num_steps": -3}, "num_steps"),
        ({"num_envs": 3, "num_steps": 3, "num_minibatches": 4}, "divisible"),
        ({"gamma": 1.5}, "gamma"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"total_timesteps": 0}, "total_timesteps"),
    ],
)
def test_bad_config_values_are_rejected_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes)


def test_unknown_config_keys_name_the_nearest_accepted_one(tmp_path):
    with pytest.raises(ValueError, match=r"'num_envz' \(did you mean 'num_envs'\?\)"):
        TrainConfig.from_dict({"num_envz": 4})
    path = tmp_path / "bad.yaml"
    path.write_text("- a list\n")
    with pytest.raises(ValueError, match="mapping"):
        load_yaml(path)
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        load_yaml(tmp_path / "missing.yaml")


def test_config_round_trips_through_a_dictionary():
    config = TrainConfig(num_envs=16, hidden_sizes=(32, 32), env_params={"max_episode_steps": 100})
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"config": {}, "value": 1})

    def failing_replace(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"config": {}, "value": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)["value"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]  # no temporary left behind
    atomic_write_bytes(tmp_path / "other.bin", b"abc")
    assert (tmp_path / "other.bin").read_bytes() == b"abc"


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path)


def test_training_resumes_from_its_checkpoint(tmp_path):
    config = TrainConfig(
        num_envs=4, num_steps=16, total_timesteps=4 * 16 * 2, num_minibatches=2, checkpoint_every=1
    )
    first = PPOTrainer(config, tmp_path)
    first.train()
    assert first.iteration == 2
    saved = load_checkpoint(tmp_path)
    assert saved["iteration"] == 2 and saved["global_step"] == 128
    for name, tensor in first.policy.state_dict().items():
        assert torch.equal(saved["policy"][name], tensor)

    resumed = PPOTrainer.resume(tmp_path, total_timesteps=4 * 16 * 4)
    assert resumed.iteration == 2 and resumed.global_step == 128
    assert resumed.optimizer.state_dict()["state"][0]["step"].item() == pytest.approx(
        first.optimizer.state_dict()["state"][0]["step"].item()
    )
    result = resumed.train()
    assert result.iterations == 4 and result.global_step == 256
    lines = (tmp_path / "progress.csv").read_text().strip().splitlines()
    assert len(lines) == 1 + 4  # one header, four iterations
    assert [float(line.split(",")[0]) for line in lines[1:]] == [64, 128, 192, 256]
    assert math.isfinite(result.history[-1]["losses/value_loss"])


def test_recent_episodes_keeps_the_last_hundred_in_order():
    from collections import deque

    from warpsci.rollout import RecentEpisodes

    window = RecentEpisodes(size=100)
    reference: deque[float] = deque(maxlen=100)
    rng = np.random.default_rng(0)
    assert math.isnan(float(window.mean()))
    for _ in range(40):
        returns = torch.from_numpy(rng.normal(size=(3, 16)).astype(np.float32))
        ended = torch.from_numpy(rng.random((3, 16)) < 0.3)
        window.add(returns, ended)
        reference.extend(returns.reshape(-1)[ended.reshape(-1)].tolist())
        assert int(window.seen) >= len(reference)
        assert float(window.mean()) == pytest.approx(np.mean(reference), abs=1e-5)


def test_recent_episodes_with_more_endings_than_slots_keep_the_last_ones():
    """300 episodes ending in one call (more than the 100 slots): the window holds exactly the last
    100, the same on every run (no slot written twice)."""
    from warpsci.rollout import RecentEpisodes

    returns = torch.arange(1000, dtype=torch.float32)
    ended = torch.zeros(1000, dtype=torch.bool)
    ended[::3] = True  # 334 endings
    for _ in range(3):
        window = RecentEpisodes(size=100)
        window.add(torch.full((5,), -1.0), torch.ones(5, dtype=torch.bool))
        slots = window.slots(ended)
        ring = slots[slots < 100]
        assert ring.numel() == 100 and ring.unique().numel() == 100
        window.add(returns, ended)
        assert int(window.seen) == 5 + 334
        kept = sorted(window.returns[:100].tolist())
        assert kept == returns[ended][-100:].tolist()


def test_target_return_stops_training_early():
    from warpsci.algorithms import make_trainer

    config = TrainConfig(
        env_id="CartPole-v1",
        device="cpu",
        num_envs=16,
        num_steps=32,
        total_timesteps=16 * 32 * 200,
        learning_rate=1e-3,
        target_return=30.0,
    )
    result = make_trainer(config).train()
    assert result.solved_at_step is not None and result.iterations < 200
    last = result.history[-1]
    assert last["charts/return_last100"] >= 30.0


@pytest.mark.skipif(
    not any(shutil.which(name) for name in ("c++", "g++", "clang++")),
    reason="torch.compile on the CPU needs a C++ compiler",
)
@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_compiled_update_equals_the_eager_update(algo):
    from warpsci.algorithms import make_trainer

    def one_iteration(compile: bool):
        config = TrainConfig(
            env_id="CartPole-v1",
            algo=algo,
            device="cpu",
            seed=5,
            num_envs=8,
            num_steps=16,
            total_timesteps=8 * 16,
            checkpoint_every=0,
            compile=compile,
        )
        trainer = make_trainer(config)
        initial = [parameter.detach().clone() for parameter in trainer.policy.parameters()]
        result = trainer.train()
        return trainer, result.history[-1], initial

    eager, eager_metrics, initial = one_iteration(False)
    compiled, compiled_metrics, _ = one_iteration(True)
    assert compiled._compiled, "compile=True must go through torch.compile"
    assert not eager._compiled
    torch.testing.assert_close(compiled.buffer.actions, eager.buffer.actions, rtol=0, atol=0)
    for a, b in zip(compiled.policy.parameters(), eager.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(eager.policy.parameters(), initial, strict=True))
    for name, value in eager_metrics.items():
        if name.startswith("losses/"):
            assert compiled_metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name


def _rollout_with_endings(num_steps: int, num_rows: int, terminated_rows, truncated_rows):
    from warpsci.rollout import RolloutBuffer

    buffer = RolloutBuffer(num_steps, num_rows, (3,), (), torch.device("cpu"))
    buffer.valid.fill_(1.0)
    for row in terminated_rows:
        buffer.dones[row % num_steps, row] = 1.0
    for row in truncated_rows:
        buffer.dones[num_steps - 1, row] = 1.0
        buffer.truncated[num_steps - 1, row] = 1.0
    return buffer


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.5, 5.0])
def test_down_sampling_keeps_every_success_and_ratio_times_as_many_others(ratio):
    """WarpDrive's neg_pos_env_ratio: rows that terminated are all kept, floor(ratio * positives)
    others drawn at random (time limits are not successes), the rest weighted out of every step."""
    from warpsci.rollout import keep_successful_rows

    terminated, truncated = [3, 17, 40], [5, 6, 7]
    generator = torch.Generator().manual_seed(0)
    chosen = set()
    for _ in range(20):
        buffer = _rollout_with_endings(8, 64, terminated, truncated)
        kept = int(keep_successful_rows(buffer, ratio, generator))
        row_weights = buffer.valid.amax(dim=0)
        assert torch.equal(buffer.valid, row_weights.expand_as(buffer.valid))  # whole rows
        kept_rows = set(torch.nonzero(row_weights).flatten().tolist())
        assert set(terminated) <= kept_rows
        assert kept == len(kept_rows) == len(terminated) + math.floor(ratio * len(terminated))
        chosen |= kept_rows - set(terminated)
    assert len(chosen) > 3 * math.floor(ratio * len(terminated)) // 2  # a new draw every rollout


def test_down_sampling_keeps_every_row_without_a_success_or_with_few_others():
    from warpsci.rollout import keep_successful_rows

    generator = torch.Generator().manual_seed(0)
    no_success = _rollout_with_endings(4, 10, [], [1, 2])
    assert int(keep_successful_rows(no_success, 5.0, generator)) == 10
    assert bool((no_success.valid == 1).all())
    few_others = _rollout_with_endings(4, 10, [0, 1, 2], [])  # 7 others, 15 allowed
    assert int(keep_successful_rows(few_others, 5.0, generator)) == 10


def test_down_sampled_rows_do_not_move_the_a2c_loss():
    """The loss over the kept rows equals the loss over a rollout holding only those rows."""
    from warpsci.a2c import a2c_losses
    from warpsci.networks import ActorCritic

    torch.manual_seed(0)
    config = TrainConfig(algo="a2c", num_envs=6, num_steps=4, norm_adv=True, hidden_sizes=(8,))
    policy = ActorCritic.for_config(config, gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Discrete(2))
    obs, actions = torch.randn(4, 6, 3), torch.randint(0, 2, (4, 6))
    advantages, returns = torch.randn(4, 6), torch.randn(4, 6)
    weights = torch.zeros(4, 6)
    weights[:, [1, 4]] = 1.0
    weighted = a2c_losses(
        policy,
        config,
        (
            obs.flatten(0, 1),
            actions.flatten(),
            advantages.flatten(),
            returns.flatten(),
            weights.flatten(),
            None,
        ),
    )
    kept = [1, 4]
    alone = a2c_losses(
        policy,
        config,
        (
            obs[:, kept].flatten(0, 1),
            actions[:, kept].flatten(),
            advantages[:, kept].flatten(),
            returns[:, kept].flatten(),
            None,
            None,
        ),
    )
    assert weighted["loss"].detach().item() == pytest.approx(alone["loss"].detach().item(), rel=1e-5)


def test_neg_pos_env_ratio_is_refused_for_environments_of_several_agents():
    from warpsci.algorithms import make_trainer

    config = TrainConfig(
        env_id="TagGridworld-v0", num_envs=2, num_steps=4, total_timesteps=8, neg_pos_env_ratio=5
    )
    with pytest.raises(ValueError, match="whole environments of one agent; TagGridworld-v0 has"):
        make_trainer(config)


def test_neg_pos_env_ratio_trains_and_reports_the_rows_it_kept():
    from warpsci.algorithms import make_trainer

    config = TrainConfig(
        env_id="CartPole-v1",
        algo="a2c",
        device="cpu",
        num_envs=32,
        num_steps=8,
        total_timesteps=32 * 8 * 4,
        checkpoint_every=0,
        neg_pos_env_ratio=0.5,
    )
    history = make_trainer(config).train().history
    fractions = [row["charts/rows_trained"] for row in history]
    assert all(0 < fraction <= 1 for fraction in fractions)
    # Random Cartpole play lasts about 22 steps: after the first, an 8-step rollout ends the episodes
    # of about a third of the rows, and half as many others are drawn.
    assert fractions[0] == 1.0 and max(fractions[1:]) < 0.75


def test_rollouts_are_queued_ahead_only_where_a_rollout_leaves_saved_state_alone():
    def changes(**fields) -> bool:
        config = TrainConfig(env_id="CartPole-v1", num_envs=4, num_steps=8, total_timesteps=64, **fields)
        return PPOTrainer(config).rollout_changes_saved_state()

    assert not changes()
    assert changes(normalize_reward=True)  # the reward scaler's statistics are checkpointed
    assert changes(neg_pos_env_ratio=0.5)  # down-sampling draws from the checkpointed generator
