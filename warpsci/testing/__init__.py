"""Checks for environments, built-in or written by users.

* :func:`check_env` checks that a vector environment keeps the API contract (spaces, dtypes,
  shapes, autoreset, determinism).
* :func:`check_parity` runs an environment's CUDA kernels (on a GPU, or Numba's CUDA simulator) and
  its CPU kernels side by side and reports the first divergence (step, env, agent, field).
"""

from warpsci.testing.env_checker import EnvCheckError, check_env
from warpsci.testing.parity import Divergence, ParityError, ParityReport, check_parity

__all__ = ["Divergence", "EnvCheckError", "ParityError", "ParityReport", "check_env", "check_parity"]
