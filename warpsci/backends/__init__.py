"""Compilers that turn an :class:`~warpsci.environment.EnvironmentDefinition` into runnable kernels.

:mod:`.stages` holds the order of a reset and a step, written once; :mod:`.cpu` walks it in a
``numba.njit(parallel=True)`` loop over environments and :mod:`.cuda` in CUDA threads.
"""

from warpsci.backends.buffers import EnvBuffers

__all__ = ["EnvBuffers"]
