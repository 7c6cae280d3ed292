"""Runs that survive: a killed run resumes on one step axis, SIGTERM checkpoints and exits 143, NaN
stops a run before it reaches a checkpoint, run folders are never overwritten or shared, damaged
or foreign checkpoints are refused by name, and training is deterministic on the CPU."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch
import yaml
from fresh_interpreter import REPO_ROOT

import warpsci
from warpsci.algorithms import make_trainer, resume_trainer
from warpsci.checkpoint import CheckpointError, load_checkpoint
from warpsci.cli import main
from warpsci.config import TrainConfig
from warpsci.run_log import read_progress
from warpsci.run_safety import NonFiniteError, RunLock, truncate_progress

#: A small CartPole run: 128 steps an iteration, a checkpoint every 3 iterations.
SMALL = {
    "num_envs": 8,
    "num_steps": 16,
    "num_minibatches": 2,
    "update_epochs": 1,
    "checkpoint_every": 3,
    "checkpoint_every_s": 0,
    "total_timesteps": 8 * 16 * 5000,
}
QUIET = ["--device", "cpu", "--no-progress", "--eval-episodes", "0"]


def start_training(run_dir: Path, config_path: Path, *extra: str) -> subprocess.Popen:
    config_path.write_text(yaml.safe_dump(SMALL))
    command = [sys.executable, "-m", "warpsci.cli", "train", "CartPole-v1", "--config", str(config_path)]
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        command + ["--run-dir", str(run_dir), *QUIET, *extra],
        cwd=REPO_ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_rows(process: subprocess.Popen, progress: Path, rows: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"training ended early: {process.stderr.read()[-2000:]}")
        if progress.exists() and len(progress.read_text().splitlines()) > rows:
            return
        time.sleep(0.2)
    process.kill()
    raise AssertionError(f"no {rows} rows in {progress} after {timeout} s")


def every_checkpoint(run_dir: Path) -> list[Path]:
    return [run_dir / "checkpoint.pt", *sorted((run_dir / "checkpoints").glob("*.pt"))]


def test_a_killed_run_resumes_on_one_step_axis(tmp_path):
    run_dir = tmp_path / "run"
    process = start_training(run_dir, tmp_path / "config.yaml")
    wait_for_rows(process, run_dir / "progress.csv", 8)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    saved = load_checkpoint(run_dir)
    logged = read_progress(run_dir / "progress.csv")
    assert len(logged) >= 8 and saved["iteration"] >= 3

    total = (len(logged) + 4) * 128
    assert main(["train", "--resume", str(run_dir), "--total-steps", str(total), *QUIET]) == 0
    steps = [row["global_step"] for row in read_progress(run_dir / "progress.csv")]
    assert all(later > earlier for earlier, later in zip(steps, steps[1:], strict=False)), steps
    assert steps[0] == 128 and steps[-1] == total
    checkpoints = every_checkpoint(run_dir)
    assert 2 <= len(checkpoints) <= 4  # checkpoint.pt and the newest 3 kept
    for path in checkpoints:
        payload = load_checkpoint(path)
        assert payload["config"]["env_id"] == "CartPole-v1" and payload["format"] == 2
    assert load_checkpoint(run_dir)["global_step"] == total


def test_sigterm_checkpoints_the_last_iteration_and_exits_143(tmp_path):
    run_dir = tmp_path / "run"
    process = start_training(run_dir, tmp_path / "config.yaml")
    wait_for_rows(process, run_dir / "progress.csv", 4)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "Traceback" not in stderr and f"--resume {run_dir}" in stderr
    last = read_progress(run_dir / "progress.csv")[-1]
    saved = load_checkpoint(run_dir)
    assert saved["iteration"] == last["iteration"] and saved["global_step"] == last["global_step"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "SIGTERM" and summary["global_step"] == last["global_step"]


@dataclasses.dataclass(frozen=True)
class PoisonedParams:
    poison_at: int = 20  #: from this step of an environment on, rewards are NaN
    max_episode_steps: int = 1000


@warpsci.agent_function
def _reset(state, params, env, agent, key):
    state.position[env, agent] = 0.0


@warpsci.agent_function
def _step(state, params, actions, env, agent, phase, key):
    state.steps[env, agent] += 1
    state.position[env, agent] += 1.0 if actions[env, agent] == 1 else -1.0
    return np.float32(np.nan) if state.steps[env, agent] >= params.poison_at else np.float32(0.1)


@warpsci.agent_function
def _observe(state, params, obs, env, agent):
    obs[env, agent, 0] = state.position[env, agent] * np.float32(0.01)


@warpsci.agent_function
def _never(state, params, env):
    return False


POISONED = warpsci.EnvironmentDefinition(
    name="Poisoned-v0",
    params_type=PoisonedParams,
    state_fields=(warpsci.StateField("position", np.float32), warpsci.StateField("steps", np.int32)),
    reset_agent=_reset,
    step_agent=_step,
    observe_agent=_observe,
    is_terminal=_never,
    observation_space=lambda params: gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32),
    action_space=lambda params: gymnasium.spaces.Discrete(2),
    max_episode_steps=lambda params: params.max_episode_steps,
)


@warpsci.agent_function
def _step_hidden(state, params, actions, env, agent, phase, key):
    state.steps[env, agent] += 1
    if state.steps[env, agent] >= params.poison_at:
        state.hidden[env, agent] = np.float32(np.nan)
    return np.float32(0.1)


POISONED_STATE = dataclasses.replace(
    POISONED,
    name="PoisonedState-v0",
    state_fields=(*POISONED.state_fields, warpsci.StateField("hidden", np.float32)),
    step_agent=_step_hidden,
    finite_state_fields=("hidden",),
)


ON_THE_GPU = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")],
)


@pytest.mark.parametrize("device", ["cpu", ON_THE_GPU])
def test_an_environment_can_have_its_state_checked(device):
    """NaN in a state field that no observation shows: caught when the environment lists the field
    (on the GPU, by the checks inside the captured update)."""
    if "PoisonedState-v0" not in warpsci.registered_ids():
        warpsci.register(POISONED_STATE)
    config = TrainConfig(
        env_id="PoisonedState-v0", num_envs=4, num_steps=8, total_timesteps=320, device=device
    )
    with pytest.raises(NonFiniteError, match="iteration 3 .* in environment state 'hidden'"):
        make_trainer(config).train()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_nan_rewards_are_caught_by_the_checks_inside_the_captured_update():
    if "Poisoned-v0" not in warpsci.registered_ids():
        warpsci.register(POISONED)
    config = TrainConfig(env_id="Poisoned-v0", num_envs=4, num_steps=8, total_timesteps=320, device="cuda")
    trainer = make_trainer(config)
    with pytest.raises(NonFiniteError, match="iteration 3 .*rewards"):
        trainer.train()
    assert trainer._update_graph is not None and trainer._update_graph.captures == 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_the_health_flags_name_exactly_the_tensors_holding_nan_or_infinity(bad):
    trainer = make_trainer(TrainConfig(num_envs=4, num_steps=8, total_timesteps=320))
    buffer = trainer.buffer
    buffer.obs.fill_(3.0e38)  # large but finite: no false alarm
    buffer.rewards.fill_(-3.0e38)
    assert trainer.health_flags().tolist() == [1.0, 1.0, 1.0]
    buffer.rewards[5, 2] = bad
    assert trainer.health_flags().tolist() == [1.0, 0.0, 1.0]


def test_the_health_flags_read_each_tensor_in_its_own_precision():
    trainer = make_trainer(TrainConfig(num_envs=4, num_steps=8, total_timesteps=320))
    trainer.buffer.rewards = trainer.buffer.rewards.double()
    trainer.buffer.rewards.fill_(1.0e300)  # finite in float64, not in float32
    assert trainer.health_flags().tolist() == [1.0, 1.0, 1.0]
    trainer.buffer.rewards[1, 1] = math.nan
    assert trainer.health_flags().tolist() == [1.0, 0.0, 1.0]


def test_state_check_field_names_are_checked():
    with pytest.raises(ValueError, match="not state fields"):
        dataclasses.replace(POISONED, finite_state_fields=("velocity",))


def test_nan_rewards_stop_the_run_before_any_checkpoint_holds_them(tmp_path, capsys):
    """Rewards turn NaN in the environments' 20th step (iteration 3 of 8-step rollouts): training
    stops with a message naming the rewards and the iteration, exits non-zero, and the checkpoint on
    disk is iteration 2's, with finite weights."""
    if "Poisoned-v0" not in warpsci.registered_ids():
        warpsci.register(POISONED)
    run_dir = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"num_envs": 4, "num_steps": 8, "checkpoint_every": 1,
                                      "num_minibatches": 1, "total_timesteps": 4 * 8 * 10}))  # fmt: skip
    code = main(["train", "Poisoned-v0", "--config", str(config), "--run-dir", str(run_dir), *QUIET])
    assert code != 0
    error = capsys.readouterr().err
    assert "iteration 3" in error and "NaN or infinity in rewards" in error and "Traceback" not in error
    saved = load_checkpoint(run_dir)
    assert saved["iteration"] == 2
    assert all(torch.isfinite(tensor).all() for tensor in saved["policy"].values())
    assert [row["iteration"] for row in read_progress(run_dir / "progress.csv")] == [1, 2]

    trainer = make_trainer(TrainConfig(env_id="Poisoned-v0", num_envs=4, num_steps=8, total_timesteps=320))
    with pytest.raises(NonFiniteError, match="rewards"):
        trainer.train()
    with pytest.raises(NonFiniteError, match="refusing"):
        trainer.save(tmp_path / "after.pt")


