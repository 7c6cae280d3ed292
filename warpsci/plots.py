"""The training-curve picture of a run: ``RUN_DIR/training_curve.png`` from its ``progress.csv``.

matplotlib is an optional extra (``pip install "warpsci[plots]"``): without it a run trains and
logs as usual and draws no picture, and ``warpsci render`` says what to install."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from warpsci.run_log import read_progress

#: File name of the picture in the run folder.
CURVE_NAME = "training_curve.png"


INSTALL_HINT = 'pip install "warpsci[plots]" (or pip install matplotlib)'


def pyplot(purpose: str) -> Any:
    """``matplotlib.pyplot`` with the file-only Agg backend, or ValueError naming ``purpose`` and
    what to install."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError(f"{purpose} needs matplotlib, which is not installed: {INSTALL_HINT}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_training_curve(run_dir: str | Path) -> Path | None:
    """Draw the last-100 mean return of each group and the steps per second against environment
    steps into ``RUN_DIR/training_curve.png``; returns its path (None when nothing was logged, or
    without matplotlib)."""
    try:
        plt = pyplot("the training curve")
    except ValueError:
        return None

    run_dir = Path(run_dir)
    progress = run_dir / "progress.csv"
    if not progress.exists():
        return None
    rows = read_progress(progress)
    if not rows:
        return None
    steps = [row["global_step"] for row in rows]
    returns = sorted(name for name in rows[0] if name.startswith("charts/return_last100"))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for name in returns:
        label = name.removeprefix("charts/return_last100").removeprefix("/") or "return"
        left.plot(steps, [row[name] for row in rows], label=label)
    left.set_xlabel("environment steps")
    left.set_ylabel("mean return, last 100 episodes")
    if len(returns) > 1:
        left.legend(title="group")
    left.grid(alpha=0.3)
    rate = "charts/SPS" if "charts/SPS" in rows[0] else None
    if rate is not None:
        right.plot(steps, [row[rate] for row in rows])
    right.set_xlabel("environment steps")
    right.set_ylabel("environment steps per second")
    right.grid(alpha=0.3)
    figure.suptitle(run_dir.name)
    path = run_dir / CURVE_NAME
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
