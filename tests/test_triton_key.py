"""Triton's cache key kept between processes (``warpsci.triton_key``)."""

from __future__ import annotations

import os

import pytest

triton_cache = pytest.importorskip("triton.runtime.cache")

from warpsci import triton_key  # noqa: E402


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A kernel cache folder of its own, and a process that has not remembered a key yet."""
    monkeypatch.setenv("WARPSCI_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.delenv("WARPSCI_KERNEL_CACHE", raising=False)
    monkeypatch.setattr(triton_key, "_remembered", False)
    monkeypatch.setattr(triton_cache, "triton_key", triton_cache.triton_key)
    return tmp_path


def test_the_remembered_key_is_tritons_own(fresh):
    expected = triton_cache.triton_key()
    triton_key.remember_triton_key()
    assert triton_cache.triton_key() == expected
    [kept] = (fresh / "kernels" / "triton").glob("*.key")
    assert kept.read_text() == expected


def test_a_later_process_reads_the_key_instead_of_hashing(fresh, monkeypatch):
    calls = []

    def first() -> str:
        calls.append("first")
        return "key-1"

    monkeypatch.setattr(triton_cache, "triton_key", first)
    triton_key.remember_triton_key()
    triton_key.remember_triton_key()  # once per process
    assert triton_cache.triton_key() == "key-1" and calls == ["first"]

    def must_not_run() -> str:
        raise AssertionError("the key was computed again")

    monkeypatch.setattr(triton_key, "_remembered", False)  # as a new process
    monkeypatch.setattr(triton_cache, "triton_key", must_not_run)
    triton_key.remember_triton_key()
    assert triton_cache.triton_key() == "key-1"


def test_nothing_is_remembered_with_the_kernel_cache_off(fresh, monkeypatch):
    monkeypatch.setenv("WARPSCI_KERNEL_CACHE", "0")

    def own() -> str:
        return "own"

    monkeypatch.setattr(triton_cache, "triton_key", own)
    triton_key.remember_triton_key()
    assert triton_cache.triton_key is own
    assert not (fresh / "kernels").exists()


def test_the_fingerprint_follows_the_files_but_not_byte_code(tmp_path):
    package = tmp_path / "package"
    (package / "__pycache__").mkdir(parents=True)
    source = package / "module.py"
    source.write_text("x = 1\n")
    before = triton_key.installation_fingerprint(str(package), "1.0")
    (package / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"\0" * 8)
    assert triton_key.installation_fingerprint(str(package), "1.0") == before, "byte code counted"
    assert triton_key.installation_fingerprint(str(package), "2.0") != before, "version not counted"
    source.write_text("x = 22\n")
    assert triton_key.installation_fingerprint(str(package), "1.0") != before, "a changed file not seen"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    changed = triton_key.installation_fingerprint(str(package), "1.0")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2))
    assert triton_key.installation_fingerprint(str(package), "1.0") != changed, "a newer time not seen"
