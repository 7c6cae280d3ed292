"""Tag continuous's partial observations on CUDA by a thread per observer, for games that observe
up to :data:`THREAD_SLOTS` others (the published and tutorial configurations observe 10): games of
up to :data:`~warpsci.envs.tag_continuous_warps.MAX_AGENTS` agents (the block observation's narrow
path, :func:`observe_nearest_by_threads`) and wider ones searched in the neighbour grid
(:func:`observe_nearest_in_grid_by_threads`). More others are observed by a warp per observer
(:mod:`warpsci.envs.tag_continuous_warps`).

A block of :data:`~warpsci.envs.tag_continuous_warps.THREADS` threads holds one environment and
each thread one observer:

- the block copies the agents' positions (an agent out of the game at x = inf: no distance keeps
  it) and the features the rows show into shared memory;
- each thread takes the limit from its observer's hints (the k nearest it found the step before):
  the largest squared distance of those still in the game;
- it marks, 32 agents to a word of bits, the agents whose squares lie up to the limit's (widened
  past rounding, :func:`~warpsci.envs.tag_continuous_warps.squares_kept`): four positions a load,
  no branch;
- it walks the marked agents in id order (its four words as one list, so that a warp walks as
  long as its longest lane's list; the empty words dropped first, so that the walk goes on to the
  next word without a branch) and keeps the :data:`THREAD_SLOTS` nearest in registers,
  sorted by distance (an agent goes after those as near: ties to the lower id). When k of the
  marked lie within the limit, the k nearest are among them;
- the observers left (no hint in the game, fewer than k within the limit) are searched by the
  whole warp (:func:`~warpsci.envs.tag_continuous_warps.select_nearest`), each from where its
  thread stopped: the agents nearer than the limit's root that the thread found are its first
  slots, and the warp takes the rest from the agents at that root or farther (with no hint in the
  game, every agent a candidate);
- the warp then writes its 32 rows and hints, its lanes in groups of k: a group an observer, a
  lane a slot (a slot with nobody written as zeros by selects, without a branch).

On an H100 at 2,000 x 110 (k = 10) the warp per observer spent about 350 warp instructions an
observer, this about 190 (BENCHMARKS.md, 2026-11-26, eighth session); walking the four words as
one list took 16.2M to 16.3M env steps/s (2026-11-27, tenth session). The warp's search going on
from the thread's found (about 2% of the observers a step are left, where a hinted runner was
tagged) and the rows' slots with nobody by selects took 20.5M to 22.1M, the hints read at once
22.6M (sixteenth session); the insertion with one comparison a slot 22.7M, the step's stages at 48
registers 23.25M (seventeenth session). On an H200, the chosen ids' rows in distinct banks took
28.23M to 28.47M, the empty words dropped before the walk 28.81M to 29.04M (twenty-fourth session).

Wider games searched in the neighbour grid (up to
:data:`~warpsci.envs.tag_continuous_warps.MAX_GRID_AGENTS` agents) observing up to
:data:`THREAD_SLOTS` others take a thread per observer too (:func:`observe_nearest_in_grid_by_threads`),
over the grid's shared copy that the grid's warps use
(:func:`~warpsci.envs.tag_continuous_warps.copy_grid`):

- the block takes its observers 128 at a time, a thread each;
- each thread takes its limit from its observer's hints, as above, and walks the cells within it,
  a run of the grid's order per row of cells;
- it keeps the :data:`THREAD_SLOTS` nearest of the agents whose squares lie up to the limit's
  sorted in registers, of which the first k are written. The grid's order is not the ids', so a
  tie in distance is settled by id;
- an observer with k of them within the limit is settled; the others (no hint in the game, fewer
  than k within the limit) get :data:`~warpsci.envs.tag_continuous_warps.SEARCH_AGAIN` in their
  first hint, and the caller observes them an agent a thread, as after the grid's warps;
- each warp writes its 32 rows and hints, its lanes in groups of k.

On an H100 at 2,000 x 1,000 (k = 10) this took the step kernel from 1.59G to 873M warp
instructions and an observed step from 0.54M to 0.73M env steps/s (BENCHMARKS.md, 2026-11-26,
ninth session); with the rows' reads before their writes, the hints read at once, the step's
stages mended, about 3 agents a cell and its kernels at 96 registers
(``tag_continuous.grid_block_registers``), 1.02M (2026-11-27, tenth session).

Both write what ``observe_agent`` writes, bit for bit; the GPU tests check it
(``tests/test_tag_continuous_gpu.py``), and so does Numba's CUDA simulator on small games
(``tests/test_tag_continuous_simulator.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import config, cuda, float32, int32

from warpsci.envs.tag_continuous_order import INVERSE_TWO_PI, NO_AGENT, cell_span, squared_gap
from warpsci.envs.tag_continuous_warps import (
    SEARCH_AGAIN,
    THREADS,
    blank_slot,
    copy_grid,
    filed_agent,
    lane_candidate,
    select_nearest,
    squares_kept,
    unfiled_agent,
    write_slot,
)

#: The most others (k) observed a thread per observer: each thread keeps its observer's nearest
#: in 2 x THREAD_SLOTS registers.
THREAD_SLOTS = 10
_U = np.uint32
_FULL = 0xFFFFFFFF
_FAR = float32(np.inf)
# The shared feature table: a row per value (x, y, v, accel, theta, type, flag), a column per agent;
# rows one longer than the threads, so that one agent's values lie in distinct banks.
_ROW = THREADS + 1
_FEATURES = 7
_TABLE = _FEATURES * _ROW
# A missing slot (no agent) in the chosen ids: past every agent.
_MISSING = THREADS
# The chosen ids, a row a slot and a column an observer. The rows are 3 (mod 32) words apart, so
# that the 30 lanes of the rows' writer (groups of k = 10 lanes, a lane a slot of one observer;
# :func:`_write_warp_rows`) and the warp's search (a lane a slot) read and write in distinct banks:
# rows a multiple of 32 words apart put a group's 10 lanes in one bank, and that read took 16% of
# the observation's shared-memory wavefronts, 342K of a launch's 1.0M in excess (Nsight Compute on
# an H200, BENCHMARKS.md, twenty-third session).
_CHOSEN_ROW = THREADS + 3
_CHOSEN = THREAD_SLOTS * _CHOSEN_ROW


@cuda.jit(device=True, inline=True)
def _chosen_at(slot, column):
    """The index in the chosen ids of row ``slot``, column ``column`` (an observer of the block)."""
    return _U(_U(_U(slot) * _U(_CHOSEN_ROW)) + _U(column))


# The narrow path marks the agents in four words of bits (``_nearest_marked``).
assert THREADS == 4 * 32
# 16-byte aligned position rows, read four at a time (the simulator takes no alignment).
_VECTORS = None if config.ENABLE_CUDASIM else 16


@cuda.jit(device=True, inline=True)
def _hints_square(observer, k, hints, count, px, py, flags, ox, oy):
    """The square of the hints' limit of ``observer`` at ``(ox, oy)``: the largest squared distance
    of its first k hinted agents in the game, -1 when none is (``count`` at least 1).

    Every slot up to :data:`THREAD_SLOTS` (a hints row has more) and every hinted agent's flag and
    position (clamped to the last agent) are read without a branch, so that the reads go out
    together. A loop of k with a branch per slot waited for each hint, then for its agent, in turn:
    in the grid, whose positions are in global memory, 0.95M against 0.99M env steps/s (H100,
    2,000 x 1,000); in the narrow path, its positions in shared memory, 22.2M against 22.6M at
    2,000 x 110 (sixteenth session; 16.2M against 16.0M in the eighth, before the step's arrays
    were staged and its unsettled observers cheaper). Read before the block's barrier instead, the
    hints' reads went out ahead of the copy's and the step was slower (BENCHMARKS.md)."""
    limit_square = float32(-1.0)
    last = _U(count - _U(1))
    for slot in range(THREAD_SLOTS):
        hinted = _U(hints[observer, slot])
        at = min(hinted, last)
        square = squared_gap(ox, oy, px[at], py[at])
        if (_U(slot) < k) & (hinted < count) & (hinted != observer) & (flags[at] == 1):
            limit_square = max(limit_square, square)
    return limit_square


@cuda.jit(device=True, inline=True)
def _marked(word, px, py, ox, oy, beyond):
    """Bit ``b`` set where agent ``32 word + b`` lies at a squared distance up to ``beyond`` (the
    positions past the agents are inf: none is marked)."""
    bits = _U(0)
    bit = _U(1)
    other = _U(word * _U(32))
    while bit != _U(0):
        if squared_gap(ox, oy, px[other], py[other]) <= beyond:
            bits = _U(bits | bit)
        bit = _U(bit << _U(1))
        other = _U(other + _U(1))
    return bits


@cuda.jit(device=True, inline=True)
def _marked_word(word, tid, count, px, py, ox, oy, beyond):
    """:func:`_marked` for the thread's observer ``tid``, without itself; 0 for a word past the
    ``count`` agents."""
    if _U(word * _U(32)) >= count:
        return _U(0)
    bits = _marked(word, px, py, ox, oy, beyond)
    if _U(tid >> _U(5)) == word:
        bits = _U(bits & ~_U(_U(1) << _U(tid & _U(31))))
    return bits


@cuda.jit(device=True, inline=True)
def _without_word(j, b0, b1, b2, b3, bases):
    """The four words with word ``j`` (0, 1 or 2) dropped where it is empty: the words after it move
    up one, an empty word comes in last; ``bases`` (a byte a word: its first agent's id) likewise,
    a zero byte coming in last. Before the walk for each word, and in it for the first word once
    its last agent is taken."""
    empty = (b2 if j == 2 else (b1 if j == 1 else b0)) == _U(0)
    if j == 0:
        b0 = b1 if empty else b0
    if j <= 1:
        b1 = b2 if empty else b1
    b2 = b3 if empty else b2
    b3 = _U(0) if empty else b3
    low = _U(_U(1) << _U(8 * j)) - _U(1)
    moved = _U(_U(bases & low) | _U(_U(bases >> _U(8)) & ~low))
    return b0, b1, b2, b3, (moved if empty else bases)


@cuda.jit(device=True, inline=True)
def _insert(gaps, ids, gap, other):
    """``(gap, other)`` into the registers ``gaps`` and ``ids``, nearest first, after those as near
    (the agents come in id order); the farthest falls off.

    A slot changes only where ``gap`` goes before it (``gaps`` is sorted, so going before the slot
    ahead implies that). Written so, a slot's comparison is the same as the choice made for the
    slot behind it, and the compiler keeps one comparison and two selects a slot: 35 SASS
    instructions an insertion for sm_90, where choosing among the slot ahead, the new agent and the
    slot itself took 43."""
    for slot in range(THREAD_SLOTS - 1, 0, -1):
        if gap < gaps[slot]:
            before_previous = gap < gaps[slot - 1]
            gaps[slot] = gaps[slot - 1] if before_previous else gap
            ids[slot] = ids[slot - 1] if before_previous else other
    if gap < gaps[0]:
        gaps[0] = gap
        ids[0] = other


@cuda.jit(device=True, inline=True)
def _limit_gap(limit_square):
    """The root of the hints' limit, from which the warp's search goes on; -1 without a limit
    (``limit_square`` -1: no hint in the game), so that every agent is a candidate."""
    return float32(math.sqrt(limit_square)) if limit_square >= float32(0.0) else float32(-1.0)


@cuda.jit(device=True, inline=True)
def _nearest_marked(tid, k, count, limit_square, px, py, ox, oy, chosen):
    """The nearest others of the thread's observer at ``(ox, oy)`` among the agents within
    :func:`squares_kept` of ``limit_square``: their ids into rows ``0 .. found-1`` of the thread's
    column of ``chosen``; returns ``found``. When k of them lie within the limit itself, the k
    nearest are among them (``found`` = k). Otherwise ``found`` < k are those nearer than the
    limit's root (:func:`_limit_gap`): every agent that near has a square below the limit's, so it
    was walked, and every other agent lies at the root or farther, where the warp's search goes on
    (:func:`_search_by_warp`). The two searches' distances then sit in one list: both take them
    from :func:`~warpsci.envs.tag_continuous_order.squared_gap` of the same positions, so they
    are the same bits."""
    beyond = squares_kept(limit_square)
    gaps = cuda.local.array(THREAD_SLOTS, float32)
    ids = cuda.local.array(THREAD_SLOTS, int32)
    for slot in range(THREAD_SLOTS):
        gaps[slot] = _FAR
        ids[slot] = _MISSING
    # The (up to) four words marked first, then walked as one: a warp then walks as long as its
    # longest lane's marked agents, not as the sum over the words of each word's longest. The
    # empty words are dropped first (the kept words' first ids a byte each in ``bases``), so that
    # the walk goes on to the next word in one step, without a branch.
    b0 = _marked_word(_U(0), tid, count, px, py, ox, oy, beyond)
    b1 = _marked_word(_U(1), tid, count, px, py, ox, oy, beyond)
    b2 = _marked_word(_U(2), tid, count, px, py, ox, oy, beyond)
    b3 = _marked_word(_U(3), tid, count, px, py, ox, oy, beyond)
    bases = _U(0x60402000)
    b0, b1, b2, b3, bases = _without_word(2, b0, b1, b2, b3, bases)
    b0, b1, b2, b3, bases = _without_word(1, b0, b1, b2, b3, bases)
    b0, b1, b2, b3, bases = _without_word(0, b0, b1, b2, b3, bases)
    within = _U(0)
    while b0 != _U(0):
        other = _U(_U(bases & _U(0xFF)) + _U(cuda.ffs(b0) - 1))
        b0 = _U(b0 & _U(b0 - _U(1)))
        b0, b1, b2, b3, bases = _without_word(0, b0, b1, b2, b3, bases)
        square = squared_gap(ox, oy, px[other], py[other])
        within = _U(within + _U(square <= limit_square))
        _insert(gaps, ids, float32(math.sqrt(square)), int32(other))
    found = k
    if within < k:
        root = _limit_gap(limit_square)
        found = _U(0)
        for slot in range(THREAD_SLOTS):
            found = _U(found + _U(gaps[slot] < root))
    for slot in range(THREAD_SLOTS):
        if _U(slot) < found:
            chosen[_chosen_at(slot, tid)] = ids[slot]
    return found


@cuda.jit(device=True, inline=True)
def _from_gap(lane, j, observer, count, xs, ys, flags, ox, oy, nearest_gap):
    """:func:`~warpsci.envs.tag_continuous_warps.lane_candidate`, none where nearer than
    ``nearest_gap``."""
    gap, other = lane_candidate(lane, j, observer, count, xs, ys, flags, ox, oy)
    if gap < nearest_gap:
        return _FAR, int32(NO_AGENT)
    return gap, other


@cuda.jit(device=True, inline=True)
def _search_by_warp(lane, warp, k, count, xs, ys, flags, chosen, unsettled, found, from_gap):
    """The nearest of each observer in the warp's ``unsettled`` mask (a bit a lane's observer)
    past those its thread found, searched by the whole warp: its lane's ``found`` nearest are in
    rows ``0 .. found-1`` of its column of ``chosen``, and every other agent lies at ``from_gap``
    or farther (-1: every agent a candidate; :func:`_nearest_marked`). The ids of the next
    ``k - found`` agents at ``from_gap`` or farther (or a missing slot's) go into rows
    ``found .. k-1``."""
    while unsettled != _U(0):
        rest = _U(unsettled & _U(unsettled - _U(1)))
        at_lane = _U(cuda.popc(_U(_U(unsettled ^ rest) - _U(1))))
        observer = _U(_U(warp << _U(5)) + at_lane)
        unsettled = rest
        first = _U(cuda.shfl_sync(_FULL, int32(found), int32(at_lane)))
        nearest_gap = cuda.shfl_sync(_FULL, from_gap, int32(at_lane))
        ox, oy = xs[observer], ys[observer]
        g0, i0 = _from_gap(lane, 0, observer, count, xs, ys, flags, ox, oy, nearest_gap)
        g1, i1 = _from_gap(lane, 1, observer, count, xs, ys, flags, ox, oy, nearest_gap)
        g2, i2 = _from_gap(lane, 2, observer, count, xs, ys, flags, ox, oy, nearest_gap)
        g3, i3 = _from_gap(lane, 3, observer, count, xs, ys, flags, ox, oy, nearest_gap)
        mine = select_nearest(lane, first, k, g0, i0, g1, i1, g2, i2, g3, i3)
        if first <= lane and lane < k:
            chosen[_chosen_at(lane, observer)] = _MISSING if mine == NO_AGENT else mine


@cuda.jit(device=True, inline=True)
def _write_group_slot(row, k, slot, me, other, at, seen, inverse_diagonal, inverse_speed_scale):
    """A group lane's slot of ``row``: :func:`write_slot`, and for k = :data:`THREAD_SLOTS` (k
    known here) the slot's seven entries at fixed offsets from its first."""
    if k == _U(THREAD_SLOTS):
        write_slot(row[slot:], THREAD_SLOTS, me, other, at, 0, seen, inverse_diagonal, inverse_speed_scale)
    else:
        write_slot(row, k, me, other, at, slot, seen, inverse_diagonal, inverse_speed_scale)


