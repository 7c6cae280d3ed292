"""Compiled kernels kept on disk, so that a new process loads them instead of compiling (seconds).

warpsci builds each environment's kernels as closures over the environment's compiled functions.
Numba's own cache keys a closure by pickling what it closes over, and a pickled Numba function
carries a random id, so that key changes in every process and the cache never hits. Here the key is
instead a fingerprint of the source: the contents of every file that holds a function the kernel
reaches (through closures and globals, recursively), the names of those functions, the values of
the plain constants they close over, and the versions of Python, NumPy, Numba and numba-cuda.
Editing any of those files compiles afresh. Kernels that reach a function without a source file
(typed at an interactive prompt) are compiled in memory, as without a cache.

The files live in a user cache folder, never inside an installed package: ``WARPSCI_CACHE_DIR``,
else ``NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/warpsci/kernels`` (``~/.cache/warpsci/kernels``), one
sub-folder per source folder. Set ``WARPSCI_KERNEL_CACHE=0`` to compile in memory only. Data never
enters a key: array params reach kernels as arguments, so their values are not compiled in.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba.core.caching import FunctionCache, IndexDataCacheFile

_PLAIN_CONSTANTS = (bool, int, float, str, type(None), np.number, np.bool_)

#: Called as ``callback(label, target)`` just before a kernel that the disk cache does not hold is
#: compiled (:func:`announce_compiles`); None says nothing.
_compile_callback: Callable[[str, str], None] | None = None
#: What the disk cache did in this process: kernels ``loaded`` from it and ``compiled`` (and saved).
_counts = {"loaded": 0, "compiled": 0}


def announce_compiles(callback: Callable[[str, str], None] | None) -> None:
    """Call ``callback(label, target)`` (``target`` ``"CPU"`` or ``"CUDA"``) before each cached kernel
    is compiled because the disk cache does not hold it yet, so a cold first run can say what it is
    compiling; None stops. Kernels compiled in memory only (the cache off, or a function without a
    source file) are not announced."""
    global _compile_callback
    _compile_callback = callback


def cache_counts() -> dict[str, int]:
    """How many kernels this process has ``loaded`` from the disk cache and ``compiled`` into it."""
    return dict(_counts)


def _looked_up(label: str, target: str, found: bool) -> None:
    _counts["loaded" if found else "compiled"] += 1
    if not found and _compile_callback is not None:
        _compile_callback(label, target)


def caching_enabled() -> bool:
    """False when the environment variable ``WARPSCI_KERNEL_CACHE`` is ``0``."""
    return os.environ.get("WARPSCI_KERNEL_CACHE", "1") != "0"


def kernel_cache_dir() -> Path:
    """Where compiled kernels are kept (see the module docstring)."""
    for variable in ("WARPSCI_CACHE_DIR", "NUMBA_CACHE_DIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "warpsci" / "kernels"


def _relocate(cache: Any, py_func: Callable) -> None:
    """Point a Numba cache object at :func:`kernel_cache_dir` instead of ``__pycache__``."""
    source_folder = os.path.dirname(os.path.abspath(inspect.getsourcefile(py_func) or ""))
    label = os.path.basename(source_folder) or "root"
    digest = hashlib.sha256(source_folder.encode()).hexdigest()[:12]
    path = kernel_cache_dir() / f"{label}-{digest}"
    path.mkdir(parents=True, exist_ok=True)
    cache._cache_path = str(path)
    cache._cache_file = IndexDataCacheFile(
        cache_path=str(path),
        filename_base=cache._impl.filename_base,
        source_stamp=cache._impl.locator.get_source_stamp(),
    )


def source_fingerprint(function: Callable) -> str | None:
    """A digest of everything that determines the compiled code of ``function`` (a Python function
    or a Numba dispatcher), or None if some reached function has no source file."""
    files: set[str] = set()
    constants: list[str] = []
    seen: set[int] = set()
    pending: list[Any] = [function]
    while pending:
        item = pending.pop()
        python_function = item if isinstance(item, types.FunctionType) else item.py_func
        if id(python_function) in seen:
            continue
        seen.add(id(python_function))
        path = inspect.getsourcefile(python_function)
        if path is None or not os.path.isfile(path):
            return None
        if python_function.__module__ not in sys.modules:
            # A module loaded from a path without a name in sys.modules: Numba would pickle its
            # functions as '<dynamic>', an entry no later process can load. Compile in memory.
            return None
        files.add(path)
        constants.append(f"{python_function.__module__}.{python_function.__qualname__}")
        for index, cell in enumerate(python_function.__closure__ or ()):
            value = cell.cell_contents
            if _is_function(value):
                pending.append(value)
            elif isinstance(value, _PLAIN_CONSTANTS):
                constants.append(f"{python_function.__qualname__}[{index}]={value!r}")
            else:
                return None
        for name in _global_names(python_function.__code__):
            value = python_function.__globals__.get(name)
            if _is_function(value):
                pending.append(value)
    digest = hashlib.sha256()
    versions = (sys.version, np.__version__, numba.__version__, _numba_cuda_version())
    digest.update(repr(versions).encode())
    # Contents, not modification times: touching a file without changing it keeps the entries.
    for file_digest in sorted(_file_digest(path) for path in files):
        digest.update(file_digest)
    for constant in sorted(constants):
        digest.update(constant.encode())
    return digest.hexdigest()


def cached_njit(label: str | None = None, **options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(**options)`` with the source-keyed disk cache; ``label`` names the kernel in
    compile notices (default: the function's name)."""

    def decorate(function: Callable) -> Any:
        dispatcher = numba.njit(**options)(function)
        fingerprint = source_fingerprint(function) if caching_enabled() else None
        if fingerprint is not None:
            dispatcher._cache = _SourceKeyedFunctionCache(function, fingerprint, label or function.__name__)
        return dispatcher

    return decorate


