"""Training on two GPUs of one host (NCCL, launched by torchrun): the weights stay bit-identical
with the update replayed as a CUDA graph, a multi-agent game trains on both GPUs, and more
processes than GPUs is one clear line. Needs two CUDA GPUs; skipped without.

Run on a 2-GPU host: ``python -m pytest -q -m gpu tests/test_distributed_gpu.py``; results in
BENCHMARKS.md ("Several GPUs").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fresh_interpreter import REPO_ROOT

from warpsci.run_log import read_progress

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"),
]


def torchrun_train(processes: int, *arguments: str, timeout: float = 600) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]
    command += [str(processes), "-m", "warpsci", "train", *arguments, "--device", "cuda", "--no-progress"]
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "NCCL_NVLS_ENABLE": "0",  # NVLink multicast off (it can take a shared host out of service)
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
        "WARPSCI_DIST_TIMEOUT_S": "300",
    }
    return subprocess.run(
        command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=timeout
    )


def test_two_gpus_keep_the_weights_identical_with_captured_updates(tmp_path: Path):
    run_dir = tmp_path / "run"
    completed = torchrun_train(
        2, "CartPole-v1", "--run-dir", str(run_dir), "--num-envs", "2048", "--num-steps", "32",
        "--total-steps", str(2048 * 32 * 6), "--eval-episodes", "4",
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["ranks_in_sync"] is True, summary
    rows = read_progress(run_dir / "progress.csv")
    assert [row["global_step"] for row in rows] == [2048 * 32 * (k + 1) for k in range(6)]
    assert all(torch.isfinite(torch.tensor(row["losses/value_loss"])) for row in rows)


def test_two_gpus_train_every_group_of_a_multi_agent_game(tmp_path: Path):
    run_dir = tmp_path / "run"
    config = str(REPO_ROOT / "examples" / "configs" / "tag_gridworld_small.yaml")
    completed = torchrun_train(
        2, "TagGridworld-v0", "--config", config, "--run-dir", str(run_dir), "--total-steps", "40000"
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["ranks_in_sync"] is True, summary
    assert {"return_last100/tagger", "return_last100/runner"} <= set(summary)


def test_more_processes_than_gpus_is_one_clear_line(tmp_path: Path):
    gpus = torch.cuda.device_count()
    completed = torchrun_train(
        gpus + 1, "CartPole-v1", "--run-dir", str(tmp_path / "r"), "--num-envs", str(64 * (gpus + 1)),
        timeout=300,
    )  # fmt: skip
    assert completed.returncode != 0
    assert (
        f"warpsci train: error: process {gpus} on this host has no GPU of its own: the host has "
        f"{gpus} GPU(s); start at most {gpus} processes per host" in completed.stderr
    ), completed.stderr[-3000:]
