"""Every row of ERRORS.md's table: the command, with its placeholders filled in, exits with code 2
and one line that contains the row's text, and no traceback."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from warpsci.cli import main

ERRORS = Path(__file__).resolve().parents[1] / "ERRORS.md"
ROW = re.compile(r"^\| ([a-z0-9-]+) \| `(.*)` \| `(.*)` \|$")


def table_rows() -> list[tuple[str, str, str]]:
    rows = [ROW.match(line) for line in ERRORS.read_text().splitlines()]
    return [match.groups() for match in rows if match]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("errors") / "run"
    argv = ["train", "CartPole-v1", "--device", "cpu", "--total-steps", "256", "--num-envs", "8"]
    assert main(argv + ["--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "0"]) == 0
    return run_dir


def fill(command: str, tmp_path: Path, run_dir: Path) -> list[str]:
    """The command's arguments with its placeholders replaced (see ERRORS.md)."""

    def config_file(text: str) -> str:
        path = tmp_path / f"config{len(list(tmp_path.glob('config*')))}.yaml"
        path.write_text(text + "\n")
        return str(path)

    plain = tmp_path / "plain.txt"
    plain.write_text("not a run\n")
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    truncated = tmp_path / "truncated.pt"
    data = (run_dir / "checkpoint.pt").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    places = {"RUN": str(run_dir), "FILE": str(plain), "EMPTY": str(empty), "TRUNCATED": str(truncated)}
    words = []
    for word in shlex.split(command):
        inline = re.fullmatch(r"YAML\{(.*)\}", word)
        words.append(config_file(inline.group(1)) if inline else places.get(word, word))
    return words


def test_the_table_has_rows():
    assert len(table_rows()) >= 25


@pytest.mark.parametrize(("row_id", "command", "answer"), table_rows(), ids=[row[0] for row in table_rows()])
def test_bad_input_gets_one_clear_line(row_id, command, answer, tmp_path, finished_run, capsys):
    argv = fill(command, tmp_path, finished_run)
    if argv[0] == "train":
        # A run folder of its own: a refusal that comes after the folder is made (a compile error
        # at the first step) must not leave runs/ in the directory the tests run from.
        defaults = {"--device": "cpu", "--eval-episodes": "0", "--total-steps": "64"}
        defaults["--run-dir"] = str(tmp_path / "run")
        for flag, value in defaults.items():
            if flag not in argv:
                argv += [flag, value]
        argv.append("--no-progress")
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's answer to a malformed flag
        code = exit.code
    error = capsys.readouterr().err
    assert code == 2, (row_id, error)
    assert answer in error, (row_id, error)
    assert "Traceback" not in error
    assert "usage:" not in error, (row_id, error)  # argparse's usage block: --help shows it
