"""Checkpoints written atomically (a temporary file in the same folder, then a rename); a run keeps
its last few in ``RUN_DIR/checkpoints/`` and ``RUN_DIR/checkpoint.pt`` is the newest."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_NAME = "checkpoint.pt"
#: Folder of a run that keeps its last few checkpoints.
KEPT_FOLDER = "checkpoints"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Serialise ``payload`` with ``torch.save`` and write it atomically to ``path``."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def save_run_checkpoint(run_dir: Path, payload: dict[str, Any], iteration: int, keep: int = 3) -> Path:
    """Write ``payload`` as ``run_dir/checkpoints/iteration-NNNNNNNN.pt`` (atomically), point
    ``run_dir/checkpoint.pt`` at it (a hard link, or a copy where links are not possible; the
    replacement is atomic) and delete all but the newest ``keep`` in ``checkpoints/``."""
    folder = run_dir / KEPT_FOLDER
    kept = folder / f"iteration-{iteration:08d}.pt"
    save_checkpoint(kept, payload)
    latest = run_dir / CHECKPOINT_NAME
    temporary = run_dir / f".{CHECKPOINT_NAME}.link"
    if temporary.exists():
        temporary.unlink()
    try:
        os.link(kept, temporary)
        os.replace(temporary, latest)
    except OSError:
        atomic_write_bytes(latest, kept.read_bytes())
    for old in sorted(folder.glob("iteration-*.pt"))[: -max(1, keep)]:
        old.unlink()
    return latest


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that belongs to another kind of run."""


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint; ``path`` may be the file or the run folder holding ``checkpoint.pt``.
    Raises FileNotFoundError where there is none and :class:`CheckpointError` for a file that is
    not a whole checkpoint."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {str(path)!r}: give a run folder that holds checkpoint.pt, or the file"
        )
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as error:  # noqa: BLE001 - torch/pickle/zip errors of a damaged file
        raise CheckpointError(
            f"checkpoint {str(path)!r} cannot be read ({type(error).__name__}: {str(error)[:120]}); it is "
            f"truncated or not a warpsci checkpoint (older ones are kept in {KEPT_FOLDER}/)"
        ) from None
    if not isinstance(payload, dict) or "config" not in payload:
        raise CheckpointError(f"{str(path)!r} is not a warpsci checkpoint (no run configuration in it)")
    return payload


def load_latest_checkpoint(
    run_dir: Path, map_location: str | torch.device = "cpu"
) -> tuple[dict[str, Any], Path]:
    """The newest readable checkpoint of a run folder and its path: ``checkpoint.pt``, else the
    kept ones in ``checkpoints/``, newest first (a damaged latest one costs one checkpoint)."""
    candidates = [run_dir / CHECKPOINT_NAME]
    candidates += sorted((run_dir / KEPT_FOLDER).glob("iteration-*.pt"), reverse=True)
    first_error: Exception | None = None
    for candidate in candidates:
        if not candidate.is_file():
            continue
        try:
            return load_checkpoint(candidate, map_location), candidate
        except CheckpointError as error:
            first_error = first_error or error
    if first_error is not None:
        raise first_error
    raise FileNotFoundError(
        f"no checkpoint in {str(run_dir)!r}: it is not a run folder, or its run stopped before its "
        "first checkpoint (start it again without --resume)"
    )