def cached_cuda_jit(function: Callable, max_registers: int | None = None, label: str | None = None) -> Any:
    """``numba.cuda.jit(function)`` with the source-keyed disk cache (not under the simulator);
    ``max_registers`` caps the registers per thread (default: the compiler's choice); ``label``
    names the kernel in compile notices (default: the function's name). Under the simulator it
    first installs :mod:`warpsci.simulated_blocks`."""
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        from warpsci import simulated_blocks

        simulated_blocks.install()
    options = {} if max_registers is None or config.ENABLE_CUDASIM else {"max_registers": max_registers}
    kernel = cuda.jit(function, **options)
    if config.ENABLE_CUDASIM or not caching_enabled():
        return kernel
    fingerprint = source_fingerprint(function)
    if fingerprint is not None:
        fingerprint += f"-registers{max_registers}"
        kernel._cache = _source_keyed_cuda_cache_class()(function, fingerprint, label or function.__name__)
    return kernel


def describe_signature(signature: Any) -> str:
    """A stable text for Numba argument types: named tuples spelled out with their field names
    (their classes are built at run time, so their pickles differ between processes)."""
    arguments = signature if isinstance(signature, tuple) else getattr(signature, "args", (signature,))
    return "(" + ", ".join(_describe_type(argument) for argument in arguments) + ")"


def _describe_type(numba_type: Any) -> str:
    if isinstance(numba_type, numba.types.BaseNamedTuple):
        inner = ", ".join(
            f"{name}: {_describe_type(item)}"
            for name, item in zip(numba_type.fields, numba_type.types, strict=True)
        )
        return f"{numba_type.instance_class.__name__}({inner})"
    return str(numba_type)


class _SourceKeyedFunctionCache(FunctionCache):
    """Numba's CPU cache, keyed by the source fingerprint instead of pickled closure cells."""

    def __init__(self, py_func: Callable, fingerprint: str, label: str) -> None:
        self._fingerprint, self._label = fingerprint, label
        super().__init__(py_func)
        _relocate(self, py_func)

    def _index_key(self, sig: Any, codegen: Any) -> tuple:
        return (describe_signature(sig), codegen.magic_tuple(), self._fingerprint)

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        overload = super().load_overload(sig, target_context)
        _looked_up(self._label, "CPU", overload is not None)
        return overload


@functools.cache
def _source_keyed_cuda_cache_class() -> type:
    from numba.cuda.dispatcher import CUDACache

    class SourceKeyedCUDACache(CUDACache):
        """numba-cuda's cache, keyed by the source fingerprint instead of pickled closure cells."""

        def __init__(self, py_func: Callable, fingerprint: str, label: str) -> None:
            self._fingerprint, self._label = fingerprint, label
            super().__init__(py_func)
            _relocate(self, py_func)

        def load_overload(self, sig: Any, target_context: Any) -> Any:
            overload = super().load_overload(sig, target_context)
            _looked_up(self._label, "CUDA", overload is not None)
            return overload

        def _index_key(self, sig: Any, codegen: Any) -> tuple:
            key = (describe_signature(sig), codegen.magic_tuple(), self._fingerprint)
            if self._launch_config_key is not None:
                key += (("launch_config", self._launch_config_key),)
            return key

    return SourceKeyedCUDACache


def _file_digest(path: str) -> bytes:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).digest()


def _is_function(value: Any) -> bool:
    return isinstance(value, types.FunctionType) or isinstance(
        getattr(value, "py_func", None), types.FunctionType
    )


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def _numba_cuda_version() -> str:
    try:
        import numba_cuda

        return numba_cuda.__version__
    except ImportError:
        return "none"
