"""Feasibility probe (issue 12): Tag continuous's partial observations computed by a warp per
observer, outside the framework, against the framework's own observation of the same state. (The
framework now observes this way on CUDA: :mod:`warpsci.envs.tag_continuous_warps`.)

Run on a machine with a CUDA GPU:  python benchmarks/tag_continuous_warp_probe.py OUT_DIR

The framework's step kernel gives each thread an observer: a warp's 32 threads search 32
observers' candidates in step, each with its own k-nearest list in thread-local memory (14.3 of a
warp's threads active, 13.6 cycles between a warp's instructions, H100, 2026-11-26). This probe
maps a warp to one observer at a time instead (up to 128 agents an environment):

- the block (128 threads, one environment) copies the agents' positions, speeds, headings,
  flags and types into shared memory;
- a warp takes observers ``warp, warp + 4, ...``; its lanes take candidates ``lane + 32 j``
  (up to 128 agents), so every lane is busy and the reads are of shared memory;
- the limit comes from the observer's hints (the k nearest of the step before, as the framework
  keeps them): the farthest of them, by a butterfly of warp shuffles; the candidates before the
  limit are found by ballots and compacted into a warp's scratch row of shared memory; each
  lane ranks one of them against the others (about k + 1 of them), and a lane of rank below k
  writes its slot's seven features, so a feature's k slots are written by k lanes together;
- when the hints give no limit, or fewer than k or more than 32 come before it: k rounds of a
  warp-wide minimum over each lane's four candidates held in registers.

It runs 45 steps of random play at the published configuration (2,000 x 110, k = 10, scan),
keeps the hints from before the last step, and observes the last step's state with them: its
observations must equal the framework's bit for bit (the time entry aside). Then it times, by
CUDA events, each launched from Python: the probe's launches, the framework's steps observed every
step, and its steps observed once per 100. Prints the figures as JSON
and writes them to OUT_DIR/tag_continuous_warp_probe.json.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
from numba import cuda, float32, int32

from warpsci.envs.tag_continuous import INVERSE_TWO_PI, TAG_CONTINUOUS, TagContinuousParams
from warpsci.multi_agent_env import vector_env_class

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tag_continuous_session import published  # noqa: E402

K = 10
THREADS = 128
WARPS = THREADS // 32
FULL = 0xFFFFFFFF
FAR = float32(np.inf)
NONE = 2**31 - 1


U = np.uint32


@cuda.jit(device=True, inline=True)
def after(gap, other, than_gap, than_other):
    return gap > than_gap or (gap == than_gap and other > than_other)


@cuda.jit(device=True, inline=True)
def gap_of(x0, y0, x1, y1):
    dx = x0 - x1
    dy = y0 - y1
    return float32(math.sqrt(dx * dx + dy * dy))


@cuda.jit(device=True, inline=True)
def write_slot(flat, start, me, other, slot, sx, sy, sv, sa, sth, sflag, stype, inv_diag, inv_speed):
    """Slot ``slot`` of the observer's row of observations: ``flat`` is every observation in one
    array, ``start`` where the row starts (uint32 offsets), ``me`` the observer's own position,
    speed, acceleration and heading."""
    place = U(start + slot)
    flat[place] = (sx[other] - me[0]) * inv_diag
    flat[U(place + U(K))] = (sy[other] - me[1]) * inv_diag
    flat[U(place + U(2 * K))] = (sv[other] - me[2]) * inv_speed
    flat[U(place + U(3 * K))] = (sa[other] - me[3]) * inv_speed
    flat[U(place + U(4 * K))] = (sth[other] - me[4]) * INVERSE_TWO_PI
    flat[U(place + U(5 * K))] = float32(stype[other])
    flat[U(place + U(6 * K))] = float32(sflag[other])


@cuda.jit(device=True, inline=True)
def candidate(lane, j, observer, count, sx, sy, sflag, ox, oy):
    """Lane's j-th candidate: (distance, id), or (inf, NONE) where there is none."""
    other = U(lane + U(32) * U(j))
    if other < count and other != observer and sflag[other] == 1:
        return gap_of(ox, oy, sx[other], sy[other]), int32(other)
    return FAR, int32(NONE)


