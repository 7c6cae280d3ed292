"""The ``warpsci`` command line: train, eval, bench, list and their errors."""

import json
import math

import pytest

from warpsci.cli import main
from warpsci.run_log import read_progress


def test_train_writes_config_progress_checkpoint_and_summary(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(
        [
            "train",
            "CartPole-v1",
            "--device",
            "cpu",
            "--num-envs",
            "8",
            "--total-steps",
            "2048",
            "--seed",
            "3",
            "--run-dir",
            str(run_dir),
            "--no-progress",
            "--eval-episodes",
            "4",
        ]
    )
    assert code == 0
    assert {"config.yaml", "progress.csv", "checkpoint.pt", "summary.json", "training_curve.png"} <= {
        p.name for p in run_dir.iterdir()
    }
    assert (run_dir / "training_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "num_envs: 8" in (run_dir / "config.yaml").read_text()
    rows = read_progress(run_dir / "progress.csv")
    assert [row["global_step"] for row in rows] == [512 * (i + 1) for i in range(len(rows))]
    for name in (
        "charts/episodic_return",
        "charts/SPS",
        "charts/SPS_iteration",
        "charts/learning_rate",
        "losses/value_loss",
        "losses/policy_loss",
        "losses/entropy",
        "losses/approx_kl",
        "losses/clipfrac",
    ):
        assert name in rows[0]
    assert rows[-1]["charts/SPS"] > 0 and math.isfinite(rows[-1]["losses/value_loss"])
    # Cumulative (CleanRL's): steps of the run over its time, so at most the best iteration's rate.
    assert rows[-1]["charts/SPS"] <= max(row["charts/SPS_iteration"] for row in rows)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] == 2048 and summary["eval_episodes"] == 4

    assert main(["eval", str(run_dir), "--episodes", "5", "--device", "cpu"]) == 0
    evaluation = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")
    assert evaluation["episodes"] == 5 and 1 <= evaluation["mean_return"] <= 500


def test_train_says_how_it_rounds_the_steps_and_what_it_compiles_without_a_progress_bar(tmp_path, capsys):
    argv = ["train", "CartPole-v1", "--device", "cpu", "--num-envs", "8", "--total-steps", "300"]
    argv += ["--run-dir", str(tmp_path / "run"), "--no-progress", "--eval-episodes", "0"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "for 512 steps (300 rounded up to whole rollouts of 512)" in printed.err
    assert "taking the first iteration ..." in printed.err and "first iteration done after" in printed.err
    assert "it/s" not in printed.err and "steps/s" not in printed.err  # no progress, bar or lines


def test_train_progress_is_whole_lines_where_stderr_is_not_a_terminal(tmp_path, capsys):
    argv = ["train", "CartPole-v1", "--device", "cpu", "--num-envs", "8", "--total-steps", "1024"]
    argv += ["--run-dir", str(tmp_path / "run"), "--eval-episodes", "0"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "\r" not in err  # a tqdm bar would rewrite its line with carriage returns
    lines = [line for line in err.splitlines() if "steps/s" in line]
    # The first after the first iteration (the compilation), then the last at the end.
    assert lines[0].startswith("512/1,024 steps (50%)") and lines[-1].startswith("1,024/1,024 steps (100%)")
    assert all(", SPS " in line and ", ret " in line for line in lines)


def test_train_resume_continues_the_run(tmp_path):
    run_dir = tmp_path / "run"
    common = ["--no-progress", "--eval-episodes", "0"]
    assert (
        main(
            [
                "train",
                "CartPole-v1",
                "--device",
                "cpu",
                "--num-envs",
                "8",
                "--total-steps",
                "1024",
                "--run-dir",
                str(run_dir),
                *common,
            ]
        )
        == 0
    )
    assert main(["train", "CartPole-v1", "--resume", str(run_dir), "--total-steps", "2048", *common]) == 0
    rows = read_progress(run_dir / "progress.csv")
    assert [row["global_step"] for row in rows] == [512, 1024, 1536, 2048]


def test_config_file_and_flags_are_merged(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("num_envs: 4\nnum_steps: 16\nlearning_rate: 0.0005\nnum_minibatches: 2\n")
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "CartPole-v1",
                "--device",
                "cpu",
                "--config",
                str(config),
                "--num-envs",
                "6",
                "--total-steps",
                "96",
                "--run-dir",
                str(run_dir),
                "--no-progress",
                "--eval-episodes",
                "0",
            ]
        )
        == 0
    )
    written = (run_dir / "config.yaml").read_text()
    assert "num_envs: 6" in written and "num_steps: 16" in written and "learning_rate: 0.0005" in written


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "Nope-v0", "--device", "cpu"], "unknown environment id 'Nope-v0'"),
        (["train", "CartPole-v1", "--device", "tpu", "--total-steps", "64"], "device"),
        (["train", "CartPole-v1", "--config", "/does/not/exist.yaml"], "does not exist"),
        (["eval", "/does/not/exist"], "no checkpoint"),
    ],
)
def test_bad_input_exits_with_a_clear_message(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_non_positive_num_envs_is_rejected_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["train", "CartPole-v1", "--num-envs", "0"])
    assert "positive integer" in capsys.readouterr().err