def test_a_fresh_run_never_overwrites_a_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = [
        "train",
        "CartPole-v1",
        "--total-steps",
        "256",
        "--num-envs",
        "8",
        "--run-dir",
        str(run_dir),
        *QUIET,
    ]
    assert main(argv) == 0
    before = (run_dir / "progress.csv").read_text()
    capsys.readouterr()
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert "already holds a run (checkpoint.pt)" in error and f"--resume {run_dir}" in error
    assert len(error.splitlines()) == 1, error  # refused before the training line is printed
    assert (run_dir / "progress.csv").read_text() == before


def test_a_live_run_locks_its_folder_and_a_dead_one_does_not(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "CartPole-v1", "--total-steps", "256", "--num-envs", "8", "--run-dir", str(run_dir),
                 *QUIET]) == 0  # fmt: skip
    resume = ["train", "--resume", str(run_dir), "--total-steps", "512", *QUIET]
    with RunLock(run_dir):
        capsys.readouterr()
        assert main(resume) == 2
        assert f"in use by another warpsci process (pid {os.getpid()})" in capsys.readouterr().err
    (run_dir / ".lock").write_text("999999")  # left by a process that died: no lock is held
    assert main(resume) == 0


def test_checkpoints_of_another_run_are_refused_by_name(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "CartPole-v1", "--total-steps", "256", "--num-envs", "8", "--run-dir", str(run_dir),
                 *QUIET]) == 0  # fmt: skip
    payload = load_checkpoint(run_dir)
    pendulum = make_trainer(TrainConfig(env_id="Pendulum-v1", num_envs=2, num_steps=8, total_timesteps=16))
    with pytest.raises(CheckpointError, match="from a CartPole-v1 PPO run; this run is Pendulum-v1 PPO"):
        pendulum.load(payload)
    with pytest.raises(CheckpointError, match="holds a CartPole-v1 run, not Pendulum-v1"):
        resume_trainer(run_dir, expected_env_id="Pendulum-v1")
    newer = dict(payload, format=99, warpsci_version="9.0")
    with pytest.raises(CheckpointError, match="format 99, written by warpsci 9.0"):
        make_trainer(TrainConfig.from_dict(payload["config"])).load(newer)


