"""Learning tests: the trained agent must reach a return threshold (CPU backend)."""

import json
import subprocess
import sys

from warpsci.run_log import read_progress


def test_cartpole_ppo_reaches_475_on_the_cpu(tmp_path):
    """``warpsci train CartPole-v1 --device cpu`` with the packaged preset solves Cartpole."""
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "warpsci.cli",
            "train",
            "CartPole-v1",
            "--device",
            "cpu",
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = read_progress(run_dir / "progress.csv")
    best = max(row["charts/episodic_return"] for row in rows if row["charts/episodes"] > 0)
    assert best >= 475, f"best mean episodic return {best}"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["eval_mean_return"] >= 475, summary
