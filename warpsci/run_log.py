"""Per-iteration metrics: ``progress.csv`` (CleanRL's metric names), TensorBoard events and,
with ``--track``, Weights & Biases."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from warpsci.run_safety import truncate_progress


class RunLog:
    """Appends one row of metrics per iteration to ``run_dir/progress.csv`` and TensorBoard.

    Args:
        run_dir: Folder of the run.
        resume_at_step: Continue the log of a run resumed from a checkpoint at this step: rows and
            TensorBoard events logged after it (by the run before it crashed) are dropped. None
            (default) starts a new log.
        tensorboard: Also write TensorBoard events to ``run_dir/tensorboard``. Default True.
        tracker: A Weights & Biases run (:func:`warpsci.tracking.start_tracking`) that also gets
            every row; finished with the log. Default None.
    """

    def __init__(
        self,
        run_dir: Path,
        resume_at_step: int | None = None,
        tensorboard: bool = True,
        tracker: Any = None,
    ) -> None:
        self._tracker = tracker
        self.path = run_dir / "progress.csv"
        self._fields: list[str] | None = None
        resume = resume_at_step is not None
        if resume:
            truncate_progress(self.path, resume_at_step)
        if resume and self.path.exists():
            with self.path.open() as handle:
                header = handle.readline().strip()
            self._fields = header.split(",") if header else None
        elif self.path.exists():
            self.path.unlink()
        self._writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            purge = None if resume_at_step is None else resume_at_step + 1
            self._writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=purge)

    def write(self, metrics: dict[str, Any]) -> None:
        """Append ``metrics`` (must contain ``global_step``)."""
        new_file = self._fields is None
        if new_file:
            self._fields = list(metrics)
        with self.path.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=self._fields, extrasaction="ignore")
            if new_file:
                writer.writeheader()
            writer.writerow(metrics)
        step = int(metrics["global_step"])
        scalars = {
            name: value
            for name, value in metrics.items()
            if "/" in name and isinstance(value, (int, float)) and not math.isnan(value)
        }
        if self._writer is not None:
            for name, value in scalars.items():
                self._writer.add_scalar(name, value, step)
        if self._tracker is not None:
            self._tracker.log(scalars, step=step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._tracker is not None:
            self._tracker.finish()


def read_progress(path: str | Path) -> list[dict[str, float]]:
    """Rows of a ``progress.csv`` as dictionaries of floats."""
    with Path(path).open() as handle:
        return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(handle)]
