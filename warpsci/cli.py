"""The ``warpsci`` command: train, evaluate, benchmark, list environments."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from warpsci.run_safety import exit_code

_IMPORTED_AT = time.time()


def process_age() -> float:
    """Seconds since this process started (from /proc on Linux; elsewhere since this module loaded)."""
    try:
        ticks_since_boot = float(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        import os

        return uptime - ticks_since_boot / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time() - _IMPORTED_AT


def default_device() -> str:
    """``"cuda"`` when a GPU is available, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _packaged_config(*parts: str) -> dict[str, Any]:
    """A YAML file under the package's ``configs`` folder (empty when there is none)."""
    from warpsci.config import load_yaml

    path = resources.files("warpsci").joinpath("configs", *parts)
    if not path.is_file():
        return {}
    with resources.as_file(path) as real_path:
        return load_yaml(real_path)


def preset(env_id: str, algo: str = "ppo", scenario: str | None = None) -> dict[str, Any]:
    """The packaged training preset of ``algo`` for ``env_id`` (empty when there is none), with the
    fields its ``scenarios:`` section sets for ``scenario`` (an environment's named scenario, such as
    a catalysis one) in place of the preset's own."""
    data = _packaged_config(algo, f"{env_id}.yaml")
    by_scenario = data.pop("scenarios", None) or {}
    return {**data, **(by_scenario.get(scenario) or {})}


def preset_algo(env_id: str, scenario: str | None = None) -> str:
    """The algorithm whose preset ``warpsci train`` uses when neither ``--algo`` nor a ``--config``
    file names one: as ``configs/algorithms.yaml`` says for ``env_id`` and ``scenario``, else PPO."""
    choice = _packaged_config("algorithms.yaml").get(env_id) or {}
    return (choice.get("scenarios") or {}).get(scenario) or choice.get("default") or "ppo"


def resolve_train_config(args: argparse.Namespace) -> dict[str, Any]:
    """Preset, then ``--config`` file, then command-line flags: later ones win. The preset is the
    one of the algorithm and scenario these name (``--scenario``, else a scenario in
    ``--env-params``, else in the file)."""
    from warpsci.config import load_yaml
    from warpsci.config_fields import coerce

    from_file = load_yaml(args.config) if args.config else {}
    flags = {
        "device": args.device,
        "num_envs": args.num_envs,
        "total_timesteps": args.total_steps,
        "seed": args.seed,
        "algo": args.algo,
        "target_return": args.target_return,
        "compile": True if args.compile else None,
    }
    flags.update({name: getattr(args, f"field_{name}") for name in _generated_fields()})
    given_params = flags.pop("env_params", None)
    given_params = {} if given_params is None else coerce("env_params", given_params, dict[str, Any])
    if args.scenario is not None:
        given_params["scenario"] = args.scenario
    scenario = given_params.get("scenario", (from_file.get("env_params") or {}).get("scenario"))
    algo = args.algo or from_file.get("algo") or preset_algo(args.env_id, scenario)
    data: dict[str, Any] = {**preset(args.env_id, algo, scenario), **from_file, "env_id": args.env_id}
    if given_params:  # merged into the preset's and the file's, not replacing them
        data["env_params"] = {**(data.get("env_params") or {}), **given_params}
    data.update({key: value for key, value in flags.items() if value is not None})
    data.setdefault("algo", algo)
    data.setdefault("device", default_device())
    return data


