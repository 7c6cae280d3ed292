"""Weights & Biases logging for ``--track`` (CleanRL's ``--track``): the run's config, then every
iteration's metrics on the global step axis. ``wandb`` is optional: it is imported only here, and
only when a run asks for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Where a run folder keeps its W&B run id, so that ``--resume`` continues the same W&B run.
ID_FILE = "wandb_id.txt"


def start_tracking(config: Any, run_dir: Path) -> Any:
    """A W&B run for ``run_dir`` (new, or the one a resumed run started), with ``config`` logged."""
    try:
        import wandb
    except ImportError:
        raise ValueError(
            "--track logs to Weights & Biases, which is not installed: pip install wandb "
            "(or train without --track)"
        ) from None
    id_path = run_dir / ID_FILE
    run_id = id_path.read_text().strip() if id_path.exists() else wandb.util.generate_id()
    id_path.write_text(run_id + "\n")
    return wandb.init(
        project=config.wandb_project,
        entity=config.wandb_entity,
        name=run_dir.name,
        id=run_id,
        resume="allow",
        config=config.to_dict(),
        dir=str(run_dir),
    )
