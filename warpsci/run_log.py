"""Per-iteration metrics: ``progress.csv`` (CleanRL's metric names) and TensorBoard events."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any


class RunLog:
    """Appends one row of metrics per iteration to ``run_dir/progress.csv`` and TensorBoard.

    Args:
        run_dir: Folder of the run.
        resume: Append to an existing ``progress.csv`` instead of starting a new one.
        tensorboard: Also write TensorBoard events to ``run_dir/tensorboard``. Default True.
    """

    def __init__(self, run_dir: Path, resume: bool = False, tensorboard: bool = True) -> None:
        self.path = run_dir / "progress.csv"
        self._fields: list[str] | None = None
        if resume and self.path.exists():
            with self.path.open() as handle:
                header = handle.readline().strip()
            self._fields = header.split(",") if header else None
        elif self.path.exists():
            self.path.unlink()
        self._writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(run_dir / "tensorboard"))

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
        if self._writer is not None:
            step = int(metrics["global_step"])
            for name, value in metrics.items():
                if "/" in name and isinstance(value, (int, float)) and not math.isnan(value):
                    self._writer.add_scalar(name, value, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def read_progress(path: str | Path) -> list[dict[str, float]]:
    """Rows of a ``progress.csv`` as dictionaries of floats."""
    with Path(path).open() as handle:
        return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(handle)]
