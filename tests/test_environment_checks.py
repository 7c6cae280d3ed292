"""An environment's functions are checked when its definition is built (arguments, returned
values), and Numba's compile errors come back as one paragraph naming the line and a hint."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import warpsci
from examples.custom_environment import CORRIDOR
from warpsci.environment import AgentStage, EnvironmentStage
from warpsci.environment_checks import EnvironmentCompileError, check_function, explain


def test_the_example_environment_passes():
    for kind, function in CORRIDOR._functions():
        check_function(CORRIDOR.name, kind, function)


WRONG = [
    ("reset_agent", "def reset_agent(state, params, env, key): pass", "takes 4 argument(s)"),
    (
        "observe_agent",
        "def observe_agent(state, params, env, agent): pass",
        "observe_agent(state, params, obs",
    ),
    ("EnvironmentStage", "def clock(state, params, env, key): pass", "warpsci calls a step stage as clock("),
    ("AgentStage", "def move(state, params, actions, env, agent, key):\n    x = 1", "move never returns"),
    ("is_terminal", "def is_terminal(state, params, env):\n    return", "is_terminal never returns"),
]


@pytest.mark.parametrize(("kind", "source", "message"), WRONG)
def test_wrong_functions_are_named(tmp_path, monkeypatch, kind, source, message):
    path = tmp_path / f"env_{kind}.py"
    path.write_text(source + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(path.stem)
    function = getattr(module, source.split("(")[0].removeprefix("def "))
    with pytest.raises(TypeError, match=re.escape(message)):
        check_function("Toy-v0", kind, function)


def test_a_nested_functions_return_does_not_count(tmp_path, monkeypatch):
    path = tmp_path / "nested_env.py"
    path.write_text(
        "def step(state, params, actions, env, agent, phase, key):\n"
        "    def helper():\n"
        "        return 1.0\n"
        "    helper()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from nested_env import step

    with pytest.raises(TypeError, match="step never returns a value"):
        check_function("Toy-v0", "step_agent", step)


def test_definitions_check_their_stages():
    @warpsci.agent_function
    def move(state, params, actions, env, agent, key):
        return 0.0

    @warpsci.agent_function
    def clock(state, params, actions, env, key):
        state.t[env] += 1

    with pytest.raises(TypeError, match="takes 5 argument"):
        dataclasses.replace(
            CORRIDOR, step_agent=None, step_stages=(AgentStage(move), EnvironmentStage(clock))
        )


NUMBA_REPORT = """Failed in nopython mode pipeline (step: nopython frontend)
No implementation of function Function(<built-in function max>) found for signature:

 >>> max(Literal[int](0), array(int64, 1d, C))

There are 10 candidate implementations:
File "/home/me/my_envs.py", line 36:
def step_agent(state, params, actions, env, agent, phase, key):
    <source elided>
    state.position[env, agent] = max(0, state.position[env] + move)
    ^
"""


def test_numba_reports_become_one_paragraph():
    error = explain("Mine-v0", RuntimeError(NUMBA_REPORT))
    text = str(error)
    assert isinstance(error, EnvironmentCompileError) and "\n" not in text
    assert (
        "at /home/me/my_envs.py, line 36 (state.position[env, agent] = max(0, state.position[env] + move))"
        in text
    )
    assert "signature max(Literal[int](0), array(int64, 1d, C))" in text
    assert "indexed state.name[env, agent]" in text


def test_compile_errors_on_the_cpu_name_the_environment_and_line():
    from tests.broken_environments.agent_index_missing import CORRIDOR as broken

    warpsci.register(broken)
    try:
        env = warpsci.make(broken.name, num_envs=2, device="cpu")
        env.reset(seed=0)
        with pytest.raises(EnvironmentCompileError, match="agent_index_missing.py, line 12"):
            env.step(np.ones(2, dtype=np.int64))
    finally:
        warpsci.registry.unregister(broken.name)
