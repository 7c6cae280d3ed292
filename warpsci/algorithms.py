"""The algorithms by name: ``make_trainer(config)`` builds the PPO or A2C trainer ``config.algo`` names.

The training loop (:mod:`warpsci.trainer`) knows no algorithm; the algorithms (:mod:`warpsci.ppo`,
:mod:`warpsci.a2c`) build on it, and this module, above both, picks one. No module imports back up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from warpsci.a2c import A2CTrainer
from warpsci.checkpoint import CheckpointError, load_latest_checkpoint
from warpsci.config import TrainConfig
from warpsci.ppo import PPOTrainer
from warpsci.trainer import OnPolicyTrainer


def trainer_class(algo: str) -> type[OnPolicyTrainer]:
    """The trainer of ``algo`` (``"ppo"`` or ``"a2c"``)."""
    classes: dict[str, type[OnPolicyTrainer]] = {"ppo": PPOTrainer, "a2c": A2CTrainer}
    if algo not in classes:
        raise ValueError(f"algo must be one of {list(classes)}, got {algo!r}")
    return classes[algo]


def make_trainer(config: TrainConfig, run_dir: str | Path | None = None) -> OnPolicyTrainer:
    """A PPO or A2C trainer, as ``config.algo`` says."""
    return trainer_class(config.algo)(config, run_dir)


def resume_trainer(
    run_dir: str | Path, expected_env_id: str | None = None, **overrides: Any
) -> OnPolicyTrainer:
    """Continue the run in ``run_dir`` with the algorithm it was started with; with
    ``expected_env_id``, refuse a run of another environment."""
    payload, path = load_latest_checkpoint(Path(run_dir))
    env_id = payload["config"].get("env_id")
    if expected_env_id is not None and expected_env_id != env_id:
        raise CheckpointError(
            f"{str(run_dir)!r} holds a {env_id} run, not {expected_env_id}: resume it without the "
            f"environment id, or start a new run of {expected_env_id} in another folder"
        )
    algo = overrides.get("algo", payload["config"].get("algo", "ppo"))
    return trainer_class(algo).resume(run_dir, **overrides)