def command_train(args: argparse.Namespace) -> int:
    import warpsci  # noqa: F401  (registers the environments)
    from warpsci import distributed
    from warpsci.algorithms import make_trainer, resume_trainer
    from warpsci.config import TrainConfig
    from warpsci.registry import get_definition

    if args.resume:
        run_dir = Path(args.resume)
        if not run_dir.is_dir():
            raise ValueError(f"--resume takes a run folder; {str(run_dir)!r} is not a folder")
        overrides = {}
        if args.total_steps is not None:
            overrides["total_timesteps"] = args.total_steps
        if args.device is not None:
            overrides["device"] = args.device
        trainer = resume_trainer(run_dir, expected_env_id=args.env_id, **overrides)
        said = ", ".join(f"{key}={value}" for key, value in overrides.items()) or "nothing"
        if trainer.processes.is_main:
            print(
                f"resuming {run_dir} from {trainer.resumed_from} at step {trainer.global_step:,} of "
                f"{trainer.config.total_timesteps:,}; overriding {said}",
                file=sys.stderr,
            )
    else:
        if args.env_id is None:
            raise ValueError("train needs an environment id (see `warpsci list`), or --resume RUN_DIR")
        get_definition(args.env_id)  # fail early on an unknown id
        config = TrainConfig.from_dict(resolve_train_config(args))
        processes = distributed.setup(config.device)
        # Several processes (torchrun): one folder, named by rank 0. A custom environment's
        # "module:NAME" id is named without the colon (scp and Windows read it as a drive or host).
        name = config.env_id.replace(":", "-")
        run_dir = Path(
            processes.broadcast_object(
                args.run_dir or f"runs/{name}__seed{config.seed}__{time.strftime('%Y%m%d-%H%M%S')}"
            )
        )
        trainer = make_trainer(config, run_dir)
    return _train_and_report(args, trainer, run_dir)


def _train_and_report(args: argparse.Namespace, trainer: Any, run_dir: Path) -> int:
    """Train, then (on rank 0) evaluate, write ``summary.json`` and print it."""
    from warpsci.trainer import evaluate_policy

    config, processes = trainer.config, trainer.processes
    if not processes.is_main:
        result = trainer.train()
        processes.barrier()  # leave together, once rank 0 has written the summary
        return exit_code(result.stopped_by) if result.stopped_by is not None else 0
    steps = f"{config.total_timesteps:,} steps"
    if config.total_timesteps % config.batch_size:
        rounded = config.num_iterations * config.batch_size
        direction = "up" if rounded > config.total_timesteps else "down"
        steps = (
            f"{rounded:,} steps ({config.total_timesteps:,} rounded {direction} to whole rollouts of "
            f"{config.batch_size:,})"
        )
    trainer.check_run_folder()  # a refusal before the training line: one line, not two
    where = f"{trainer.device}" if not processes.active else f"{processes.world_size} processes"
    print(
        f"training {config.env_id} with {config.algo.upper()} on {where} with "
        f"{config.num_envs} environments for {steps}; run folder {run_dir}",
        file=sys.stderr,
    )
    result = trainer.train(progress_bar=not args.no_progress, announce=True)
    finished_at = process_age()
    summary = {
        "env_id": config.env_id,
        "algo": config.algo,
        "device": str(trainer.device),
        "global_step": result.global_step,
        "train_wall_time_s": round(result.wall_time, 3),
    }
    if processes.active:
        summary["processes"] = processes.world_size
        summary["ranks_in_sync"] = result.ranks_in_sync
    if result.stopped_by is not None:
        summary["stopped_by"] = result.stopped_by
    groups = trainer.group_names
    if len(groups) == 1:
        summary["mean_episodic_return"] = result.mean_episodic_return
    for group in groups:
        key = "charts/return_last100" + ("" if len(groups) == 1 else f"/{group}")
        summary["return_last100" + ("" if len(groups) == 1 else f"/{group}")] = (
            result.history[-1][key] if result.history else None
        )
    if config.target_return is not None:
        summary["target_return"] = config.target_return
        summary["solved_at_step"] = result.solved_at_step
        # Wall time from process start (interpreter, imports, compilation included) to the stop.
        summary["time_to_target_s"] = round(finished_at, 3) if result.solved_at_step is not None else None
    if args.eval_episodes > 0 and len(groups) > 1 and result.stopped_by is None:
        from warpsci.evaluation import evaluate_groups

        players = {group.name: learner.policy for learner in trainer.learners for group in learner.groups}
        evaluation = evaluate_groups(
            config.env_id, players, args.eval_episodes, trainer.device, env_params=config.env_params
        )
        summary.update(_group_summary(evaluation))
    elif args.eval_episodes > 0 and result.stopped_by is None:
        returns = evaluate_policy(
            trainer.policy, config.env_id, args.eval_episodes, trainer.device, env_params=config.env_params
        )
        summary["eval_mean_return"] = float(returns.mean())
        summary["eval_episodes"] = int(returns.size)
    from warpsci.plots import plot_training_curve

    curve = plot_training_curve(run_dir)
    if curve is not None:
        summary["training_curve"] = str(curve)
    text = json.dumps(_finite_or_none(summary), indent=2, allow_nan=False)
    (run_dir / "summary.json").write_text(text + "\n")
    print(text)
    processes.barrier()
    if result.stopped_by is not None:
        print(
            f"stopped by {result.stopped_by} at step {result.global_step:,}; continue with "
            f"`warpsci train --resume {run_dir}`",
            file=sys.stderr,
        )
        return exit_code(result.stopped_by)
    return 0


