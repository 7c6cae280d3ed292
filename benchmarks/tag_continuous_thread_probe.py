"""Feasibility probe (issue 12): Tag continuous's partial observations by a thread per observer
with the environment in shared memory, outside the framework, against the framework's own
observation of the same state and against the warp-per-observer probe.

Run on a machine with a CUDA GPU:  python benchmarks/tag_continuous_thread_probe.py OUT_DIR
Check on the CPU (Numba's CUDA simulator, two environments):
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/tag_continuous_thread_probe.py --check

A block (128 threads) holds one environment, a thread one observer:

- the block copies the agents' seven observed values (position, speed, acceleration, heading,
  type, flag) into shared memory;
- the observer's limit is the farthest of its hints in the game (the k nearest of the step
  before, as the framework keeps them); one pass over every agent, without a branch per
  candidate, appends those at or before the limit to the observer's column of a shared list
  (told by squared distances, the root only in a band around the limit's square);
- if the list holds k to ``CAP`` agents, each gets its distance and its rank among the others
  in (distance, id) order: the k nearest are those of rank below k. Otherwise (no hint in the
  game, fewer than k or more than ``CAP`` before the limit): k passes of successive minima;
- a warp then writes its 32 observers' rows one after another, a lane an entry, so that a store
  covers 32 consecutive words of one row (a thread writing its own row touched a line a word).

Prints JSON and writes OUT_DIR/tag_continuous_thread_probe.json.

Measured (H100, 2026-11-26, BENCHMARKS.md): equal to the framework's observations, but slower than
the warp per observer (418 us against 276 us, 16 places a list): 114 registers, 11 of 32 threads
active, a quarter of its instructions in the ranking. Kept as the record of that design.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
from numba import cuda, float32, int32

from warpsci.envs.tag_continuous import INVERSE_TWO_PI, TAG_CONTINUOUS, TagContinuousParams
from warpsci.multi_agent_env import vector_env_class

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tag_continuous_session import published  # noqa: E402
from tag_continuous_warp_probe import slot_major  # noqa: E402

K = 10
THREADS = 128
CAP = int(os.environ.get("PROBE_CAP", "16"))
NONE = 2**31 - 1
U = np.uint32
#: Row padding of the shared tables read across lanes by column, against bank conflicts.
FEATURE_ROW = THREADS + 1
NEAREST_ROW = K + 1


@cuda.jit(device=True, inline=True)
def after(gap, other, than_gap, than_other):
    return gap > than_gap or (gap == than_gap and other > than_other)


@cuda.jit(device=True, inline=True)
def gap_of(x0, y0, x1, y1):
    dx = x0 - x1
    dy = y0 - y1
    return float32(math.sqrt(dx * dx + dy * dy))


@cuda.jit(device=True, inline=True)
def collect(feats, gaps, ids, tid, observer, count, ox, oy, limit_gap, limit_id):
    """One pass over every agent: those in the game before ``(limit_gap, limit_id)`` in (distance,
    id) order, other than the observer, appended to the thread's column of ``ids`` (up to CAP);
    returns how many there are. Told by squared distances, the root only in a band around the
    limit's square."""
    bounded = max(limit_gap, float32(1e-18))
    beyond = bounded * bounded * float32(1.0 + 2.0**-20)
    nearer = limit_gap * limit_gap * float32(1.0 - 2.0**-20) if limit_gap >= float32(1e-18) else float32(0.0)
    kept = U(0)
    other = U(0)
    while other < count:
        dx = ox - feats[0, other]
        dy = oy - feats[1, other]
        square = dx * dx + dy * dy
        before = feats[6, other] == float32(1.0) and other != observer
        before = before and (
            square < nearer
            or (square <= beyond and after(limit_gap, limit_id, float32(math.sqrt(square)), int32(other)))
        )
        if before:
            if kept < U(CAP):
                ids[kept, tid] = int32(other)
            kept = U(kept + U(1))
        other = U(other + U(1))
    return kept


@cuda.jit(device=True, inline=True)
def rank_kept(feats, gaps, ids, nearest, tid, kept, ox, oy):
    """The ``kept`` agents of the thread's column ranked in (distance, id) order; those of rank
    below K into the thread's row of ``nearest``."""
    index = U(0)
    while index < kept:
        other = U(ids[index, tid])
        gaps[index, tid] = gap_of(ox, oy, feats[0, other], feats[1, other])
        index = U(index + U(1))
    index = U(0)
    while index < kept:
        gap, other = gaps[index, tid], ids[index, tid]
        rank = U(0)
        against = U(0)
        while against < kept:
            if after(gap, other, gaps[against, tid], ids[against, tid]):
                rank = U(rank + U(1))
            against = U(against + U(1))
        if rank < U(K):
            nearest[tid, rank] = other
        index = U(index + U(1))


