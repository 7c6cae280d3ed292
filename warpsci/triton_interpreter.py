"""Whether Triton runs its kernels on the CPU, in its interpreter (``TRITON_INTERPRET``), read
without importing Triton (a second of start-up that CPU runs never need)."""

from __future__ import annotations

import os

#: The values of an environment variable that Triton reads as on (its ``getenv_bool``), any case.
TRUE_WORDS = ("1", "true", "on", "yes")


def interpreting() -> bool:
    """Whether ``TRITON_INTERPRET`` is on (``1``, ``true``, ``on`` or ``yes``, any case)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in TRUE_WORDS
