"""Tag continuous's order of agents by distance, which every search for the k nearest keeps (spec
sections 4 and 7.2): float32 Euclidean distances, ties to the lower id; and the neighbour grid's
cells of a point and of a disc. Shared by the per-agent observation
(:mod:`warpsci.envs.tag_continuous`) and the block observation
(:mod:`warpsci.envs.tag_continuous_warps`), so that both compute the same bits and walk the same
cells."""

from __future__ import annotations

import math

import numpy as np

from warpsci.environment import agent_function

#: The heading feature's scale, ``1 / 2 pi``, rounded once from float64.
INVERSE_TWO_PI = np.float32(1.0 / (2.0 * np.pi))
#: The id of an empty place of a k-nearest list: after every agent's id.
NO_AGENT = np.int32(2**31 - 1)


@agent_function
def squared_gap(x0, y0, x1, y1):
    """The float32 square of the distance between two float32 points: the one arithmetic every
    distance of the game starts from (searches that compare squares first take their roots)."""
    dx = x0 - x1
    dy = y0 - y1
    return dx * dx + dy * dy


@agent_function
def gap_between(x0, y0, x1, y1):
    """The float32 distance between two float32 points: the root of :func:`squared_gap`."""
    return np.float32(math.sqrt(squared_gap(x0, y0, x1, y1)))


@agent_function
def comes_after(gap, other, than_gap, than_other):
    """Whether ``other`` at distance ``gap`` comes after ``than_other`` at ``than_gap`` in
    (distance, id) order: farther, or as far with the higher id (``&`` and ``|``: no branches on
    a GPU)."""
    return (gap > than_gap) | ((gap == than_gap) & (other > than_other))


@agent_function
def cell_coordinate(position, inverse_cell, cells):
    """The grid column (or row) of a coordinate: ``position * cells / L`` rounded down, clamped to
    ``[0, cells - 1]``. Monotone in ``position``, which the search's exactness rests on."""
    scaled = position * inverse_cell
    return np.int64(min(max(scaled, np.float32(0.0)), np.float32(cells - 1)))


@agent_function
def cell_span(x, y, reach, inverse_cell, cells, grid_length):
    """The cells ``(x0, x1, y0, y1)`` that hold every point within ``reach`` of ``(x, y)``, the
    reach widened past float32 rounding (``cells`` a side of ``grid_length``, ``inverse_cell`` =
    ``cells / grid_length``)."""
    scale = abs(x) + abs(y) + grid_length
    pad = reach * np.float32(1.001) + scale * np.float32(1e-6)
    x0, x1 = cell_coordinate(x - pad, inverse_cell, cells), cell_coordinate(x + pad, inverse_cell, cells)
    y0, y1 = cell_coordinate(y - pad, inverse_cell, cells), cell_coordinate(y + pad, inverse_cell, cells)
    return x0, x1, y0, y1
