"""Where one training iteration spends its time on the GPU: rollout (environment steps, policy
forward, sampling, storage, advantages) against the update, then the top CUDA kernels.

Run on a machine with a CUDA GPU:
    python benchmarks/profile_iteration.py OUT_DIR [compile] [warpdrive] [bf16] [runners=N] [steps=S]
(``compile``: ``TrainConfig.compile``, the update's loss through torch.compile; ``warpdrive``:
WarpDrive's network, one ReLU trunk with a policy head and a value head, instead of separate tanh
actor and critic; ``bf16``: ``TrainConfig.bf16``, the networks' products in bfloat16; ``runners``:
runners besides the 10 taggers, default 100; ``steps``: rollout steps, default 10). Profiles Tag
continuous at 2,000 x (10 + N) (A2C, [256, 256] per group) and prints a short table; writes
profile_iteration[_compiled][_warpdrive][_bf16][_N_runners][_S_steps].json with the peak memory.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
from tag_continuous_session import published  # noqa: E402

from warpsci.algorithms import make_trainer  # noqa: E402
from warpsci.config import TrainConfig  # noqa: E402


def timed(function, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(
    out_dir: str,
    compile_loss: bool = False,
    warpdrive_network: bool = False,
    bf16: bool = False,
    runners: int = 100,
    steps: int = 10,
) -> None:
    config = TrainConfig(
        env_id="TagContinuous-v0",
        algo="a2c",
        device="cuda",
        num_envs=2000,
        num_steps=steps,
        total_timesteps=2000 * steps * 4,
        hidden_sizes=(256, 256),
        anneal_lr=False,
        env_params=published(runners),
        compile=compile_loss,
        activation="relu" if warpdrive_network else "tanh",
        shared_trunk=warpdrive_network,
        bf16=bf16,
    )
    trainer = make_trainer(config)
    trainer.train()
    rollout_s = timed(trainer.rollout_and_advantages)
    update_s = timed(trainer.run_update)
    env = trainer.env
    env_s = timed(lambda: env.random_rollout(config.num_steps))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            trainer.rollout_and_advantages()
            trainer.run_update()
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70)
    report = {
        "device": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d"),
        "case": f"TagContinuous-v0 2,000 x {runners + 10}, A2C [256, 256] per group, {steps}-step rollouts"
        + (", compiled loss" if compile_loss else "")
        + (", WarpDrive's network (shared ReLU trunk)" if warpdrive_network else ", separate tanh networks")
        + (", bfloat16 products" if bf16 else ""),
        "rollout_ms": rollout_s * 1e3,
        "update_ms": update_s * 1e3,
        "env_only_ms_for_the_rollout_steps": env_s * 1e3,
        "env_steps_per_s": config.batch_size / (rollout_s + update_s),
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9,
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ("_compiled" if compile_loss else "") + ("_warpdrive" if warpdrive_network else "")
    suffix += "_bf16" if bf16 else ""
    suffix += (f"_{runners}_runners" if runners != 100 else "") + (f"_{steps}_steps" if steps != 10 else "")
    (out / f"profile_iteration{suffix}.json").write_text(json.dumps(report, indent=2))
    (out / f"profile_kernels{suffix}.txt").write_text(table)
    print(json.dumps(report, indent=1))
    print(table)


if __name__ == "__main__":
    flags = sys.argv[2:]
    numbers = dict(flag.split("=") for flag in flags if "=" in flag)
    main(
        sys.argv[1],
        "compile" in flags,
        "warpdrive" in flags,
        "bf16" in flags,
        runners=int(numbers.get("runners", 100)),
        steps=int(numbers.get("steps", 10)),
    )
