"""The throughput study of "Increasing Sample Throughput for RL Environments" (CS 267), for warpsci.

    python benchmarks/throughput_study.py envs   OUT_DIR [--device cpu|cuda] [--sizes ...]
    python benchmarks/throughput_study.py work   OUT_DIR [--device cpu|cuda] [--num-envs N] [--work 1 2 4 ...]
    python benchmarks/throughput_study.py reward OUT_DIR RUN_DIR [RUN_DIR ...]

``envs``: time per step against the number of environments, Cartpole, for
  * ``gymnasium-sync`` / ``gymnasium-async``: Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv``
    (one process per environment, the Stable-Baselines-style baseline; CPU only);
  * ``torch-batched``: the same dynamics as batched torch tensor operations, with autoreset;
  * ``warpsci``: warpsci's kernels (the CPU backend, or on CUDA eager launches and graph replay at
    several threads-per-block values: the block-size search).
``work``: time per step against the work per step: Cartpole whose step integrates ``k`` sub-steps
  (the step's computation repeated ``k`` times), for warpsci and torch-batched.
``reward``: mean episodic return against wall-clock training time, from the ``progress.csv`` of
  training runs (``warpsci train ... --run-dir RUN_DIR``).

Each mode writes a CSV and a PNG into OUT_DIR and prints a table. Figures are medians of
``--repeats`` timed repeats after a warm-up.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import warpsci
from warpsci.envs.cartpole import CARTPOLE, CartPoleParams, observe_agent, reset_agent
from warpsci.envs.cartpole import is_terminal as cartpole_is_terminal
from warpsci.envs.cartpole import step_agent as cartpole_step_agent
from warpsci.graphs import GraphReplay

# ----------------------------------------------------------------------------- workloads


@dataclasses.dataclass(frozen=True)
class WorkCartPoleParams(CartPoleParams):
    """Cartpole whose step integrates ``work`` sub-steps of ``tau`` each."""

    work: int = 1


@warpsci.agent_function
def work_step_agent(state, params, actions, env, agent, phase, key):
    reward = 0.0
    for _ in range(params.work):
        reward = cartpole_step_agent(state, params, actions, env, agent, phase, key)
    return reward


WORK_CARTPOLE = dataclasses.replace(
    CARTPOLE,
    name="CartPoleWork-v0",
    params_type=WorkCartPoleParams,
    reset_agent=reset_agent,
    step_agent=work_step_agent,
    observe_agent=observe_agent,
    is_terminal=cartpole_is_terminal,
    reference="CartPole-v1 with `work` Euler sub-steps per step (throughput study)",
)


class TorchCartPole:
    """Cartpole's dynamics as batched torch operations, with autoreset, on any device."""

    def __init__(self, num_envs: int, device: str, work: int = 1, seed: int = 0) -> None:
        self.p = CartPoleParams()
        self.work = work
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.state = self._fresh((num_envs, 4), device)
        self.elapsed = torch.zeros(num_envs, dtype=torch.int32, device=device)

    def _fresh(self, shape, device) -> torch.Tensor:
        bound = self.p.reset_bound
        return torch.rand(shape, generator=self.generator, device=device) * (2 * bound) - bound

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        p = self.p
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = torch.where(actions == 1, p.force_mag, -p.force_mag)
        total_mass = p.masspole + p.masscart
        polemass_length = p.masspole * p.length
        for _ in range(self.work):
            cos, sin = torch.cos(theta), torch.sin(theta)
            temp = (force + polemass_length * theta_dot * theta_dot * sin) / total_mass
            theta_acc = (p.gravity * sin - cos * temp) / (
                p.length * (4.0 / 3.0 - p.masspole * cos * cos / total_mass)
            )
            x_acc = temp - polemass_length * theta_acc * cos / total_mass
            x, x_dot = x + p.tau * x_dot, x_dot + p.tau * x_acc
            theta, theta_dot = theta + p.tau * theta_dot, theta_dot + p.tau * theta_acc
        self.elapsed += 1
        terminated = (x.abs() > p.x_threshold) | (theta.abs() > p.theta_threshold_radians)
        done = terminated | (self.elapsed >= p.max_episode_steps)
        state = torch.stack([x, x_dot, theta, theta_dot], 1)
        self.state = torch.where(done[:, None], self._fresh(state.shape, state.device), state)
        self.elapsed = torch.where(done, 0, self.elapsed)
        return self.state, terminated


