"""Typed, range-checked configuration fields, whichever way a value arrives (YAML, CLI, Python).

YAML reads ``1e-3`` as a string and ``"false"`` is a string too; the CLI hands every value over as
text. :func:`coerce` turns such values into the field's type where that is unambiguous (``"1e-3"``
to 0.001, ``"false"`` to False, ``"64,64"`` to ``(64, 64)``) and refuses anything else by the
field's name, and :data:`RANGES` says what each numeric field accepts. :func:`field_docs` reads the
fields' docstrings (the string under each field), which the CLI shows as each flag's help.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import math
import textwrap
import types
import typing
from collections.abc import Callable
from typing import Any

import yaml

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_NONE = {"none", "null", "~"}


def _positive(value: float) -> bool:
    return value > 0


def _non_negative(value: float) -> bool:
    return value >= 0


def _unit_interval(value: float) -> bool:
    return 0.0 <= value <= 1.0


#: What a numeric field accepts beyond its type: ``name: (predicate, description)``.
RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "seed": (lambda value: 0 <= value < 2**63, "an integer in [0, 2**63)"),
    "num_envs": (lambda value: 1 <= value < 2**31, "an integer in [1, 2**31)"),
    "num_steps": (_positive, "a positive integer"),
    "total_timesteps": (_positive, "a positive integer"),
    "num_minibatches": (_positive, "a positive integer"),
    "update_epochs": (_positive, "a positive integer"),
    "learning_rate": (_positive, "a positive number"),
    "gamma": (_unit_interval, "a number in [0, 1]"),
    "gae_lambda": (_unit_interval, "a number in [0, 1]"),
    "clip_coef": (_positive, "a positive number"),
    "ent_coef": (_non_negative, "a number >= 0"),
    "ent_coef_final": (_non_negative, "a number >= 0 (or null)"),
    "learning_rate_final": (_non_negative, "a number >= 0"),
    "vf_coef": (_non_negative, "a number >= 0"),
    "max_grad_norm": (_positive, "a positive number"),
    "target_kl": (_positive, "a positive number (or null)"),
    "neg_pos_env_ratio": (_positive, "a positive number (or null: train on every row)"),
    "checkpoint_every": (_non_negative, "an integer >= 0 (0: off)"),
    "checkpoint_every_s": (_non_negative, "a number of seconds >= 0 (0: off)"),
    "keep_checkpoints": (_positive, "an integer >= 1"),
}


def coerce(name: str, value: Any, annotation: Any) -> Any:
    """``value`` as the type ``annotation`` names (see the module docstring), or a ValueError that
    names the field, what it accepts and what it got."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [option for option in arguments if option is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE):
            return None
        return coerce(name, value, options[0])
    if annotation is bool:
        return _as_bool(name, value)
    if annotation is int:
        return _as_int(name, value)
    if annotation is float:
        return _as_float(name, value)
    if annotation is str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}")
        return value
    if origin is tuple:
        items = value
        if isinstance(value, str):
            items = [item for item in value.replace(",", " ").split() if item]
        if isinstance(items, (int, float)) and not isinstance(items, bool):
            items = [items]
        if not isinstance(items, (list, tuple)) or not items:
            raise ValueError(f"{name} must be a list of integers such as [64, 64], got {value!r}")
        return tuple(_as_int(name, item) for item in items)
    if origin is dict:
        mapping = yaml.safe_load(value) if isinstance(value, str) else value
        if mapping is None:
            mapping = {}
        if not isinstance(mapping, dict):
            raise ValueError(f"{name} must be a mapping such as {{key: value}}, got {value!r}")
        return mapping
    return value


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _as_float(name: str, value: Any) -> float:
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return number


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    number: float | None = None
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                number = None
    if number is None or not math.isfinite(number) or number != int(number):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(number)


def check_range(name: str, value: Any) -> None:
    """Raise a ValueError when ``value`` is outside what :data:`RANGES` allows for ``name``."""
    if name in RANGES and value is not None:
        accepts, description = RANGES[name]
        if not accepts(value):
            raise ValueError(f"{name} must be {description}, got {value!r}")


def unknown_key_message(unknown: list[str], accepted: list[str]) -> str:
    """One line naming the unknown keys, the nearest accepted one for each, and where to look."""
    parts = []
    for key in unknown:
        nearest = difflib.get_close_matches(key, accepted, n=1)
        parts.append(f"{key!r}" + (f" (did you mean {nearest[0]!r}?)" if nearest else ""))
    return f"unknown config key(s) {', '.join(parts)}; `warpsci train --help` lists every key"


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of the dataclass ``cls``, whitespace collapsed and Sphinx
    markup (double backticks, ``:mod:`` roles) removed."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, following in zip(body, body[1:], strict=False):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                text = " ".join(str(following.value.value).split())
                for role in (":mod:", ":class:", ":data:", ":func:", ":meth:"):
                    text = text.replace(role, "")
                docs[statement.target.id] = text.replace("``", "").replace("`", "")
    return docs
