"""What keeps a run's folder and results safe: one live run per folder, stopping cleanly on a signal,
and stopping before non-finite numbers reach a checkpoint.

* :class:`RunLock`: an exclusive ``fcntl.flock`` on ``RUN_DIR/.lock`` while a run trains. The
  operating system releases it when the process ends, however it ends, so a crashed run never
  blocks its own resume.
* :class:`StopSignals`: while training, SIGTERM and SIGINT only set a flag; the trainer finishes the
  iteration, writes a checkpoint and returns (a second signal acts as usual).
* :class:`NonFiniteError`: raised by the trainer when an iteration produced NaN or infinity; no
  checkpoint is written after it, so the last one on disk is the last good one.
* :func:`truncate_progress`: drops the rows a crashed run logged after its last checkpoint, so that
  a resumed run continues one step axis.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from warpsci.checkpoint import atomic_write_bytes

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; runs are then not protected from each other.
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"


class RunFolderError(ValueError):
    """A run folder that cannot be used as asked (it holds another run, or a live run uses it)."""


class NonFiniteError(RuntimeError):
    """An iteration produced NaN or infinity (the message names what, where and when)."""


class RunLock:
    """Hold ``run_dir/.lock`` exclusively for the life of a run (a context manager).

    Raises :class:`RunFolderError` naming the process that holds it.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self._handle: io.TextIOWrapper | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                handle.close()
                raise RunFolderError(
                    f"run folder {str(self.path.parent)!r} is in use by another warpsci process "
                    f"(pid {holder}); wait for it to finish or choose another --run-dir"
                ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._handle is not None:
            self._handle.close()  # closing releases the lock
            self._handle = None


def holds_run(run_dir: Path) -> str | None:
    """The first file that shows ``run_dir`` holds a run (a checkpoint, a log, a config), or None."""
    for name in ("checkpoint.pt", "progress.csv", "config.yaml"):
        if (Path(run_dir) / name).exists():
            return name
    return None


class StopSignals:
    """While active (a context manager), SIGTERM and SIGINT set :attr:`received` (the signal's name)
    instead of ending the process; a second signal gets the previous handler. Outside the main
    thread (where Python cannot install handlers) it does nothing."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in self.SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def _handle(self, number: int, frame: FrameType | None) -> None:
        self.received = signal.Signals(number).name
        signal.signal(number, self._previous[number])

    def __exit__(self, *exc_info: Any) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()


def exit_code(signal_name: str) -> int:
    """The shell's exit code for a process ended by ``signal_name``: 128 + its number."""
    return 128 + int(signal.Signals[signal_name])


def truncate_progress(path: Path, global_step: int) -> int:
    """Drop the rows of ``progress.csv`` logged after ``global_step`` (atomically); returns how
    many were dropped."""
    if not path.exists():
        return 0
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        rows = list(reader)
    if header is None or "global_step" not in header:
        return 0
    column = header.index("global_step")
    kept = [row for row in rows if row and float(row[column]) <= global_step]
    if len(kept) == len(rows):
        return 0
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(kept)
    atomic_write_bytes(path, text.getvalue().encode())
    return len(rows) - len(kept)