def _median_seconds_per_step(
    run: Callable[[int], None], steps: int, repeats: int, device: str
) -> list[float]:
    run(max(1, steps // 10))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        timings.append((time.perf_counter() - start) / steps)
    return timings


def time_gymnasium(kind: str, num_envs: int, steps: int, repeats: int) -> list[float]:
    import gymnasium

    vector_class = gymnasium.vector.AsyncVectorEnv if kind == "async" else gymnasium.vector.SyncVectorEnv
    envs = vector_class([lambda: gymnasium.make("CartPole-v1") for _ in range(num_envs)])
    envs.reset(seed=0)
    rng = np.random.default_rng(0)

    def run(count: int) -> None:
        for _ in range(count):
            envs.step(rng.integers(0, 2, size=num_envs))

    try:
        return _median_seconds_per_step(run, steps, repeats, "cpu")
    finally:
        envs.close()


def time_torch(num_envs: int, device: str, steps: int, repeats: int, work: int = 1) -> list[float]:
    env = TorchCartPole(num_envs, device, work)
    actions = torch.zeros(num_envs, dtype=torch.int64, device=device)

    def run(count: int) -> None:
        for _ in range(count):
            torch.randint(0, 2, (num_envs,), generator=env.generator, device=device, out=actions)
            env.step(actions)

    return _median_seconds_per_step(run, steps, repeats, device)


def time_warpsci(
    num_envs: int,
    device: str,
    steps: int,
    repeats: int,
    work: int = 1,
    capture: bool = False,
    threads_per_block: int | None = None,
) -> list[float]:
    options = {} if threads_per_block is None else {"threads_per_block": threads_per_block}
    env = warpsci.WarpVectorEnv(
        WORK_CARTPOLE,
        num_envs,
        device=device,
        params=WorkCartPoleParams(work=work),
        copy=False,
        check_actions=False,
        **options,
    )
    generator = torch.Generator(device=env.device).manual_seed(0)
    actions = env.actions_buffer
    env.reset()

    def run_steps(count: int) -> None:
        for _ in range(count):
            torch.randint(0, 2, actions.shape, generator=generator, device=env.device, out=actions)
            env.step_in_place()

    if not capture:
        return _median_seconds_per_step(run_steps, steps, repeats, device)
    replay = GraphReplay(lambda: run_steps(steps), env.device, (generator,))
    return _median_seconds_per_step(lambda count: replay(), steps, repeats, device)


# ----------------------------------------------------------------------------- modes


def _write(out: Path, name: str, header: list[str], rows: list[list]) -> None:
    with (out / f"{name}.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def study_envs(out: Path, device: str, sizes: list[int], repeats: int, gym_max: int) -> None:
    rows = []

    def add(system: str, num_envs: int, timings: list[float]) -> None:
        seconds = statistics.median(timings)
        rows.append([system, device, num_envs, seconds, num_envs / seconds])
        print(
            f"{system:<22} {num_envs:>10,} envs {seconds * 1e6:>12.1f} us/step "
            f"{num_envs / seconds:>16,.0f} steps/s",
            flush=True,
        )

    for num_envs in sizes:
        steps = max(20, min(500, 2_000_000 // num_envs))
        if device == "cpu" and num_envs <= gym_max:
            add("gymnasium-sync", num_envs, time_gymnasium("sync", num_envs, steps, repeats))
            if num_envs <= 64:
                add("gymnasium-async", num_envs, time_gymnasium("async", num_envs, min(steps, 200), repeats))
        add("torch-batched", num_envs, time_torch(num_envs, device, steps, repeats))
        if device == "cpu":
            add("warpsci", num_envs, time_warpsci(num_envs, device, steps, repeats))
        else:
            add("warpsci-eager", num_envs, time_warpsci(num_envs, device, steps, repeats))
            for threads in (32, 64, 128, 256, 512):
                add(
                    f"warpsci-graph-tpb{threads}",
                    num_envs,
                    time_warpsci(num_envs, device, steps, repeats, capture=True, threads_per_block=threads),
                )
    _write(
        out, f"envs_{device}", ["system", "device", "num_envs", "seconds_per_step", "steps_per_second"], rows
    )
    _plot(
        out / f"envs_{device}.png",
        rows,
        x_index=2,
        x_label="environments",
        title=f"Cartpole: time per step vs environments ({device})",
    )


def study_work(out: Path, device: str, num_envs: int, works: list[int], repeats: int) -> None:
    rows = []
    steps = max(20, min(500, 2_000_000 // num_envs))
    for work in works:
        systems = [("torch-batched", time_torch(num_envs, device, steps, repeats, work))]
        systems.append(("warpsci", time_warpsci(num_envs, device, steps, repeats, work)))
        if device != "cpu":
            systems.append(
                ("warpsci-graph", time_warpsci(num_envs, device, steps, repeats, work, capture=True))
            )
        for system, timings in systems:
            seconds = statistics.median(timings)
            rows.append([system, device, work, num_envs, seconds])
            print(f"{system:<16} work {work:>4} {seconds * 1e6:>12.1f} us/step", flush=True)
    _write(out, f"work_{device}", ["system", "device", "work", "num_envs", "seconds_per_step"], rows)
    _plot(
        out / f"work_{device}.png",
        rows,
        x_index=2,
        x_label="Euler sub-steps per step (work)",
        title=f"Cartpole, {num_envs:,} environments: time per step vs work ({device})",
    )


def study_reward(out: Path, run_dirs: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from warpsci.run_log import read_progress

    rows = []
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for run_dir in run_dirs:
        progress = read_progress(Path(run_dir) / "progress.csv")
        points = [
            (row["time/elapsed_s"], row["charts/episodic_return"])
            for row in progress
            if row["charts/episodes"] > 0 and math.isfinite(row["charts/episodic_return"])
        ]
        rows += [[Path(run_dir).name, t, r] for t, r in points]
        axes.plot([t for t, _ in points], [r for _, r in points], label=Path(run_dir).name)
    axes.set_xlabel("wall-clock training time (s)")
    axes.set_ylabel("mean episodic return")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out / "reward_vs_time.png", dpi=120)
    _write(out, "reward_vs_time", ["run", "seconds", "mean_return"], rows)


def _plot(path: Path, rows: list[list], x_index: int, x_label: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for system in dict.fromkeys(row[0] for row in rows):
        points = sorted((row[x_index], row[3]) for row in rows if row[0] == system)
        axes.loglog(
            [x for x, _ in points], [seconds * 1e6 for _, seconds in points], marker="o", label=system
        )
    axes.set_xlabel(x_label)
    axes.set_ylabel("time per step (us)")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3, which="both")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["envs", "work", "reward"])
    parser.add_argument("out_dir")
    parser.add_argument("run_dirs", nargs="*", help="reward mode: training run folders")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64, 256, 1024, 10_000, 100_000])
    parser.add_argument("--gym-max", type=int, default=1024, help="largest Gymnasium vector env to time")
    parser.add_argument("--num-envs", type=int, default=10_000, help="work mode: environments")
    parser.add_argument("--work", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.mode == "envs":
        study_envs(out, args.device, args.sizes, args.repeats, args.gym_max)
    elif args.mode == "work":
        study_work(out, args.device, args.num_envs, args.work, args.repeats)
    else:
        if not args.run_dirs:
            parser.error("reward mode needs at least one RUN_DIR")
        study_reward(out, args.run_dirs)


if __name__ == "__main__":
    main()
