"""Small per-agent scratch arrays for environment code: thread-local storage on each backend.

An agent function that needs a short working list (the k nearest others found so far, say) can
keep it in an array of its own instead of in a state or observation array. Make the array's maker
once, at module level, with a size fixed there; call it inside the agent code::

    new_gaps = local_array(32, np.float32)  # module level

    @agent_function
    def observe(state, params, obs, env, agent):
        gaps = new_gaps()  # 32 float32, contents undefined
        ...

On a GPU the array is CUDA local memory (``cuda.local.array``): private to the thread, laid out so
that a warp's threads reading the same element read adjacent words, and cached in L1, where a row
of a global array per thread is a scattered cache line per thread for every access. On the CPU
backend it lives on the compiled function's stack (no allocation, no reference counting). In plain
Python and under Numba's CUDA simulator it is ``np.empty``. Use the array in the function that
made it and pass it down to the functions it calls; never return it (its storage is that
function's; the backends refuse to compile a function that does).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import from_dtype, types
from numba.core import cgutils
from numba.core.extending import lower_builtin, type_callable
from numba.np.arrayobj import make_array, populate_array


def local_array(size: int, dtype: type | np.dtype) -> Callable[[], np.ndarray]:
    """A function of no arguments that returns an uninitialised 1-D array of ``size`` elements of
    ``dtype`` (a NumPy number type), private to the calling agent. Call this at module level: the
    size is compiled into the code. The array lives in the frame of the function that calls the
    maker: pass it down, never return it. The backends refuse to compile a function that returns
    one (Numba's rule, with reference counting off as the CPU backend compiles and on CUDA, that a
    function returns no array it did not receive); a plain ``@njit`` function does not check."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"local_array's size must be a positive int, got {size!r}")
    numpy_dtype = np.dtype(dtype)
    element = from_dtype(numpy_dtype)
    # A string, not a dtype, in the closure: the kernel cache fingerprints plain constants only.
    dtype_code = numpy_dtype.str

    def new_array():
        return np.empty(size, dtype_code)

    array_type = types.Array(element, 1, "C")

    # Typed and lowered in place in the caller (no function of its own, which could not return
    # its stack, and which the CPU backend, compiling without reference counting, would refuse).
    @type_callable(new_array)
    def _type_new_array(context):
        return lambda: array_type

    @lower_builtin(new_array)
    def _lower_new_array(context, builder, signature, args):
        """An array over ``size`` elements on the stack, allocated once in the function's entry
        block (a call inside a loop does not grow the stack), owned by no memory record."""
        data_type = context.get_data_type(element)
        array = make_array(array_type)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(data_type))
        populate_array(
            array,
            data=cgutils.alloca_once(builder, data_type, size=size),
            shape=[context.get_constant(types.intp, size)],
            strides=[itemsize],
            itemsize=itemsize,
            meminfo=None,
        )
        return array._getvalue()

    _register_cuda_overload(new_array, size, element)
    new_array.__name__ = new_array.__qualname__ = f"local_array_{size}_{numpy_dtype.name}"
    return new_array


def _register_cuda_overload(new_array: Callable, size: int, element: types.Type) -> None:
    """The CUDA implementation, through numba-cuda's own overload registry (absent under the CUDA
    simulator, whose kernels call the Python version)."""
    try:
        from numba import cuda
        from numba.cuda.extending import overload as cuda_overload
    except ImportError:
        return

    @cuda_overload(new_array, target="cuda", inline="always")
    def _new_array_cuda():
        def implementation():
            return cuda.local.array(size, element)

        return implementation
