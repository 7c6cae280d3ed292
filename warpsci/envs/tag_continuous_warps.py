"""Tag continuous's partial observations on CUDA by a warp per observer: the block observation
(:class:`warpsci.environment.BlockObservation`) of environments of up to :data:`MAX_AGENTS` agents
(:func:`observe_nearest_by_warps`, described here), and of wider ones in the neighbour grid, up to
:data:`MAX_GRID_AGENTS` (:func:`observe_nearest_in_grid_by_warps`: a warp per observer too, over
the candidates of the grid's cells, with steps of its own described there). Both take games that
observe more than ``tag_continuous_threads.THREAD_SLOTS`` others; up to that many, a thread per
observer does it (:mod:`warpsci.envs.tag_continuous_threads`), with this module's helpers for the
grid's copy and the rows.

The per-agent observation (``tag_continuous.observe_agent``) gives each thread an observer: a warp's
32 threads search 32 observers' candidates in step, each with its own k-nearest list in
thread-local memory, and most of a warp's threads wait while a few insert (H100, 2,000 x 110,
k = 10: 11 to 15 of 32 busy). Here a block of :data:`THREADS` threads holds one environment and a
warp takes one observer at a time (the narrow games' block observation takes this path for more
than ``tag_continuous_threads.THREAD_SLOTS`` others, and a thread per observer, with its own
steps, for up to that many: :mod:`warpsci.envs.tag_continuous_threads`):

- the block copies the agents' positions, speeds, accelerations, headings, flags and types into
  shared memory, an agent out of the game at x = inf (no distance keeps it);
- a warp takes observers ``warp, warp + 4, ...``; its lanes take candidates ``lane + 32 j``, so every
  lane is busy and the reads are of shared memory;
- the limit comes from the observer's hints (the k nearest it found the step before, read an
  observer ahead): the distance of the farthest of them still in the game, here its square (the
  largest of the hints' squares, by a butterfly of warp shuffles). The candidates whose squares
  lie up to it (widened past rounding: every candidate within the limit, maybe a few just past
  it) are found by ballots and compacted, in id order, into the warp's scratch row of shared
  memory. When k of them have a square up to the limit's (so a distance up to the limit), the k
  nearest are among them: each lane ranks one, counting the nearer and, by ``match_any_sync``, the
  as near of lower id, and a lane of rank below k writes that slot's seven features;
- when no hint is in the game, or fewer than k within the limit or more than 32 kept: k rounds of
  a warp-wide minimum over each lane's four candidates, held in registers.

It writes what ``observe_agent`` writes, bit for bit (the same distances from
:mod:`warpsci.envs.tag_continuous_order`, the same order, the same features and hints); the GPU
tests check it (``tests/test_tag_continuous_gpu.py``), and so does Numba's CUDA simulator on small
games, its missing shuffles and ballots emulated by :mod:`warpsci.simulated_warps`
(``tests/test_tag_continuous_simulator.py``). The CPU backend runs ``observe_agent``.

Numba's ``ballot_sync`` returns a signed mask on a GPU (a full mask reads -1): the ballots here are
taken as uint32 before their bits are counted.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, int32

from warpsci.envs.tag_continuous_order import (
    INVERSE_TWO_PI,
    NO_AGENT,
    cell_span,
    comes_after,
    gap_between,
    squared_gap,
)

#: Threads of the block observation's block: four warps.
THREADS = 128
#: The most agents it observes: four candidates a lane.
MAX_AGENTS = THREADS
#: The most others (k) it observes: one hint a lane.
MAX_OBSERVED = 32
#: The most agents the grid's block observation (:func:`observe_nearest_in_grid_by_warps`) takes:
#: its shared memory (:func:`grid_shared_bytes`) then fits the 48 KB a block gets.
MAX_GRID_AGENTS = 2048
assert MAX_GRID_AGENTS <= 2**15  # the grid's scratch rows pack an id and a place in an int32
#: The most candidates within the hints' limit that the grid's warps select from (four a lane);
#: with more the observer is searched again.
GRID_KEPT = 128
#: A first hint that sends an observer to the per-agent search after the grid's block observation
#: (its warps or threads): an id past every agent (so no search takes it for one), before
#: :data:`NO_AGENT`.
SEARCH_AGAIN = np.int32(2**31 - 2)
# Both observations' scratch rows and observer strides take a block of THREADS (the backend
# launches the block observation so).
_WARPS = THREADS // 32
_FULL = 0xFFFFFFFF
_FULL_I32 = np.int32(-1)  # match_any_sync's mask is signed
_FAR = float32(np.inf)
_LARGEST = float32(np.finfo(np.float32).max)
_U = np.uint32


@cuda.jit(device=True, inline=True)
def filed_agent(other, at):
    """An agent as the grid's scratch rows hold it: its id and its place in the grid's order, in one
    int32 ordered as the ids are (ids below 2**15 and places below 2**16; the block observation of
    narrower games holds ids)."""
    return int32(_U(_U(other) << _U(16)) | _U(at))


@cuda.jit(device=True, inline=True)
def unfiled_agent(entry, in_grid):
    """``(id, place)`` of a scratch row's ``entry``: a :func:`filed_agent` agent ``in_grid``, else an id,
    which is also its place."""
    if in_grid:
        return _U(_U(entry) >> _U(16)), _U(_U(entry) & _U(0xFFFF))
    return _U(entry), _U(entry)


@cuda.jit(device=True, inline=True)
def write_slot(row, slots, me, other, at, slot, seen, inverse_diagonal, inverse_speed_scale):
    """Slot ``slot`` of the observer's ``row``: agent ``other``'s seven features from ``seen`` (x
    and y at its place ``at``; v, accel, theta, flag, type by its id), relative to ``me`` (the
    observer's first five).

    Every value is read before any entry is written: a read of a global array placed after a write
    to the row cannot be moved above it (the compiler cannot rule out that they overlap), so each
    read of the grid's v, accel, theta, type and flag waited for the write before it (H100,
    2,000 x 1,000: about a sixth of the step kernel's stall samples)."""
    sx, sy, sv, sa, sth, sflag, stype = seen
    dx, dy = sx[at] - me[0], sy[at] - me[1]
    dv, da, dtheta = sv[other] - me[2], sa[other] - me[3], sth[other] - me[4]
    tagger, playing = float32(stype[other]), float32(sflag[other])
    place = _U(slot)
    stride = _U(slots)
    row[place] = dx * inverse_diagonal
    row[_U(place + stride)] = dy * inverse_diagonal
    row[_U(place + 2 * stride)] = dv * inverse_speed_scale
    row[_U(place + 3 * stride)] = da * inverse_speed_scale
    row[_U(place + 4 * stride)] = dtheta * INVERSE_TWO_PI
    row[_U(place + 5 * stride)] = tagger
    row[_U(place + 6 * stride)] = playing


@cuda.jit(device=True, inline=True)
def blank_slot(row, slots, slot):
    """Zeros in slot ``slot`` of ``row`` (``slots`` slots): a slot with nobody."""
    for feature in range(7):
        row[_U(_U(feature) * _U(slots) + slot)] = float32(0.0)


@cuda.jit(device=True, inline=True)
def lane_candidate(lane, j, observer, count, sx, sy, sflag, x, y):
    """The lane's ``j``-th candidate as ``(distance, id)``, or ``(inf, NO_AGENT)`` where there is
    none (past the agents, the observer, out of the game)."""
    other = _U(lane + _U(32) * _U(j))
    if other < count and other != observer and sflag[other] == 1:
        return gap_between(x, y, sx[other], sy[other]), int32(other)
    return _FAR, int32(NO_AGENT)


@cuda.jit(device=True, inline=True)
def _warp_max(gap):
    """The largest of the warp's ``gap``, on every lane: a butterfly of shuffles."""
    for offset in (16, 8, 4, 2, 1):
        gap = max(gap, cuda.shfl_xor_sync(_FULL, gap, offset))
    return gap


@cuda.jit(device=True, inline=True)
def _in_order(g0, i0, g1, i1):
    """Two ``(gap, id)`` pairs, the nearer first."""
    swap = comes_after(g0, i0, g1, i1)
    return (g1 if swap else g0), (i1 if swap else i0), (g0 if swap else g1), (i0 if swap else i1)


@cuda.jit(device=True, inline=True)
def _warp_nearest(gap, other):
    """The nearest of the warp's ``(gap, other)`` in (distance, id) order, on every lane: a
    butterfly of shuffles."""
    for offset in (16, 8, 4, 2, 1):
        their_gap = cuda.shfl_xor_sync(_FULL, gap, offset)
        their_id = cuda.shfl_xor_sync(_FULL, other, offset)
        take = comes_after(gap, other, their_gap, their_id)
        gap = their_gap if take else gap
        other = their_id if take else other
    return gap, other


@cuda.jit(device=True, inline=True)
def _blank_row(row, width, lane):
    """Zeros in the ``width`` entries of an observer out of the game."""
    entry = lane
    while entry < width:
        row[entry] = float32(0.0)
        entry = _U(entry + _U(32))


@cuda.jit(device=True, inline=True)
def _lane_hint(hints, observer, count, lane, k):
    """The lane's hint of ``observer`` (lanes below k; :data:`NO_AGENT` for the others and past the
    agents)."""
    if observer < count and lane < k:
        return _U(hints[observer, lane])
    return _U(NO_AGENT)


@cuda.jit(device=True, inline=True)
def _hinted_square(hinted, observer, count, xs, ys, flags, ox, oy):
    """The square of the hints' limit, on every lane: the largest squared distance of a hinted
    agent in the game (not the observer at ``(ox, oy)``), -1 when none is; ``hinted``: the lane's
    hint (:func:`_lane_hint`)."""
    hint_square = float32(-1.0)
    if hinted < count and hinted != observer and flags[hinted] == 1:
        hint_square = squared_gap(ox, oy, xs[hinted], ys[hinted])
    return _warp_max(hint_square)


@cuda.jit(device=True, inline=True)
def _hinted_limit(hinted, observer, count, xs, ys, flags, ox, oy):
    """The hints' limit, on every lane: the distance of the farthest hinted agent in the game, -1
    when none is (:func:`_hinted_square`'s root: the largest of the roots). Every agent up to it is
    kept; once k are, the k nearest are among them."""
    hint_square = _hinted_square(hinted, observer, count, xs, ys, flags, ox, oy)
    if hint_square < float32(0.0):
        return float32(-1.0)
    return float32(math.sqrt(hint_square))


@cuda.jit(device=True, inline=True)
def squares_kept(limit_square):
    """``beyond``: the largest squared distance kept for a limit of square ``limit_square`` (at
    least 0): every square whose root is up to the limit's root, maybe a few past it. It stays
    finite, so that no agent out of the game (x = inf) or past the agents (inf or NaN) is kept,
    even where the limit's square overflows."""
    beyond = max(limit_square, float32(1e-36)) * float32(1.0 + 2.0**-20)
    return min(beyond, _LARGEST)


@cuda.jit(device=True, inline=True)
def _square_bounds(limit_gap):
    """``(nearer, beyond)``: squares below ``nearer`` have a root within the limit, squares above
    ``beyond`` one past it; between them the root decides (rounding could)."""
    bounded = max(limit_gap, float32(1e-18))
    beyond = bounded * bounded * float32(1.0 + 2.0**-20)
    nearer = limit_gap * limit_gap * float32(1.0 - 2.0**-20)
    return nearer, beyond


@cuda.jit(device=True, inline=True)
def _within(square, candidate, nearer, beyond, limit_gap):
    """Whether a candidate at this squared distance lies within the limit (``&`` and ``|`` rather
    than branches)."""
    before = candidate & (square < nearer)
    if candidate & (square >= nearer) & (square <= beyond):
        before = float32(math.sqrt(square)) <= limit_gap
    return before


@cuda.jit(device=True, inline=True)
def _keep(before, square, other, kept, below, my_gaps, my_ids):
    """The warp's candidates that ``before`` keeps (within the limit; in the narrow observation, by
    their squares, maybe a few just past it) appended to its scratch row (as many as it holds);
    returns how many it has seen in all."""
    mask = _U(cuda.ballot_sync(_FULL, before))
    place = _U(kept + _U(cuda.popc(_U(mask & below))))
    if before and place < _U(my_gaps.shape[0]):
        my_gaps[place] = square
        my_ids[place] = other
    return _U(kept + _U(cuda.popc(mask)))


@cuda.jit(device=True, inline=True)
def _root_kept(lane, kept, my_gaps):
    """The ``kept`` (at most 32) squares of the scratch row replaced by their roots; returns the
    lane's distance (inf past the kept)."""
    gap = _FAR
    if lane < kept:
        gap = float32(math.sqrt(my_gaps[lane]))
        my_gaps[lane] = gap
    cuda.syncwarp(_FULL)
    return gap


@cuda.jit(device=True, inline=True)
def _rank(lane, kept, my_gaps, my_ids):
    """The rank in (distance, id) order of the lane's entry among the ``kept`` (k to 32) of the
    scratch row (distances: :func:`_root_kept`), for lanes below ``kept``."""
    rank = _U(0)
    if lane < kept:
        gap, other = my_gaps[lane], my_ids[lane]
        index = _U(0)
        while index < kept:
            rank = _U(rank + _U(comes_after(gap, other, my_gaps[index], my_ids[index])))
            index = _U(index + _U(1))
    return rank


@cuda.jit(device=True, inline=True)
def _rank_in_id_order(lane, gap, kept, below, my_gaps):
    """:func:`_rank` of a scratch row in id order (lane ``gap`` its distance, inf past the kept):
    the entries nearer than the lane's, and those as near before it (``match_any_sync`` gives the
    lanes of an equal distance, whose bits are equal: no distance is -0 or NaN)."""
    twins = _U(cuda.match_any_sync(_FULL_I32, gap))
    rank = _U(cuda.popc(_U(twins & below)))
    if lane < kept:
        index = _U(0)
        while index < kept:
            rank = _U(rank + _U(my_gaps[index] < gap))
            index = _U(index + _U(1))
    return rank


@cuda.jit(device=True, inline=True)
def _write_ranked(
    lane, kept, k, rank, my_ids, in_grid, row, me, seen, hints, observer, inverse_diagonal,
    inverse_speed_scale,
):  # fmt: skip
    """The k nearest of the ``kept`` (k to 32) in the scratch row, each lane's entry ranked
    (:func:`_rank` or :func:`_rank_in_id_order`): a lane of rank below k writes that slot and its
    hint (entries as :func:`unfiled_agent` reads them)."""
    if lane < kept and rank < k:
        other, at = unfiled_agent(my_ids[lane], in_grid)
        write_slot(row, k, me, other, at, rank, seen, inverse_diagonal, inverse_speed_scale)
        hints[observer, rank] = other


@cuda.jit(device=True, inline=True)
def select_nearest(lane, first, k, g0, i0, g1, i1, g2, i2, g3, i3):
    """The ``k - first`` nearest of each lane's four candidates ``(gap, id)`` (none: ``(inf,
    NO_AGENT)``, ids otherwise distinct), held in registers: each lane puts its four in order (a
    sorting network), then each of ``k - first`` rounds takes the warp-wide nearest of the lanes'
    first (a butterfly), and the lane that held it moves its next one up. Lane ``first + j`` gets
    the ``j``-th nearest (or :data:`NO_AGENT`), for ``0 <= j < k - first``."""
    g0, i0, g1, i1 = _in_order(g0, i0, g1, i1)
    g2, i2, g3, i3 = _in_order(g2, i2, g3, i3)
    g0, i0, g2, i2 = _in_order(g0, i0, g2, i2)
    g1, i1, g3, i3 = _in_order(g1, i1, g3, i3)
    g1, i1, g2, i2 = _in_order(g1, i1, g2, i2)
    mine = int32(NO_AGENT)
    slot = _U(first)
    while slot < k:
        gap, other = _warp_nearest(g0, i0)
        if lane == slot:
            mine = other
        taken = i0 == other
        g0, i0 = (g1 if taken else g0), (i1 if taken else i0)
        g1, i1 = (g2 if taken else g1), (i2 if taken else i1)
        g2, i2 = (g3 if taken else g2), (i3 if taken else i2)
        g3, i3 = (_FAR if taken else g3), (int32(NO_AGENT) if taken else i3)
        slot = _U(slot + _U(1))
    return mine


@cuda.jit(device=True, inline=True)
def _write_selected(
    lane, k, mine, in_grid, row, me, seen, hints, observer, inverse_diagonal, inverse_speed_scale
):
    """Lane ``slot < k`` writes its slot of :func:`select_nearest`'s choice (zeros for none) and
    its hint (``mine`` as :func:`unfiled_agent` reads it)."""
    if lane < k:
        if mine != NO_AGENT:
            other, at = unfiled_agent(mine, in_grid)
            write_slot(row, k, me, other, at, lane, seen, inverse_diagonal, inverse_speed_scale)
            hints[observer, lane] = other
        else:
            blank_slot(row, k, lane)
            hints[observer, lane] = NO_AGENT


@cuda.jit(device=True, inline=True)
def _kept_candidate(lane, j, kept, my_gaps, my_ids):
    """The lane's ``j``-th of the ``kept`` in the scratch row (squared distances) as ``(distance,
    id)``, or ``(inf, NO_AGENT)``."""
    place = _U(lane + _U(32) * _U(j))
    if place < kept:
        return float32(math.sqrt(my_gaps[place])), my_ids[place]
    return _FAR, int32(NO_AGENT)


@cuda.jit(device=True)
def observe_nearest_by_warps(
    x, y, v, accel, theta, playing, is_tagger, hints, obs, slots, time, inverse_diagonal, inverse_speed_scale
):
    """Every observer's row of one environment: the ``slots`` nearest others in the game, nearest
    first, ties to the lower id, missing slots zero, then ``time``; an observer out of the game
    sees zeros. Called by every thread of a block of :data:`THREADS`.

    ``x`` ... ``theta``, ``playing`` (``in_game_before``): the environment's rows of the state;
    ``is_tagger``: per agent; ``hints``: the environment's ``nearest_hint`` (agent-major, updated
    to the nearest found); ``obs``: the environment's observations (agent, entry). At most
    :data:`MAX_AGENTS` agents and :data:`MAX_OBSERVED` slots.
    """
    tid = _U(cuda.threadIdx.x)
    lane = _U(tid & _U(31))
    warp = _U(tid >> _U(5))
    count = _U(x.shape[0])
    sx = cuda.shared.array(THREADS, float32)
    sy = cuda.shared.array(THREADS, float32)
    sv = cuda.shared.array(THREADS, float32)
    sa = cuda.shared.array(THREADS, float32)
    sth = cuda.shared.array(THREADS, float32)
    sflag = cuda.shared.array(THREADS, int32)
    stype = cuda.shared.array(THREADS, int32)
    scratch_gap = cuda.shared.array((_WARPS, 32), float32)
    scratch_id = cuda.shared.array((_WARPS, 32), int32)
    if tid < count:
        sx[tid] = x[tid] if playing[tid] == 1 else _FAR
        sy[tid] = y[tid]
        sv[tid] = v[tid]
        sa[tid] = accel[tid]
        sth[tid] = theta[tid]
        sflag[tid] = playing[tid]
        stype[tid] = is_tagger[tid]
    else:
        sx[tid] = _FAR
        sflag[tid] = 0
    cuda.syncthreads()
    seen = (sx, sy, sv, sa, sth, sflag, stype)
    below = _U(_U(_U(1) << lane) - _U(1))
    my_gaps, my_ids = scratch_gap[warp], scratch_id[warp]
    k = _U(slots)
    width = _U(7 * k + 1)
    observer = warp
    next_hint = _lane_hint(hints, observer, count, lane, k)
    while observer < count:
        row = obs[observer]
        this_hint = next_hint
        next_hint = _lane_hint(hints, _U(observer + _U(_WARPS)), count, lane, k)
        if sflag[observer] != 1:
            _blank_row(row, width, lane)
            observer = _U(observer + _U(_WARPS))
            continue
        ox, oy = sx[observer], sy[observer]
        me = (ox, oy, sv[observer], sa[observer], sth[observer])
        limit_square = _hinted_square(this_hint, observer, count, sx, sy, sflag, ox, oy)
        kept = _U(0)
        if limit_square >= float32(0.0):
            # Every agent whose square is up to ``beyond``: all those with a root up to the limit's
            # (the largest square's root), maybe a few past it; an agent not kept has a root past
            # the limit.
            beyond = squares_kept(limit_square)
            for j in range(MAX_AGENTS // 32):
                other = _U(lane + _U(32 * j))
                square = squared_gap(ox, oy, sx[other], sy[other])
                before = (other != observer) & (square <= beyond)
                kept = _keep(before, square, other, kept, below, my_gaps, my_ids)
        cuda.syncwarp(_FULL)
        settled = False
        gap = _FAR
        if kept >= k and kept <= _U(32):
            # A square up to the largest hint's has a root up to the limit: once k kept have, the
            # k nearest are among the kept.
            inside = (lane < kept) & (my_gaps[lane] <= limit_square)
            gap = _root_kept(lane, kept, my_gaps)
            settled = _U(cuda.popc(_U(cuda.ballot_sync(_FULL, inside)))) >= k
        if settled:
            rank = _rank_in_id_order(lane, gap, kept, below, my_gaps)
            _write_ranked(
                lane, kept, k, rank, my_ids, False, row, me, seen, hints, observer, inverse_diagonal,
                inverse_speed_scale,
            )  # fmt: skip
        else:
            # Every agent a candidate: four a lane.
            g0, i0 = lane_candidate(lane, 0, observer, count, sx, sy, sflag, ox, oy)
            g1, i1 = lane_candidate(lane, 1, observer, count, sx, sy, sflag, ox, oy)
            g2, i2 = lane_candidate(lane, 2, observer, count, sx, sy, sflag, ox, oy)
            g3, i3 = lane_candidate(lane, 3, observer, count, sx, sy, sflag, ox, oy)
            mine = select_nearest(lane, 0, k, g0, i0, g1, i1, g2, i2, g3, i3)
            _write_selected(
                lane, k, mine, False, row, me, seen, hints, observer, inverse_diagonal, inverse_speed_scale
            )
        if lane == _U(0):
            row[_U(7 * k)] = time
        cuda.syncwarp(_FULL)
        observer = _U(observer + _U(_WARPS))


@cuda.jit(device=True, inline=True)
def copy_grid(tid, threads, x, y, cell_agents, cell_start, filed, area, floats, ints, at_y, at_id, at_start):
    """The grid into dynamic shared memory (:func:`grid_shared_bytes`), by the block's ``threads``:
    the ``filed`` agents' x at ``floats[0 ..]``, y at ``floats[at_y ..]`` and ids at
    ``ints[at_id ..]``, in the grid's order (``cell_agents``), then the ``area + 1`` starts of the
    cells' runs at ``ints[at_start ..]``."""
    place = tid
    while place < filed:
        agent = _U(cell_agents[place])
        floats[place] = x[agent]
        floats[_U(at_y + place)] = y[agent]
        ints[_U(at_id + place)] = agent
        place = _U(place + threads)
    place = tid
    while place <= area:
        ints[_U(at_start + place)] = cell_start[place]
        place = _U(place + threads)


def grid_shared_bytes(num_agents: int, num_cells: int) -> int:
    """Dynamic shared memory of the grid's block observation (:func:`observe_nearest_in_grid_by_warps`
    and ``tag_continuous_threads.observe_nearest_in_grid_by_threads``; :func:`copy_grid` fills
    it), in bytes: each agent's x, y and id in the grid's order, and the ``num_cells + 1`` starts of
    the cells' runs."""
    return 4 * (3 * num_agents + num_cells + 1)


@cuda.jit(device=True)
def observe_nearest_in_grid_by_warps(
    x, y, v, accel, theta, playing, is_tagger, hints, obs, slots, time, inverse_diagonal, inverse_speed_scale,
    cell_agents, cell_start, cells, inverse_cell, grid_length,
):  # fmt: skip
    """:func:`observe_nearest_by_warps` for environments of more than :data:`MAX_AGENTS` agents,
    the candidates from the neighbour grid: the observations of the observers whose hints settle
    them, and :data:`SEARCH_AGAIN` in the first hint of the others, which the caller then observes
    an agent a thread (``observe_agent``: its search ignores such a hint).

    The block copies the grid (``cell_agents``, the environment's agents in the game by cell;
    ``cell_start``, where each of the ``cells`` x ``cells`` cells' runs starts) into dynamic shared
    memory (:func:`grid_shared_bytes`), with each filed agent's position. A warp takes one
    observer at a time: the cells within the hints' limit (``cell_span``) are a run of the grid's
    order per row of cells; the warp's lanes take the candidates of the rows' runs one after
    another, 32 at a time, and keep those within the limit (the hints' farthest distance, told by
    squares, the root only in a band around its square). When there are k to 32 of them, their
    ranks by :func:`_rank` give the k nearest (kept in the grid's order, not the ids'); up to
    :data:`GRID_KEPT`, k rounds of a warp-wide minimum. Otherwise (no hint in the game, fewer than
    k or more than :data:`GRID_KEPT` within the limit) the observer is searched again.
    The scratch rows hold each kept agent with its place in the grid's order (:func:`filed_agent`), so
    that the features' x and y come from the grid's copy; the others from the state's rows (``v``,
    ``accel``, ``theta``, ``playing``, ``is_tagger``).
    """
    tid = _U(cuda.threadIdx.x)
    lane = _U(tid & _U(31))
    warp = _U(tid >> _U(5))
    threads = _U(cuda.blockDim.x)
    count = _U(x.shape[0])
    area = _U(cells * cells)
    filed = _U(cell_start[area])
    # Dynamic shared memory: floats [0, count) the filed agents' x in the grid's order, [count,
    # 2 count) their y; ints [2 count, 3 count) their ids, then the cells' starts.
    floats = cuda.shared.array(0, float32)
    ints = cuda.shared.array(0, int32)
    at_y = count
    at_id = _U(2 * count)
    at_start = _U(3 * count)
    copy_grid(tid, threads, x, y, cell_agents, cell_start, filed, area, floats, ints, at_y, at_id, at_start)
    scratch_gap = cuda.shared.array((_WARPS, GRID_KEPT), float32)
    scratch_id = cuda.shared.array((_WARPS, GRID_KEPT), int32)
    cuda.syncthreads()
    # Positions where the grid files them (the copy in shared memory), the rest by id.
    seen = (floats[:count], floats[count : 2 * count], v, accel, theta, playing, is_tagger)
    below = _U(_U(_U(1) << lane) - _U(1))
    my_gaps, my_ids = scratch_gap[warp], scratch_id[warp]
    k = _U(slots)
    width = _U(7 * k + 1)
    row_cells = _U(cells)
    observer = warp
    while observer < count:
        row = obs[observer]
        if playing[observer] != 1:
            _blank_row(row, width, lane)
            observer = _U(observer + _U(_WARPS))
            continue
        ox, oy = x[observer], y[observer]
        me = (ox, oy, v[observer], accel[observer], theta[observer])
        limit_gap = _hinted_limit(
            _lane_hint(hints, observer, count, lane, k), observer, count, x, y, playing, ox, oy
        )
        kept = _U(0)
        if limit_gap >= float32(0.0):
            nearer, beyond = _square_bounds(limit_gap)
            x0, x1, y0, y1 = cell_span(ox, oy, limit_gap, inverse_cell, cells, grid_length)
            left, right, bottom, top = _U(x0), _U(_U(x1) + _U(1)), _U(y0), _U(_U(y1) + _U(1))
            total = _U(0)
            cell_row = bottom
            while cell_row < top:
                base = _U(at_start + cell_row * row_cells)
                total = _U(total + _U(ints[_U(base + right)] - ints[_U(base + left)]))
                cell_row = _U(cell_row + _U(1))
            first = _U(0)
            while first < total and kept <= _U(GRID_KEPT):
                # The lane's candidate: number ``first + lane`` of the rows' runs laid end to end.
                wanted = _U(first + lane)
                index = _U(0)
                offset = _U(0)
                cell_row = bottom
                while cell_row < top:
                    base = _U(at_start + cell_row * row_cells)
                    begin = _U(ints[_U(base + left)])
                    run = _U(_U(ints[_U(base + right)]) - begin)
                    if (wanted >= offset) & (wanted < _U(offset + run)):
                        index = _U(begin + _U(wanted - offset))
                    offset = _U(offset + run)
                    cell_row = _U(cell_row + _U(1))
                other = _U(ints[_U(at_id + index)])
                square = squared_gap(ox, oy, floats[index], floats[_U(at_y + index)])
                candidate = (wanted < total) & (other != observer)
                before = _within(square, candidate, nearer, beyond, limit_gap)
                kept = _keep(before, square, filed_agent(other, index), kept, below, my_gaps, my_ids)
                first = _U(first + _U(32))
        cuda.syncwarp(_FULL)
        settled = (kept >= k) & (kept <= _U(GRID_KEPT))
        if settled and kept <= _U(32):
            _root_kept(lane, kept, my_gaps)
            rank = _rank(lane, kept, my_gaps, my_ids)
            _write_ranked(
                lane, kept, k, rank, my_ids, True, row, me, seen, hints, observer, inverse_diagonal,
                inverse_speed_scale,
            )  # fmt: skip
        elif settled:
            g0, i0 = _kept_candidate(lane, 0, kept, my_gaps, my_ids)
            g1, i1 = _kept_candidate(lane, 1, kept, my_gaps, my_ids)
            g2, i2 = _kept_candidate(lane, 2, kept, my_gaps, my_ids)
            g3, i3 = _kept_candidate(lane, 3, kept, my_gaps, my_ids)
            mine = select_nearest(lane, 0, k, g0, i0, g1, i1, g2, i2, g3, i3)
            _write_selected(
                lane, k, mine, True, row, me, seen, hints, observer, inverse_diagonal, inverse_speed_scale
            )
        elif lane == _U(0):
            hints[observer, 0] = SEARCH_AGAIN
        if settled and lane == _U(0):
            row[_U(7 * k)] = time
        cuda.syncwarp(_FULL)
        observer = _U(observer + _U(_WARPS))