def _finite_or_none(value: Any) -> Any:
    """``value`` with NaN and infinities (in nested dicts and lists) replaced by None: JSON has no
    NaN, and a bare ``NaN`` in a summary breaks strict readers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(item) for item in value]
    return value


def command_eval(args: argparse.Namespace) -> int:
    import warpsci  # noqa: F401
    from warpsci.checkpoint import load_checkpoint
    from warpsci.config import TrainConfig
    from warpsci.registry import make
    from warpsci.trainer import build_policy, evaluate_policy

    if args.policy is not None:
        return _eval_scripted(args)
    if args.env_params is not None or args.output_dir is not None:
        raise ValueError("--env-params and --output-dir go with --policy (a scripted policy's run)")
    payload = load_checkpoint(args.checkpoint)
    config = TrainConfig.from_dict(payload["config"])
    device = args.device or default_device()
    probe = make(config.env_id, num_envs=1, device="cpu", params=dict(config.env_params) or None)
    groups = [group.name for group in probe.groups]
    if len(groups) > 1:
        from warpsci.evaluation import evaluate_groups

        players: dict[str, Any] = dict.fromkeys(groups, args.checkpoint)
        for choice in args.play or []:
            group, _, player = choice.partition("=")
            if group not in players or not player:
                raise ValueError(f"--play takes GROUP=PLAYER with GROUP one of {groups}; got {choice!r}")
            players[group] = player
        evaluation = evaluate_groups(
            config.env_id, players, args.episodes, device, seed=args.seed, env_params=config.env_params
        )
        summary = {
            "env_id": config.env_id,
            "players": {k: str(v) for k, v in players.items()},
            **_group_summary(evaluation),
        }
        if config.env_id == "CovidEconomy-v0" and not args.play:
            summary.update(_covid_trained_episode(args.checkpoint, config.env_params, device))
        print(json.dumps(summary, indent=2))
        return 0
    if args.play:
        raise ValueError(f"--play chooses players of agent groups; {config.env_id} has one group")
    policy = build_policy(config, probe)
    policy.load_state_dict(payload["policy"])
    returns = evaluate_policy(
        policy,
        config.env_id,
        args.episodes,
        device,
        seed=args.seed,
        greedy=not args.sample,
        env_params=config.env_params,
    )
    summary: dict[str, Any] = {
        "env_id": config.env_id,
        "episodes": int(returns.size),
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "min_return": float(returns.min()),
        "max_return": float(returns.max()),
    }
    if config.env_id.startswith("Catalysis"):
        from warpsci.envs.catalysis import landscape
        from warpsci.reaction_path import greedy_path, write_reaction_path

        run = Path(args.checkpoint)
        folder = run if run.is_dir() else run.parent
        rows = greedy_path(policy, config.env_id, config.env_params, device)
        summary.update(write_reaction_path(rows, landscape(probe.params), folder))
    print(json.dumps(summary, indent=2))
    return 0


def _eval_scripted(args: argparse.Namespace) -> int:
    """``warpsci eval ENV_ID --policy NAME``: one scripted episode, its summary, plot and CSV."""
    from warpsci.config_fields import coerce
    from warpsci.covid_episodes import ENV_ID, play_scripted, write_episodes

    if args.checkpoint != ENV_ID:
        raise ValueError(
            f"--policy plays the scripted runs of {ENV_ID}; got {args.checkpoint!r} "
            f"(warpsci eval {ENV_ID} --policy NAME)"
        )
    if args.play:
        raise ValueError("--play chooses players of a trained run; it does not go with --policy")
    env_params = coerce("env_params", args.env_params, dict[str, Any]) if args.env_params else None
    episode = play_scripted(args.policy, env_params, args.device or "cpu", progress=_say)
    summary: dict[str, Any] = {"env_id": ENV_ID, **episode.summary()}
    if args.output_dir:
        summary.update(write_episodes([episode], args.output_dir, f"covid_{args.policy}"))
    print(json.dumps(summary, indent=2))
    return 0


def _covid_trained_episode(run: str, env_params: dict[str, Any], device: str) -> dict[str, Any]:
    """A trained CovidEconomy run's greedy episode beside the real-world policies in the same setting:
    both welfares, and ``covid_episode.png`` plus CSVs in the run folder."""
    from warpsci.covid_episodes import (
        TUTORIAL_SETTING,
        play_episode,
        play_scripted,
        trained_actor,
        write_episodes,
    )
    from warpsci.envs.covid_economy_data import CovidEconomyParams

    folder = Path(run) if Path(run).is_dir() else Path(run).parent
    trained = play_episode("trained", trained_actor(run, device), env_params, device)
    params = CovidEconomyParams(**(env_params or {}))
    same_setting = {  # the run's own values, not the tutorial's, for every key of that setting
        key: (env_params or {}).get(key, getattr(params, key)) for key in TUTORIAL_SETTING
    }
    days_of_data = params.data.num_rows - params.derived.s0  # the real policies end with the data
    same_setting["episode_length"] = min(params.episode_length, days_of_data)
    reference = play_scripted("real-world-policies", {**(env_params or {}), **same_setting}, device)
    return {
        "social_welfare/trained": round(trained.social_welfare, 4),
        "social_welfare/real-world-policies": round(reference.social_welfare, 4),
        "us_deaths/trained": round(trained.us_deaths, 1),
        "us_deaths/real-world-policies": round(reference.us_deaths, 1),
        **write_episodes([trained, reference], folder, "covid_episode"),
    }


def _group_summary(evaluation: Any) -> dict[str, Any]:
    """What an evaluation of several groups reports: returns per group, episode lengths."""
    out: dict[str, Any] = {"eval_episodes": int(evaluation.lengths.size)}
    for group in evaluation.returns:
        out[f"eval_mean_return/{group}"] = evaluation.mean_return(group)
    out["eval_mean_length"] = evaluation.mean_length
    out["eval_terminated_fraction"] = float(evaluation.terminated.mean())
    return out


def command_bench(args: argparse.Namespace) -> int:
    import csv

    import warpsci  # noqa: F401
    from warpsci.bench import bench_env, bench_train, bench_versus_gymnasium

    device = args.device or default_device()
    if args.versus and device != "cpu":
        raise SystemExit(f"--versus {args.versus} compares the CPU backend: use --device cpu, got {device}")
    capture = device.startswith("cuda") and not args.no_capture
    trained = [flag for flag, on in (("--compile", args.compile), ("--bf16", args.bf16)) if on]
    if trained and args.mode == "env":
        verb = "applies" if len(trained) == 1 else "apply"
        raise ValueError(f"{' and '.join(trained)} {verb} to training only: use --mode train or both")
    if args.steps % args.steps_per_launch:
        raise SystemExit(f"--steps-per-launch {args.steps_per_launch} must divide --steps {args.steps}")
    results = []
    print(
        f"benchmarking {args.env_id} on {device}; the first size compiles the kernels (cached for later "
        "runs), each size is printed as it finishes",
        file=sys.stderr,
        flush=True,
    )
    for num_envs in args.num_envs:
        if args.versus:
            results.extend(
                bench_versus_gymnasium(args.env_id, num_envs, steps=args.steps, repeats=args.repeats)
            )
            for result in results[-4:]:
                _report(result)
            continue
        if args.mode in ("env", "both"):
            results.append(
                bench_env(
                    args.env_id,
                    num_envs,
                    device,
                    steps=args.steps,
                    repeats=args.repeats,
                    capture=capture,
                    steps_per_launch=args.steps_per_launch,
                )
            )
            _report(results[-1])
        if args.mode in ("train", "both"):
            results.append(
                bench_train(
                    args.env_id,
                    num_envs,
                    device,
                    num_steps=args.num_steps,
                    iterations=args.repeats,
                    capture=capture,
                    compile=args.compile,
                    overrides={"bf16": True} if args.bf16 else None,
                )
            )
            _report(results[-1])
    versus = {r.num_envs: r.steps_per_second for r in results if r.mode == "gymnasium-vector"}
    print(
        f"{'env':<14} {'mode':<16} {'device':<8} {'num_envs':>10} {'steps/s (median)':>18}"
        + (f" {'x gymnasium':>12}" if versus else "")
    )
    for result in results:
        ratio = f" {result.steps_per_second / versus[result.num_envs]:>12.2f}" if versus else ""
        print(
            f"{result.env_id:<14} {result.mode:<16} {result.device:<8} {result.num_envs:>10,d} "
            f"{result.steps_per_second:>18,.0f}{ratio}"
        )
    if args.output:
        with open(args.output, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["env_id", "mode", "device", "num_envs", "steps_per_second", "repeats"])
            for result in results:
                writer.writerow(
                    [
                        result.env_id,
                        result.mode,
                        result.device,
                        result.num_envs,
                        f"{result.steps_per_second:.1f}",
                        " ".join(f"{rate:.1f}" for rate in result.repeats),
                    ]
                )
    return 0


def _report(result: Any) -> None:
    print(
        f"  {result.mode:5s} {result.num_envs:>9,d} envs: {result.steps_per_second:>16,.0f} steps/s",
        file=sys.stderr,
    )


def _say(message: str) -> None:
    """A progress line on standard error (the results go to standard output)."""
    print(message, file=sys.stderr, flush=True)


def command_render(args: argparse.Namespace) -> int:
    import warpsci  # noqa: F401  (registers the environments)
    from warpsci.render import render_run

    deterministic = True if args.greedy else (False if args.sample else None)
    output, episode = render_run(
        args.run, args.output, seed=args.seed, fps=args.fps, deterministic=deterministic, progress=_say
    )
    if len(episode.returns) == 1:
        returns = f"return {next(iter(episode.returns.values())):.3g}"
    else:
        returns = "returns summed over each group's agents: " + ", ".join(
            f"{name} {value:.3g}" for name, value in episode.returns.items()
        )
    print(f"wrote {output}: {len(episode.frames)} frames of {episode.definition.name} ({returns})")
    return 0


def command_list(args: argparse.Namespace) -> int:
    import warpsci

    for env_id in warpsci.registered_ids():
        definition = warpsci.get_definition(env_id)
        print(f"{env_id:<24} {definition.reference}")
    return 0


#: TrainConfig fields with a flag of their own above (or the positional env_id).
_HAND_WRITTEN = {"env_id", "algo", "device", "seed", "num_envs", "total_timesteps", "target_return",
                 "compile"}  # fmt: skip


def _generated_fields() -> list[str]:
    """The TrainConfig fields that get a generated ``--kebab-case`` flag."""
    import dataclasses

    from warpsci.config import TrainConfig

    return [field.name for field in dataclasses.fields(TrainConfig) if field.name not in _HAND_WRITTEN]


def _add_config_fields(parser: argparse.ArgumentParser) -> None:
    """A ``--kebab-case`` flag for every other TrainConfig field, its docstring as help; values
    are checked by TrainConfig itself (one message per field, whichever way it was set)."""
    import typing

    from warpsci.config import TrainConfig
    from warpsci.config_fields import field_docs

    docs = field_docs(TrainConfig)
    types = typing.get_type_hints(TrainConfig)
    group = parser.add_argument_group(
        "training configuration (TrainConfig fields; also settable in --config)"
    )
    for name in _generated_fields():
        flag = "--" + name.replace("_", "-")
        text = docs.get(name, "")
        if types[name] is bool:
            group.add_argument(flag, dest=f"field_{name}", action=argparse.BooleanOptionalAction, help=text)
        elif typing.get_origin(types[name]) is tuple:
            group.add_argument(flag, dest=f"field_{name}", nargs="+", metavar="N", help=text)
        else:
            metavar = "MAPPING" if typing.get_origin(types[name]) is dict else "VALUE"
            group.add_argument(flag, dest=f"field_{name}", metavar=metavar, help=text)


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose answer to a mistyped option suggests the closest one."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if message.startswith("unrecognized arguments:"):
            import difflib

            options = self._all_option_strings()
            for word in message.split(":", 1)[1].split():
                close = (
                    difflib.get_close_matches(word.split("=")[0], options, n=1)
                    if word.startswith("--")
                    else []
                )
                if close:
                    message += f" (did you mean {close[0]}?)"
                    break
        # One line, without argparse's usage block (dozens of lines for `train`); --help shows it.
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")

    def _all_option_strings(self) -> list[str]:
        """The options of this parser and of its subcommands."""
        options = [option for action in self._actions for option in action.option_strings]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for command in action.choices.values():
                    options += [option for sub in command._actions for option in sub.option_strings]
        return options


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="warpsci", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train an agent with PPO or A2C")
    train.add_argument(
        "env_id", nargs="?", help="registered environment id, e.g. CartPole-v1 (not needed with --resume)"
    )
    train.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if available)")
    train.add_argument("--num-envs", type=_positive_int, help="environments in parallel")
    train.add_argument("--total-steps", type=_positive_int, help="environment steps to train for")
    train.add_argument("--seed", type=int, help="seed (default 1)")
    train.add_argument(
        "--algo",
        choices=["ppo", "a2c"],
        help="algorithm (default: the config file's, else configs/algorithms.yaml's for the environment and "
        "scenario, else ppo)",
    )
    train.add_argument("--config", help="YAML file of TrainConfig fields")
    train.add_argument("--run-dir", help="folder for config, progress.csv, checkpoints")
    train.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its newest checkpoint (its environment and config; "
        "--total-steps and --device override them)",
    )
    train.add_argument(
        "--eval-episodes",
        type=_non_negative_int,
        default=100,
        help="greedy evaluation episodes after training (0: none)",
    )
    train.add_argument(
        "--target-return",
        type=float,
        help="stop when the mean return of the last 100 episodes reaches this; the summary gives the "
        "wall time from process start",
    )
    train.add_argument(
        "--compile", action="store_true", help="torch.compile the update's loss (TrainConfig.compile)"
    )
    train.add_argument(
        "--no-progress", action="store_true", help="no progress bar (what a first run compiles is still said)"
    )
    train.add_argument(
        "--scenario",
        help="a named scenario of the environment (the catalysis ones: surface, gas1, diffusion2d, ...); "
        "the same as --env-params '{scenario: NAME}'",
    )
    _add_config_fields(train)
    train.set_defaults(handler=command_train)

    render = commands.add_parser(
        "render", help="animate one episode of a trained run (GIF, or MP4 with ffmpeg)"
    )
    render.add_argument("run", help="run folder or checkpoint")
    render.add_argument("--output", required=True, help="FILE.gif, or FILE.mp4 where ffmpeg is installed")
    render.add_argument("--seed", type=int, default=0, help="seed of the episode (default 0)")
    render.add_argument("--fps", type=_positive_int, default=20, help="frames per second (default 20)")
    choice = render.add_mutually_exclusive_group()
    choice.add_argument("--greedy", action="store_true", help="most likely actions (default for one group)")
    choice.add_argument("--sample", action="store_true", help="sampled actions (default for several groups)")
    render.set_defaults(handler=command_render)

    evaluate = commands.add_parser("eval", help="evaluate a checkpoint")
    evaluate.add_argument("checkpoint", help="checkpoint.pt or the run folder holding it")
    evaluate.add_argument("--episodes", type=_positive_int, default=100)
    evaluate.add_argument("--device")
    evaluate.add_argument("--seed", type=int, default=12345)
    evaluate.add_argument("--sample", action="store_true", help="sample actions instead of the greedy policy")
    evaluate.add_argument(
        "--play",
        action="append",
        metavar="GROUP=PLAYER",
        help="multi-group environments: play GROUP with PLAYER ('random' or another run's folder) "
        "instead of this run's policy; repeatable. Groups' policies sample (tag games need it)",
    )
    evaluate.add_argument(
        "--policy",
        choices=["real-world-data", "real-world-policies", "open", "closed", "closed-6-months"],
        help="CovidEconomy-v0: play a scripted run of the AI Economist tutorial instead of a checkpoint "
        "(give the environment id in place of the checkpoint)",
    )
    evaluate.add_argument(
        "--env-params", help="with --policy: YAML mapping of env params over the tutorial's setting"
    )
    evaluate.add_argument("--output-dir", help="with --policy: write the episode's PNG and CSV there")
    evaluate.set_defaults(handler=command_eval)

    bench = commands.add_parser("bench", help="measure environment and training throughput")
    bench.add_argument("env_id")
    bench.add_argument("--num-envs", type=_positive_int, nargs="+", default=[1000, 10000])
    bench.add_argument("--device")
    bench.add_argument("--mode", choices=["env", "train", "both"], default="both")
    bench.add_argument("--steps", type=_positive_int, default=1000, help="steps per timed repeat (env mode)")
    bench.add_argument("--repeats", type=_positive_int, default=5)
    bench.add_argument("--num-steps", type=_positive_int, default=128, help="rollout length (train mode)")
    bench.add_argument(
        "--steps-per-launch",
        type=_positive_int,
        default=1,
        help="env mode: steps per kernel launch, actions drawn in the kernel (env.random_rollout)",
    )
    bench.add_argument(
        "--no-capture", action="store_true", help="on CUDA, launch eagerly instead of replaying CUDA graphs"
    )
    bench.add_argument(
        "--compile",
        action="store_true",
        help="train mode: torch.compile the update's loss (TrainConfig.compile)",
    )
    bench.add_argument(
        "--bf16",
        action="store_true",
        help="train mode: the networks' products in bfloat16 (TrainConfig.bf16; on CUDA inside the fused "
        "kernels)",
    )
    bench.add_argument(
        "--versus",
        choices=["gymnasium"],
        help="CPU only: warpsci's step(), step_in_place and random_rollout beside Gymnasium's vector "
        "environment of the same id, measured in this process (steps/s and ratio), at each --num-envs",
    )
    bench.add_argument("--output", help="write the results to this CSV file")
    bench.set_defaults(handler=command_bench)

    listing = commands.add_parser("list", help="list registered environments")
    listing.set_defaults(handler=command_list)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"warpsci {args.command}: interrupted", file=sys.stderr)
        return exit_code("SIGINT")
    except MemoryError as error:
        if args.debug:
            raise
        if "--num-envs" in str(error):  # a planned refusal (warpsci.memory) says what to change
            print(f"warpsci {args.command}: error: {error}", file=sys.stderr)
            return 2
        print(
            f"warpsci {args.command}: error: out of memory ({error or 'allocation failed'}); use fewer "
            "environments (--num-envs) or shorter rollouts (--num-steps)",
            file=sys.stderr,
        )
        return 2
    except torch.OutOfMemoryError as error:
        if args.debug:
            raise
        first = str(error).split(". ")[0]
        print(
            f"warpsci {args.command}: error: out of GPU memory ({first}); use fewer environments "
            "(--num-envs), shorter rollouts (--num-steps) or more minibatches (--num-minibatches)",
            file=sys.stderr,
        )
        return 2
    except (ValueError, TypeError, OSError, RuntimeError) as error:
        if args.debug:
            raise
        print(f"warpsci {args.command}: error: {error}", file=sys.stderr)
        return 2
    finally:
        from warpsci.distributed import shutdown

        shutdown()  # leave the process group of a torchrun launch (nothing otherwise)


if __name__ == "__main__":
    sys.exit(main())
