"""``--track``: the config and every iteration's metrics reach Weights & Biases (a stand-in module
here: CI has no W&B account), a resumed run continues the same W&B run, and a missing ``wandb``
is one clear line."""

from __future__ import annotations

import sys
import types

import pytest

from warpsci.algorithms import make_trainer, resume_trainer
from warpsci.cli import main
from warpsci.config import TrainConfig
from warpsci.run_log import read_progress

SMALL = {"env_id": "CartPole-v1", "num_envs": 4, "num_steps": 16, "num_minibatches": 2, "update_epochs": 1}


class StandInRun:
    def __init__(self, **options):
        self.options, self.logged, self.finished = options, [], False

    def log(self, data: dict, step: int) -> None:
        self.logged.append((step, data))

    def finish(self) -> None:
        self.finished = True


@pytest.fixture
def wandb_runs(monkeypatch) -> list[StandInRun]:
    runs: list[StandInRun] = []
    ids = iter(["first-id", "second-id"])
    module = types.ModuleType("wandb")
    module.init = lambda **options: runs.append(StandInRun(**options)) or runs[-1]
    module.util = types.SimpleNamespace(generate_id=lambda: next(ids))
    monkeypatch.setitem(sys.modules, "wandb", module)
    return runs


def test_metrics_and_config_reach_wandb_and_a_resume_continues_the_run(tmp_path, wandb_runs):
    run_dir = tmp_path / "run"
    config = TrainConfig(**SMALL, total_timesteps=64 * 3, track=True, wandb_project="tests")
    make_trainer(config, run_dir).train()
    (first,) = wandb_runs
    assert first.options["project"] == "tests" and first.options["name"] == "run"
    assert first.options["id"] == "first-id" and first.options["resume"] == "allow"
    assert first.options["config"]["env_id"] == "CartPole-v1" and first.options["config"]["track"] is True
    rows = read_progress(run_dir / "progress.csv")
    assert [step for step, _ in first.logged] == [int(row["global_step"]) for row in rows] == [64, 128, 192]
    assert first.logged[-1][1]["losses/value_loss"] == pytest.approx(rows[-1]["losses/value_loss"])
    assert "global_step" not in first.logged[-1][1] and first.finished

    resume_trainer(run_dir, total_timesteps=64 * 5).train()
    second = wandb_runs[-1]
    assert second.options["id"] == "first-id", "a resumed run must continue its W&B run"
    assert [step for step, _ in second.logged] == [256, 320]


def test_track_without_wandb_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    argv = ["train", "CartPole-v1", "--device", "cpu", "--total-steps", "64", "--num-envs", "4", "--track"]
    assert main(argv + ["--run-dir", str(tmp_path / "run"), "--no-progress", "--eval-episodes", "0"]) == 2
    error = capsys.readouterr().err
    assert "--track logs to Weights & Biases, which is not installed: pip install wandb" in error
    assert "Traceback" not in error
