"""Animations of trained runs: ``warpsci render RUN_DIR --output episode.gif``.

One episode of the run's environment is played on the CPU by its trained policies (greedy for one
group, sampled for several, as tag games need), the state is kept after every step, and the
environment's drawing function draws each kept state into a matplotlib frame; the frames are
written as a GIF (Pillow) or an MP4 (when ffmpeg is installed).

An environment can be drawn when its definition has ``draw=`` a function ``draw(ax, state,
params)``: ``ax`` is a matplotlib ``Axes``, ``state`` one environment's state arrays by field name
(per-agent fields as ``(num_agents, ...)`` arrays, per-environment ones as scalars, plus
``"active"``: which agents are still in the game), ``params`` the environment's params. It draws
with ``ax``'s methods only (no import of matplotlib needed in the environment's module); the step
counter is drawn for it. The built-in environments' drawing functions live in ``warpsci/drawings.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from warpsci.environment import EnvironmentDefinition


@dataclasses.dataclass
class Episode:
    """States of one played episode: ``frames[0]`` after the reset, then one per step."""

    definition: EnvironmentDefinition
    params: Any
    frames: list[dict[str, Any]]
    returns: dict[str, float]


def play_episode(
    run: str | Path,
    seed: int = 0,
    deterministic: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> Episode:
    """One episode of ``run``'s environment on the CPU with its trained policies; ``deterministic``
    defaults to greedy actions for one group and sampled ones for several. ``progress`` is told
    what is being played once the run and its environment are checked (before the seconds of
    playing)."""
    from warpsci.drawings import drawing_for
    from warpsci.policy_api import load_policy
    from warpsci.registry import make

    policy = load_policy(run)
    config = policy.config
    env = make(config.env_id, num_envs=1, device="cpu", seed=seed, params=dict(config.env_params) or None)
    drawing_for(env.definition)  # refuse an environment that cannot be drawn before playing
    groups = list(getattr(env, "groups", ()))
    if deterministic is None:
        deterministic = len(groups) < 2
    if progress is not None:
        progress(f"playing one {config.env_id} episode of {run} ...")
    generator = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    frames = [_snapshot(env)]
    returns = {name: 0.0 for name in policy.groups}
    for _ in range(env.max_episode_steps):
        actions = policy.act(obs, deterministic=deterministic, generator=generator)
        obs, rewards, _, _, _ = env.step(actions)
        if isinstance(rewards, dict):
            for name, value in rewards.items():
                returns[name] += float(value.sum())
        else:
            returns[policy.groups[0]] += float(rewards.sum())
        if bool(env.buffers.terminated[0] or env.buffers.truncated[0]):
            break  # the environment has reset itself already: its last state is gone
        frames.append(_snapshot(env))
    return Episode(env.definition, env.params, frames, returns)


def _snapshot(env: Any) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for name, tensor in env.state_tensors.items():
        value = tensor[0].numpy().copy()
        state[name] = value.item() if value.ndim == 0 else value
    state["active"] = env.buffers.active[0].numpy().copy()
    return state


def animate(episode: Episode, output: str | Path, fps: int = 20) -> Path:
    """Draw every frame of ``episode`` and write the animation to ``output`` (``.gif`` or
    ``.mp4``)."""
    from warpsci.drawings import drawing_for
    from warpsci.plots import pyplot

    plt = pyplot("warpsci render")
    from matplotlib import animation

    output = checked_output(output)
    draw = drawing_for(episode.definition)
    figure, ax = plt.subplots(figsize=(5, 5))

    def frame(index: int) -> None:
        ax.clear()
        draw(ax, episode.frames[index], episode.params)
        ax.set_title(f"{episode.definition.name}   step {index}")

    movie = animation.FuncAnimation(figure, frame, frames=len(episode.frames), interval=1000 / fps)
    writer = (
        animation.PillowWriter(fps=fps)
        if output.suffix.lower() == ".gif"
        else animation.FFMpegWriter(fps=fps)
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    movie.save(str(output), writer=writer)
    plt.close(figure)
    return output


def checked_output(output: str | Path) -> Path:
    """``output`` as a path, refused unless it ends in ``.gif``, or in ``.mp4`` with ffmpeg there."""
    from matplotlib import animation

    output = Path(output)
    suffix = output.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"--output must end in .gif or .mp4, got {str(output)!r}")
    if suffix == ".mp4" and not animation.writers.is_available("ffmpeg"):
        raise ValueError("writing .mp4 needs ffmpeg, which is not installed; write a .gif instead")
    return output


def render_run(
    run: str | Path,
    output: str | Path,
    seed: int = 0,
    fps: int = 20,
    deterministic: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[Path, Episode]:
    """Play one episode of ``run`` and write its animation to ``output``; ``output`` is checked
    before playing, ``progress`` told what is being done once the inputs are checked."""
    from warpsci.plots import pyplot

    pyplot("warpsci render")  # refuses a missing matplotlib in one line, before playing
    output = checked_output(output)
    episode = play_episode(run, seed=seed, deterministic=deterministic, progress=progress)
    if progress is not None:
        progress(f"drawing {len(episode.frames)} frames into {output} ...")
    return animate(episode, output, fps=fps), episode