@cuda.jit(device=True, inline=True)
def warp_extreme(gap, other, farthest):
    """The nearest (or with ``farthest``, the farthest) of the warp's ``(gap, other)`` in
    (distance, id) order, on every lane: a butterfly of shuffles."""
    for offset in (16, 8, 4, 2, 1):
        their_gap = cuda.shfl_xor_sync(FULL, gap, offset)
        their_id = cuda.shfl_xor_sync(FULL, other, offset)
        if after(their_gap, their_id, gap, other) if farthest else after(gap, other, their_gap, their_id):
            gap, other = their_gap, their_id
    return gap, other


@cuda.jit
def observe_by_warps(x, y, v, accel, theta, playing, is_tagger, hints, obs, new_hints, inv_diag, inv_speed):
    env = U(cuda.blockIdx.x)
    tid = U(cuda.threadIdx.x)
    lane = U(tid & U(31))
    warp = U(tid >> U(5))
    count = U(x.shape[1])
    sx = cuda.shared.array(THREADS, float32)
    sy = cuda.shared.array(THREADS, float32)
    sv = cuda.shared.array(THREADS, float32)
    sa = cuda.shared.array(THREADS, float32)
    sth = cuda.shared.array(THREADS, float32)
    sflag = cuda.shared.array(THREADS, int32)
    stype = cuda.shared.array(THREADS, int32)
    scratch_gap = cuda.shared.array((WARPS, 32), float32)
    scratch_id = cuda.shared.array((WARPS, 32), int32)
    if tid < count:
        sx[tid] = x[env, tid]
        sy[tid] = y[env, tid]
        sv[tid] = v[env, tid]
        sa[tid] = accel[env, tid]
        sth[tid] = theta[env, tid]
        sflag[tid] = playing[env, tid]
        stype[tid] = is_tagger[tid]
    else:
        sflag[tid] = 0
    cuda.syncthreads()
    below = U(U(U(1) << lane) - U(1))
    my_gaps, my_ids = scratch_gap[warp], scratch_id[warp]
    hint_rows, new_hint_rows = hints[env], new_hints[env]
    width = U(7 * K + 1)
    observer = warp
    while observer < count:
        start = U(U(env * count + observer) * width)
        if sflag[observer] != 1:
            entry = lane
            while entry < width:
                obs[U(start + entry)] = float32(0.0)
                entry = U(entry + U(32))
            observer = U(observer + U(WARPS))
            continue
        ox, oy = sx[observer], sy[observer]
        me = (ox, oy, sv[observer], sa[observer], sth[observer])
        # The hints' limit: the farthest of the k hinted (every one in the game, not the observer).
        limit_gap, limit_id = float32(-1.0), int32(-1)
        valid = True
        if lane < U(K):
            hinted = U(hint_rows[lane, observer])
            valid = hinted < count and hinted != observer and sflag[hinted] == 1
            if valid:
                limit_gap, limit_id = gap_of(ox, oy, sx[hinted], sy[hinted]), int32(hinted)
        limit_gap, limit_id = warp_extreme(limit_gap, limit_id, True)
        limit_id = int32(limit_id + int32(1))
        # (Numba's ballot is signed: a full mask reads -1, so test that no lane is invalid.)
        all_valid = cuda.ballot_sync(FULL, not valid) == 0
        kept = U(0)
        if all_valid:
            # Told by the squared distance, the root only in a band around the limit's square
            # (the framework's beyond_square and below_square); the padded flags are 0.
            bounded = max(limit_gap, float32(1e-18))
            beyond = bounded * bounded * float32(1.0 + 2.0**-20)
            nearer = (
                limit_gap * limit_gap * float32(1.0 - 2.0**-20)
                if limit_gap >= float32(1e-18)
                else float32(0.0)
            )
            for j in range(4):
                other = U(lane + U(32 * j))
                dx = ox - sx[other]
                dy = oy - sy[other]
                square = dx * dx + dy * dy
                before = sflag[other] == 1 and other != observer
                before = before and (
                    square < nearer
                    or (
                        square <= beyond
                        and after(limit_gap, limit_id, float32(math.sqrt(square)), int32(other))
                    )
                )
                mask = U(cuda.ballot_sync(FULL, before))
                place = U(kept + U(cuda.popc(U(mask & below))))
                if before and place < U(32):
                    my_gaps[place] = square
                    my_ids[place] = other
                kept = U(kept + U(cuda.popc(mask)))
        cuda.syncwarp(FULL)
        if all_valid and kept >= U(K) and kept <= U(32):
            if lane < kept:
                my_gaps[lane] = float32(math.sqrt(my_gaps[lane]))
            cuda.syncwarp(FULL)
            if lane < kept:
                gap, other = my_gaps[lane], my_ids[lane]
                rank = U(0)
                index = U(0)
                while index < kept:
                    if after(gap, other, my_gaps[index], my_ids[index]):
                        rank = U(rank + U(1))
                    index = U(index + U(1))
                if rank < U(K):
                    write_slot(
                        obs, start, me, U(other), rank, sx, sy, sv, sa, sth, sflag, stype, inv_diag, inv_speed
                    )
                    new_hint_rows[rank, observer] = other
        else:
            # k rounds of a warp-wide minimum over each lane's four candidates (in registers).
            g0, i0 = candidate(lane, 0, observer, count, sx, sy, sflag, ox, oy)
            g1, i1 = candidate(lane, 1, observer, count, sx, sy, sflag, ox, oy)
            g2, i2 = candidate(lane, 2, observer, count, sx, sy, sflag, ox, oy)
            g3, i3 = candidate(lane, 3, observer, count, sx, sy, sflag, ox, oy)
            mine = int32(NONE)
            for slot in range(K):
                gap, other = g0, i0
                if after(gap, other, g1, i1):
                    gap, other = g1, i1
                if after(gap, other, g2, i2):
                    gap, other = g2, i2
                if after(gap, other, g3, i3):
                    gap, other = g3, i3
                gap, other = warp_extreme(gap, other, False)
                if lane == U(slot):
                    mine = other
                if other == i0:
                    g0, i0 = FAR, int32(NONE)
                if other == i1:
                    g1, i1 = FAR, int32(NONE)
                if other == i2:
                    g2, i2 = FAR, int32(NONE)
                if other == i3:
                    g3, i3 = FAR, int32(NONE)
            if lane < U(K):
                if mine != NONE:
                    write_slot(
                        obs, start, me, U(mine), lane, sx, sy, sv, sa, sth, sflag, stype, inv_diag, inv_speed
                    )
                else:
                    for feature in range(7):
                        obs[U(start + U(feature * K) + lane)] = float32(0.0)
                new_hint_rows[lane, observer] = mine
        cuda.syncwarp(FULL)
        observer = U(observer + U(WARPS))


