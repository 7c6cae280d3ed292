"""Compilers that turn an :class:`~warpsci.environment.EnvironmentDefinition` into runnable kernels.

:mod:`.kernel_parts` holds the per-agent pieces shared by both backends; :mod:`.cpu` runs them in a
``numba.njit(parallel=True)`` loop over environments and :mod:`.cuda` in CUDA threads.
"""

from warpsci.backends.buffers import EnvBuffers

__all__ = ["EnvBuffers"]
