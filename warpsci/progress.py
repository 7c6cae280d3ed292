"""A training run's progress on standard error: a tqdm bar in a terminal, plain lines elsewhere.

Redirected to a file or a pipe (a cluster job's log, ``| tee``), a tqdm bar rewrites itself with
carriage returns, so the log holds one long line that grows all run. There the progress is written
as whole lines instead, one every :data:`LINE_INTERVAL_S` seconds and one at the end, each giving
the steps done, the mean rate since the first update, the time left at that rate and the run's
own figures (``shown``).
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

#: Seconds between two progress lines where standard error is not a terminal.
LINE_INTERVAL_S = 30.0


class Progress:
    """Steps done out of ``total``, from ``initial`` (a resumed run's steps); ``stream`` defaults
    to standard error, ``interactive`` to whether it is a terminal (then a tqdm bar)."""

    def __init__(
        self,
        total: int,
        initial: int = 0,
        stream: TextIO | None = None,
        interactive: bool | None = None,
        interval_s: float = LINE_INTERVAL_S,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if interactive is None:
            interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.done, self.interval_s = total, initial, interval_s
        self._first_done, self._start = initial, time.monotonic()
        self._last_line: float | None = None
        self._last_line_done: int | None = None
        self._shown: dict[str, str] = {}
        self._bar = None
        if interactive:
            from tqdm import tqdm

            # smoothing=0: the mean rate since the start, an honest time left.
            self._bar = tqdm(total=total, initial=initial, unit="step", smoothing=0, file=self.stream)

    def update(self, steps: int, shown: dict[str, str]) -> None:
        """``steps`` more done; ``shown``: the figures to show beside them (name -> text)."""
        self.done += steps
        self._shown = shown
        if self._bar is not None:
            self._bar.update(steps)
            self._bar.set_postfix(shown)
            return
        now = time.monotonic()
        if self._last_line is None or now - self._last_line >= self.interval_s:
            self._write_line(now)

    def close(self) -> None:
        """End the bar, or write the last line (unless the last update wrote it)."""
        if self._bar is not None:
            self._bar.close()
            return
        if self._last_line is None or self._last_line_done != self.done:
            self._write_line(time.monotonic())

    def _write_line(self, now: float) -> None:
        elapsed = now - self._start
        rate = (self.done - self._first_done) / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        percent = 100.0 * self.done / self.total if self.total else 100.0
        figures = "".join(f", {name} {text}" for name, text in self._shown.items())
        print(
            f"{self.done:,}/{self.total:,} steps ({percent:.0f}%), {rate:,.0f} steps/s, "
            f"{_duration(elapsed)} elapsed, {_duration(left)} left{figures}",
            file=self.stream,
            flush=True,
        )
        self._last_line, self._last_line_done = now, self.done


def _duration(seconds: float) -> str:
    """``1:02:03`` or ``2:03`` (minutes:seconds); ``?`` when unknown."""
    if not math.isfinite(seconds):
        return "?"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
