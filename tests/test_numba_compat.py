"""warpsci imports on numpy 2.5, which removed ``np.row_stack`` that Numba's array code refers to."""

import subprocess
import sys

IMPORT_WITHOUT_ROW_STACK = """
import numpy
if hasattr(numpy, "row_stack"):
    del numpy.row_stack  # numpy 2.5 no longer has it
import warpsci.local_arrays  # imports numba.np.arrayobj, which registers np.row_stack
import numba.np.arrayobj
assert numpy.row_stack is numpy.vstack
print("imported")
"""


def test_warpsci_imports_where_numpy_has_no_row_stack():
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_WITHOUT_ROW_STACK], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "imported"