@cuda.jit(device=True, inline=True)
def _slot_entries(me, other, nobody, seen, inverse_diagonal, inverse_speed_scale):
    """The seven entries of a slot showing agent ``other`` (:func:`write_slot`'s), zeros where
    ``nobody``."""
    sx, sy, sv, sa, sth, sflag, stype = seen
    zero = float32(0.0)
    dx = (sx[other] - me[0]) * inverse_diagonal
    dy = (sy[other] - me[1]) * inverse_diagonal
    dv = (sv[other] - me[2]) * inverse_speed_scale
    da = (sa[other] - me[3]) * inverse_speed_scale
    dtheta = (sth[other] - me[4]) * INVERSE_TWO_PI
    tagger, playing = stype[other], sflag[other]
    return (
        zero if nobody else dx,
        zero if nobody else dy,
        zero if nobody else dv,
        zero if nobody else da,
        zero if nobody else dtheta,
        zero if nobody else tagger,
        zero if nobody else playing,
    )


@cuda.jit(device=True, inline=True)
def _store_slot(entries_row, stride, entries):
    """A slot's seven ``entries`` at ``entries_row[0]``, ``entries_row[stride]``, ... (``stride``
    a constant where it can be, so that the stores take fixed offsets)."""
    for feature in range(_FEATURES):
        entries_row[feature * stride] = entries[feature]


