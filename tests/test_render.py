"""Animations of trained runs: ``warpsci render`` writes a GIF of one episode, for a multi-group
and a single-agent environment; environments without a drawing function are refused by name."""

from __future__ import annotations

import dataclasses

import pytest
from PIL import Image

import warpsci
from warpsci.cli import main
from warpsci.drawings import drawing_for

QUIET = ["--device", "cpu", "--no-progress", "--eval-episodes", "0", "--num-envs", "4"]


def frames_of(path) -> int:
    with Image.open(path) as image:
        return image.n_frames


def test_a_tag_continuous_run_renders_to_a_gif(tmp_path, capsys):
    run_dir = tmp_path / "tag"
    params = "{num_taggers: 2, num_runners: 4, episode_length: 12, seed: 3, num_other_agents_observed: 3}"
    argv = ["train", "TagContinuous-v0", "--total-steps", "96", "--num-steps", "12", "--env-params", params]
    assert main(argv + ["--run-dir", str(run_dir), *QUIET]) == 0
    output = tmp_path / "episode.gif"
    capsys.readouterr()
    assert main(["render", str(run_dir), "--output", str(output), "--fps", "8"]) == 0
    assert output.read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    printed = capsys.readouterr().out
    assert str(output) in printed
    assert 2 <= frames_of(output) <= 12  # the reset and every step that did not end the episode


def test_a_cartpole_run_renders_and_bad_outputs_are_refused(tmp_path, capsys):
    run_dir = tmp_path / "cartpole"
    assert main(["train", "CartPole-v1", "--total-steps", "64", "--run-dir", str(run_dir), *QUIET]) == 0
    output = tmp_path / "cartpole.gif"
    capsys.readouterr()
    assert main(["render", str(run_dir), "--output", str(output)]) == 0
    assert frames_of(output) >= 2
    progress = capsys.readouterr().err.splitlines()
    assert progress[0].startswith("playing one CartPole-v1 episode of"), progress
    assert progress[1].startswith("drawing ") and str(output) in progress[1], progress
    # A bad output is refused in one line, before the episode is played.
    assert main(["render", str(run_dir), "--output", str(tmp_path / "movie.avi")]) == 2
    error = capsys.readouterr().err.strip()
    assert "must end in .gif or .mp4" in error and len(error.splitlines()) == 1, error


def test_every_builtin_environment_can_be_drawn_and_others_are_told_how():
    from warpsci.envs import BUILTIN_ENVIRONMENTS

    for definition in BUILTIN_ENVIRONMENTS:
        assert callable(drawing_for(definition))
    nameless = dataclasses.replace(warpsci.get_definition("CartPole-v1"), name="Undrawn-v0")
    with pytest.raises(
        ValueError, match="Undrawn-v0 has no drawing function: give its EnvironmentDefinition"
    ):
        drawing_for(nameless)


def test_a_covid_economy_state_is_drawn_as_one_bar_per_state():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from warpsci.render import _snapshot

    env = warpsci.make("CovidEconomy-v0", num_envs=1, device="cpu")
    env.reset(seed=0)
    state = _snapshot(env)
    figure, ax = plt.subplots()
    drawing_for(env.definition)(ax, state, env.params)
    heights = [patch.get_height() for patch in ax.patches]
    assert heights == [float(level) for level in state["level"][:51]]
    assert [label.get_text() for label in ax.get_xticklabels()][:3] == ["AL", "AK", "AZ"]
    assert ax.get_title().startswith("day 0, subsidy level ")
    plt.close(figure)


def test_without_matplotlib_runs_draw_no_curve_and_render_says_what_to_install(tmp_path, monkeypatch):
    import sys

    from warpsci.plots import plot_training_curve
    from warpsci.render import animate

    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--device", "cpu", "--total-steps", "64", "--num-envs", "4"]
    assert main(argv + ["--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "0"]) == 0
    (run_dir / "training_curve.png").unlink()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert plot_training_curve(run_dir) is None
    assert not (run_dir / "training_curve.png").exists()
    with pytest.raises(ValueError, match=r'warpsci render needs matplotlib.*pip install "warpsci\[plots\]"'):
        animate(None, tmp_path / "episode.gif")
