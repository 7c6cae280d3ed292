"""Compatibility fixes that must run before numba-cuda compiles anything.

numba-cuda 0.30.4 still refers to ``np.row_stack``, which numpy 2.5 removed; GPU hosts that ship
numpy 2.5 therefore fail to compile any kernel. ``np.vstack`` is the function ``row_stack`` was an
alias of, so restoring the alias where it is missing is exact. Kept in this one place.
"""

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