@cuda.jit(device=True, inline=True)
def _write_warp_rows(
    lane, warp, count, k, feats, flags, chosen, obs, hints, time, inverse_diagonal, inverse_speed_scale
):
    """The rows and hints of the warp's observers from the ids in ``chosen``: the lanes in groups
    of k, a group an observer and a lane a slot (so that a group's stores of a feature are k
    consecutive entries); an observer out of the game sees zeros and its hints stay."""
    first = _U(warp << _U(5))
    last = min(_U(first + _U(32)), count)
    groups = _U(_U(32) // k)
    group = _U(lane // k)
    slot = _U(lane - group * k)
    seen = (
        feats[0:_ROW],
        feats[_ROW : 2 * _ROW],
        feats[2 * _ROW : 3 * _ROW],
        feats[3 * _ROW : 4 * _ROW],
        feats[4 * _ROW : 5 * _ROW],
        feats[6 * _ROW : 7 * _ROW],
        feats[5 * _ROW : 6 * _ROW],
    )
    start = first
    while start < last:
        observer = _U(start + group)
        if group < groups and observer < last:
            other = _U(chosen[_chosen_at(slot, observer)])
            nobody = other == _U(_MISSING)
            me = (
                seen[0][observer],
                seen[1][observer],
                seen[2][observer],
                seen[3][observer],
                seen[4][observer],
            )
            # A slot with nobody reads the table's spare column and writes zeros: no branch.
            entries = _slot_entries(me, other, nobody, seen, inverse_diagonal, inverse_speed_scale)
            in_game = flags[observer] == 1
            stamp = time if in_game else float32(0.0)
            row = obs[observer]
            if k == _U(THREAD_SLOTS):
                _store_slot(row[slot:], THREAD_SLOTS, entries)
                if slot == _U(0):
                    row[_FEATURES * THREAD_SLOTS] = stamp
            else:
                _store_slot(row[slot:], k, entries)
                if slot == _U(0):
                    row[_U(_FEATURES * k)] = stamp
            if in_game:
                hints[observer, slot] = NO_AGENT if nobody else int32(other)
        start = _U(start + groups)


@cuda.jit(device=True)
def observe_nearest_by_threads(
    x, y, v, accel, theta, playing, is_tagger, hints, obs, slots, time, inverse_diagonal, inverse_speed_scale
):
    """Every observer's row of one environment, as
    :func:`~warpsci.envs.tag_continuous_warps.observe_nearest_by_warps` writes it (the same
    arguments), for at most :data:`THREAD_SLOTS` slots: a thread per observer (the module's
    steps). Called by every thread of a block of
    :data:`~warpsci.envs.tag_continuous_warps.THREADS`."""
    tid = _U(cuda.threadIdx.x)
    lane = _U(tid & _U(31))
    warp = _U(tid >> _U(5))
    count = _U(x.shape[0])
    feats = cuda.shared.array(_TABLE, float32)
    px = cuda.shared.array(THREADS, float32, alignment=_VECTORS)
    py = cuda.shared.array(THREADS, float32, alignment=_VECTORS)
    flags = cuda.shared.array(THREADS, int32)
    chosen = cuda.shared.array(_CHOSEN, int32)
    xs = feats[0:_ROW]
    ys = feats[_ROW : 2 * _ROW]
    in_game = False
    if tid < count:
        flag = playing[tid]
        in_game = flag == 1
        here_x = x[tid] if in_game else _FAR
        here_y = y[tid]
        feats[tid] = here_x
        feats[_U(_ROW + tid)] = here_y
        feats[_U(2 * _ROW + tid)] = v[tid]
        feats[_U(3 * _ROW + tid)] = accel[tid]
        feats[_U(4 * _ROW + tid)] = theta[tid]
        feats[_U(5 * _ROW + tid)] = float32(is_tagger[tid])
        feats[_U(6 * _ROW + tid)] = float32(flag)
        px[tid] = here_x
        py[tid] = here_y
        flags[tid] = flag
    else:
        feats[tid] = _FAR
        px[tid] = _FAR
        py[tid] = _FAR
        flags[tid] = 0
    cuda.syncthreads()
    k = _U(slots)
    found = _U(0)
    from_gap = float32(-1.0)
    if in_game:
        ox, oy = xs[tid], ys[tid]
        limit_square = _hints_square(tid, k, hints, count, px, py, flags, ox, oy)
        if limit_square >= float32(0.0):
            found = _nearest_marked(tid, k, count, limit_square, px, py, ox, oy, chosen)
            from_gap = _limit_gap(limit_square)
    else:
        slot = _U(0)
        while slot < k:
            chosen[_chosen_at(slot, tid)] = _MISSING
            slot = _U(slot + _U(1))
    unsettled = _U(cuda.ballot_sync(_FULL, in_game and found < k))
    _search_by_warp(lane, warp, k, count, xs, ys, flags, chosen, unsettled, found, from_gap)
    cuda.syncwarp(_FULL)
    _write_warp_rows(
        lane, warp, count, k, feats, flags, chosen, obs, hints, time, inverse_diagonal, inverse_speed_scale
    )


# The grid's chosen entries: an agent filed as the grid's scratch rows file it (id and place,
# ordered as the ids are), a slot with nobody, or an observer left to the per-agent search.
_NOBODY = int32(-1)
_LEFT = int32(-2)
_LAST_ENTRY = int32(2**31 - 1)


@cuda.jit(device=True, inline=True)
def _before(gap, entry, than_gap, than_entry):
    """Whether ``entry`` at distance ``gap`` comes before ``than_entry`` in (distance, id) order
    (entries ordered as their ids)."""
    return (gap < than_gap) | ((gap == than_gap) & (entry < than_entry))


@cuda.jit(device=True, inline=True)
def _insert_any_order(gaps, entries, gap, entry):
    """``(gap, entry)`` into the registers ``gaps`` and ``entries``, nearest first, ties by entry
    (the agents come in the grid's order, not the ids'); the farthest falls off."""
    for slot in range(THREAD_SLOTS - 1, 0, -1):
        before_previous = _before(gap, entry, gaps[slot - 1], entries[slot - 1])
        here = _before(gap, entry, gaps[slot], entries[slot])
        new_gap = gaps[slot - 1] if before_previous else (gap if here else gaps[slot])
        new_entry = entries[slot - 1] if before_previous else (entry if here else entries[slot])
        gaps[slot] = new_gap
        entries[slot] = new_entry
    if _before(gap, entry, gaps[0], entries[0]):
        gaps[0] = gap
        entries[0] = entry


@cuda.jit(device=True, inline=True)
def _nearest_in_cells(
    tid, observer, k, limit_square, ox, oy, floats, ints, at_y, at_id, at_start, cells, inverse_cell,
    grid_length, chosen,
):  # fmt: skip
    """The k nearest others of ``observer`` at ``(ox, oy)`` among the grid's agents in the cells
    within the limit (``limit_square`` its square), if k of them lie within it: their entries
    (id and place in the grid's order) into rows ``0 .. k-1`` of column ``tid`` of ``chosen``.
    Returns whether they are there."""
    beyond = squares_kept(limit_square)
    x0, x1, y0, y1 = cell_span(ox, oy, float32(math.sqrt(limit_square)), inverse_cell, cells, grid_length)
    left, right = _U(x0), _U(_U(x1) + _U(1))
    gaps = cuda.local.array(THREAD_SLOTS, float32)
    entries = cuda.local.array(THREAD_SLOTS, int32)
    for slot in range(THREAD_SLOTS):
        gaps[slot] = _FAR
        entries[slot] = _LAST_ENTRY
    within = _U(0)
    cell_row = _U(y0)
    while cell_row <= _U(y1):
        base = _U(at_start + cell_row * _U(cells))
        place = _U(ints[_U(base + left)])
        end = _U(ints[_U(base + right)])
        while place < end:
            square = squared_gap(ox, oy, floats[place], floats[_U(at_y + place)])
            if square <= beyond:
                other = _U(ints[_U(at_id + place)])
                if other != observer:
                    within = _U(within + _U(square <= limit_square))
                    gap = float32(math.sqrt(square))
                    entry = filed_agent(other, place)
                    if _before(gap, entry, gaps[THREAD_SLOTS - 1], entries[THREAD_SLOTS - 1]):
                        _insert_any_order(gaps, entries, gap, entry)
            place = _U(place + _U(1))
        cell_row = _U(cell_row + _U(1))
    settled = within >= k
    if settled:
        for slot in range(THREAD_SLOTS):
            if _U(slot) < k:
                chosen[_chosen_at(slot, tid)] = entries[slot]
    return settled


@cuda.jit(device=True, inline=True)
def _fill_column(chosen, tid, k, entry):
    """``entry`` in rows ``0 .. k-1`` of column ``tid`` of ``chosen``."""
    slot = _U(0)
    while slot < k:
        chosen[_chosen_at(slot, tid)] = entry
        slot = _U(slot + _U(1))


@cuda.jit(device=True, inline=True)
def _write_grid_rows(
    lane, warp, first_observer, count, k, x, y, seen, chosen, obs, hints, time, inverse_diagonal,
    inverse_speed_scale,
):  # fmt: skip
    """The rows and hints of the warp's 32 observers (from ``first_observer + 32 warp`` on) from
    their entries in ``chosen`` (a column a thread), the lanes in groups of k as
    :func:`_write_warp_rows` takes them; ``seen`` as :func:`write_slot` reads it (x and y by place
    in the grid's order). An observer out of the game sees zeros and its hints stay; one left to
    the per-agent search is not written."""
    first = _U(warp << _U(5))
    end = _U(first + _U(32))
    groups = _U(_U(32) // k)
    group = _U(lane // k)
    slot = _U(lane - group * k)
    sflag = seen[5]
    column = first
    while column < end:
        local = _U(column + group)
        observer = _U(first_observer + local)
        if group < groups and local < end and observer < count:
            entry = chosen[_chosen_at(slot, local)]
            if entry != _LEFT:
                row = obs[observer]
                in_game = sflag[observer] == 1
                if entry != _NOBODY:
                    other, at = unfiled_agent(entry, True)
                    me = (x[observer], y[observer], seen[2][observer], seen[3][observer], seen[4][observer])
                    _write_group_slot(
                        row, k, slot, me, other, at, seen, inverse_diagonal, inverse_speed_scale
                    )
                else:
                    blank_slot(row, k, slot)
                if slot == _U(0):
                    row[_U(_FEATURES * k)] = time if in_game else float32(0.0)
                if in_game:
                    hints[observer, slot] = NO_AGENT if entry == _NOBODY else int32(_U(entry) >> _U(16))
        column = _U(column + groups)


@cuda.jit(device=True)
def observe_nearest_in_grid_by_threads(
    x, y, v, accel, theta, playing, is_tagger, hints, obs, slots, time, inverse_diagonal, inverse_speed_scale,
    cell_agents, cell_start, cells, inverse_cell, grid_length,
):  # fmt: skip
    """:func:`~warpsci.envs.tag_continuous_warps.observe_nearest_in_grid_by_warps` (the same
    arguments, the same shared copy of the grid, the same :data:`SEARCH_AGAIN` mark for the
    observers it leaves) for at most :data:`THREAD_SLOTS` slots, a thread per observer: the block
    takes its observers 128 at a time; each thread takes its limit from its observer's hints,
    walks the cells within it (a run of the grid's order per row of cells), keeps the
    :data:`THREAD_SLOTS` nearest of the agents whose squares lie up to the limit's in registers,
    sorted by distance and id, and is settled when k of them lie within the limit; then each warp
    writes its 32 rows, its lanes in groups of k. Called by every thread of a block of
    :data:`~warpsci.envs.tag_continuous_warps.THREADS`."""
    tid = _U(cuda.threadIdx.x)
    lane = _U(tid & _U(31))
    warp = _U(tid >> _U(5))
    count = _U(x.shape[0])
    area = _U(cells * cells)
    filed = _U(cell_start[area])
    floats = cuda.shared.array(0, float32)
    ints = cuda.shared.array(0, int32)
    at_y = count
    at_id = _U(2 * count)
    at_start = _U(3 * count)
    copy_grid(
        tid, _U(THREADS), x, y, cell_agents, cell_start, filed, area, floats, ints, at_y, at_id, at_start
    )
    chosen = cuda.shared.array(_CHOSEN, int32)
    cuda.syncthreads()
    seen = (floats[:count], floats[count : 2 * count], v, accel, theta, playing, is_tagger)
    k = _U(slots)
    first_observer = _U(0)
    while first_observer < count:
        observer = _U(first_observer + tid)
        settled = False
        if observer < count and playing[observer] == 1:
            ox, oy = x[observer], y[observer]
            limit_square = _hints_square(observer, k, hints, count, x, y, playing, ox, oy)
            if limit_square >= float32(0.0):
                settled = _nearest_in_cells(
                    tid, observer, k, limit_square, ox, oy, floats, ints, at_y, at_id, at_start, cells,
                    inverse_cell, grid_length, chosen,
                )  # fmt: skip
            if not settled:
                hints[observer, 0] = SEARCH_AGAIN
                _fill_column(chosen, tid, k, _LEFT)
        else:
            _fill_column(chosen, tid, k, _NOBODY)
        cuda.syncwarp(_FULL)
        _write_grid_rows(
            lane, warp, first_observer, count, k, x, y, seen, chosen, obs, hints, time, inverse_diagonal,
            inverse_speed_scale,
        )  # fmt: skip
        cuda.syncwarp(_FULL)
        first_observer = _U(first_observer + _U(THREADS))
