"""warpsci.load_policy: act with a trained run on NumPy or torch input, single- and multi-agent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import warpsci
from warpsci.cli import main
from warpsci.evaluation import load_policies

QUIET = ["--device", "cpu", "--no-progress", "--eval-episodes", "0", "--num-envs", "8"]


def test_a_single_agent_run_acts_on_numpy_and_torch(tmp_path):
    run_dir = tmp_path / "cartpole"
    assert main(["train", "CartPole-v1", "--total-steps", "512", "--run-dir", str(run_dir), *QUIET]) == 0
    policy = warpsci.load_policy(run_dir)
    assert policy.env_id == "CartPole-v1" and len(policy.groups) == 1
    batch = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    actions = policy.act(batch)
    assert isinstance(actions, np.ndarray) and actions.shape == (32,)
    network = load_policies(run_dir)[policy.groups[0]]
    with torch.no_grad():
        expected = network.actor(torch.from_numpy(batch)).argmax(-1).numpy()
    assert np.array_equal(actions, expected)
    assert policy.act(batch[0]).shape == ()
    torch_actions = policy.act(
        torch.from_numpy(batch), deterministic=False, generator=torch.Generator().manual_seed(1)
    )
    assert isinstance(torch_actions, torch.Tensor) and torch_actions.shape == (32,)
    assert set(torch_actions.tolist()) <= {0, 1}
    assert policy.value(batch).shape == (32,)
    with pytest.raises(ValueError, match="must end in 4 entries"):
        policy.act(np.zeros((3, 5)))


def test_a_multi_group_run_acts_by_group(tmp_path):
    run_dir = tmp_path / "tag"
    params = "{num_taggers: 3, grid_length: 5, episode_length: 10}"
    argv = ["train", "TagGridworld-v0", "--total-steps", "256", "--num-steps", "16", "--env-params", params]
    assert main(argv + ["--run-dir", str(run_dir), *QUIET]) == 0
    policy = warpsci.load_policy(run_dir)
    assert policy.groups == ["tagger", "runner"]
    obs = {"tagger": np.zeros((8, 3, 17), np.float32), "runner": np.zeros((8, 1, 17), np.float32)}
    actions = policy.act(obs)
    assert actions["tagger"].shape == (8, 3) and actions["runner"].shape == (8, 1)
    assert policy.act(obs["runner"], group="runner").shape == (8, 1)
    with pytest.raises(ValueError, match=r"pass group=\.\.\."):
        policy.act(obs["runner"])
    with pytest.raises(ValueError, match="unknown group 'hunter'"):
        policy.act(obs["runner"], group="hunter")
