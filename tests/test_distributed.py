"""Training on several processes (torch.distributed with gloo, launched by torchrun, on the CPU):
the preset learns, weights stay bit-identical across ranks, only rank 0 writes, a multi-process
run resumes, a stop signal to one rank stops all with one checkpoint, and bad launches end with
one clear line instead of a hang."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from fresh_interpreter import REPO_ROOT

from warpsci.distributed import DistributedError, Processes, contiguous_span, timeout_s
from warpsci.run_log import read_progress

QUIET = ["--device", "cpu", "--no-progress"]
WORKER = REPO_ROOT / "tests" / "distributed_worker.py"
#: A small CartPole run: 128 environment steps an iteration over both processes.
SMALL = {"num_envs": 8, "num_steps": 16, "num_minibatches": 2, "update_epochs": 1}


def torchrun(*arguments: str, processes: int = 2) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(processes),
        *arguments,
    ]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "WARPSCI_DIST_TIMEOUT_S": "900", **extra}


def run(command: list[str], timeout: float = 600, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=REPO_ROOT, env=environment(**extra), capture_output=True, text=True, timeout=timeout
    )


def small_config(tmp_path: Path, **fields) -> str:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump({**SMALL, **fields}))
    return str(path)


# ----------------------------------------------------------------------------- one process


def test_share_seed_and_device_per_rank():
    one, second = Processes(0, 2, 0), Processes(1, 2, 1)
    assert one.share(64, "num_envs") == second.share(64, "num_envs") == 32
    assert one.seed(5) == 5 and second.seed(5) not in (5, 6) and second.seed(5) != second.seed(6)
    assert second.device("cuda") == "cuda:1" and second.device("cpu") == "cpu"
    assert Processes().device("cuda") == "cuda" and not Processes().active
    with pytest.raises(DistributedError, match="num_envs 7 does not split over 2 processes"):
        one.share(7, "num_envs")


def test_gradients_back_to_back_in_one_buffer_are_one_span():
    buffer = torch.arange(12.0)
    first, second, third = buffer[:6].view(2, 3), buffer[6:8], buffer[8:12].view(2, 2)
    span = contiguous_span([first, second, third])
    assert span is not None and torch.equal(span, buffer)
    assert span.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
    inner = contiguous_span([buffer[2:4], buffer[4:9]])
    assert inner is not None and torch.equal(inner, buffer[2:9])
    # A gap, another order, another buffer, a strided view or another dtype: no span.
    assert contiguous_span([buffer[:4], buffer[5:8]]) is None
    assert contiguous_span([second, first]) is None
    assert contiguous_span([first, torch.arange(2.0)]) is None
    assert contiguous_span([buffer.view(3, 4)[:, 0]]) is None
    assert contiguous_span([buffer[:2], buffer.view(torch.int32)[2:4]]) is None


def test_timeout_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("WARPSCI_DIST_TIMEOUT_S", "12.5")
    assert timeout_s() == 12.5
    monkeypatch.setenv("WARPSCI_DIST_TIMEOUT_S", "soon")
    with pytest.raises(DistributedError, match="WARPSCI_DIST_TIMEOUT_S='soon' is not a positive number"):
        timeout_s()


# ----------------------------------------------------------------------------- two processes


@pytest.mark.slow
def test_two_processes_train_the_cartpole_preset_to_the_threshold(tmp_path):
    run_dir = tmp_path / "run"
    completed = run(
        torchrun("-m", "warpsci", "train", "CartPole-v1", "--run-dir", str(run_dir), "--target-return", "475")
        + QUIET,
        timeout=1500,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["ranks_in_sync"] is True
    assert summary["solved_at_step"] is not None, summary
    assert summary["eval_mean_return"] >= 475, summary
    # One log, by rank 0, on the global step axis: 32 environments x 64 steps per iteration.
    rows = read_progress(run_dir / "progress.csv")
    assert [row["global_step"] for row in rows] == [2048 * (k + 1) for k in range(len(rows))]
    assert completed.stdout.count('"eval_mean_return"') == 1


def test_a_two_process_run_resumes_on_its_step_axis(tmp_path):
    run_dir, config = tmp_path / "run", small_config(tmp_path, checkpoint_every=2)
    first = run(
        torchrun("-m", "warpsci", "train", "CartPole-v1", "--config", config, "--run-dir", str(run_dir))
        + QUIET
        + ["--total-steps", str(128 * 4), "--eval-episodes", "0"]
    )
    assert first.returncode == 0, first.stderr[-3000:]
    second = run(
        torchrun("-m", "warpsci", "train", "--resume", str(run_dir), "--total-steps", str(128 * 7))
        + ["--no-progress", "--eval-episodes", "0"]
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming" in second.stderr and "at step 512" in second.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] == 128 * 7 and summary["ranks_in_sync"] is True
    steps = [row["global_step"] for row in read_progress(run_dir / "progress.csv")]
    assert steps == [128 * (k + 1) for k in range(7)]


def test_sigterm_to_one_rank_checkpoints_once_and_stops_every_rank(tmp_path):
    run_dir, config = tmp_path / "run", small_config(tmp_path, checkpoint_every=0, checkpoint_every_s=0)
    command = torchrun("-m", "warpsci", "train", "CartPole-v1", "--config", config, "--run-dir", str(run_dir))
    launcher = subprocess.Popen(
        command + QUIET + ["--total-steps", str(128 * 100_000), "--eval-episodes", "0"],
        cwd=REPO_ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    progress = run_dir / "progress.csv"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and launcher.poll() is None:
        if progress.exists() and len(progress.read_text().splitlines()) >= 4:
            break
        time.sleep(0.5)
    assert launcher.poll() is None, launcher.communicate()[1][-3000:]
    workers = subprocess.run(
        ["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True
    ).stdout.split()
    assert len(workers) == 2, workers
    os.kill(int(workers[-1]), signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=180)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "SIGTERM", (summary, stderr[-3000:])
    assert summary["ranks_in_sync"] is True
    # One checkpoint, written at the stop (none were due before it).
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == [
        f"iteration-{summary['global_step'] // 128:08d}.pt"
    ]
    assert len(read_progress(progress)) == summary["global_step"] // 128


def test_a_rank_that_dies_stops_the_others(tmp_path):
    start = time.monotonic()
    completed = run(
        torchrun(str(WORKER), "die", str(tmp_path / "run")),
        timeout=300,
    )
    assert completed.returncode != 0
    assert "exitcode  : 3" in completed.stderr or "exit code 3" in completed.stderr, completed.stderr[-3000:]
    assert time.monotonic() - start < 240


def test_weights_that_differ_by_one_bit_are_caught():
    completed = run(torchrun(str(WORKER), "diverge"), timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    # The two processes share torchrun's stdout: their lines may run together.
    report = r"rank=\d in_sync_before=(?:True|False) in_sync_after=(?:True|False)"
    lines = sorted(re.findall(report, completed.stdout))
    assert lines == [
        "rank=0 in_sync_before=True in_sync_after=False",
        "rank=1 in_sync_before=True in_sync_after=False",
    ]


def test_gradients_are_averaged_in_their_buffer_or_gathered_and_copied_back():
    completed = run(torchrun(str(WORKER), "average"), timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    # The two processes share torchrun's stdout: their lines may run together.
    flag = "(?:True|False)"
    report = rf"rank=\d span=\[[^\]]*\] separate=\[[^\]]*\] aliased={flag} in_place={flag}"
    reports = sorted(re.findall(report, completed.stdout))
    # Rank r's buffer is arange(7) * (r + 1): the mean is arange(7) * 1.5; the separate gradients
    # are 10 r + i: the means 5 and 6.
    span = [round(1.5 * value, 3) for value in range(7)]
    assert reports == [
        f"rank={rank} span={span} separate=[5.0, 5.0, 6.0, 6.0] aliased=True in_place=True" for rank in (0, 1)
    ]


# ----------------------------------------------------------------------------- bad launches


def test_num_envs_that_does_not_split_is_one_clear_line(tmp_path):
    completed = run(
        torchrun("-m", "warpsci", "train", "CartPole-v1", "--num-envs", "7", "--run-dir", str(tmp_path / "r"))
        + QUIET,
        timeout=300,
    )
    assert completed.returncode != 0
    assert (
        "warpsci train: error: num_envs 7 does not split over 2 processes: give a multiple of 2"
        in completed.stderr
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_rendezvous_ends_within_the_timeout(tmp_path):
    start = time.monotonic()
    completed = run(
        [sys.executable, "-m", "warpsci", "train", "CartPole-v1", "--run-dir", str(tmp_path / "r"), *QUIET],
        timeout=120,
        WORLD_SIZE="2",
        RANK="1",
        LOCAL_RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        WARPSCI_DIST_TIMEOUT_S="5",
    )
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert lines[-1].startswith(
        "warpsci train: error: rank 1 of 2 could not join the process group at 127.0.0.1:"
    )
    assert "Traceback" not in completed.stderr
    assert time.monotonic() - start < 90
    assert not (tmp_path / "r").exists()


def test_two_processes_train_every_group_of_a_multi_agent_game(tmp_path):
    run_dir = tmp_path / "run"
    config = str(REPO_ROOT / "examples" / "configs" / "tag_gridworld_small.yaml")
    completed = run(
        torchrun("-m", "warpsci", "train", "TagGridworld-v0", "--config", config, "--run-dir", str(run_dir))
        + QUIET
        + ["--total-steps", "20000"],
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["ranks_in_sync"] is True
    assert {"return_last100/tagger", "return_last100/runner", "eval_mean_length"} <= set(summary)
    payload = torch.load(run_dir / "checkpoint.pt", weights_only=False)
    assert sorted(payload["learners"]) == ["runner", "tagger"]
