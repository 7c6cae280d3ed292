"""CovidEconomy-v0 on the GPU (issue 14): env-only steps/s at 1K, 10K and 60K+ environments, the
CPU backend on the same host, end to end with the published [256, 256] networks.

Run on a machine with a CUDA GPU:  python benchmarks/covid_session.py OUT_DIR [large [ENVS ...]]
Prints one JSON line per figure and writes covid_session.json (``large``: only end to end at 10,000
and 60,000 environments, or the ENVS given of those, into covid_session_large.json). Env-only:
uniform random actions (unmasked: masks are advice) sampled by torch each step into the action
buffer, medians of 5 repeats of STEPS steps, each repeat one captured CUDA graph; the CPU backend
the same way, without graphs, on every core of the host, and the NumPy reference of the rules (one
environment, the way the AI Economist's CPU implementation steps). End to end: PPO with the
published configuration's networks and rollout length (90 steps), median ``charts/SPS_iteration`` of
4 iterations after 2 warm-ups. At 10,000 environments the 90-step rollout (46M governor rows) trains
in 32 minibatches instead of 4, and 60,000 environments take 15-step rollouts (the same rows): a
90-step rollout of 60,000 environments would hold 70 GB of governor observations alone.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from warpsci.algorithms import make_trainer
from warpsci.bench import bench_env
from warpsci.config import TrainConfig
from warpsci.envs.covid_economy_data import CovidEconomyParams
from warpsci.envs.covid_economy_reference import CovidEconomyReference

ENV_ID = "CovidEconomy-v0"


def end_to_end(num_envs: int, num_steps: int = 90, num_minibatches: int = 4) -> float:
    config = TrainConfig(
        env_id=ENV_ID, device="cuda", num_envs=num_envs, num_steps=num_steps,
        total_timesteps=num_envs * num_steps * 6, hidden_sizes=(256, 256), learning_rate=1e-4,
        gamma=0.98, vf_coef=1.0, ent_coef=0.05, checkpoint_every=0, num_minibatches=num_minibatches,
    )  # fmt: skip
    rates: list[float] = []
    make_trainer(config).train(on_iteration=lambda metrics: rates.append(metrics["charts/SPS_iteration"]))
    return statistics.median(rates[2:])


#: End to end at scale: environments -> rollout steps (the same 46M governor rows each).
LARGE_RUNS = {10_000: 90, 60_000: 15}


def main(out_dir: str, large: tuple[int, ...] = ()) -> None:
    rows = []

    def record(**row) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        name = "covid_session_large.json" if large else "covid_session.json"
        Path(out_dir, name).write_text(json.dumps(rows, indent=1))

    if large:
        for num_envs in large:
            num_steps = LARGE_RUNS[num_envs]
            start = time.perf_counter()
            rate = end_to_end(num_envs, num_steps, num_minibatches=32)
            record(mode="end to end PPO [256, 256], 32 minibatches", envs=num_envs, num_steps=num_steps,
                   steps_per_s=rate, peak_gb=round(torch.cuda.max_memory_allocated() / 1e9, 1),
                   wall_s=round(time.perf_counter() - start, 1))  # fmt: skip
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        record(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"))
        return

    for num_envs in (1_000, 10_000, 60_000, 100_000):
        steps = 200 if num_envs <= 10_000 else 100
        result = bench_env(ENV_ID, num_envs, "cuda", steps=steps, capture=True)
        record(mode="env-only cuda graph", envs=num_envs, steps_per_s=result.steps_per_second,
               repeats=result.repeats)  # fmt: skip
    cores = torch.get_num_threads()
    for num_envs in (1_000, 10_000):
        result = bench_env(ENV_ID, num_envs, "cpu", steps=20, repeats=3)
        record(mode=f"env-only cpu ({cores} threads)", envs=num_envs, steps_per_s=result.steps_per_second,
               repeats=result.repeats)  # fmt: skip
    reference = CovidEconomyReference(CovidEconomyParams())
    start = time.perf_counter()
    for _ in range(540):
        reference.step(np.zeros(reference.n, dtype=np.int64), 0)
    record(mode="NumPy reference, one environment, one process",
           envs=1, steps_per_s=540 / (time.perf_counter() - start))  # fmt: skip
    for num_envs in (1_000, 2_000):
        start = time.perf_counter()
        record(mode="end to end PPO [256, 256]", envs=num_envs, steps_per_s=end_to_end(num_envs),
               wall_s=round(time.perf_counter() - start, 1))  # fmt: skip
    record(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"))


if __name__ == "__main__":
    arguments = sys.argv[2:]
    if arguments[:1] == ["large"]:
        main(sys.argv[1], tuple(int(count) for count in arguments[1:]) or tuple(LARGE_RUNS))
    else:
        main(sys.argv[1])
