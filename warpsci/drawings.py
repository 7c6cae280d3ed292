"""How the built-in environments are drawn (for :mod:`warpsci.render`): one function per
environment, ``draw(ax, state, params)`` with matplotlib ``Axes`` methods only; a user's
environment passes its own as ``EnvironmentDefinition(draw=...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from warpsci.environment import EnvironmentDefinition

TAGGER_COLOUR, RUNNER_COLOUR, OUT_COLOUR = "tab:red", "tab:blue", "0.75"

#: Postal codes of the COVID-19 economy's states (a user's own data may name others: those are
#: labelled by their first letters).
US_STATE_CODES = dict(zip(
    ("Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut", "Delaware",
     "District of Columbia", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa",
     "Kansas", "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota",
     "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey",
     "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon",
     "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah",
     "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming"),
    ("AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "DC", "FL", "GA", "HI", "ID", "IL", "IN", "IA",
     "KS", "KY", "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM",
     "NY", "NC", "ND", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA", "WA",
     "WV", "WI", "WY"),
    strict=True,
))  # fmt: skip


def draw_cartpole(ax: Any, state: dict, params: Any) -> None:
    x, theta = float(state["x"][0]), float(state["theta"][0])
    limit = params.x_threshold * 1.2
    ax.plot([-limit, limit], [0, 0], color="0.3")
    ax.add_patch(_rectangle(ax, x - 0.25, -0.1, 0.5, 0.2, "tab:gray"))
    pole = 2 * params.length
    ax.plot([x, x + pole * np.sin(theta)], [0, pole * np.cos(theta)], color="tab:orange", linewidth=5)
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-1.0, 1.6)
    ax.set_aspect("equal")


def draw_acrobot(ax: Any, state: dict, params: Any) -> None:
    first, second = float(state["theta1"][0]), float(state["theta2"][0])
    elbow = (np.sin(first), -np.cos(first))
    hand = (elbow[0] + np.sin(first + second), elbow[1] - np.cos(first + second))
    ax.plot([0, elbow[0], hand[0]], [0, elbow[1], hand[1]], color="tab:blue", linewidth=5, marker="o")
    ax.plot([-2.2, 2.2], [1, 1], color="0.5", linestyle="--")  # the height to swing above
    ax.set_xlim(-2.2, 2.2)
    ax.set_ylim(-2.2, 2.2)
    ax.set_aspect("equal")


def draw_pendulum(ax: Any, state: dict, params: Any) -> None:
    angle = float(state["th"][0])
    ax.plot([0, np.sin(angle)], [0, np.cos(angle)], color="tab:red", linewidth=6, marker="o")
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.set_aspect("equal")


def draw_mountain_car(ax: Any, state: dict, params: Any) -> None:
    hills = np.linspace(params.min_position, params.max_position, 200)
    ax.plot(hills, np.sin(3 * hills) * 0.45 + 0.55, color="0.3")
    position = float(state["position"][0])
    ax.plot([position], [np.sin(3 * position) * 0.45 + 0.55], marker="s", markersize=12, color="tab:green")
    goal = params.goal_position
    ax.plot(
        [goal, goal], [np.sin(3 * goal) * 0.45 + 0.55, np.sin(3 * goal) * 0.45 + 0.75], color="tab:orange"
    )
    ax.set_xlim(params.min_position, params.max_position)
    ax.set_ylim(0, 1.1)


def draw_tag_gridworld(ax: Any, state: dict, params: Any) -> None:
    x, y = state["x"], state["y"]
    length = params.grid_length
    ax.scatter(x[:-1], y[:-1], s=60, color=TAGGER_COLOUR, marker="s", label="taggers")
    ax.scatter(x[-1:], y[-1:], s=80, color=RUNNER_COLOUR, marker="o", label="runner")
    ax.set_xlim(-0.5, length + 0.5)
    ax.set_ylim(-0.5, length + 0.5)
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize="small")


def draw_tag_continuous(ax: Any, state: dict, params: Any) -> None:
    from warpsci.envs.tag_continuous import kernel_params

    is_tagger = kernel_params(params)["is_tagger"] == 1
    x, y, v, theta = state["x"], state["y"], state["v"], state["theta"]
    playing = state["in_game"] == 1
    length = params.grid_length
    groups = (
        (is_tagger, TAGGER_COLOUR, "taggers"),
        (~is_tagger & playing, RUNNER_COLOUR, "runners"),
        (~is_tagger & ~playing, OUT_COLOUR, "tagged"),
    )
    for chosen, colour, label in groups:
        if chosen.any():
            ax.scatter(x[chosen], y[chosen], s=40, color=colour, label=label, zorder=3)
    from matplotlib.patches import Circle

    radius = params.tagging_distance * length
    for index in np.flatnonzero(is_tagger):
        ax.add_patch(Circle((x[index], y[index]), radius, fill=False, color=TAGGER_COLOUR, alpha=0.5))
    moving = playing & (v > 0)
    scale = length / 40
    ax.quiver(x[moving], y[moving], np.cos(theta[moving]) * scale, np.sin(theta[moving]) * scale,
              angles="xy", scale_units="xy", scale=1, width=0.004, color="0.3")  # fmt: skip
    ax.set_xlim(0, length)
    ax.set_ylim(0, length)
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize="small")


def draw_catalysis(ax: Any, state: dict, params: Any) -> None:
    """The energy (eV) of the slab layer the first atom is in, as a heat map over (x, y), with the
    atoms (filled) and their targets (rings); for two atoms, the map is the first atom's energy with
    the second held where it is. Outside the slab (2-D rules) the nearest layer is shown."""
    from warpsci.envs.catalysis import landscape

    land = landscape(params)
    position = [int(v) for v in state["position"][0]]
    layer = min(max(position[2], land.z_slab_lower), land.z_slab_upper - 1) - land.z_slab_lower
    if len(position) == 3:
        energies = land.grid[:, :, layer]
    else:
        second = (position[3], position[4], position[5] - land.z_slab_lower)
        energies = land.grid[:, :, layer, second[0], second[1], second[2]]
    # The range the reward sees: above ienergy + max_denergy every cell is the reward's floor.
    shown = np.clip(energies, land.ienergy - land.max_denergy, land.ienergy + land.max_denergy)
    image = ax.imshow(shown.T, origin="lower", cmap="viridis")
    colours = ("tab:red", "tab:orange")
    for atom in range(len(position) // 3):
        x, y = position[3 * atom], position[3 * atom + 1]
        ax.scatter([x], [y], s=90, color=colours[atom], edgecolors="white", label=f"atom {atom + 1}")
        fx, fy = land.final_state[3 * atom], land.final_state[3 * atom + 1]
        ax.scatter([fx], [fy], s=140, facecolors="none", edgecolors=colours[atom], linewidths=2)
    ax.set_title(f"z = {position[2]} (slab {land.z_slab_lower}-{land.z_slab_upper - 1}); rings: targets")
    ax.figure.colorbar(image, ax=ax, label="energy (eV)")
    ax.legend(loc="upper right", fontsize="small")


def draw_covid_economy(ax: Any, state: dict, params: Any) -> None:
    """Each state's stringency level as a bar, coloured by its active infections per 100,000
    people; the title gives the day, the planner's subsidy level and the deaths so far."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    from warpsci.envs.covid_economy_data import load_covid_data

    data = load_covid_data(params.path_to_data_and_fitted_params)
    n = data.num_states
    per_100k = np.asarray(state["infected"][:n], dtype=np.float64) / data.population * 1e5
    scale = Normalize(vmin=0.0, vmax=max(float(per_100k.max()), 1.0))
    colours = colormaps["Reds"](scale(per_100k))
    ax.bar(np.arange(n), np.asarray(state["level"][:n]), color=colours, edgecolor="0.4", linewidth=0.3)
    ax.set_xticks(
        np.arange(n),
        [US_STATE_CODES.get(name, name[:2]) for name in data.state_names],
        fontsize=5,
        rotation=90,
    )
    ax.set_ylim(0, data.num_stringency_levels + 0.5)
    ax.set_ylabel("stringency level")
    deaths = float(np.sum(state["deaths"][:n]))
    ax.set_title(f"day {int(state['t'])}, subsidy level {int(state['subsidy_level'])}, deaths {deaths:,.0f}")
    ax.figure.colorbar(ScalarMappable(scale, "Reds"), ax=ax, label="infected per 100,000")


