"""How many environments share a CUDA block, measured (issue 11): env-only steps/s of narrow
environments in the default blocks (128 threads: 25 Tag gridworld environments of 5 agents, 80
blocks at 2,000 environments, fewer than the H100's 132 multiprocessors) against blocks of 32, 64
and 128 threads.

Run on a machine with a CUDA GPU:  python benchmarks/block_size_session.py OUT_DIR
Prints one JSON line per figure and writes block_size_session.json. Env-only: ``random_rollout``
(actions drawn in the kernel, every step of a repeat in one launch), medians of 5 repeats after a
warm-up that includes compilation. Then Tag gridworld 2,000 x 5 end to end (A2C, one [32, 32] policy
for both groups, 100-step rollouts, graph-replayed) with the default block shape, as in issue 11's
table.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

import warpsci

#: (environment, environments, params, steps of one rollout launch)
CASES = (
    ("TagGridworld-v0", 2_000, {"num_taggers": 4, "grid_length": 100, "episode_length": 100}, 1000),
    ("CartPole-v1", 2_000, {}, 1000),
    ("CartPole-v1", 10_000, {}, 1000),
    ("CatalysisOneAtom-v0", 2_000, {}, 100),
)
BLOCKS = (None, 32, 64, 128)


def rollout_rate(env_id: str, num_envs: int, params: dict, steps: int, threads: int | None) -> tuple:
    options = {} if threads is None else {"threads_per_block": threads}
    env = warpsci.make(env_id, num_envs=num_envs, device="cuda", seed=0, params=params,
                       copy=False, check_actions=False, **options)  # fmt: skip
    env.reset(seed=0)
    env.random_rollout(steps)
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        env.random_rollout(steps)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    kernels = env._kernels
    return num_envs * steps / statistics.median(times), list(kernels.block), kernels.grid


def main(out_dir: str) -> None:
    rows = []

    def record(**row) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        Path(out_dir, "block_size_session.json").write_text(json.dumps(rows, indent=1))

    for env_id, num_envs, params, steps in CASES:
        for threads in BLOCKS:
            rate, block, grid = rollout_rate(env_id, num_envs, params, steps, threads)
            record(env=env_id, envs=num_envs, threads_per_block=threads or "default", block=block,
                   grid=grid, mode="rollout", env_steps_per_s=rate)  # fmt: skip
    sys.path.insert(0, str(Path(__file__).parent))
    from multi_agent_session import end_to_end

    trained = end_to_end(2_000, 4, True, "a2c")
    record(env="TagGridworld-v0", envs=2_000, mode="end to end A2C [32, 32] shared, 100-step rollouts",
           env_steps_per_s=trained["env_steps_per_s"], rates=trained["iteration_rates"])  # fmt: skip
    record(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"))


if __name__ == "__main__":
    main(sys.argv[1])
