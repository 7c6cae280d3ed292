"""Tag gridworld wider than a block on the GPU (issue 11): 100 environments of 5,000 agents (4,999
taggers and a runner, partial observations), each environment spanning several blocks with one
launch per stage. Env-only: one step (its stage launches) per step with actions sampled by torch,
each repeat of 100 steps replayed as one CUDA graph (as training replays them), and
``random_rollout`` launched from Python; end to end: A2C, one [32, 32] policy for both groups,
10-step rollouts, the whole iteration graph-replayed.

Run on a machine with a CUDA GPU:  python benchmarks/multi_block_session.py OUT_DIR
Prints one JSON line per figure and writes multi_block_session.json; medians of 5 repeats (env-only)
or of the iterations after two warm-ups (end to end).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from warpsci.bench import bench_env

sys.path.insert(0, str(Path(__file__).parent))
from block_size_session import rollout_rate  # noqa: E402
from multi_agent_session import end_to_end  # noqa: E402

NUM_ENVS, NUM_TAGGERS = 100, 4999
PARAMS = {
    "num_taggers": NUM_TAGGERS,
    "grid_length": 100,
    "episode_length": 100,
    "use_full_observation": False,
}


def main(out_dir: str) -> None:
    rows = []

    def record(**row) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        Path(out_dir, "multi_block_session.json").write_text(json.dumps(rows, indent=1))

    agents = NUM_TAGGERS + 1
    graphed = bench_env("TagGridworld-v0", NUM_ENVS, "cuda", steps=100, capture=True, params=PARAMS)
    record(
        mode="env-only, CUDA graph of single steps",
        envs=NUM_ENVS,
        agents=agents,
        env_steps_per_s=graphed.steps_per_second,
        agent_steps_per_s=graphed.steps_per_second * agents,
    )
    rate, _, grid = rollout_rate("TagGridworld-v0", NUM_ENVS, PARAMS, 20, None)
    record(
        mode="env-only, random_rollout (launches from Python)",
        envs=NUM_ENVS,
        agents=agents,
        blocks_per_env=grid // NUM_ENVS,
        env_steps_per_s=rate,
        agent_steps_per_s=rate * agents,
    )
    trained = end_to_end(NUM_ENVS, NUM_TAGGERS, False, "a2c", num_steps=10)
    record(
        mode="end to end, A2C [32, 32] shared, 10-step rollouts",
        envs=NUM_ENVS,
        agents=agents,
        env_steps_per_s=trained["env_steps_per_s"],
        agent_steps_per_s=trained["agent_steps_per_s"],
    )
    record(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"))


if __name__ == "__main__":
    main(sys.argv[1])
