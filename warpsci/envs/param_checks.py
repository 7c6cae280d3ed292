"""Checks shared by environments' params dataclasses (one message wording for every environment)."""

from __future__ import annotations

import numbers


def check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> None:
    """Raise a ValueError unless ``value`` is an integer (not a bool) in ``[minimum, maximum]``."""
    integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not integral or value < minimum or (maximum is not None and value > maximum):
        accepted = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {accepted}, got {value!r}")
