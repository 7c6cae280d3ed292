"""Triton's cache key, remembered between processes.

Before Triton loads a compiled kernel from its disk cache it computes ``triton_key()``: a hash of
its own sources and of its compiled library, ``libtriton.so``, which is about 500 MB. Every new
process pays that once: 0.39 s on this project's development machine, about 0.4 s on the H100 hosts
(BENCHMARKS.md), a tenth of warpsci's start-up share in the time to solve Cartpole.

:func:`remember_triton_key` keeps the key in warpsci's kernel cache folder under a fingerprint of
the Triton installation: the path, size, times and inode of every file in Triton's package, and
Triton's version; a kept key that is not of Triton's form is computed afresh. A reinstalled or
edited Triton changes the fingerprint, and the key is computed afresh (and kept). Triton's own
warm-up pool replaces ``triton.runtime.cache.triton_key`` the same way. With
``WARPSCI_KERNEL_CACHE=0`` nothing is remembered.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from warpsci.kernel_cache import caching_enabled, kernel_cache_dir

_remembered = False


def installation_fingerprint(package_folder: str, version: str) -> str:
    """A digest of every file's path (relative), size, modification and change times (ns) and
    inode under ``package_folder``, symbolic links to folders followed (as Triton's own hash
    follows them into a source install's backends), with ``version``: it changes when a file of
    the installation does. Python's byte-code caches are left out (written by imports, they follow
    the sources)."""
    entries = [version]
    visited = set()
    for folder, subfolders, files in os.walk(package_folder, followlinks=True):
        real = os.path.realpath(folder)
        if real in visited:  # a link back up the tree
            subfolders[:] = []
            continue
        visited.add(real)
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            stat = os.stat(path)
            entries.append(
                f"{os.path.relpath(path, package_folder)}:{stat.st_size}:{stat.st_mtime_ns}:"
                f"{stat.st_ctime_ns}:{stat.st_ino}"
            )
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:32]


def is_triton_key(text: str, version: str) -> bool:
    """Whether ``text`` has the form of Triton's key: its version, then SHA-256 digests joined by
    ``-`` (a file cut short or overwritten is computed afresh)."""
    return (
        text.startswith(version)
        and re.fullmatch(r"[0-9a-f]{64}(-[0-9a-f]{64})*", text[len(version) :]) is not None
    )


def remember_triton_key() -> None:
    """Make ``triton.runtime.cache.triton_key`` return the key kept for this Triton installation,
    computing and keeping it the first time (once per process; nothing where Triton lacks that
    function or the kernel cache is off). Any failure to read the installation or the kept key
    leaves Triton's own function in place: a speed-up must never stop the kernels loading."""
    global _remembered
    if _remembered or not caching_enabled():
        return
    _remembered = True
    import triton
    from triton.runtime import cache

    compute = getattr(cache, "triton_key", None)
    if compute is None:
        return
    try:
        folder = os.path.dirname(os.path.abspath(triton.__file__))
        path = kernel_cache_dir() / "triton" / f"{installation_fingerprint(folder, triton.__version__)}.key"
        try:
            key = path.read_text()
        except (OSError, ValueError):
            key = ""
        if not is_triton_key(key, triton.__version__):
            key = compute()
            _write_atomically(path, key)
    except (OSError, ValueError):
        return
    cache.triton_key = lambda: key


def _write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` through :func:`warpsci.checkpoint.atomic_write_bytes` (a reader never
    sees half a key), readable by all (a shared cache folder); a folder that cannot be written only
    costs the next process the hash again."""
    from warpsci.checkpoint import atomic_write_bytes

    try:
        atomic_write_bytes(path, text.encode())
        os.chmod(path, 0o644)
    except OSError:
        pass
