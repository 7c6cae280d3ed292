"""``warpsci.local_arrays``: a per-agent scratch array that compiled CPU code keeps on its stack (no
allocation, so the CPU backend's functions stay free of reference counting), that plain Python
(and so Numba's CUDA simulator) makes with ``np.empty``, and whose size is checked."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from warpsci.local_arrays import local_array

new_list = local_array(6, np.float32)
new_ids = local_array(6, np.int32)


@njit
def sorted_smallest(values, out_values, out_ids):
    """The 6 smallest of ``values`` in increasing order, by insertion into the local arrays."""
    gaps, ids = new_list(), new_ids()
    count = 0
    for index in range(values.shape[0]):
        value = values[index]
        if count == 6 and value >= gaps[5]:
            continue
        position = min(count, 5)
        count = min(count + 1, 6)
        while position > 0 and gaps[position - 1] > value:
            gaps[position], ids[position] = gaps[position - 1], ids[position - 1]
            position -= 1
        gaps[position], ids[position] = value, index
    for slot in range(count):
        out_values[slot], out_ids[slot] = gaps[slot], ids[slot]
    return count


@njit
def every_row(rows, out_values, out_ids):
    """``sorted_smallest`` of each row: the local arrays are made again (and reused) per call."""
    for row in range(rows.shape[0]):
        sorted_smallest(rows[row], out_values[row], out_ids[row])


@pytest.mark.parametrize("compiled", [True, False])
def test_local_arrays_hold_a_working_list(compiled):
    rng = np.random.default_rng(0)
    rows = rng.random((200, 40)).astype(np.float32)
    out_values = np.zeros((200, 6), np.float32)
    out_ids = np.zeros((200, 6), np.int64)
    if compiled:
        every_row(rows, out_values, out_ids)
    else:
        for row in range(rows.shape[0]):
            sorted_smallest.py_func(rows[row], out_values[row], out_ids[row])
    expected_ids = np.argsort(rows, axis=1, kind="stable")[:, :6]
    np.testing.assert_array_equal(out_ids, expected_ids)
    np.testing.assert_array_equal(out_values, np.take_along_axis(rows, expected_ids, axis=1))


def test_local_arrays_compile_without_reference_counting():
    """As the CPU backend compiles environment code (``_nrt=False``), where a function may not
    return an array it made."""
    no_counting = njit(_nrt=False)(sorted_smallest.py_func)
    out_values, out_ids = np.zeros(6, np.float32), np.zeros(6, np.int64)
    assert no_counting(np.arange(9, 0, -1).astype(np.float32), out_values, out_ids) == 6
    np.testing.assert_array_equal(out_values, np.arange(1, 7, dtype=np.float32))
    np.testing.assert_array_equal(out_ids, np.arange(8, 2, -1))


def test_a_function_that_returns_its_local_array_does_not_compile_for_the_backends():
    """Its storage would be freed on return; compiled as the CPU backend compiles (and CUDA
    device code), Numba refuses to return an array the function did not receive."""

    def escape():
        gaps = new_list()
        gaps[:] = 7.0
        return gaps

    helper = njit(escape)

    def caller():  # an environment function calling a helper that returns one
        return helper()[0]

    for function in (escape, caller):
        with pytest.raises(TypingError, match="Only accept returning of array passed into the function"):
            njit(_nrt=False)(function)()


def test_compiled_local_arrays_are_on_the_stack():
    sorted_smallest(np.arange(10, dtype=np.float32), np.zeros(6, np.float32), np.zeros(6, np.int64))
    llvm = "".join(sorted_smallest.inspect_llvm().values())
    assert "NRT_MemInfo_alloc" not in llvm and "alloca [6 x float]" in llvm


@pytest.mark.parametrize("size", [0, -1, 2.0, True])
def test_a_size_that_is_not_a_positive_int_is_refused(size):
    with pytest.raises(ValueError, match="local_array's size must be a positive int"):
        local_array(size, np.float32)