def timed(function, repeats: int = 20) -> float:
    """Median seconds of ``function`` over ``repeats`` runs (CUDA events, after a warm-up)."""
    function()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return statistics.median(times)


def played_game(num_envs: int, runners: int):
    """The published game (``runners`` besides 10 taggers, scan) on the GPU after 45 steps of random
    play: ``(env, params, earlier_hints, framework_obs)``, the hints those of the step before the
    last (on the device), the observations those the framework wrote after it (on the host)."""
    params = TagContinuousParams(**published(runners), neighbour_search="scan")
    env = vector_env_class(TAG_CONTINUOUS.agent_groups(params))(
        TAG_CONTINUOUS, num_envs=num_envs, device="cuda", seed=0, params=params, copy=False,
        check_actions=False,
    )  # fmt: skip
    env.reset(seed=0)
    for _ in range(44):
        env.random_rollout(1)
    earlier_hints = cuda.to_device(slot_major(env._state_view.nearest_hint.copy_to_host()))
    env.random_rollout(1)
    torch.cuda.synchronize()
    return env, params, earlier_hints, env._buffer_view.obs.copy_to_host()


def slot_major(hints: np.ndarray) -> np.ndarray:
    """The framework's hints ``(env, agent, slot)`` laid out as the probes' kernels take them,
    ``(env, slot, agent)``."""
    return np.ascontiguousarray(hints.transpose(0, 2, 1))


