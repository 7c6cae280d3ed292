"""A user's own environment from the CLI: ``warpsci train package.module:ATTRIBUTE``, then eval and
resume in the same way, and clear errors for a bad reference."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from warpsci.cli import main
from warpsci.registry import unregister

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_environment.py"
CORRIDOR = "my_corridor:CORRIDOR"


@pytest.fixture(autouse=True)
def users_folder(tmp_path, monkeypatch):
    """A user's folder holding their environment module (a copy of the example, under its own
    name: a source file imported under two module names would confuse Numba's disk cache), as the
    current folder; no Corridor-v0 registered before or after (the example's test registers its own)."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "my_corridor.py").write_text(EXAMPLE.read_text())
    monkeypatch.chdir(folder)
    monkeypatch.delitem(sys.modules, "my_corridor", raising=False)
    unregister("Corridor-v0")
    yield
    unregister("Corridor-v0")


QUIET = ["--device", "cpu", "--no-progress", "--num-envs", "8"]


def test_train_eval_and_resume_a_users_environment(tmp_path, capsys):
    run_dir = tmp_path / "corridor"
    argv = ["train", CORRIDOR, "--total-steps", "1024", "--run-dir", str(run_dir), "--eval-episodes", "3"]
    assert main(argv + QUIET) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_id"] == CORRIDOR and summary["eval_episodes"] == 3
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "3", "--device", "cpu"]) == 0
    assert '"env_id": "my_corridor:CORRIDOR"' in capsys.readouterr().out
    resume = ["train", "--resume", str(run_dir), "--total-steps", "2048", "--eval-episodes", "0"]
    assert main(resume + ["--device", "cpu", "--no-progress"]) == 0


def test_default_run_folder_of_a_users_environment_has_no_colon():
    """``runs/<id>__seed<n>__<time>``: a ``module:NAME`` id is named with a dash (a colon reads as a
    host in scp and as a drive on Windows)."""
    argv = ["train", CORRIDOR, "--total-steps", "64", "--num-steps", "8", "--eval-episodes", "0"]
    assert main(argv + QUIET) == 0
    (folder,) = Path("runs").iterdir()
    assert folder.name.startswith("my_corridor-CORRIDOR__seed1__"), folder.name


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_module:ENV", "cannot import 'no_such_module'"),
        ("my_corridor:NOPE", "my_corridor.NOPE is nothing"),
        ("my_corridor:main", "is a function, not a warpsci.EnvironmentDefinition"),
        ("CartPol-v1", "did you mean 'CartPole-v1'?"),
    ],
)
def test_bad_environment_references_are_one_line(reference, message, capsys):
    assert main(["train", reference, "--device", "cpu", "--total-steps", "64", "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