def test_bench_prints_env_and_train_throughput(tmp_path, capsys):
    output = tmp_path / "bench.csv"
    assert (
        main(
            [
                "bench",
                "CartPole-v1",
                "--device",
                "cpu",
                "--num-envs",
                "64",
                "--steps",
                "20",
                "--repeats",
                "2",
                "--num-steps",
                "16",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    printed = capsys.readouterr()
    table = printed.out
    assert "env" in table and "train" in table
    # Feedback while it works: what is happening first, then each size as it finishes.
    progress = printed.err.splitlines()
    assert progress[0].startswith("benchmarking CartPole-v1 on cpu; the first size compiles the kernels")
    assert any(line.strip().startswith("env") and "steps/s" in line for line in progress[1:])
    lines = output.read_text().strip().splitlines()
    assert lines[0].startswith("env_id,mode") and len(lines) == 3
    assert all(float(line.split(",")[4]) > 0 for line in lines[1:])


def test_bench_trains_with_bf16_products_when_asked(tmp_path, capsys):
    output = tmp_path / "bench.csv"
    argv = [
        "bench",
        "CartPole-v1",
        "--device",
        "cpu",
        "--mode",
        "train",
        "--num-envs",
        "16",
        "--repeats",
        "1",
    ]
    assert main(argv + ["--num-steps", "8", "--bf16", "--output", str(output)]) == 0
    [row] = output.read_text().strip().splitlines()[1:]
    assert row.split(",")[1] == "train-bf16" and float(row.split(",")[4]) > 0


def test_bench_versus_gymnasium_prints_both_side_by_side(tmp_path, capsys):
    output = tmp_path / "versus.csv"
    argv = ["bench", "CartPole-v1", "--device", "cpu", "--versus", "gymnasium", "--num-envs", "8", "16"]
    assert main(argv + ["--steps", "5", "--repeats", "1", "--output", str(output)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "x gymnasium" in table[0]
    for num_envs in (8, 16):
        rows = {line.split()[1]: line.split() for line in table[1:] if int(line.split()[3]) == num_envs}
        assert set(rows) == {"gymnasium-vector", "step", "step_in_place", "random_rollout"}
        assert float(rows["gymnasium-vector"][5]) == 1.0
    assert len(output.read_text().strip().splitlines()) == 1 + 2 * 4


def test_bench_versus_gymnasium_is_cpu_only():
    with pytest.raises(SystemExit, match="--device cpu"):
        main(["bench", "CartPole-v1", "--device", "cuda", "--versus", "gymnasium"])


def test_list_names_cartpole(capsys):
    assert main(["list"]) == 0
    assert "CartPole-v1" in capsys.readouterr().out


def test_every_builtin_environment_has_a_valid_ppo_preset():
    from warpsci.cli import preset
    from warpsci.config import TrainConfig
    from warpsci.envs import BUILTIN_ENVIRONMENTS

    for definition in BUILTIN_ENVIRONMENTS:
        data = preset(definition.name, "ppo")
        assert data, f"no PPO preset for {definition.name}"
        config = TrainConfig.from_dict(data)
        assert config.env_id == definition.name and config.algo == "ppo"


def test_every_scenario_section_and_algorithm_choice_names_what_exists():
    """Presets' ``scenarios:`` sections and ``configs/algorithms.yaml`` name registered environments,
    their scenarios and the two algorithms, and every section gives a valid config."""
    from warpsci.cli import _packaged_config, preset
    from warpsci.config import TrainConfig
    from warpsci.envs import BUILTIN_ENVIRONMENTS
    from warpsci.envs.catalysis import SCENARIOS

    names = {definition.name for definition in BUILTIN_ENVIRONMENTS}
    sections = 0
    for env_id in names:
        for algo in ("ppo", "a2c"):
            for scenario in _packaged_config(algo, f"{env_id}.yaml").get("scenarios") or {}:
                assert scenario in SCENARIOS, (env_id, algo, scenario)
                config = TrainConfig.from_dict(preset(env_id, algo, scenario))
                assert config.algo == algo
                sections += 1
    assert sections >= 3
    choices = _packaged_config("algorithms.yaml")
    assert choices and set(choices) <= names
    for choice in choices.values():
        assert set(choice) <= {"default", "scenarios"}
        assert {choice.get("default", "ppo"), *choice.get("scenarios", {}).values()} <= {"ppo", "a2c"}
        assert set(choice.get("scenarios", {})) <= set(SCENARIOS)


@pytest.mark.parametrize(
    ("argv", "algo", "expected"),
    [
        # No scenario: the environment's default (surface) with the published A2C settings.
        ([], "a2c", {"num_envs": 1000, "num_steps": 50, "ent_coef": 0.1}),
        (
            ["--scenario", "surface_double_grids"],
            "a2c",
            {"num_envs": 500, "num_steps": 500, "ent_coef": 0.2, "neg_pos_env_ratio": 5.0},
        ),
        (["--scenario", "diffusion2d"], "ppo", {"num_steps": 500, "norm_adv": True, "ent_coef": 0.1}),
        (["--env-params", "{scenario: diffusion3d}"], "ppo", {"ent_coef": 0.5, "ent_coef_final": 0.01}),
        # Flags still win over the scenario's preset.
        (["--scenario", "diffusion3d", "--algo", "a2c", "--ent-coef", "0.3"], "a2c", {"ent_coef": 0.3}),
        (["--scenario", "gas1", "--algo", "ppo"], "ppo", {"num_steps": 500, "ent_coef": 0.1}),
    ],
)
def test_a_scenario_trains_with_its_own_preset(argv, algo, expected):
    from warpsci.cli import build_parser, resolve_train_config
    from warpsci.config import TrainConfig

    data = resolve_train_config(build_parser().parse_args(["train", "CatalysisOneAtom-v0", *argv]))
    config = TrainConfig.from_dict(data)
    assert config.algo == algo
    assert {name: getattr(config, name) for name in expected} == expected


def test_a_config_file_scenario_picks_the_preset_and_the_file_still_wins(tmp_path):
    from warpsci.cli import build_parser, resolve_train_config

    path = tmp_path / "run.yaml"
    path.write_text("env_params: {scenario: diffusion3d}\nseed: 5\n")
    data = resolve_train_config(
        build_parser().parse_args(["train", "CatalysisOneAtom-v0", "--config", str(path)])
    )
    assert (data["algo"], data["ent_coef_final"], data["seed"]) == ("ppo", 0.01, 5)
    assert data["env_params"] == {"scenario": "diffusion3d"}


def test_algo_flag_selects_the_a2c_preset_and_trainer(tmp_path):
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--algo", "a2c", "--device", "cpu", "--total-steps", "640"]
    assert main(argv + ["--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "0"]) == 0
    written = (run_dir / "config.yaml").read_text()
    # The A2C preset's rollout (64 environments, 5 steps, RMSprop), not the PPO one.
    assert "algo: a2c" in written and "num_steps: 5" in written and "optimizer: rmsprop" in written
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["algo"] == "a2c" and summary["global_step"] == 640
    # Resuming picks the algorithm up from the checkpoint.
    assert (
        main(
            [
                "train",
                "CartPole-v1",
                "--resume",
                str(run_dir),
                "--total-steps",
                "1280",
                "--no-progress",
                "--eval-episodes",
                "0",
            ]
        )
        == 0
    )
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 1280


def test_eval_restores_a_continuous_policy_with_observation_statistics(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["train", "Pendulum-v1", "--device", "cpu", "--num-envs", "8", "--total-steps", "1024"]
    assert main(argv + ["--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "4"]) == 0
    trained = json.loads((run_dir / "summary.json").read_text())
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "4", "--device", "cpu", "--seed", "12345"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    # Same greedy policy, same seed and episodes: the saved normaliser statistics were restored.
    assert evaluated["mean_return"] == pytest.approx(trained["eval_mean_return"], rel=1e-5)


def test_target_return_reports_the_time_from_process_start(tmp_path):
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--device", "cpu", "--target-return", "40", "--total-steps", "200000"]
    assert main(argv + ["--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "0"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["solved_at_step"] is not None and summary["global_step"] < 200_000
    assert summary["return_last100"] >= 40
    # From process start, so at least the training time.
    assert summary["time_to_target_s"] >= summary["train_wall_time_s"]


def test_compile_flag_sets_the_config_field():
    from warpsci.cli import build_parser, resolve_train_config

    parser = build_parser()
    with_flag = resolve_train_config(
        parser.parse_args(["train", "CartPole-v1", "--compile", "--device", "cpu"])
    )
    without = resolve_train_config(parser.parse_args(["train", "CartPole-v1", "--device", "cpu"]))
    assert with_flag["compile"] is True
    assert without.get("compile", False) is False


def test_fused_mlp_is_on_by_default_and_the_flag_turns_it_off():
    from warpsci.cli import build_parser, resolve_train_config
    from warpsci.config import TrainConfig

    parser = build_parser()
    off = resolve_train_config(
        parser.parse_args(["train", "TagGridworld-v0", "--no-fused-mlp", "--device", "cpu"])
    )
    default = resolve_train_config(parser.parse_args(["train", "TagGridworld-v0", "--device", "cpu"]))
    assert off["fused_mlp"] is False
    assert TrainConfig.from_dict(default).fused_mlp is True
