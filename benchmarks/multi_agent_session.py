"""One GPU session for the multi-agent core: correctness on the GPU, then Tag gridworld throughput.

Run on a machine with a CUDA GPU:  python benchmarks/multi_agent_session.py OUT_DIR
Prints a short table; writes ``multi_agent_session.json`` to OUT_DIR.

1. Multi-block equals one block: Tag gridworld with the same seed and uniform random actions (drawn
   in the kernel), once with each environment in one block and once split over several blocks; every
   state array and buffer must be equal after the rollout. Also 2,048 agents per environment on two
   blocks of 1,024 against eight blocks of 256.
2. CUDA against the CPU backend for the multi-group toy and Tag gridworld (``check_parity``).
3. Env-only throughput of Tag gridworld (``random_rollout``: actions drawn in the kernel, many steps
   per launch; and ``step_in_place`` one launch per step), median of repeats, in environment steps/s
   and agent steps/s, on the GPU and on this host's CPU backend.
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


def _sync() -> None:
    torch.cuda.synchronize()


def tag(num_envs: int, num_taggers: int, full: bool, device: str = "cuda", **options):
    params = {
        "num_taggers": num_taggers,
        "grid_length": 100,
        "episode_length": 100,
        "use_full_observation": full,
    }
    return warpsci.make("TagGridworld-v0", num_envs=num_envs, device=device, seed=3, params=params, **options)


def snapshot(env) -> dict[str, torch.Tensor]:
    arrays = {f"state.{name}": tensor.cpu().clone() for name, tensor in env.state_tensors.items()}
    arrays.update({f"buffers.{name}": tensor.cpu().clone() for name, tensor in env.buffers._asdict().items()})
    return arrays


def blocks_agree(
    num_envs: int, num_taggers: int, full: bool, layouts: tuple[int | None, int], steps: int
) -> dict:
    results = []
    for threads in layouts:
        env = tag(num_envs, num_taggers, full, threads_per_block=threads)
        env.reset(seed=11)
        env.random_rollout(steps)
        _sync()
        results.append((env._kernels.blocks_per_env, snapshot(env)))
    (blocks_a, first), (blocks_b, second) = results
    mismatched = [name for name in first if not torch.equal(first[name], second[name])]
    return {
        "envs": num_envs,
        "agents": num_taggers + 1,
        "blocks_per_env": [blocks_a, blocks_b],
        "steps": steps,
        "mismatched_arrays": mismatched,
    }


def throughput(num_envs: int, num_taggers: int, full: bool, device: str, steps: int, repeats: int) -> dict:
    env = tag(num_envs, num_taggers, full, device=device, copy=False, check_actions=False)
    env.reset(seed=0)
    env.random_rollout(steps)  # compile / warm up
    if device == "cuda":
        _sync()
    rollout_times = []
    for _ in range(repeats):
        start = time.perf_counter()
        env.random_rollout(steps)
        if device == "cuda":
            _sync()
        rollout_times.append(time.perf_counter() - start)
    step_times = []
    step_count = max(10, steps // 10)
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(step_count):
            env.step_in_place()
        if device == "cuda":
            _sync()
        step_times.append((time.perf_counter() - start) * steps / step_count)
    rollout = statistics.median(rollout_times)
    stepped = statistics.median(step_times)
    agents = num_taggers + 1
    return {
        "device": device,
        "envs": num_envs,
        "agents": agents,
        "split": f"{num_taggers} taggers / 1 runner",
        "observation": "full" if full else "partial",
        "blocks_per_env": getattr(env._kernels, "blocks_per_env", 1),
        "steps": steps,
        "repeats": repeats,
        "rollout_env_steps_per_s": num_envs * steps / rollout,
        "rollout_agent_steps_per_s": num_envs * agents * steps / rollout,
        "step_env_steps_per_s": num_envs * steps / stepped,
        "step_agent_steps_per_s": num_envs * agents * steps / stepped,
    }


def end_to_end(
    num_envs: int, num_taggers: int, full: bool, algo: str, iterations: int = 6, num_steps: int = 100
) -> dict:
    """Training steps/s with one policy shared by both groups ([32, 32], WarpDrive's setting), 100-step
    rollouts (10 at 1,000 agents: 100 would need 200M rollout rows), the whole iteration
    graph-replayed; median over the iterations after two warm-ups."""
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig

    config = TrainConfig(
        env_id="TagGridworld-v0",
        algo=algo,
        device="cuda",
        num_envs=num_envs,
        num_steps=num_steps,
        total_timesteps=num_envs * num_steps * (iterations + 2),
        num_minibatches=1 if algo == "a2c" else 4,
        update_epochs=1 if algo == "a2c" else 4,
        hidden_sizes=(32, 32),
        shared_policy=True,
        anneal_lr=False,
        env_params={
            "num_taggers": num_taggers,
            "grid_length": 100,
            "episode_length": 100,
            "use_full_observation": full,
        },
    )
    trainer = make_trainer(config)
    rates = []
    trainer.train(on_iteration=lambda metrics: rates.append(metrics["charts/SPS_iteration"]))
    rate = statistics.median(rates[2:])
    agents = num_taggers + 1
    return {
        "algo": algo,
        "envs": num_envs,
        "agents": agents,
        "observation": "full" if full else "partial",
        "network": "[32, 32] shared",
        "num_steps": num_steps,
        "env_steps_per_s": rate,
        "agent_steps_per_s": rate * agents,
        "iteration_rates": rates,
    }


def guarded(function, *args, **kwargs) -> dict:
    """``function``'s result, or its error (so that one failing case does not lose the others)."""
    try:
        return function(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - reported in the table
        print(f"{function.__name__}{args}: {type(error).__name__}: {error}")
        return {"error": f"{type(error).__name__}: {error}", "args": repr(args)}


def main(out_dir: str, parts: tuple[str, ...] = ("blocks", "parity", "env", "train")) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d")}

    report["blocks"] = (
        []
        if "blocks" not in parts
        else [
            guarded(blocks_agree, 64, 199, False, (None, 64), 150),  # one block of 224 threads vs 4 of 64
            guarded(blocks_agree, 16, 2047, False, (None, 1024), 60),  # 1 block of 256 vs 2 of 1024
            guarded(blocks_agree, 64, 4, True, (None, 2), 200),  # 5 agents: one block vs 3 blocks of 2
        ]
    )
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from multi_group_toy import TOY_GROUPS

    report["parity"] = []
    for env_id, params in (
        ()
        if "parity" not in parts
        else (
            (TOY_GROUPS, None),
            ("TagGridworld-v0", {"num_taggers": 4, "grid_length": 4, "episode_length": 20}),
        )
    ):
        for threads in (None, 2):
            parity = check_parity(
                env_id,
                num_envs=256,
                steps=60,
                params=params,
                threads_per_block=threads,
                raise_on_failure=False,
            )
            report["parity"].append(
                {
                    "env": getattr(env_id, "name", env_id),
                    "threads_per_block": threads,
                    "ok": parity.ok,
                    "episodes": parity.episodes_ended,
                    "divergence": str(parity.divergence),
                }
            )

    cases = [(2000, 4, True, 1000), (2000, 999, False, 100), (100, 4999, False, 20), (20000, 4, True, 1000)]
    report["throughput"] = []
    if "env" not in parts:
        cases = []
    for num_envs, taggers, full, steps in cases:
        report["throughput"].append(guarded(throughput, num_envs, taggers, full, "cuda", steps, repeats=5))
    torch.set_num_threads(torch.get_num_threads())
    for num_envs, taggers, full, steps in [(2000, 4, True, 100), (2000, 999, False, 5)] if cases else []:
        report["throughput"].append(guarded(throughput, num_envs, taggers, full, "cpu", steps, repeats=3))

    report["end_to_end"] = (
        []
        if "train" not in parts
        else [
            guarded(end_to_end, 2000, 4, True, "a2c"),
            guarded(end_to_end, 2000, 4, True, "ppo"),
            guarded(end_to_end, 2000, 999, False, "a2c", 6, 10),
            guarded(end_to_end, 2000, 999, False, "ppo", 6, 10),
        ]
    )
    (out / "multi_agent_session.json").write_text(json.dumps(report, indent=2))
    print(f"device {report['device']}  date {report['date']}")
    for row in report["blocks"]:
        if "error" in row:
            continue
        shape = f"{row['envs']}x{row['agents']}"
        print(f"blocks {shape} {row['blocks_per_env']}: mismatched {row['mismatched_arrays']}")
    for row in report["parity"]:
        where = f"{row['env']} tpb={row['threads_per_block']}"
        print(f"parity {where}: ok={row['ok']} episodes={row['episodes']} {row['divergence']}")
    columns = ("dev", "envs", "agents", "obs", "blocks", "rollout env/s", "agent/s", "step env/s", "agent/s")
    print(" ".join(f"{name:>14}" for name in columns))
    keys = ("device", "envs", "agents", "observation", "blocks_per_env")
    rates = (
        "rollout_env_steps_per_s",
        "rollout_agent_steps_per_s",
        "step_env_steps_per_s",
        "step_agent_steps_per_s",
    )
    for row in report["throughput"]:
        if "error" in row:
            continue
        print(" ".join(f"{row[k]!s:>14}" for k in keys) + " " + " ".join(f"{row[k]:>14.4g}" for k in rates))
    for row in report["end_to_end"]:
        if "error" not in row:
            print(
                f"train {row['algo']} {row['envs']}x{row['agents']} {row['observation']} {row['network']}: "
                f"{row['env_steps_per_s']:.4g} env steps/s, {row['agent_steps_per_s']:.4g} agent steps/s"
            )


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/multi_agent",
        tuple(sys.argv[2:]) or ("blocks", "parity", "env", "train"),
    )
