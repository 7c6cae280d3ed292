"""One GPU session for Tag continuous (issue 12): correctness on the GPU first, then throughput.

Run on a machine with a CUDA GPU:  python benchmarks/tag_continuous_session.py OUT_DIR [parts]
(parts: parity, env, train; default all). Prints a short table; writes tag_continuous_session.json.

1. ``check_parity`` (CUDA against the CPU backend after every step) for the spec's test5 game,
   partial and full observations, one block and blocks of 2 threads; a 2,000-agent game in one block
   against several blocks (every state array and buffer equal).
2. Env-only ``random_rollout`` rates at the published configuration (100 x 110), 2,000 x 110 and
   2,000 x 1,000 (10 taggers, k = 10, partial observations), with the peak device memory.
3. End to end, A2C with WarpDrive's [256, 256] network and a policy per group: the published
   100 x 110 with 250-step rollouts, 2,000 x 110 with 10-step rollouts (PyTorch layers, fused MLP).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

import warpsci
from warpsci.testing import check_parity

TEST5 = {
    "num_taggers": 2,
    "num_runners": 3,
    "grid_length": 10.0,
    "episode_length": 20,
    "num_acceleration_levels": 3,
    "num_turn_levels": 3,
    "max_acceleration": 1.0,
    "max_turn": 0.785,
    "seed": 7,
    "num_other_agents_observed": 2,
    "tagging_distance": 0.3,
    "edge_hit_penalty": -0.1,
    "tag_reward_for_tagger": 10.0,
    "tag_penalty_for_runner": -10.0,
}


def published(num_runners: int, num_taggers: int = 10) -> dict:
    return {
        "num_taggers": num_taggers,
        "num_runners": num_runners,
        "grid_length": 20.0,
        "episode_length": 500,
        "max_acceleration": 0.1,
        "min_acceleration": -0.1,
        "max_turn": 2.356,
        "min_turn": -2.356,
        "num_acceleration_levels": 20,
        "num_turn_levels": 20,
        "use_full_observation": False,
        "num_other_agents_observed": 10,
        "tagging_distance": 0.02,
        "tag_reward_for_tagger": 10.0,
        "tag_penalty_for_runner": -10.0,
        "seed": 274880,
    }


def parity() -> list[dict]:
    rows = []
    for full in (False, True):
        for threads in (None, 2):
            report = check_parity(
                "TagContinuous-v0",
                num_envs=256,
                steps=60,
                threads_per_block=threads,
                params={**TEST5, "use_full_observation": full},
                raise_on_failure=False,
                atol=1e-5,
            )
            rows.append(
                {
                    "full": full,
                    "threads": threads,
                    "ok": report.ok,
                    "episodes": report.episodes_ended,
                    "divergence": str(report.divergence),
                }
            )
    return rows


def blocks_agree(num_envs: int, num_runners: int, steps: int) -> dict:
    snapshots = []
    for threads in (None, 512):
        env = warpsci.make(
            "TagContinuous-v0",
            num_envs=num_envs,
            device="cuda",
            seed=3,
            params=published(num_runners),
            threads_per_block=threads,
        )
        env.reset(seed=11)
        env.random_rollout(steps)
        torch.cuda.synchronize()
        arrays = {f"state.{k}": v.cpu().clone() for k, v in env.state_tensors.items()}
        arrays.update({f"buffers.{k}": v.cpu().clone() for k, v in env.buffers._asdict().items()})
        snapshots.append((env._kernels.blocks_per_env, arrays))
    (first_blocks, first), (second_blocks, second) = snapshots
    # Float sums (rewards added atomically in another order) may differ in the last bit.
    mismatched = [k for k in first if not torch.allclose(first[k].double(), second[k].double(), atol=1e-5)]
    return {
        "envs": num_envs,
        "agents": num_runners + 10,
        "blocks": [first_blocks, second_blocks],
        "mismatched": mismatched,
    }


def env_only(num_envs: int, num_runners: int, steps: int, repeats: int = 5) -> dict:
    torch.cuda.reset_peak_memory_stats()
    env = warpsci.make(
        "TagContinuous-v0",
        num_envs=num_envs,
        device="cuda",
        seed=0,
        params=published(num_runners),
        copy=False,
        check_actions=False,
    )
    env.reset(seed=0)
    env.random_rollout(steps)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        env.random_rollout(steps)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    rate = num_envs * steps / statistics.median(times)
    agents = num_runners + 10
    return {
        "envs": num_envs,
        "agents": agents,
        "split": "10 taggers",
        "k": 10,
        "env_steps_per_s": rate,
        "agent_steps_per_s": rate * agents,
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9,
    }


def end_to_end(num_envs: int, num_runners: int, num_steps: int, fused_mlp: bool = False) -> dict:
    """A2C with WarpDrive's [256, 256] network and a policy per group; ``num_steps``-step rollouts
    (WarpDrive ran 2,000 x 110 with 10-step rollouts; 100-step ones ran out of memory there)."""
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig

    torch.cuda.reset_peak_memory_stats()
    config = TrainConfig(
        env_id="TagContinuous-v0",
        algo="a2c",
        device="cuda",
        num_envs=num_envs,
        num_steps=num_steps,
        total_timesteps=num_envs * num_steps * 12,
        fused_mlp=fused_mlp,
        hidden_sizes=(256, 256),
        anneal_lr=False,
        gamma=0.98,
        ent_coef=0.05,
        vf_coef=1.0,
        env_params=published(num_runners),
    )
    rates = []
    make_trainer(config).train(on_iteration=lambda metrics: rates.append(metrics["charts/SPS_iteration"]))
    rate = statistics.median(rates[2:])
    return {
        "envs": num_envs,
        "agents": num_runners + 10,
        "rollout_steps": num_steps,
        "fused_mlp": fused_mlp,
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9,
        "network": "[256, 256] per group, A2C",
        "env_steps_per_s": rate,
        "agent_steps_per_s": rate * (num_runners + 10),
    }


def guarded(function, *args) -> dict | list:
    try:
        return function(*args)
    except Exception as error:  # noqa: BLE001 - reported in the table
        return {"error": f"{type(error).__name__}: {error}", "call": f"{function.__name__}{args}"}


def main(out_dir: str, parts: tuple[str, ...]) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d")}
    if "parity" in parts:
        report["parity"] = guarded(parity)
        report["blocks"] = guarded(blocks_agree, 16, 1990, 40)
    if "env" in parts:
        report["env_only"] = [
            guarded(env_only, *case) for case in ((100, 100, 500), (2000, 100, 200), (2000, 990, 20))
        ]
    if "train" in parts:
        report["end_to_end"] = [
            guarded(end_to_end, *case) for case in ((100, 100, 250), (2000, 100, 10), (2000, 100, 10, True))
        ]
    (out / "tag_continuous_session.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=1)[:6000])


if __name__ == "__main__":
    main(sys.argv[1], tuple(sys.argv[2:]) or ("parity", "env", "train"))
