"""Compatibility fixes that must run before Numba's array code is imported.

numba-cuda 0.30.4 (and numba's own ``numba.np.arrayobj``) still refer to ``np.row_stack``, which
numpy 2.5 removed; on hosts that ship numpy 2.5 the first import of that array code fails. This
module is therefore imported first of all, by ``warpsci/__init__.py``, which runs before any
submodule. ``np.vstack`` is the function ``row_stack`` was an alias of, so restoring the alias
where it is missing is exact. Kept in this one place.
"""

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
