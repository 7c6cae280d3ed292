"""Run a script in a fresh Python interpreter, with the repository importable.

Numba's CUDA simulator must be switched on before numba is imported, and the kernel cache can only
be tested across processes, so several tests run their checks in a new interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_script(
    script: str, *, simulator: bool = False, timeout: float = 600, **environment: str
) -> subprocess.CompletedProcess:
    """Run ``script`` with ``python -c`` from the repository root; ``simulator`` sets
    ``NUMBA_ENABLE_CUDASIM=1``, and ``environment`` adds further variables."""
    variables = {**os.environ, **environment}
    if simulator:
        variables["NUMBA_ENABLE_CUDASIM"] = "1"
    variables["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT)] + ([variables["PYTHONPATH"]] if variables.get("PYTHONPATH") else [])
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        env=variables,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
