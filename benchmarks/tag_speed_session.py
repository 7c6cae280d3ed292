"""One GPU session for Tag gridworld at 2,000 x 1,000 agents: correctness, env-only rates, and where
an end-to-end training iteration spends its time.

Run on a machine with a CUDA GPU:  python benchmarks/tag_speed_session.py OUT_DIR
Prints a short table; writes ``tag_speed_session.json`` and ``profile_*.txt`` to OUT_DIR.

1. Partial observations on the GPU equal the CPU backend (``check_parity``), one block and several;
   multi-block equals one block (the runner's nearest tagger is an atomic min over the taggers).
2. Env-only ``random_rollout`` rates at 2,000 x 5 (full), 2,000 x 1,000 (partial) with one block of
   256, 512 and 1,024 threads per environment, and 100 x 5,000 (several blocks).
3. End to end, A2C with one shared [32, 32] policy, 10-step rollouts at 2,000 x 1,000 (partial):
   graph-replayed steps/s (eager and ``--compile``), and a ``torch.profiler`` table of one eager
   iteration (kernels by total device time).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import multi_agent_session as session  # noqa: E402

import warpsci.backends.cuda as cuda_backend  # noqa: E402
from warpsci.testing import check_parity  # noqa: E402


def parity_partial() -> list[dict]:
    rows = []
    params = {"num_taggers": 6, "grid_length": 4, "episode_length": 20, "use_full_observation": False}
    for threads in (None, 2):
        report = check_parity(
            "TagGridworld-v0",
            num_envs=256,
            steps=60,
            params=params,
            threads_per_block=threads,
            raise_on_failure=False,
            atol=0.0,
        )
        rows.append(
            {
                "threads": threads,
                "ok": report.ok,
                "episodes": report.episodes_ended,
                "divergence": str(report.divergence),
            }
        )
    return rows


def env_only(
    fused_threads: int, num_envs: int, taggers: int, full: bool, steps: int, registers: int | None = None
) -> dict:
    cuda_backend.MAX_FUSED_THREADS = fused_threads
    cuda_backend.WIDE_MAX_REGISTERS = registers
    try:
        row = session.throughput(num_envs, taggers, full, "cuda", steps, repeats=5)
        env = session.tag(num_envs, taggers, full)
        kernel = env._kernels._fused[2] if not env._kernels.multi_block else None
        row["regs_per_thread"] = str(kernel.get_regs_per_thread()) if kernel is not None else None
    finally:
        cuda_backend.MAX_FUSED_THREADS = 128
        cuda_backend.WIDE_MAX_REGISTERS = 64
    row["fused_threads"] = fused_threads
    row["max_registers"] = registers
    return row


def update_precision(num_envs: int, taggers: int) -> dict:
    """Milliseconds of one A2C update over the whole rollout, float32 (TF32 matmuls) and under
    bfloat16 autocast."""
    trainer = trainer_for(num_envs, taggers, compile_update=False, graphs=False)
    trainer.env.reset()
    trainer.rollout_and_advantages()
    result = {}
    for name, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        times = []
        for _ in range(4):
            torch.cuda.synchronize()
            start = time.perf_counter()
            if dtype is None:
                trainer.run_update()
            else:
                with torch.autocast("cuda", dtype=dtype):
                    trainer.run_update()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        result[name] = statistics.median(times[1:]) * 1e3
    return result


def trainer_for(
    num_envs: int,
    taggers: int,
    compile_update: bool,
    graphs: bool,
    num_steps: int = 10,
    fused: bool = True,
    algo: str = "a2c",
    full: bool = False,
):
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig

    config = TrainConfig(
        env_id="TagGridworld-v0",
        algo=algo,
        device="cuda",
        num_envs=num_envs,
        num_steps=num_steps,
        total_timesteps=num_envs * num_steps * 8,
        num_minibatches=1 if algo == "a2c" else 4,
        update_epochs=1 if algo == "a2c" else 4,
        hidden_sizes=(32, 32),
        shared_policy=True,
        anneal_lr=False,
        compile=compile_update,
        capture_graphs=graphs,
        fused_mlp=fused,
        env_params={
            "num_taggers": taggers,
            "grid_length": 100,
            "episode_length": 100,
            "use_full_observation": full,
        },
    )
    return make_trainer(config)


def end_to_end(
    num_envs: int,
    taggers: int,
    compile_update: bool,
    fused: bool = True,
    algo: str = "a2c",
    num_steps: int = 10,
    full: bool = False,
) -> dict:
    trainer = trainer_for(
        num_envs, taggers, compile_update, graphs=True, num_steps=num_steps, fused=fused, algo=algo, full=full
    )
    rates = []
    trainer.train(on_iteration=lambda metrics: rates.append(metrics["charts/SPS_iteration"]))
    return {
        "envs": num_envs,
        "agents": taggers + 1,
        "compile": compile_update,
        "fused": fused,
        "algo": algo,
        "num_steps": num_steps,
        "observation": "full" if full else "partial",
        "env_steps_per_s": statistics.median(rates[2:]),
        "rates": rates,
    }


def profile_iteration(out: Path, num_envs: int, taggers: int, fused: bool = True) -> dict:
    from torch.profiler import ProfilerActivity, profile

    trainer = trainer_for(num_envs, taggers, compile_update=False, graphs=False, fused=fused)
    trainer.env.reset()
    for _ in range(2):
        trainer.rollout_and_advantages()
        trainer.run_update()
    torch.cuda.synchronize()
    phases = {}
    for name, work in (
        ("rollout", trainer.collect_rollout),
        ("advantages", lambda: trainer.compute_advantages(learner=trainer.single)),
        ("update", trainer.run_update),
    ):
        times = []
        for _ in range(3):
            start = time.perf_counter()
            work()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        phases[name] = statistics.median(times) * 1e3
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        trainer.rollout_and_advantages()
        trainer.run_update()
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=40)
    (out / f"profile_{num_envs}x{taggers + 1}_fused{int(fused)}.txt").write_text(table)
    return {"envs": num_envs, "agents": taggers + 1, "fused": fused, "phase_ms": phases}


def sweep(out: Path) -> None:
    """Registers per thread against threads per block for the one-block kernels."""
    rows = [session.guarded(update_precision, 2000, 999)]
    print("update ms", rows[0])
    for registers, threads in ((64, 128), (48, 128), (56, 128), (64, 64), (None, 256)):
        row = session.guarded(env_only, threads, 2000, 999, False, 200, registers)
        rows.append(row)
        if "error" not in row:
            print(
                f"2000x1000 partial regs<={registers} threads={threads} used={row['regs_per_thread']} "
                f"rollout {row['rollout_env_steps_per_s']:.4g} step {row['step_env_steps_per_s']:.4g}"
            )
    (out / "sweep.json").write_text(json.dumps(rows, indent=2))


def training(out: Path) -> None:
    """End to end with and without the fused MLP kernels."""
    rows = [session.guarded(profile_iteration, out, 2000, 999, True)]
    print("profile fused", rows[-1])
    cases = [
        (2000, 999, False, True), (2000, 999, False, True, "ppo"),
        (2000, 4, False, True, "a2c", 100, True), (2000, 4, False, True, "ppo", 100, True),
    ]  # fmt: skip
    if "fused-only" not in sys.argv[2:]:
        cases += [(2000, 999, False, False), (2000, 4, False, False, "a2c", 100, True),
                  (2000, 4, False, False, "ppo", 100, True)]  # fmt: skip
    for args in cases:
        row = session.guarded(end_to_end, *args)
        rows.append(row)
        print(
            "e2e",
            {
                k: row.get(k)
                for k in ("algo", "envs", "agents", "fused", "num_steps", "env_steps_per_s", "error")
            },
        )
    (out / "training.json").write_text(json.dumps(rows, indent=2))
    table = out / "profile_2000x1000_fused1.txt"
    if table.exists():
        print(table.read_text()[:5000])


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if "sweep" in sys.argv[2:]:
        sweep(out)
    if "training" in sys.argv[2:]:
        training(out)
    if sys.argv[2:]:
        return
    report: dict = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d")}
    report["parity"] = session.guarded(parity_partial)
    report["blocks"] = [
        session.guarded(session.blocks_agree, 64, 199, False, (None, 64), 150),
        session.guarded(session.blocks_agree, 16, 2047, False, (None, 1024), 60),
    ]
    report["env_only"] = [
        session.guarded(env_only, 256, 2000, 4, True, 1000),
        session.guarded(env_only, 256, 2000, 999, False, 200),
        session.guarded(env_only, 512, 2000, 999, False, 200),
        session.guarded(env_only, 1024, 2000, 999, False, 200),
        session.guarded(env_only, 256, 100, 4999, False, 20),
    ]
    report["profile"] = session.guarded(profile_iteration, out, 2000, 999)
    report["end_to_end"] = [
        session.guarded(end_to_end, 2000, 999, False),
        session.guarded(end_to_end, 2000, 999, True),
    ]
    (out / "tag_speed_session.json").write_text(json.dumps(report, indent=2))
    print(f"device {report['device']}  date {report['date']}")
    print("parity", report["parity"])
    for row in report["blocks"]:
        print(
            "blocks",
            {k: row.get(k) for k in ("envs", "agents", "blocks_per_env", "mismatched_arrays", "error")},
        )
    for row in report["env_only"]:
        if "error" in row:
            print("env_only error", row)
            continue
        print(
            f"env-only {row['envs']}x{row['agents']} {row['observation']} fused={row['fused_threads']} "
            f"blocks={row['blocks_per_env']} rollout {row['rollout_env_steps_per_s']:.4g} env/s "
            f"{row['rollout_agent_steps_per_s']:.4g} agent/s; step {row['step_env_steps_per_s']:.4g} env/s"
        )
    print("profile", report["profile"])
    for row in report["end_to_end"]:
        print("e2e", {k: row.get(k) for k in ("envs", "agents", "compile", "env_steps_per_s", "error")})
    table = out / "profile_2000x1000_fused1.txt"
    if table.exists():
        print(table.read_text()[:6000])


if __name__ == "__main__":
    main(sys.argv[1])
