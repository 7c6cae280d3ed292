"""Catalytic reaction search (HDRL-FP): ``CatalysisOneAtom-v0`` and ``CatalysisTwoAtom-v0``.

An agent moves one atom (or a pair) across a potential-energy grid computed from density
functional theory, from an initial site to a target site; the reward punishes climbing above a
reference energy, so a good policy finds a low-barrier path (a reaction pathway). Rules:
``shared/envs/catalysis.md`` (Lan, Wang and An, Nature Communications 15, 6281, 2024). The nine
published scenarios and their grids ship with the package (``warpsci/data/hdrl_fp/``, BSD-3-Clause).

One atom, Discrete(6): 0 x+1, 1 x-1, 2 y+1, 3 y-1, 4 z+1, 5 z-1; x, y and z wrap periodically
(``nx, ny, nz``). Only ``z_slab_lower <= z < z_slab_upper`` has energies. The scenario is 3-D when
the initial and final z differ: a z move that leaves the slab is cancelled with a raw reward of -1.
Otherwise (2-D) every move lands, and a position outside the slab gives -1. Inside the slab the raw
reward is ``(ienergy - E(p')) / max_denergy``. Reward: the raw reward clipped to ``[min_reward, 0]``,
plus ``terminate_reward`` on landing on ``final_state``, which ends the episode; ``episode_length``
steps truncate it. Observation: ``x/nx, y/ny, z/nz`` and the distance to the target over the
initial distance.

Two atoms, MultiDiscrete([2, 6]): which atom, then one of the six moves for it, 3-D rules; the grid
holds the energy of both positions. Observation: the six coordinates over ``(nx, ny, nz)`` twice,
then each atom's distance to its target over its initial distance.

Energies are in eV. The grid is read-only array data placed in device memory once for all
environments; grids are checked on the host (shape, finite values) before any kernel runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
from importlib import resources
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import yaml

from warpsci.environment import EnvironmentDefinition, StateField, agent_function

#: Scenario name -> (atoms, configuration file, grid file) in ``warpsci/data/hdrl_fp/``.
SCENARIOS: dict[str, tuple[int, str, str]] = {
    "surface": (1, "single_agent_one_atom_surface.yaml", "en_array.npy"),
    "gas1": (1, "single_agent_one_atom_gas1.yaml", "en_array.npy"),
    "gas2": (1, "single_agent_one_atom_gas2.yaml", "en_array.npy"),
    "diffusion2d": (1, "single_agent_one_atom_diffusion2d.yaml", "en_array_diffusion.npy"),
    "diffusion2d_relaxed": (
        1, "single_agent_one_atom_diffusion2d_relaxed.yaml", "en_array_diffusion_relax.npy"
    ),
    "diffusion3d": (1, "single_agent_one_atom_diffusion3d.yaml", "en_array_diffusion.npy"),
    "surface_double_grids": (
        1, "single_agent_one_atom_surface_double_grids.yaml", "en_array_double_grids.npy"
    ),
    "gas2_double_grids": (
        1, "single_agent_one_atom_gas2_double_grids.yaml", "en_array_double_grids.npy"
    ),
    "diffusion": (2, "single_agent_two_atom_diffusion.yaml", "en_array_2atom_diffusion.npy"),
}  # fmt: skip
#: Other names accepted for a scenario.
ALIASES = {"two_atom_diffusion": "diffusion"}
#: The scenario parameters (the ``env:`` block of a scenario's configuration) a params field overrides.
SCENARIO_FIELDS = (
    "ienergy", "max_denergy", "nx", "ny", "nz", "z_slab_lower", "z_slab_upper", "initial_state",
    "final_state", "terminate_reward", "episode_length",
)  # fmt: skip

MOVES = 6  #: x+1, x-1, y+1, y-1, z+1, z-1


def _data_file(name: str) -> Any:
    return resources.files("warpsci") / "data" / "hdrl_fp" / name


def scenario_names(atoms: int) -> list[str]:
    """The published scenarios of ``atoms`` atoms (1 or 2)."""
    return [name for name, (count, _, _) in SCENARIOS.items() if count == atoms]


def _canonical(scenario: object, atoms: int) -> str:
    accepted = scenario_names(atoms) + [
        alias for alias, name in ALIASES.items() if SCENARIOS[name][0] == atoms
    ]
    if isinstance(scenario, str) and scenario in accepted:
        return ALIASES.get(scenario, scenario)
    near = difflib.get_close_matches(str(scenario), accepted, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise ValueError(f"unknown {atoms}-atom scenario {scenario!r}{hint}; accepted: {', '.join(accepted)}")


@functools.cache
def scenario_settings(scenario: str) -> dict[str, Any]:
    """The ``env:`` block of a packaged scenario's configuration (reference energy, grid size, slab,
    initial and final states, terminal bonus, episode length)."""
    _, config, _ = SCENARIOS[scenario]
    with resources.as_file(_data_file(config)) as path:
        return dict(yaml.safe_load(Path(path).read_text())["env"])


@functools.cache
def load_grid(path: str) -> np.ndarray:
    """An energy grid (eV) from a ``.npy`` file, read once per path; a clear error when the file is
    missing or unreadable."""
    try:
        grid = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"energy_grid file {path!r} does not exist; give the path of a .npy grid") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"energy_grid file {path!r} is not a readable .npy array ({error})") from None
    grid.setflags(write=False)
    return grid


def _packaged_grid(scenario: str) -> np.ndarray:
    with resources.as_file(_data_file(SCENARIOS[scenario][2])) as path:
        return load_grid(str(path))


@dataclasses.dataclass(frozen=True)
class Landscape:
    """Everything a scenario fixes, resolved from the params: numbers and the grid (eV)."""

    ienergy: float
    max_denergy: float
    nx: int
    ny: int
    nz: int
    z_slab_lower: int
    z_slab_upper: int
    initial_state: tuple[int, ...]
    final_state: tuple[int, ...]
    terminate_reward: float
    episode_length: int
    min_reward: float
    grid: np.ndarray

    @property
    def three_d(self) -> bool:
        """One atom: whether the initial and final z differ (the 3-D rules)."""
        return self.initial_state[2] != self.final_state[2]


@dataclasses.dataclass(frozen=True)
class CatalysisParams:
    """A scenario by name, each of its numbers overridable, and an optional grid of one's own.

    ``None`` means "the scenario's value". Energies in eV; positions are integer grid coordinates
    ``(x, y, z)`` (two atoms: atom 1's then atom 2's).
    """

    scenario: str = "surface"  #: a published scenario (``scenario_names``)
    energy_grid: str | None = None  #: path of a ``.npy`` grid (x, y, z - z_slab_lower [, atom 2's])
    ienergy: float | None = None  #: reference energy, eV
    max_denergy: float | None = None  #: energy normalisation, eV (20 in the scenarios)
    nx: int | None = None  #: periodic grid size in x
    ny: int | None = None  #: periodic grid size in y
    nz: int | None = None  #: periodic grid size in z
    z_slab_lower: int | None = None  #: lowest z that has energies
    z_slab_upper: int | None = None  #: one past the highest z that has energies
    initial_state: tuple[int, ...] | None = None  #: start position(s)
    final_state: tuple[int, ...] | None = None  #: target position(s)
    terminate_reward: float | None = None  #: bonus on reaching the target
    episode_length: int | None = None  #: steps before truncation (500 in the scenarios)
    min_reward: float = -1.0  #: floor of the clipped reward

    atoms = 1  # not a field: 1 here, 2 in the two-atom params

    def __post_init__(self) -> None:
        object.__setattr__(self, "scenario", _canonical(self.scenario, self.atoms))
        for name in ("initial_state", "final_state"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(int(v) for v in value))
        landscape(self)  # every check, before any kernel runs


@dataclasses.dataclass(frozen=True)
class CatalysisTwoAtomParams(CatalysisParams):
    """As :class:`CatalysisParams`, for a pair of atoms (the ``diffusion`` scenario)."""

    scenario: str = "diffusion"
    atoms = 2


def _grid_of(params: CatalysisParams) -> np.ndarray:
    return (
        load_grid(str(params.energy_grid))
        if params.energy_grid is not None
        else _packaged_grid(params.scenario)
    )


@functools.cache
def landscape(params: CatalysisParams) -> Landscape:
    """The scenario's numbers with the params' overrides and the grid, checked: positions inside the
    grid and the slab, the grid's shape fits ``(nx, ny, slab)`` (twice for two atoms), every energy
    finite (every slab cell can be reached through the periodic moves)."""
    settings = {**scenario_settings(params.scenario)}
    for name in SCENARIO_FIELDS:
        if getattr(params, name) is not None:
            settings[name] = getattr(params, name)
    nx, ny, nz = (int(settings[name]) for name in ("nx", "ny", "nz"))
    lower, upper = int(settings["z_slab_lower"]), int(settings["z_slab_upper"])
    if min(nx, ny, nz) < 1 or not 0 <= lower < upper <= nz:
        raise ValueError(
            f"grid nx={nx}, ny={ny}, nz={nz} with slab [{lower}, {upper}) does not fit: sizes must be "
            ">= 1 and 0 <= z_slab_lower < z_slab_upper <= nz"
        )
    for name in ("initial_state", "final_state"):
        state = tuple(int(v) for v in settings[name])
        if len(state) != 3 * params.atoms:
            raise ValueError(f"{name} must hold {3 * params.atoms} integers (x, y, z per atom), got {state}")
        for atom in range(params.atoms):
            x, y, z = state[3 * atom : 3 * atom + 3]
            if not (0 <= x < nx and 0 <= y < ny and lower <= z < upper):
                raise ValueError(
                    f"{name} {state} lies outside the grid [0, {nx}) x [0, {ny}) x slab [{lower}, {upper})"
                )
        settings[name] = state
    grid = _grid_of(params)
    expected = (nx, ny, upper - lower) * params.atoms
    source = params.energy_grid or f"the {params.scenario!r} grid"
    if grid.shape != expected:
        raise ValueError(
            f"energy grid {source} has shape {grid.shape}; this scenario needs {expected} "
            "((nx, ny, z_slab_upper - z_slab_lower) per atom)"
        )
    if not np.issubdtype(grid.dtype, np.number) or not np.isfinite(grid).all():
        bad = (
            tuple(int(i) for i in np.argwhere(~np.isfinite(grid))[0])
            if np.issubdtype(grid.dtype, np.number)
            else "?"
        )
        raise ValueError(
            f"energy grid {source} holds non-finite energies (first at index {bad}); every slab "
            "cell can be reached by a move, so every energy must be a finite number of eV"
        )
    max_denergy = float(settings["max_denergy"])
    if not max_denergy > 0:
        raise ValueError(f"max_denergy must be a positive energy in eV, got {max_denergy!r}")
    if not params.min_reward <= 0:
        raise ValueError(
            f"min_reward must be <= 0 (rewards are clipped to [min_reward, 0]), got {params.min_reward!r}"
        )
    return Landscape(
        ienergy=float(settings["ienergy"]),
        max_denergy=max_denergy,
        nx=nx,
        ny=ny,
        nz=nz,
        z_slab_lower=lower,
        z_slab_upper=upper,
        initial_state=settings["initial_state"],
        final_state=settings["final_state"],
        terminate_reward=float(settings["terminate_reward"]),
        episode_length=int(settings["episode_length"]),
        min_reward=float(params.min_reward),
        grid=grid,
    )


def initial_distances(land: Landscape, atoms: int) -> tuple[float, ...]:
    """Each atom's Euclidean distance from its start to its target (1 where they coincide)."""
    distances = []
    for atom in range(atoms):
        gap = np.subtract(
            land.initial_state[3 * atom : 3 * atom + 3], land.final_state[3 * atom : 3 * atom + 3]
        )
        distances.append(float(np.linalg.norm(gap)) or 1.0)
    return tuple(distances)


