"""Triton's cache key, remembered between processes.

Before Triton loads a compiled kernel from its disk cache it computes ``triton_key()``: a hash of
its own sources and of its compiled library, ``libtriton.so``, which is about 500 MB. Every new
process pays that once: 0.39 s on this project's development machine, about 0.4 s on the H100 hosts
(BENCHMARKS.md), a tenth of warpsci's start-up share in the time to solve Cartpole.

:func:`remember_triton_key` keeps the key in warpsci's kernel cache folder under a fingerprint of
the Triton installation: the path, size and modification time of every file in Triton's package,
and Triton's version. A reinstalled or edited Triton changes the fingerprint, and the key is
computed afresh (and kept). Triton's own warm-up pool replaces ``triton.runtime.cache.triton_key``
the same way. With ``WARPSCI_KERNEL_CACHE=0`` nothing is remembered.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from warpsci.kernel_cache import caching_enabled, kernel_cache_dir

_remembered = False


def installation_fingerprint(package_folder: str, version: str) -> str:
    """A digest of every file's path (relative), size and modification time (ns) under
    ``package_folder``, with ``version``: it changes when a file of the installation does.
    Python's byte-code caches are left out (written by imports, they follow the sources)."""
    entries = [version]
    for folder, subfolders, files in os.walk(package_folder):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            stat = os.stat(path)
            entries.append(f"{os.path.relpath(path, package_folder)}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:32]


def remember_triton_key() -> None:
    """Make ``triton.runtime.cache.triton_key`` return the key kept for this Triton installation,
    computing and keeping it the first time (once per process; nothing where Triton lacks that
    function or the kernel cache is off)."""
    global _remembered
    if _remembered or not caching_enabled():
        return
    _remembered = True
    import triton
    from triton.runtime import cache

    compute = getattr(cache, "triton_key", None)
    if compute is None:
        return
    fingerprint = installation_fingerprint(
        os.path.dirname(os.path.abspath(triton.__file__)), triton.__version__
    )
    path = kernel_cache_dir() / "triton" / f"{fingerprint}.key"
    try:
        key = path.read_text()
    except OSError:
        key = ""
    if not key:
        key = compute()
        _write_atomically(path, key)
    cache.triton_key = lambda: key


def _write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file renamed into place (a reader never sees half
    a key); a folder that cannot be written only costs the next process the hash again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
            handle.write(text)
        os.replace(handle.name, path)
    except OSError:
        pass