@cuda.jit
def observe_by_threads(
    x, y, v, accel, theta, playing, is_tagger, t, episode_length, hints, obs, new_hints,
    inv_diag, inv_speed, extra_passes,
):  # fmt: skip
    env = U(cuda.blockIdx.x)
    tid = U(cuda.threadIdx.x)
    count = U(x.shape[1])
    feats = cuda.shared.array((7, FEATURE_ROW), float32)
    gaps = cuda.shared.array((CAP, THREADS), float32)
    ids = cuda.shared.array((CAP, THREADS), int32)
    nearest = cuda.shared.array((THREADS, NEAREST_ROW), int32)
    found = cuda.shared.array(THREADS, int32)
    if tid < count:
        feats[0, tid] = x[env, tid]
        feats[1, tid] = y[env, tid]
        feats[2, tid] = v[env, tid]
        feats[3, tid] = accel[env, tid]
        feats[4, tid] = theta[env, tid]
        feats[5, tid] = float32(is_tagger[tid])
        feats[6, tid] = float32(playing[env, tid])
    cuda.syncthreads()
    observer = tid
    if observer < count:
        filled = int32(-1)  # out of the game: a row of zeros
        if feats[6, observer] == float32(1.0):
            ox, oy = feats[0, observer], feats[1, observer]
            limit_gap, limit_id = float32(-1.0), int32(-1)
            slot = U(0)
            while slot < U(K):
                hinted = U(hints[env, slot, observer])
                if hinted < count and hinted != observer and feats[6, hinted] == float32(1.0):
                    gap = gap_of(ox, oy, feats[0, hinted], feats[1, hinted])
                    if after(gap, int32(hinted), limit_gap, limit_id):
                        limit_gap, limit_id = gap, int32(hinted)
                slot = U(slot + U(1))
            kept = U(0)
            if limit_id >= 0:
                while True:
                    kept = collect(
                        feats, gaps, ids, tid, observer, count, ox, oy, limit_gap, int32(limit_id + 1)
                    )
                    if kept <= U(CAP):
                        break
                    # Too many before the limit: the k-th nearest of the first CAP is a tighter one.
                    rank_kept(feats, gaps, ids, nearest, tid, U(CAP), ox, oy)
                    last = U(nearest[tid, K - 1])
                    limit_gap, limit_id = gap_of(ox, oy, feats[0, last], feats[1, last]), int32(last)
                    cuda.atomic.add(extra_passes, 0, 1)
                rank_kept(feats, gaps, ids, nearest, tid, kept, ox, oy)
            filled = int32(min(kept, U(K)))
            # Fewer than k at or before the limit: the rest by successive minima after it.
            previous, previous_id = limit_gap, limit_id
            while filled < int32(K):
                cuda.atomic.add(extra_passes, 0, 1)
                chosen, best = int32(-1), float32(0.0)
                other = U(0)
                while other < count:
                    if other != observer and feats[6, other] == float32(1.0):
                        gap = gap_of(ox, oy, feats[0, other], feats[1, other])
                        if after(gap, int32(other), previous, previous_id) and (chosen < 0 or gap < best):
                            chosen, best = int32(other), gap
                    other = U(other + U(1))
                if chosen < 0:
                    break
                nearest[tid, filled] = chosen
                filled = int32(filled + 1)
                previous, previous_id = best, chosen
            for slot in range(K):
                new_hints[env, slot, observer] = nearest[tid, slot] if slot < filled else int32(NONE)
        found[tid] = filled
    cuda.syncthreads()
    # A warp writes its own observers' rows, a lane an entry of each.
    lane = U(tid & U(31))
    first = U(tid - lane)
    width = U(7 * K + 1)
    time = float32(t[env]) / float32(episode_length)
    entry = lane
    while entry < width:
        feature = U(entry // U(K))
        slot = U(entry - feature * U(K))
        relative = float32(1.0) if feature < U(5) else float32(0.0)
        scale = float32(1.0)
        if feature < U(2):
            scale = inv_diag
        elif feature < U(4):
            scale = inv_speed
        elif feature < U(5):
            scale = INVERSE_TWO_PI
        index = U(0)
        while index < U(32):
            observer = U(first + index)
            if observer >= count:
                break
            filled = found[observer]
            value = float32(0.0)
            if entry == U(7 * K):
                if filled >= 0:
                    value = time
            elif int32(slot) < filled:
                other = U(nearest[observer, slot])
                value = (feats[feature, other] - feats[feature, observer] * relative) * scale
            obs[U(U(env * count + observer) * width + entry)] = value
            index = U(index + U(1))
        entry = U(entry + U(32))


def _arguments(state, kernel_params, params, hints, obs, new_hints, extra_passes) -> tuple:
    return (
        state.x, state.y, state.v, state.accel, state.theta, state.in_game_before, kernel_params.is_tagger,
        state.t, np.int32(params.episode_length), hints, obs, new_hints,
        np.float32(kernel_params.inverse_diagonal), np.float32(kernel_params.inverse_speed_scale),
        extra_passes,
    )  # fmt: skip


def check(num_envs: int = 4) -> None:
    """Under the simulator: the probe against the CPU backend's observation after 45 steps, with
    the hints of the step before, of ten steps before, and none."""
    params = TagContinuousParams(**published(100), neighbour_search="scan")
    env = vector_env_class(TAG_CONTINUOUS.agent_groups(params))(
        TAG_CONTINUOUS, num_envs=num_envs, device="cpu", seed=0, params=params, copy=False
    )
    env.reset(seed=0)
    state, kernel_params = env._state_view, env._params_tuple
    earlier = {}
    for step in range(45):
        earlier[step] = slot_major(state.nearest_hint)
        env.random_rollout(1)
    expected = env._buffer_view.obs.copy()
    observing = state.in_game_before.astype(bool)[:, None, :]
    sources = {
        "step before": earlier[44],
        "ten steps before": earlier[35],
        "none": np.full_like(earlier[0], NONE),
    }
    results = {}
    for name, hints in sources.items():
        obs = np.full(expected.size, np.nan, np.float32)
        new_hints = np.full(earlier[0].shape, NONE, np.int32)
        extra_passes = np.zeros(1, np.int64)
        observe_by_threads[num_envs, THREADS](
            *_arguments(state, kernel_params, params, hints, obs, new_hints, extra_passes)
        )
        got = obs.reshape(expected.shape)
        results[name] = {
            "observers_mismatched": int((got != expected).any(axis=2).sum()),
            "hints_equal": bool(
                ((new_hints[:, :K] == slot_major(state.nearest_hint)[:, :K]) | ~observing).all()
            ),
            "extra_passes": int(extra_passes[0]),
        }
    print(json.dumps(results, indent=1))


def main(out_dir: str) -> None:
    import torch
    from tag_continuous_warp_probe import (
        framework_step_times,
        observe_by_warps,
        played_game,
        timed,
        warp_arguments,
    )

    num_envs, runners = 2000, 100
    env, params, earlier_hints, framework_obs = played_game(num_envs, runners)
    state, kernel_params = env._state_view, env._params_tuple
    observing = state.in_game_before.copy_to_host().astype(bool)[:, None, :]
    framework_hints = slot_major(state.nearest_hint.copy_to_host())[:, :K]
    probe_obs = cuda.device_array(framework_obs.size, np.float32)
    new_hints = cuda.to_device(np.full(earlier_hints.shape, NONE, np.int32))
    extra_passes = cuda.to_device(np.zeros(1, np.int64))
    arguments = _arguments(state, kernel_params, params, earlier_hints, probe_obs, new_hints, extra_passes)

    def threads() -> None:
        observe_by_threads[num_envs, THREADS](*arguments)

    threads()
    cuda.synchronize()
    got = probe_obs.copy_to_host().reshape(framework_obs.shape)
    mismatched = int((got != framework_obs).any(axis=2).sum())
    same_hints = bool(((new_hints.copy_to_host()[:, :K] == framework_hints) | ~observing).all())
    extra_pass_count = int(extra_passes.copy_to_host()[0])
    threads_s = timed(threads)

    warp_obs = cuda.device_array(framework_obs.size, np.float32)
    warp_hints = cuda.to_device(np.full(earlier_hints.shape, NONE, np.int32))
    warp_probe_arguments = warp_arguments(env, earlier_hints, warp_obs, warp_hints)

    def warps() -> None:
        observe_by_warps[num_envs, THREADS](*warp_probe_arguments)

    warps_s = timed(warps)
    observed_s, rollout_s = framework_step_times(env)
    result = {
        "device": torch.cuda.get_device_name(),
        "command": f"python benchmarks/tag_continuous_thread_probe.py {out_dir}",
        "envs": num_envs,
        "agents": runners + 10,
        "k": K,
        "cap": CAP,
        "observers": int(num_envs * (runners + 10)),
        "observers_mismatched": mismatched,
        "hints_equal": same_hints,
        "extra_passes": extra_pass_count,
        "thread_probe_observation_us": threads_s * 1e6,
        "warp_probe_observation_us": warps_s * 1e6,
        "framework_observed_step_us": observed_s * 1e6,
        "framework_step_observed_once_per_100_us": rollout_s * 1e6,
        "thread_probe_projected_env_steps_per_s": num_envs / (rollout_s + threads_s),
        "warp_probe_projected_env_steps_per_s": num_envs / (rollout_s + warps_s),
        "framework_env_steps_per_s": num_envs / observed_s,
    }
    print(json.dumps(result, indent=1))
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "tag_continuous_thread_probe.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        check()
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        main(sys.argv[1])
    else:
        sys.exit(
            "usage: python benchmarks/tag_continuous_thread_probe.py OUT_DIR (CUDA GPU) "
            "| NUMBA_ENABLE_CUDASIM=1 python benchmarks/tag_continuous_thread_probe.py --check"
        )
