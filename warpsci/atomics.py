"""Atomic updates for environment code: one function, the right instruction on each backend.

Agents of one environment run in parallel on a GPU, so a value that many of them combine (the
nearest agent to a point, a count, a total) needs an atomic update there. On the CPU backend the
agents of an environment run one after another on one core, so a plain read-modify-write is exact.
Numba's CUDA simulator runs compiled CPU code under Python's global lock, where the same holds.

Call them from ``@agent_function`` code like any Numba function::

    atomic_min(state.nearest_key, env, my_key)

Results do not depend on the order the agents arrive in (min and max are order-free; integer sums
too). A float ``atomic_add`` is exact on the CPU but rounds in arrival order on a GPU.
``atomic_fetch_add`` also returns the value it replaced: agents that each take a slot of a shared
list (``slot = atomic_fetch_add(fill, cell, 1)``) get distinct slots, but which agent gets which
depends on the arrival order on a GPU (sort the list afterwards where the order matters).
"""

from __future__ import annotations

from numba.core.extending import overload


def atomic_min(array, index, value):
    """``array[index] = min(array[index], value)``, atomically on a GPU; returns nothing."""
    if value < array[index]:
        array[index] = value


def atomic_max(array, index, value):
    """``array[index] = max(array[index], value)``, atomically on a GPU; returns nothing."""
    if value > array[index]:
        array[index] = value


def atomic_add(array, index, value):
    """``array[index] += value``, atomically on a GPU; returns nothing."""
    array[index] += value


def atomic_fetch_add(array, index, value):
    """``old = array[index]; array[index] = old + value; return old``, atomically on a GPU."""
    old = array[index]
    array[index] = old + value
    return old


@overload(atomic_min, target="cpu")
def _atomic_min_cpu(array, index, value):
    return atomic_min


@overload(atomic_max, target="cpu")
def _atomic_max_cpu(array, index, value):
    return atomic_max


@overload(atomic_add, target="cpu")
def _atomic_add_cpu(array, index, value):
    return atomic_add


@overload(atomic_fetch_add, target="cpu")
def _atomic_fetch_add_cpu(array, index, value):
    return atomic_fetch_add


def _register_cuda_overloads() -> None:
    """The CUDA implementations, through numba-cuda's own overload registry (absent under the CUDA
    simulator, whose kernels call the CPU versions)."""
    try:
        from numba import cuda
        from numba.cuda.extending import overload as cuda_overload
    except ImportError:
        return

    @cuda_overload(atomic_min, target="cuda")
    def _atomic_min_cuda(array, index, value):
        def implementation(array, index, value):
            cuda.atomic.min(array, index, value)

        return implementation

    @cuda_overload(atomic_max, target="cuda")
    def _atomic_max_cuda(array, index, value):
        def implementation(array, index, value):
            cuda.atomic.max(array, index, value)

        return implementation

    @cuda_overload(atomic_add, target="cuda")
    def _atomic_add_cuda(array, index, value):
        def implementation(array, index, value):
            cuda.atomic.add(array, index, value)

        return implementation

    @cuda_overload(atomic_fetch_add, target="cuda")
    def _atomic_fetch_add_cuda(array, index, value):
        def implementation(array, index, value):
            return cuda.atomic.add(array, index, value)

        return implementation


_register_cuda_overloads()
