"""Reaction pathways of a trained catalysis policy (``warpsci eval`` on a ``Catalysis*`` run).

The greedy policy is played once from the initial state; every position it visits, with its energy
(eV; empty outside the slab) and the step's reward, is written as ``reaction_path.csv``. The
reaction profile (energy along the path, with the barrier: the highest energy on the path minus the
initial energy) is drawn as ``reaction_profile.png`` and, for one atom, the path over a heat map of
the energy surface as ``reaction_path_on_surface.png``. For one atom, :func:`lowest_barrier` gives
the lowest barrier of any path inside the slab, the yardstick for the one a policy found.
"""

from __future__ import annotations

import csv
import heapq
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from warpsci.envs.catalysis import Landscape, landscape


def energy_at(land: Landscape, position: list[int]) -> float:
    """The grid's energy (eV) of ``position`` (one atom or two), NaN where an atom is outside the slab."""
    index = []
    for atom in range(len(position) // 3):
        x, y, z = position[3 * atom : 3 * atom + 3]
        if not land.z_slab_lower <= z < land.z_slab_upper:
            return math.nan
        index += [x, y, z - land.z_slab_lower]
    return float(land.grid[tuple(index)])


def _position(observation: torch.Tensor, land: Landscape) -> list[int]:
    sizes = [land.nx, land.ny, land.nz] * (len(land.initial_state) // 3)
    return [round(float(observation[i]) * size) for i, size in enumerate(sizes)]


def greedy_path(policy: Any, env_id: str, env_params: dict[str, Any], device: str = "cpu") -> list[dict]:
    """The greedy policy's one episode: rows of step, positions, energy (eV) and reward (step 0:
    the initial state, reward empty)."""
    from warpsci.registry import make

    env = make(env_id, num_envs=1, device=device, params=dict(env_params) or None)
    land = landscape(env.params)
    obs, _ = env.reset(seed=0)
    position = list(land.initial_state)
    rows = [{"step": 0, "position": position, "energy_eV": energy_at(land, position), "reward": math.nan}]
    for step in range(1, land.episode_length + 1):
        with torch.no_grad():
            obs, reward, terminated, truncated, info = env.step(policy.act_greedy(obs))
        done = bool(terminated[0] or truncated[0])
        position = _position(info["final_obs"][0] if done else obs[0], land)
        energy = energy_at(land, position)
        rows.append({"step": step, "position": position, "energy_eV": energy, "reward": float(reward[0])})
        if done:
            break
    return rows


def barrier(rows: list[dict]) -> float:
    """Highest energy on the path minus the initial energy (eV), over the positions inside the slab
    (positions outside it, which the 2-D rules allow, have no energy)."""
    energies = [row["energy_eV"] for row in rows if not math.isnan(row["energy_eV"])]
    return max(energies) - rows[0]["energy_eV"]


def lowest_barrier(land: Landscape) -> tuple[float, list[tuple[int, int, int]]]:
    """The lowest barrier (eV) of any one-atom path from the initial to the final state that stays
    inside the slab, and one such path: the path whose highest energy is least (a minimax path,
    found by Dijkstra's search with "highest energy so far" as the distance), minus the initial
    energy. Moves are the environment's six, x, y and z periodic. The 2-D rules also let an atom
    step out of the slab, at the reward's floor, where the grid has no energy: such paths are not
    searched (a path that leaves the slab has no barrier to compare; :func:`write_reaction_path`
    says when the policy's did). Raises ValueError for two atoms."""
    if len(land.initial_state) != 3:
        raise ValueError("lowest_barrier is defined for one atom")
    start, goal = tuple(land.initial_state), tuple(land.final_state)
    highest = {start: energy_at(land, list(start))}
    came_from: dict[tuple, tuple] = {}
    queue = [(highest[start], start)]
    while queue:
        level, here = heapq.heappop(queue)
        if here == goal:
            break
        if level > highest[here]:
            continue
        x, y, z = here
        for dx, dy, dz in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)):
            there = ((x + dx) % land.nx, (y + dy) % land.ny, (z + dz) % land.nz)
            if not land.z_slab_lower <= there[2] < land.z_slab_upper:
                continue
            through = max(level, energy_at(land, list(there)))
            if through < highest.get(there, math.inf):
                highest[there], came_from[there] = through, here
                heapq.heappush(queue, (through, there))
    path = [goal]
    while path[-1] != start:
        path.append(came_from[path[-1]])
    return highest[goal] - highest[start], path[::-1]