def warp_arguments(env, earlier_hints, obs, new_hints) -> tuple:
    """:func:`observe_by_warps`'s arguments for ``env``'s state."""
    state, kernel_params = env._state_view, env._params_tuple
    return (
        state.x, state.y, state.v, state.accel, state.theta, state.in_game_before, kernel_params.is_tagger,
        earlier_hints, obs, new_hints,
        np.float32(kernel_params.inverse_diagonal), np.float32(kernel_params.inverse_speed_scale),
    )  # fmt: skip


def framework_step_times(env) -> tuple[float, float]:
    """Seconds of the framework's step observed every step, and observed once per 100 steps."""

    def observed_steps() -> None:
        for _ in range(10):
            env.random_rollout(1)

    def rollout() -> None:
        env.random_rollout(100)

    return timed(observed_steps, 5) / 10, timed(rollout, 5) / 100


def main(out_dir: str) -> None:
    num_envs, runners = 2000, 100
    env, params, earlier_hints, framework_obs = played_game(num_envs, runners)
    if params.num_agents > THREADS or params.num_other_agents_observed != K:
        raise ValueError(f"the probe's kernel takes up to {THREADS} agents and k = {K}")
    state = env._state_view
    probe_obs = cuda.device_array(framework_obs.size, np.float32)  # every row in one array
    new_hints = cuda.to_device(np.full(earlier_hints.shape, NONE, np.int32))
    arguments = warp_arguments(env, earlier_hints, probe_obs, new_hints)

    def probe() -> None:
        observe_by_warps[num_envs, THREADS](*arguments)

    probe()
    cuda.synchronize()
    got = probe_obs.copy_to_host().reshape(framework_obs.shape)
    features = slice(0, 7 * K)
    mismatched = int((got[..., features] != framework_obs[..., features]).any(axis=2).sum())
    observing = state.in_game_before.copy_to_host().astype(bool)[:, None, :]
    same_hints = bool(
        (
            (new_hints.copy_to_host()[:, :K] == slot_major(state.nearest_hint.copy_to_host())[:, :K])
            | ~observing
        ).all()
    )
    probe_s = timed(probe)
    observed_s, rollout_s = framework_step_times(env)
    result = {
        "device": torch.cuda.get_device_name(),
        "command": f"python benchmarks/tag_continuous_warp_probe.py {out_dir}",
        "envs": num_envs,
        "agents": runners + 10,
        "k": K,
        "observers_mismatched": mismatched,
        "observers": int(num_envs * (runners + 10)),
        "hints_equal": same_hints,
        "probe_observation_us": probe_s * 1e6,
        "framework_observed_step_us": observed_s * 1e6,
        "framework_step_observed_once_per_100_us": rollout_s * 1e6,
        "framework_observation_us_estimate": (observed_s - rollout_s) * 1e6,
        "projected_env_steps_per_s": num_envs / (rollout_s + probe_s),
        "framework_env_steps_per_s": num_envs / observed_s,
    }
    print(json.dumps(result, indent=1))
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "tag_continuous_warp_probe.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(
            "usage: python benchmarks/tag_continuous_warp_probe.py OUT_DIR (on a machine with a CUDA GPU)"
        )
    if not torch.cuda.is_available():
        sys.exit("tag_continuous_warp_probe.py needs a CUDA GPU; none is visible here")
    main(sys.argv[1])
