"""Tag continuous with the neighbour grid (issue 12): GPU parity first, then env-only throughput.

Run on a machine with a CUDA GPU:  python benchmarks/tag_continuous_grid.py OUT_DIR [parts]
(parts: parity, env; default both). Prints a small table; writes OUT_DIR/tag_continuous_grid.json.

1. ``check_parity`` (CUDA against the CPU backend after every step, every state array and buffer,
   the grid's included) on mid-size games whose partial observations use the grid: 110 agents
   (7 x 7 cells) in one block and in blocks of 32 threads, and 1,000 agents (22 x 22 cells) in one
   block and in blocks of 256 threads; short episodes, so autoresets (the copied start grid) are
   compared too.
2. Env-only ``random_rollout`` rates at the published parameters (``published()`` of
   ``tag_continuous_session.py``: grid_length 20, 10 taggers, k = 10, partial observations) for
   2,000 x 110 and 2,000 x 1,000: the grid search (``TagContinuous-v0``) and, in the same lease, the
   brute-force search it replaces (``observe_agent_by_scan``; the grid is still rebuilt every step,
   so the difference is the search alone). Warm-up, five repeats, median.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from warpsci.envs import tag_continuous
from warpsci.envs.tag_continuous import (
    TAG_CONTINUOUS,
    TagContinuousParams,
    grid_cells_per_side,
    observe_agent_by_scan,
)
from warpsci.multi_agent_env import vector_env_class
from warpsci.testing import check_parity

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tag_continuous_session import published  # noqa: E402

TAG_CONTINUOUS_BY_SCAN = dataclasses.replace(
    TAG_CONTINUOUS, name="TagContinuousByScan-v0", observe_agent=observe_agent_by_scan
)
SEARCHES = {"grid": TAG_CONTINUOUS, "scan": TAG_CONTINUOUS_BY_SCAN}


def parity() -> list[dict]:
    rows = []
    cases = ((100, 64, (None, 32)), (990, 16, (None, 256)))
    for num_runners, num_envs, block_sizes in cases:
        params = {**published(num_runners), "episode_length": 15}
        cells = grid_cells_per_side(TagContinuousParams(**params))
        for threads in block_sizes:
            report = check_parity(
                TAG_CONTINUOUS,
                num_envs=num_envs,
                steps=40,
                threads_per_block=threads,
                params=params,
                raise_on_failure=False,
                atol=1e-5,
            )
            rows.append(
                {
                    "agents": num_runners + 10,
                    "cells": f"{cells} x {cells}",
                    "envs": num_envs,
                    "threads": threads,
                    "ok": report.ok,
                    "episodes": report.episodes_ended,
                    "max_abs_diff": report.max_abs_diff,
                    "divergence": str(report.divergence),
                }
            )
    return rows


def env_only(
    search: str,
    num_envs: int,
    num_runners: int,
    steps: int,
    mode: str = "rollout",
    agents_per_cell: float | None = None,
    repeats: int = 5,
) -> dict:
    """Env steps/s of ``random_rollout``: ``mode`` ``"rollout"`` is one ``random_rollout(steps)``
    (observations written once, after the last step; autoresets write final observations), and
    ``"observed"`` is ``steps`` calls of ``random_rollout(1)`` (every step observed, as in
    training). ``agents_per_cell`` overrides ``GRID_AGENTS_PER_CELL`` (a kernel param: no
    recompilation)."""
    definition = SEARCHES[search]
    params = TagContinuousParams(**published(num_runners))
    default_density = tag_continuous.GRID_AGENTS_PER_CELL
    if agents_per_cell is not None:
        tag_continuous.GRID_AGENTS_PER_CELL = agents_per_cell
    try:
        torch.cuda.reset_peak_memory_stats()
        env = vector_env_class(definition.agent_groups(params))(
            definition,
            num_envs=num_envs,
            device="cuda",
            seed=0,
            params=params,
            copy=False,
            check_actions=False,
        )
        cells = grid_cells_per_side(params)
    finally:
        tag_continuous.GRID_AGENTS_PER_CELL = default_density

    def run() -> None:
        if mode == "rollout":
            env.random_rollout(steps)
        else:
            for _ in range(steps):
                env.random_rollout(1)

    env.reset(seed=0)
    run()  # compiles, warms up
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        env.reset(seed=0)  # every repeat plays the same steps from the start
        torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    rate = num_envs * steps / statistics.median(times)
    agents = num_runners + 10
    return {
        "search": search,
        "mode": mode,
        "agents_per_cell": agents_per_cell or default_density,
        "envs": num_envs,
        "agents": agents,
        "cells": f"{cells} x {cells}",
        "k": 10,
        "steps": steps,
        "env_steps_per_s": rate,
        "agent_steps_per_s": rate * agents,
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9,
    }


def guarded(function, *args) -> dict | list:
    try:
        return function(*args)
    except Exception as error:  # noqa: BLE001 - reported in the table
        return {"error": f"{type(error).__name__}: {error}", "call": f"{function.__name__}{args}"}


def table(report: dict) -> str:
    lines = [f"device {report['device']}, {report['date']}"]
    for row in report.get("parity", []):
        lines.append(
            "parity "
            + (
                f"{row['agents']:>5} agents ({row['cells']}), {row['envs']} envs, threads {row['threads']}: "
                f"ok {row['ok']}, episodes {row['episodes']}, max diff {row['max_abs_diff']:.2e}"
                if "ok" in row
                else str(row)
            )
        )
    if report.get("env_only"):
        lines.append(
            f"{'search':>6} {'mode':>8} {'per cell':>8} {'envs':>5} {'agents':>6} {'cells':>7} "
            f"{'env steps/s':>12} {'agent steps/s':>14}"
        )
    for row in report.get("env_only", []):
        if "error" in row:
            lines.append(str(row))
            continue
        lines.append(
            f"{row['search']:>6} {row['mode']:>8} {row['agents_per_cell']:>8} {row['envs']:>5} "
            f"{row['agents']:>6} {row['cells']:>7} "
            f"{row['env_steps_per_s']:>12,.0f} {row['agent_steps_per_s']:>14,.0f}"
        )
    return "\n".join(lines)


def main(out_dir: str, parts: tuple[str, ...]) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "device": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/tag_continuous_grid.py " + " ".join([out_dir, *parts]),
    }
    if "parity" in parts:
        rows = guarded(parity)
        report["parity"] = rows if isinstance(rows, list) else [rows]
        print(json.dumps(report["parity"]), flush=True)
    if "env" in parts:
        cases = [
            (search, 2000, runners, steps, mode)
            for search in ("grid", "scan")
            for mode in ("rollout", "observed")
            for runners, steps in ((100, 100), (990, 20))
        ]
        # Grid density at 2,000 x 1,000, every step observed (the default, 2 a cell, is above).
        cases += [("grid", 2000, 990, 20, "observed", density) for density in (1.0, 4.0)]
        report["env_only"] = []
        for case in cases:  # each row printed and saved as it finishes
            report["env_only"].append(guarded(env_only, *case))
            print(json.dumps(report["env_only"][-1]), flush=True)
            (out / "tag_continuous_grid.json").write_text(json.dumps(report, indent=2))
    (out / "tag_continuous_grid.json").write_text(json.dumps(report, indent=2))
    print(table(report))


if __name__ == "__main__":
    main(sys.argv[1], tuple(sys.argv[2:]) or ("parity", "env"))
