"""What the barrier before a random step's action draw costs (issue 11): env-only steps/s of
``random_rollout`` with the stage list as it is against the same list without that barrier (the
draw reads only the agent's own key and the tick, so it need not wait for the other agents), in one
process, interleaved, on the same GPU. Measured on an H100 (BENCHMARKS.md): no gain; the barrier
stays.

Run on a machine with a CUDA GPU:  python benchmarks/random_action_barrier.py OUT_DIR
Prints one JSON line per case and writes random_action_barrier.json. Tag gridworld (4 taggers and a
runner, grid length 100, 100-step episodes, full observations) at 2,000 and 20,000 environments and
Cartpole at 10,000 (no barriers at all: one agent); 1,000 steps a launch, medians of 7 repeats
taken in turns (with, without, with, ...) after a warm-up that includes compilation.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import warpsci
from warpsci.backends import cuda as cuda_backend
from warpsci.backends import stages

SUFFIX = "-without-barrier"
_make_kernel_stages = stages.make_kernel_stages


def _stages_without_barrier(definition, *args, **kwargs):
    """The stage lists, without the random action's barrier for the ``SUFFIX`` copies."""
    lists = _make_kernel_stages(definition, *args, **kwargs)
    if not definition.name.endswith(SUFFIX):
        return lists
    first, *rest = lists.random_step
    return dataclasses.replace(lists, random_step=(dataclasses.replace(first, sync=False), *rest))


def main(out_dir: str) -> None:
    cuda_backend.make_kernel_stages = _stages_without_barrier
    cases = (
        ("TagGridworld-v0", 2_000, {"num_taggers": 4, "grid_length": 100, "episode_length": 100}),
        ("TagGridworld-v0", 20_000, {"num_taggers": 4, "grid_length": 100, "episode_length": 100}),
        ("CartPole-v1", 10_000, {}),
    )
    rows = []
    for env_id, num_envs, params in cases:
        definition = warpsci.get_definition(env_id)
        copy = dataclasses.replace(definition, name=definition.name + SUFFIX)
        if copy.name not in warpsci.registered_ids():
            warpsci.register(copy)
        envs = {
            variant: warpsci.make(
                name, num_envs=num_envs, device="cuda", seed=0, params=params, copy=False, check_actions=False
            )  # fmt: skip
            for variant, name in (("with", env_id), ("without", copy.name))
        }
        times: dict[str, list[float]] = {"with": [], "without": []}
        for env in envs.values():
            env.reset(seed=0)
            env.random_rollout(1000)
        for _ in range(7):
            for variant, env in envs.items():
                torch.cuda.synchronize()
                start = time.perf_counter()
                env.random_rollout(1000)
                torch.cuda.synchronize()
                times[variant].append(time.perf_counter() - start)
        row = {"env": env_id, "envs": num_envs}
        for variant, measured in times.items():
            row[f"{variant}_barrier_env_steps_per_s"] = num_envs * 1000 / statistics.median(measured)
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    Path(out_dir, "random_action_barrier.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
