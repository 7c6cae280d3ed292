"""``check_parity``: the CUDA kernels of an environment against its CPU kernels, step by step.

Both backends start from the same seed and receive the same random actions; after the reset and
after every step every array (state fields and framework buffers: observations, rewards, flags,
episode statistics) is compared. The CUDA side runs on a real GPU when Numba sees one, otherwise
under Numba's CUDA simulator. The simulator must be switched on before numba is imported, so when
neither is available in this process the check runs itself in a fresh interpreter with
``NUMBA_ENABLE_CUDASIM=1`` (the environment's module must then be importable by name).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from typing import Any

import gymnasium
import numpy as np

from warpsci.environment import EnvironmentDefinition


class ParityError(AssertionError):
    """The CUDA and CPU kernels disagree; the message names where first."""


@dataclasses.dataclass
class Divergence:
    """Where the backends first disagreed."""

    step: int
    """0 after the reset, then the number of steps taken."""
    field: str
    """``state.<name>`` or ``buffers.<name>``."""
    env: int
    agent: int | None
    """None for per-environment arrays."""
    cpu_value: Any
    cuda_value: Any

    def __str__(self) -> str:
        where = f"env {self.env}" + (f", agent {self.agent}" if self.agent is not None else "")
        return f"step {self.step}, {where}, {self.field}: cpu {self.cpu_value!r} != cuda {self.cuda_value!r}"


@dataclasses.dataclass
class ParityReport:
    """What ``check_parity`` compared and found."""

    env_id: str
    backend: str
    """``"cuda"`` (a GPU) or ``"cuda-simulator"``."""
    num_envs: int
    steps: int
    episodes_ended: int
    """Episode ends (terminations or truncations) the comparison went through."""
    max_abs_diff: float
    """Largest difference seen in a floating-point array."""
    divergence: Divergence | None
    """The first disagreement beyond ``atol``, or None."""

    @property
    def ok(self) -> bool:
        return self.divergence is None


def check_parity(
    env: str | EnvironmentDefinition,
    num_envs: int = 16,
    steps: int = 100,
    atol: float = 1e-5,
    seed: int = 0,
    params: Any | None = None,
    threads_per_block: int = 8,
    resync: bool = True,
    raise_on_failure: bool = True,
) -> ParityReport:
    """Run an environment's CUDA and CPU kernels side by side and compare them after every step.

    Args:
        env: A registered id (``"CartPole-v1"``) or an :class:`EnvironmentDefinition`.
        num_envs: Environments to run. Default 16 (the simulator is slow: keep it small).
        steps: Steps after the reset. Default 100. Make it longer than an episode, or shorten
            episodes through ``params``, so that autoresets are compared too.
        atol: Largest accepted absolute difference of floating-point values (integers and flags
            must be equal). Default 1e-5.
        seed: Seed of the reset and of the random actions. Default 0.
        params: Params dataclass or dict of fields to change; default the environment's defaults.
        threads_per_block: CUDA threads per block. Default 8, so that a few environments already
            fill several blocks and the last one partly.
        resync: Copy the CPU arrays into the CUDA side after each comparison (default True), so
            that rounding differences within ``atol`` cannot grow through chaotic dynamics; each
            step is then checked from identical inputs.
        raise_on_failure: Raise :class:`ParityError` at a divergence (default True); otherwise
            return the report with ``divergence`` set.

    Returns:
        A :class:`ParityReport`.
    """
    definition = _definition(env)
    params = _params(definition, params)
    from numba import config, cuda

    settings = {
        "num_envs": num_envs,
        "steps": steps,
        "atol": atol,
        "seed": seed,
        "threads_per_block": threads_per_block,
        "resync": resync,
    }
    if config.ENABLE_CUDASIM or cuda.is_available():
        report = _compare(definition, params, **settings)
    else:
        report = _compare_in_simulator(definition, params, settings)
    if raise_on_failure and report.divergence is not None:
        raise ParityError(
            f"{definition.name}: the CUDA kernels ({report.backend}) diverge from the CPU kernels at "
            f"{report.divergence} (atol {atol})"
        )
    return report


def _definition(env: str | EnvironmentDefinition) -> EnvironmentDefinition:
    if isinstance(env, EnvironmentDefinition):
        return env
    if isinstance(env, str):
        import warpsci  # noqa: F401  (registers the built-in environments)
        from warpsci.registry import get_definition

        return get_definition(env)
    raise TypeError(f"env must be an environment id or an EnvironmentDefinition, got {type(env).__name__}")


def _params(definition: EnvironmentDefinition, params: Any | None) -> Any:
    if params is None:
        return definition.default_params()
    if isinstance(params, dict):
        from warpsci.vector_env import dataclass_replace

        return dataclass_replace(definition.default_params(), **params)
    return params


def random_actions(space: gymnasium.Space, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random actions of ``space`` for a batch ``shape``; Box actions reach half a width beyond the
    bounds, so that the environment's own clipping is exercised."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return rng.integers(0, int(space.n), size=shape).astype(np.int32)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return rng.integers(0, space.nvec, size=shape + space.shape).astype(np.int32)
    if isinstance(space, gymnasium.spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        margin = 0.5 * (high - low)
        return rng.uniform(low - margin, high + margin, size=shape + space.shape).astype(np.float32)
    raise TypeError(f"unsupported action space {space!r}")


def random_agent_actions(groups: Any, like: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random actions for every agent, each from its group's action space, in an array shaped and
    typed like the environment's action array ``like`` (unused components stay 0)."""
    actions = np.zeros_like(like)
    for group in groups:
        drawn = random_actions(group.action_space, (like.shape[0], group.size), rng)
        index = list(group.agents)
        if like.ndim == 3:
            drawn = drawn.reshape(like.shape[0], group.size, -1)
            actions[:, index, : drawn.shape[2]] = drawn
        else:
            actions[:, index] = drawn
    return actions