def kernel_params(params: CatalysisParams) -> dict[str, Any]:
    """What the kernels see: the resolved numbers, start and target tables and the grid."""
    land = landscape(params)
    return {
        "ienergy": land.ienergy,
        "max_denergy": land.max_denergy,
        "min_reward": land.min_reward,
        "terminate_reward": land.terminate_reward,
        "nx": land.nx,
        "ny": land.ny,
        "nz": land.nz,
        "z_slab_lower": land.z_slab_lower,
        "z_slab_upper": land.z_slab_upper,
        "three_d": params.atoms == 2 or land.three_d,
        "initial_state": np.asarray(land.initial_state, dtype=np.int32),
        "final_state": np.asarray(land.final_state, dtype=np.int32),
        "initial_distance": np.asarray(initial_distances(land, params.atoms), dtype=np.float64),
        "grid": np.array(land.grid, dtype=np.float64),  # a writable copy for torch
    }


STATE_FIELDS_ONE = (StateField("position", np.int32, shape=(3,)),)
STATE_FIELDS_TWO = (StateField("position", np.int32, shape=(6,)),)


@agent_function
def reset_agent(state, params, env, agent, key):
    for axis in range(state.position.shape[2]):
        state.position[env, agent, axis] = params.initial_state[axis]


@agent_function
def move_atom(state, params, env, agent, atom, move):
    """Apply ``move`` (0-5) to atom ``atom``: x, y and z wrap; under the 3-D rules a z move that
    would leave the slab is cancelled. Returns whether the move earns the -1 of leaving the slab:
    a cancelled move (3-D), or an atom outside the slab after the move (2-D)."""
    base = 3 * atom
    axis = move // 2
    size = params.nx if axis == 0 else (params.ny if axis == 1 else params.nz)
    step = 1 if move % 2 == 0 else -1
    moved = (state.position[env, agent, base + axis] + step + size) % size
    if axis == 2 and params.three_d and not (params.z_slab_lower <= moved < params.z_slab_upper):
        return True
    state.position[env, agent, base + axis] = moved
    z = state.position[env, agent, base + 2]
    return not (params.z_slab_lower <= z < params.z_slab_upper)


