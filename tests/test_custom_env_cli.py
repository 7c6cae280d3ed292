"""A user's own environment from the CLI: ``warpsci train package.module:ATTRIBUTE``, then eval and
resume in the same way, and clear errors for a bad reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warpsci.cli import main

CORRIDOR = "examples.custom_environment:CORRIDOR"
QUIET = ["--device", "cpu", "--no-progress", "--num-envs", "8"]


def test_train_eval_and_resume_a_users_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    run_dir = tmp_path / "corridor"
    argv = ["train", CORRIDOR, "--total-steps", "1024", "--run-dir", str(run_dir), "--eval-episodes", "3"]
    assert main(argv + QUIET) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_id"] == CORRIDOR and summary["eval_episodes"] == 3
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "3", "--device", "cpu"]) == 0
    assert '"env_id": "examples.custom_environment:CORRIDOR"' in capsys.readouterr().out
    resume = ["train", "--resume", str(run_dir), "--total-steps", "2048", "--eval-episodes", "0"]
    assert main(resume + ["--device", "cpu", "--no-progress"]) == 0


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_module:ENV", "cannot import 'no_such_module'"),
        ("examples.custom_environment:NOPE", "examples.custom_environment.NOPE is nothing"),
        ("examples.custom_environment:main", "is a function, not a warpsci.EnvironmentDefinition"),
        ("CartPol-v1", "did you mean 'CartPole-v1'?"),
    ],
)
def test_bad_environment_references_are_one_line(reference, message, capsys):
    assert main(["train", reference, "--device", "cpu", "--total-steps", "64", "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
