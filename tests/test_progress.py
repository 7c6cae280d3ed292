"""``warpsci.progress``: a tqdm bar in a terminal, whole lines elsewhere (a log file, a pipe)."""

from __future__ import annotations

import io

from warpsci.progress import Progress, _duration


def test_lines_where_the_stream_is_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(1000, initial=100, stream=stream, interval_s=3600)
    progress.update(100, {"SPS": "5"})  # the first update writes a line
    progress.update(100, {"SPS": "6"})  # within the interval: nothing
    progress.close()  # the last line
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert len(lines) == 2, lines
    assert lines[0].startswith("200/1,000 steps (20%), ") and lines[0].endswith(", SPS 5")
    assert lines[1].startswith("300/1,000 steps (30%), ") and lines[1].endswith(", SPS 6")
    assert " elapsed, " in lines[1] and " left" in lines[1]


def test_a_line_every_interval_and_none_repeated_at_the_end():
    stream = io.StringIO()
    progress = Progress(300, stream=stream, interval_s=0)
    for _ in range(3):
        progress.update(100, {})
    progress.close()  # the last update wrote the last line already
    lines = stream.getvalue().splitlines()
    assert [line.split(" ")[0] for line in lines] == ["100/300", "200/300", "300/300"]
    assert lines[-1].split(", ")[3] == "0:00 left"


def test_a_bar_in_a_terminal():
    stream = io.StringIO()
    progress = Progress(1000, stream=stream, interactive=True)
    progress.update(500, {"ret": "9.5"})
    progress.close()
    written = stream.getvalue()
    assert "\r" in written and "500/1000" in written and "ret=9.5" in written


def test_durations():
    assert _duration(0) == "0:00"
    assert _duration(125.4) == "2:05"
    assert _duration(3723) == "1:02:03"
    assert _duration(float("nan")) == "?" and _duration(float("inf")) == "?"