def write_reaction_path(rows: list[dict], land: Landscape, folder: Path) -> dict[str, Any]:
    """Write the CSV and the pictures into ``folder``; returns a summary (files, steps, whether the
    final state was reached, the barrier in eV)."""
    folder.mkdir(parents=True, exist_ok=True)
    atoms = len(land.initial_state) // 3
    names = [f"{axis}{atom + 1}" if atoms > 1 else axis for atom in range(atoms) for axis in "xyz"]
    csv_path = folder / "reaction_path.csv"
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", *names, "energy_eV", "reward"])
        for row in rows:
            energy = "" if math.isnan(row["energy_eV"]) else f"{row['energy_eV']:.6f}"
            reward = "" if math.isnan(row["reward"]) else f"{row['reward']:.6f}"
            writer.writerow([row["step"], *row["position"], energy, reward])
    summary = {
        "reaction_path": str(csv_path),
        "path_steps": len(rows) - 1,
        "reached_final_state": tuple(rows[-1]["position"]) == land.final_state,
        "barrier_eV": barrier(rows),
    }
    summary["left_slab"] = any(math.isnan(row["energy_eV"]) for row in rows)
    if atoms == 1:
        summary["lowest_barrier_eV"] = lowest_barrier(land)[0]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return summary  # the CSV is written; pictures need the plots extra
    summary["reaction_profile"] = str(_draw_profile(plt, rows, summary["barrier_eV"], folder))
    if atoms == 1:
        summary["reaction_path_on_surface"] = str(_draw_on_surface(plt, rows, land, folder))
    return summary


def _draw_profile(plt: Any, rows: list[dict], height: float, folder: Path) -> Path:
    steps = [row["step"] for row in rows]
    energies = np.array([row["energy_eV"] for row in rows])
    peak = int(np.nanargmax(energies))
    figure, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, energies, marker="o", markersize=3, color="tab:blue")
    ax.axhline(energies[0], color="0.6", linestyle="--", linewidth=1)
    ax.vlines(
        steps[peak],
        energies[0],
        energies[peak],
        color="tab:red",
        linewidth=2,
        label=f"barrier {height:.3f} eV",
    )
    ax.set_xlabel("step")
    ax.set_ylabel("energy (eV)")
    ax.set_title("reaction profile of the greedy path")
    ax.legend(loc="lower right", fontsize="small")
    path = folder / "reaction_profile.png"
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _draw_on_surface(plt: Any, rows: list[dict], land: Landscape, folder: Path) -> Path:
    layer = land.initial_state[2] - land.z_slab_lower
    # Up to a quarter of max_denergy above the reference, where the low-barrier paths are told apart.
    shown = np.minimum(land.grid[:, :, layer], land.ienergy + 0.25 * land.max_denergy)
    figure, ax = plt.subplots(figsize=(6, 5))
    image = ax.imshow(shown.T, origin="lower", cmap="viridis")
    xs = [row["position"][0] for row in rows]
    ys = [row["position"][1] for row in rows]
    ax.plot(xs, ys, color="white", linewidth=1.5)
    ax.scatter([xs[0]], [ys[0]], color="tab:red", s=60, label="initial", zorder=3)
    fx, fy = land.final_state[0], land.final_state[1]
    ax.scatter(
        [fx], [fy], facecolors="none", edgecolors="tab:orange", s=120, linewidths=2, label="final", zorder=3
    )
    ax.set_title(f"greedy path over the energy of layer z = {land.initial_state[2]}")
    figure.colorbar(image, ax=ax, label="energy (eV)")
    ax.legend(loc="upper right", fontsize="small")
    path = folder / "reaction_path_on_surface.png"
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