def _compare(
    definition: EnvironmentDefinition,
    params: Any,
    num_envs: int,
    steps: int,
    atol: float,
    seed: int,
    threads_per_block: int,
    resync: bool,
) -> ParityReport:
    from numba import config

    from warpsci.testing.kernel_runner import HostKernelRunner

    cpu = HostKernelRunner(definition, num_envs, "cpu", params=params)
    gpu = HostKernelRunner(definition, num_envs, "cuda", params=params, threads_per_block=threads_per_block)
    groups = definition.agent_groups(params)
    rng = np.random.default_rng(seed)
    report = ParityReport(
        env_id=definition.name,
        backend="cuda-simulator" if config.ENABLE_CUDASIM else "cuda",
        num_envs=num_envs,
        steps=0,
        episodes_ended=0,
        max_abs_diff=0.0,
        divergence=None,
    )

    cpu.reset(seed)
    gpu.reset(seed)
    for step in range(steps + 1):
        if step > 0:
            actions = random_agent_actions(groups, cpu.buffers.actions, rng)
            cpu.step(actions, seed)
            gpu.step(actions, seed)
            report.steps = step
            report.episodes_ended += int(np.count_nonzero(cpu.buffers.terminated | cpu.buffers.truncated))
        report.divergence = _first_divergence(cpu, gpu, step, atol, report)
        if report.divergence is not None:
            break
        if resync:
            for host, device in zip((*cpu.state, *cpu.buffers), (*gpu.state, *gpu.buffers), strict=True):
                device[...] = host
    return report


def _first_divergence(cpu, gpu, step: int, atol: float, report: ParityReport) -> Divergence | None:
    groups = (("state", cpu.state, gpu.state), ("buffers", cpu.buffers, gpu.buffers))
    for group, cpu_arrays, gpu_arrays in groups:
        for name, expected, actual in zip(cpu_arrays._fields, cpu_arrays, gpu_arrays, strict=True):
            if np.issubdtype(expected.dtype, np.floating):
                difference = np.abs(expected.astype(np.float64) - actual.astype(np.float64))
                difference[np.isnan(expected) & np.isnan(actual)] = 0.0
                difference[np.isnan(difference)] = np.inf
                if difference.size:
                    report.max_abs_diff = max(report.max_abs_diff, float(difference.max()))
                bad = difference > atol
            else:
                bad = expected != actual
            if np.any(bad):
                index = np.argwhere(bad)[0]
                agent = _agent_of(index, group, name, cpu) if expected.ndim >= 2 else None
                return Divergence(
                    step=step,
                    field=f"{group}.{name}",
                    env=int(index[0]),
                    agent=agent,
                    cpu_value=expected[tuple(index)].item(),
                    cuda_value=actual[tuple(index)].item(),
                )
    return None


def _agent_of(index: np.ndarray, group: str, name: str, runner) -> int | None:
    """The agent an array entry belongs to (``index``: the entry's), None for a per-environment
    array."""
    if group == "buffers":
        per_environment = name in ("terminated", "truncated", "elapsed", "tick", "final_length")
        return None if per_environment else int(index[1])
    field = next(f for f in runner.definition.state_fields if f.name == name)
    if not field.per_agent:
        return None
    return int(index[-1]) if field.agents_last else int(index[1])


def _compare_in_simulator(definition: EnvironmentDefinition, params: Any, settings: dict) -> ParityReport:
    module = definition.reset_agent.py_func.__module__
    if module == "__main__":
        raise RuntimeError(
            f"{definition.name} is defined in __main__, which a fresh interpreter cannot import; "
            "move it into a module, or set NUMBA_ENABLE_CUDASIM=1 before importing numba"
        )
    request = {
        "module": module,
        "name": definition.name,
        "params": {name: _plain(value) for name, value in dataclasses.asdict(params).items()},
        "settings": settings,
    }
    environment = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    completed = subprocess.run(
        [sys.executable, "-m", "warpsci.testing.parity", json.dumps(request)],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"the CUDA-simulator run of {definition.name} failed (exit {completed.returncode}):\n"
            f"{completed.stderr[-4000:]}"
        )
    data = json.loads(completed.stdout.strip().splitlines()[-1])
    divergence = data.pop("divergence")
    return ParityReport(**data, divergence=None if divergence is None else Divergence(**divergence))


def _plain(value: Any) -> Any:
    """A params value as JSON can carry it (arrays as nested lists)."""
    return value.tolist() if isinstance(value, np.ndarray) else value


def _find_definition(module_name: str, name: str) -> EnvironmentDefinition:
    module = importlib.import_module(module_name)
    for value in vars(module).values():
        if isinstance(value, EnvironmentDefinition) and value.name == name:
            return value
    raise LookupError(f"module {module_name!r} holds no EnvironmentDefinition named {name!r}")


def _main(argument: str) -> None:
    request = json.loads(argument)
    definition = _find_definition(request["module"], request["name"])
    fields = {
        name: tuple(value) if isinstance(value, list) else value for name, value in request["params"].items()
    }
    params = definition.params_type(**fields)
    report = _compare(definition, params, **request["settings"])
    print(json.dumps(dataclasses.asdict(report)))


if __name__ == "__main__":
    _main(sys.argv[1])
