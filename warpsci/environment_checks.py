"""An environment's functions checked before Numba sees them, and Numba's compile errors said in
one paragraph that names the function, the line and the likely fix.

Numba answers a wrong signature, a missing ``return`` or a per-agent field indexed by ``env`` alone
with a typing report of a hundred lines through warpsci's own stage functions. The checks here run
when an :class:`~warpsci.environment.EnvironmentDefinition` is built (argument counts, and a value
returned where one is needed); :func:`raise_named` turns what still fails in compilation
into an :class:`EnvironmentCompileError` (a ``TypeError``: the CLI prints it as one line;
``warpsci --debug`` shows Numba's report).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable

#: The arguments warpsci passes to each kind of environment function, in order.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "reset_environment": ("state", "params", "env", "key"),
    "reset_agent": ("state", "params", "env", "agent", "key"),
    "step_agent": ("state", "params", "actions", "env", "agent", "phase", "key"),
    "AgentStage": ("state", "params", "actions", "env", "agent", "key"),
    "EnvironmentStage": ("state", "params", "actions", "rewards", "env", "key"),
    "observe_agent": ("state", "params", "obs", "env", "agent"),
    "is_terminal": ("state", "params", "env"),
    "is_agent_done": ("state", "params", "env", "agent"),
    "action_mask": ("state", "params", "mask", "env", "agent"),
}

#: What each kind of function that must return a value returns.
RETURNS: dict[str, str] = {
    "step_agent": "the agent's reward for the step (a number)",
    "AgentStage": "the agent's reward for the stage (a number)",
    "is_terminal": "whether the episode has ended (a bool)",
    "is_agent_done": "whether the agent leaves the game (a bool)",
}


class EnvironmentCompileError(TypeError):
    """An environment function that Numba cannot compile, named with its line."""


def python_function(function: Callable) -> Callable:
    """The Python function behind a Numba dispatcher (or the function itself)."""
    return getattr(function, "py_func", function)


def call_form(kind: str, name: str) -> str:
    return f"{name}({', '.join(SIGNATURES[kind])})"


def check_function(environment: str, kind: str, function: Callable) -> None:
    """Raise ``TypeError`` when ``function`` (a ``kind`` of environment function) cannot take the
    arguments warpsci passes, or never returns a value where one is needed."""
    plain = python_function(function)
    name = getattr(plain, "__name__", kind)
    try:
        signature = inspect.signature(plain)
    except (TypeError, ValueError):
        return
    parameters = list(signature.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return
    expected = SIGNATURES[kind]
    if len(parameters) != len(expected):
        given = f"{name}({', '.join(p.name for p in parameters)})"
        role = "a step stage" if kind.endswith("Stage") else kind
        raise TypeError(
            f"{environment}: {given} takes {len(parameters)} argument(s), but warpsci calls {role} as "
            f"{call_form(kind, name)}: change its arguments to these {len(expected)}"
        )
    if kind in RETURNS and not _returns_a_value(plain):
        raise TypeError(
            f"{environment}: {name} never returns a value; as {kind} it must return {RETURNS[kind]}: "
            "end it with a return statement"
        )


def _returns_a_value(function: Callable) -> bool:
    """Whether the function's source has a ``return <value>`` (True when the source is unknown)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return True
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    pending = list(definition.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # a nested function's returns are its own
        pending.extend(ast.iter_child_nodes(node))
    return False


# ----------------------------------------------------------------------------- compile errors

_LOCATION = re.compile(r'File "([^"]+)", line (\d+)')


def _is_numba_error(error: BaseException) -> bool:
    return type(error).__module__.startswith(("numba.", "numba_cuda.")) and type(error).__name__ in (
        "TypingError",
        "LoweringError",
        "UnsupportedError",
        "NumbaError",
    )


def explain(environment: str, error: BaseException) -> EnvironmentCompileError:
    """One paragraph for Numba's report: where in the environment's own code, what, and a hint."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines()]
    reason = next(
        (line for line in lines if line and not line.startswith(("Failed in", "During:", "File ", "^"))),
        type(error).__name__,
    )
    signature = next((line[4:].strip() for line in lines if line.startswith(">>> ")), "")
    if signature:
        reason = f"{reason.rstrip(':')} {signature}"
    where = ""
    for match in _LOCATION.finditer(text):
        path = match.group(1).replace("\\", "/")
        if "/warpsci/" not in path and "numba" not in path:
            index = text.index(match.group(0))
            # Numba prints the function's first line, maybe "<source elided>", and the failing line
            # above a caret.
            following = text[index:].splitlines()[1:8]
            caret = next((k for k, line in enumerate(following) if line.strip().startswith("^")), 0)
            code = following[caret - 1].strip() if caret > 0 else ""
            where = f" at {match.group(1)}, line {match.group(2)}" + (f" ({code})" if code else "")
            break
    hint = ""
    if "array(" in reason:
        hint = (
            " An array appeared where a number was expected: a per-agent state field is indexed "
            "state.name[env, agent], a per-environment one state.name[env]."
        )
    elif "none" in reason.lower():
        hint = " A value is None: a function that must return a value (a reward, a flag) returned nothing."
    return EnvironmentCompileError(
        f"{environment}: Numba could not compile the environment{where}: {reason}.{hint} "
        "(`warpsci --debug ...` or the exception's cause shows Numba's full report)"
    )


def raise_named(environment: str, error: Exception) -> None:
    """Raise ``error``, as an :class:`EnvironmentCompileError` when it is Numba's compile error
    (a ``try`` around each kernel call costs nothing until something raises)."""
    if _is_numba_error(error):
        raise explain(environment, error) from error
    raise error
