"""The barrier a trained policy finds on every one-atom catalysis scenario (issue 13).

Each scenario trains with HDRL-FP's published settings (the package's A2C preset: [50, 50], lr 1e-3,
gamma 0.99, entropy 0.1, value weight 0.1, gradient norm 3, advantages not normalised) and the
published batch of 50,000 steps an update, here as 1,000 environments x 50 steps (the double-grid
scenarios: entropy 0.2 and 250,000-step batches, 5,000 x 50, as their YAML files say), for at most
TOTAL steps or SECONDS of training, one process per scenario, all at once on one GPU. Then the
greedy policy's reaction pathway (``warpsci.reaction_path``): whether it reaches the final state, in
how many steps, its barrier (eV). "Found": the first training step (and second, checks left out)
at which the greedy policy, played every `--check-every` steps (default a million), reached the final state.

Run on a machine with a CUDA GPU:
    python benchmarks/catalysis_barriers.py OUT_DIR [--total N] [--seconds S] [--device cpu]
        [--variant NAME:FIELD=VALUE[,FIELD=VALUE...] ...] [SCENARIO ...]
Prints a table; writes OUT_DIR/catalysis_barriers.json and, per scenario, the pathway CSV and
pictures and the training's progress.csv under OUT_DIR/<scenario>/. With ``--variant`` options,
every scenario trains once per variant instead, the published settings with those TrainConfig
fields changed (values read as YAML, lists too), in OUT_DIR/<scenario>-<NAME>/; e.g. ``--variant
episodes:num_envs=100,num_steps=500`` for the published 100 environments x 500 steps (whole
episodes a rollout).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ENV_ID = "CatalysisOneAtom-v0"


def recipe(scenario: str, total_steps: int, device: str = "cuda", changes: dict | None = None) -> dict:
    """The TrainConfig fields of the published settings for ``scenario`` (the package's A2C preset
    with its section for the scenario), with ``changes``."""
    from warpsci.cli import preset

    fields = {
        **preset(ENV_ID, "a2c", scenario),
        "device": device,
        "seed": 1,
        "total_timesteps": total_steps,
        "env_params": {"scenario": scenario},
        "checkpoint_every": 0,
        "checkpoint_every_s": 0,
    }
    return {**fields, **(changes or {})}


def parse_variant(text: str) -> tuple[str, dict]:
    """``NAME:FIELD=VALUE,...`` as ``(NAME, {FIELD: VALUE})``, values read as YAML."""
    import yaml

    name, _, assignments = text.partition(":")
    if not name or not name.replace("_", "").isalnum() or not assignments:
        raise SystemExit(f"--variant must look like NAME:FIELD=VALUE[,FIELD=VALUE...], got {text!r}")
    changes = {}
    # Split at the commas that start the next FIELD=, so that list values keep theirs.
    for assignment in re.split(r",(?=\s*\w+\s*=)", assignments):
        field, equals, value = assignment.partition("=")
        if not equals:
            raise SystemExit(f"--variant assignment {assignment!r} needs FIELD=VALUE")
        changes[field.strip()] = yaml.safe_load(value)
    return name, changes


class FirstArrival:
    """Plays the greedy policy every ``every`` iterations (``on_iteration``) and remembers the first
    training step and second (the checks' own time left out) at which it reached the final state."""

    def __init__(self, trainer, config, every: int) -> None:
        from warpsci.envs.catalysis import landscape

        self.trainer, self.config, self.every = trainer, config, every
        self.final_state = landscape(trainer.env.params).final_state
        self.steps: int | None = None
        self.seconds: float | None = None
        self.checking = 0.0
        self.start = time.perf_counter()

    def __call__(self, metrics: dict) -> None:
        from warpsci.reaction_path import greedy_path

        if self.steps is not None or int(metrics["iteration"]) % self.every:
            return
        began = time.perf_counter()
        policy = self.trainer.single.policy
        rows = greedy_path(policy, ENV_ID, self.config.env_params, device=self.config.device)
        if tuple(rows[-1]["position"]) == self.final_state:
            self.steps, self.seconds = int(metrics["global_step"]), began - self.start - self.checking
        self.checking += time.perf_counter() - began


def train_and_trace(
    scenario: str,
    out: Path,
    total_steps: int,
    seconds: float,
    device: str,
    check_every: int,
    variant: tuple[str, dict] | None = None,
) -> dict:
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig
    from warpsci.envs.catalysis import landscape
    from warpsci.reaction_path import greedy_path, write_reaction_path

    label, changes = variant or ("", {})
    config = TrainConfig.from_dict(recipe(scenario, total_steps, device, changes))
    folder = out / run_name(scenario, label)
    trainer = make_trainer(config, run_dir=folder / "run")
    arrival = FirstArrival(trainer, config, every=max(1, check_every // (config.num_envs * config.num_steps)))
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM))  # stops after an iteration
    timer.start()
    result = trainer.train(on_iteration=arrival)
    timer.cancel()
    training_seconds = time.perf_counter() - arrival.start - arrival.checking
    land = landscape(trainer.env.params)
    rows = greedy_path(trainer.single.policy, ENV_ID, config.env_params, device=device)
    summary = write_reaction_path(rows, land, folder)
    return {
        "scenario": scenario,
        "variant": label,
        "changes": changes,
        "algo": config.algo,
        "num_envs": config.num_envs,
        "num_steps": config.num_steps,
        "ent_coef": config.ent_coef,
        "training_steps": result.global_step,
        "training_seconds": training_seconds,
        "stopped_by": result.stopped_by,
        "return_last100": result.history[-1].get("charts/return_last100"),
        "found_at_steps": arrival.steps,
        "found_at_seconds": arrival.seconds,
        "reached_final_state": summary["reached_final_state"],
        "path_steps": summary["path_steps"],
        "barrier_eV": summary["barrier_eV"],
    }


def run_name(scenario: str, label: str) -> str:
    """The folder of a scenario's run: the scenario, or ``<scenario>-<variant>``."""
    return f"{scenario}-{label}" if label else scenario


def run_one(
    scenario: str,
    out: Path,
    total_steps: int,
    seconds: float,
    device: str,
    check_every: int,
    variant: tuple[str, dict] | None = None,
) -> None:
    name = run_name(scenario, variant[0] if variant else "")
    try:
        row = train_and_trace(scenario, out, total_steps, seconds, device, check_every, variant)
    except Exception as error:  # noqa: BLE001 - reported in the table
        row = {"scenario": name, "error": f"{type(error).__name__}: {error}"}
    (out / name).mkdir(parents=True, exist_ok=True)
    (out / name / "barrier.json").write_text(json.dumps(row, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--total", type=int, default=200_000_000, help="training steps at most")
    parser.add_argument("--seconds", type=float, default=150.0, help="training seconds at most")
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--check-every", type=int, default=1_000_000, help="training steps between greedy checks"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:FIELD=VALUE[,FIELD=VALUE...]: train each scenario with these TrainConfig changes",
    )
    parser.add_argument("--one", action="store_true", help="(internal) run one scenario in this process")
    args = parser.parse_intermixed_args()
    out = Path(args.out)
    variants = [parse_variant(text) for text in args.variant]
    if args.one:
        variant = variants[0] if variants else None
        run_one(args.scenarios[0], out, args.total, args.seconds, args.device, args.check_every, variant)
        return
    import torch

    from warpsci.envs.catalysis import scenario_names

    scenarios = args.scenarios or list(scenario_names(1))
    command = [
        sys.executable,
        __file__,
        str(out),
        "--total",
        str(args.total),
        "--seconds",
        str(args.seconds),
        "--device",
        args.device,
        "--check-every",
        str(args.check_every),
    ]
    runs = [(name, None) for name in scenarios] if not variants else []
    runs += [(name, text) for text in args.variant for name in scenarios]
    processes = [
        subprocess.Popen([*command, "--one", name, *(["--variant", text] if text else [])])
        for name, text in runs
    ]
    for process in processes:
        process.wait()
    rows = []
    for scenario, text in runs:
        name = run_name(scenario, parse_variant(text)[0] if text else "")
        path = out / name / "barrier.json"
        rows.append(
            json.loads(path.read_text()) if path.exists() else {"scenario": name, "error": "no result"}
        )

    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    report = {"device": device, "date": time.strftime("%Y-%m-%d"), "rows": rows}
    (out / "catalysis_barriers.json").write_text(json.dumps(report, indent=2))
    print(f"{'scenario':<34} {'reached':>7} {'path':>5} {'barrier eV':>10} {'found at':>12} {'s':>6} "
          f"{'trained':>12} {'s':>6}")  # fmt: skip
    for row in rows:
        if "error" in row:
            print(f"{row['scenario']:<34} {row['error'][:100]}")
            continue
        found = f"{row['found_at_steps']:,}" if row["found_at_steps"] is not None else "-"
        found_s = f"{row['found_at_seconds']:.1f}" if row["found_at_seconds"] is not None else "-"
        print(
            f"{run_name(row['scenario'], row['variant']):<34} {row['reached_final_state']!s:>7} "
            f"{row['path_steps']:>5} {row['barrier_eV']:>10.3f} {found:>12} {found_s:>6} "
            f"{row['training_steps']:>12,} {row['training_seconds']:>6.1f}"
        )


if __name__ == "__main__":
    main()