def _rectangle(ax: Any, x: float, y: float, width: float, height: float, colour: str) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), width, height, color=colour)


#: The built-in environments' drawing functions by id.
BUILTIN_DRAWINGS: dict[str, Callable[[Any, dict, Any], None]] = {
    "CartPole-v1": draw_cartpole,
    "Acrobot-v1": draw_acrobot,
    "Pendulum-v1": draw_pendulum,
    "MountainCar-v0": draw_mountain_car,
    "MountainCarContinuous-v0": draw_mountain_car,
    "TagGridworld-v0": draw_tag_gridworld,
    "TagContinuous-v0": draw_tag_continuous,
    "CatalysisOneAtom-v0": draw_catalysis,
    "CatalysisTwoAtom-v0": draw_catalysis,
    "CovidEconomy-v0": draw_covid_economy,
}


def drawing_for(definition: EnvironmentDefinition) -> Callable[[Any, dict, Any], None]:
    """The environment's drawing function, or a ValueError saying how to give it one."""
    own = getattr(definition, "draw", None)
    if own is not None:
        return own
    if definition.name in BUILTIN_DRAWINGS:
        return BUILTIN_DRAWINGS[definition.name]
    raise ValueError(
        f"{definition.name} has no drawing function: give its EnvironmentDefinition "
        "draw=function(ax, state, params) (see warpsci/render.py)"
    )