def test_damaged_checkpoints_are_errors_and_resume_falls_back_to_a_kept_one(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--num-envs", "8", "--run-dir", str(run_dir), *QUIET]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"checkpoint_every": 1, "num_steps": 16, "num_minibatches": 2}))
    assert main(argv + ["--total-steps", "384", "--config", str(config)]) == 0
    latest = run_dir / "checkpoint.pt"
    data = latest.read_bytes()
    latest.unlink()  # a hard link to the newest kept one: replace it rather than cut both
    latest.write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "2", "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert "cannot be read" in error and "Traceback" not in error
    trainer = resume_trainer(run_dir)
    assert trainer.resumed_from.parent.name == "checkpoints" and trainer.iteration == 3
    assert main(["eval", str(tmp_path / "nowhere"), "--device", "cpu"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_resume_drops_rows_logged_after_the_checkpoint(tmp_path):
    progress = tmp_path / "progress.csv"
    progress.write_text("global_step,iteration,x\r\n128,1,0.5\r\n256,2,0.25\r\n384,3,0.125\r\n")
    assert truncate_progress(progress, 256) == 1
    assert [row["global_step"] for row in read_progress(progress)] == [128, 256]
    assert truncate_progress(progress, 256) == 0


def test_training_on_the_cpu_is_deterministic():
    """Same seed, same threads: bit-identical weights after four PPO updates."""
    weights = []
    for _ in range(2):
        config = TrainConfig(
            env_id="CartPole-v1", num_envs=8, num_steps=16, total_timesteps=8 * 16 * 4, seed=5
        )
        trainer = make_trainer(config)
        trainer.train()
        weights.append(torch.cat([p.detach().flatten() for p in trainer.policy.parameters()]))
    assert torch.equal(weights[0], weights[1])
