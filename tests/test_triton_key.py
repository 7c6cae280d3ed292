"""Triton's cache key kept between processes (``warpsci.triton_key``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

triton_cache = pytest.importorskip("triton.runtime.cache")
import triton  # noqa: E402

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
    """Against Triton's own function in a fresh process (in this one an imported kernel module may
    already have replaced it)."""
    own = subprocess.run(
        [sys.executable, "-c", "from triton.runtime import cache; print(cache.triton_key(), end='')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert triton_key.is_triton_key(own, triton.__version__)
    triton_key.remember_triton_key()
    assert triton_cache.triton_key() == own
    [kept] = (fresh / "kernels" / "triton").glob("*.key")
    assert kept.read_text() == own


def test_a_later_process_reads_the_key_instead_of_hashing(fresh, monkeypatch):
    calls = []
    first_key = f"{triton.__version__}{'a' * 64}-{'b' * 64}"

    def first() -> str:
        calls.append("first")
        return first_key

    monkeypatch.setattr(triton_cache, "triton_key", first)
    triton_key.remember_triton_key()
    triton_key.remember_triton_key()  # once per process
    assert triton_cache.triton_key() == first_key and calls == ["first"]

    def must_not_run() -> str:
        raise AssertionError("the key was computed again")

    monkeypatch.setattr(triton_key, "_remembered", False)  # as a new process
    monkeypatch.setattr(triton_cache, "triton_key", must_not_run)
    triton_key.remember_triton_key()
    assert triton_cache.triton_key() == first_key


@pytest.mark.parametrize("content", [b"", b"3.", b"\xff\xfe not text", b"garbage-0123"])
def test_a_kept_key_not_of_tritons_form_is_computed_again(fresh, monkeypatch, content):
    good = f"{triton.__version__}{'c' * 64}"
    monkeypatch.setattr(triton_cache, "triton_key", lambda: good)
    triton_key.remember_triton_key()
    [kept] = (fresh / "kernels" / "triton").glob("*.key")
    kept.write_bytes(content)
    monkeypatch.setattr(triton_key, "_remembered", False)
    triton_key.remember_triton_key()
    assert triton_cache.triton_key() == good
    assert kept.read_text() == good


def test_an_unreadable_installation_leaves_tritons_own_function(fresh, monkeypatch):
    def vanished(folder: str, version: str) -> str:
        raise FileNotFoundError("a file went away during the walk")

    def own() -> str:
        return "own"

    monkeypatch.setattr(triton_key, "installation_fingerprint", vanished)
    monkeypatch.setattr(triton_cache, "triton_key", own)
    triton_key.remember_triton_key()  # no exception: the kernels must still load
    assert triton_cache.triton_key is own


def test_nothing_is_remembered_with_the_kernel_cache_off(fresh, monkeypatch):
    monkeypatch.setenv("WARPSCI_KERNEL_CACHE", "0")

    def own() -> str:
        return "own"

    monkeypatch.setattr(triton_cache, "triton_key", own)
    triton_key.remember_triton_key()
    assert triton_cache.triton_key is own
    assert not (fresh / "kernels").exists()


def test_the_fingerprint_follows_the_files_and_linked_folders_but_not_byte_code(tmp_path):
    package = tmp_path / "package"
    (package / "__pycache__").mkdir(parents=True)
    source = package / "module.py"
    source.write_text("x = 1\n")
    outside = tmp_path / "third_party" / "backend"
    outside.mkdir(parents=True)
    (outside / "compiler.py").write_text("y = 1\n")
    (package / "backends").symlink_to(outside, target_is_directory=True)
    (outside / "loop").symlink_to(package, target_is_directory=True)  # a link back up the tree

    def fingerprint(version: str = "1.0") -> str:
        return triton_key.installation_fingerprint(str(package), version)

    before = fingerprint()
    (package / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"\0" * 8)
    assert fingerprint() == before, "byte code counted"
    assert fingerprint("2.0") != before, "version not counted"
    (outside / "compiler.py").write_text("y = 22\n")
    changed = fingerprint()
    assert changed != before, "a file in a linked folder not seen"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    assert fingerprint() != changed, "a newer time not seen"


def test_only_keys_of_tritons_form_are_taken():
    digest = "0123456789abcdef" * 4
    assert triton_key.is_triton_key(f"3.6.0{digest}-{digest}", "3.6.0")
    assert not triton_key.is_triton_key(f"3.6.0{digest}-{digest[:10]}", "3.6.0"), "cut short"
    assert not triton_key.is_triton_key(f"3.5.0{digest}", "3.6.0"), "another version"
    assert not triton_key.is_triton_key("3.6.0", "3.6.0"), "no digest"