@agent_function
def at_target(state, params, env, agent):
    for axis in range(state.position.shape[2]):
        if state.position[env, agent, axis] != params.final_state[axis]:
            return False
    return True


@agent_function
def clipped_reward(state, params, env, agent, raw):
    reward = min(max(raw, params.min_reward), 0.0)
    if at_target(state, params, env, agent):
        reward += params.terminate_reward
    return reward


@agent_function
def step_one_atom(state, params, actions, env, agent, phase, key):
    if move_atom(state, params, env, agent, 0, actions[env, agent]):
        return clipped_reward(state, params, env, agent, -1.0)
    x = state.position[env, agent, 0]
    y = state.position[env, agent, 1]
    z = state.position[env, agent, 2] - params.z_slab_lower
    return clipped_reward(
        state, params, env, agent, (params.ienergy - params.grid[x, y, z]) / params.max_denergy
    )


@agent_function
def step_two_atoms(state, params, actions, env, agent, phase, key):
    if move_atom(state, params, env, agent, actions[env, agent, 0], actions[env, agent, 1]):
        return clipped_reward(state, params, env, agent, -1.0)
    lower = params.z_slab_lower
    p = state.position
    energy = params.grid[
        p[env, agent, 0], p[env, agent, 1], p[env, agent, 2] - lower,
        p[env, agent, 3], p[env, agent, 4], p[env, agent, 5] - lower,
    ]  # fmt: skip
    return clipped_reward(state, params, env, agent, (params.ienergy - energy) / params.max_denergy)


@agent_function
def observe_agent(state, params, obs, env, agent):
    atoms = state.position.shape[2] // 3
    for atom in range(atoms):
        squared = 0.0
        for axis in range(3):
            coordinate = state.position[env, agent, 3 * atom + axis]
            size = params.nx if axis == 0 else (params.ny if axis == 1 else params.nz)
            obs[env, agent, 3 * atom + axis] = coordinate / size
            gap = coordinate - params.final_state[3 * atom + axis]
            squared += gap * gap
        obs[env, agent, 3 * atoms + atom] = math.sqrt(squared) / params.initial_distance[atom]


@agent_function
def is_terminal(state, params, env):
    return at_target(state, params, env, 0)


def _observation_space(size: int) -> gymnasium.spaces.Box:
    return gymnasium.spaces.Box(0.0, np.inf, shape=(size,), dtype=np.float32)


CATALYSIS_ONE_ATOM = EnvironmentDefinition(
    name="CatalysisOneAtom-v0",
    params_type=CatalysisParams,
    state_fields=STATE_FIELDS_ONE,
    reset_agent=reset_agent,
    step_agent=step_one_atom,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=lambda params: _observation_space(4),
    action_space=lambda params: gymnasium.spaces.Discrete(MOVES),
    max_episode_steps=lambda params: landscape(params).episode_length,
    kernel_params=kernel_params,
    params_float_dtype=np.float64,
    reference="HDRL-FP (Lan, Wang and An, Nat. Commun. 15, 6281, 2024); shared/envs/catalysis.md",
)

CATALYSIS_TWO_ATOM = EnvironmentDefinition(
    name="CatalysisTwoAtom-v0",
    params_type=CatalysisTwoAtomParams,
    state_fields=STATE_FIELDS_TWO,
    reset_agent=reset_agent,
    step_agent=step_two_atoms,
    observe_agent=observe_agent,
    is_terminal=is_terminal,
    observation_space=lambda params: _observation_space(8),
    action_space=lambda params: gymnasium.spaces.MultiDiscrete([2, MOVES]),
    max_episode_steps=lambda params: landscape(params).episode_length,
    kernel_params=kernel_params,
    params_float_dtype=np.float64,
    reference="HDRL-FP (Lan, Wang and An, Nat. Commun. 15, 6281, 2024); shared/envs/catalysis.md",
)
