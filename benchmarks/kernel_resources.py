"""Registers and spills of an environment's CUDA kernels for sm_90 (H100), compiled without a GPU.

    python benchmarks/kernel_resources.py TagContinuous-v0 --runners 100
    python benchmarks/kernel_resources.py TagContinuous-v0 --runners 100 --stage-registers 40 32

Builds the environment on the CPU (for the kernels' argument types), compiles the kernels of
environments in one block each to PTX with Numba's CUDA compiler (NVVM, from the
``nvidia-nvvm`` wheel), and assembles them with ``ptxas -v`` (``nvidia-cuda-nvcc`` wheel) at each
register cap: the random-steps kernel as launched from Python (block observation inside, at the
observation's cap), and, as a random rollout captured in a CUDA graph launches them, the
random-steps kernel's stages apart (at each ``--stage-registers`` cap; default the backend's
``STAGES_APART_MAX_REGISTERS``) and the block observation's own kernel. Prints ptxas's registers a
thread, stack frame and spill bytes: static figures (how often each spill runs needs a profile on
a GPU). The wheels are for development only::

    pip install "nvidia-cuda-nvcc==13.*" "nvidia-nvvm==13.*"

``--runners`` applies Tag continuous's published configuration (10 taggers, k = 10) with that many
runners; other environments take their default params.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numba
import numpy as np

import warpsci
from warpsci.backends import cuda as cuda_backend
from warpsci.registry import get_definition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tag_continuous_session import published  # noqa: E402

#: The compute capability compiled for (H100).
TARGET = (9, 0)


def ptxas_path() -> str:
    """The ``ptxas`` of the newest ``nvidia-cuda-nvcc`` wheel (``nvidia/cu13`` before ``cu12``: it
    must read the PTX that the ``nvidia-nvvm`` wheel's NVVM writes, which an older toolkit's may
    not), else the one on the PATH."""
    try:
        import nvidia

        candidates = [
            path for root in nvidia.__path__ for path in glob.glob(os.path.join(root, "*", "bin", "ptxas"))
        ]
        if candidates:
            return max(
                candidates, key=lambda path: int(re.sub(r"\D", "", Path(path).parent.parent.name) or 0)
            )
    except ImportError:
        pass
    found = shutil.which("ptxas")
    if found:
        return found
    sys.exit('ptxas not found: pip install "nvidia-cuda-nvcc==13.*" "nvidia-nvvm==13.*"')


def resources(ptx: str, max_registers: int | None) -> str:
    """ptxas's summary of ``ptx`` assembled for sm_90 at ``max_registers`` (None: uncapped)."""
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernel.ptx")
        Path(source).write_text(ptx)
        command = [ptxas_path(), f"-arch=sm_{TARGET[0]}{TARGET[1]}", "-v", source, "-o", source + ".cubin"]
        if max_registers is not None:
            command.insert(2, f"-maxrregcount={max_registers}")
        done = subprocess.run(command, capture_output=True, text=True)
        older = re.search(r"Unsupported \.version [\d.]+; current version is '([\d.]+)'", done.stderr)
        if older:
            # NVVM wrote a newer PTX version than this ptxas reads; the kernels use nothing newer.
            Path(source).write_text(
                re.sub(r"^\.version [\d.]+", f".version {older.group(1)}", ptx, flags=re.M)
            )
            done = subprocess.run(command, capture_output=True, text=True)
    text = done.stderr + done.stdout
    # ptxas reports each function it assembles; the kernel's report follows "Compiling entry function".
    entry = text.find("Compiling entry function")
    if done.returncode != 0 or entry < 0:
        return "ptxas failed: " + text.strip()[-300:]
    text = text[entry:]
    used = re.search(r"Used (\d+) registers", text)
    spills = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if not used or not spills:
        return "ptxas failed: " + text.strip()[-300:]
    return (
        f"{used.group(1)} registers, stack {spills.group(1)} B, "
        f"spill stores {spills.group(2)} B, spill loads {spills.group(3)} B"
    )


def compile_ptx(kernel, arguments: tuple) -> str:
    """PTX of ``kernel`` for TARGET; exits with one line where Numba cannot compile it (most often
    NVVM missing)."""
    types = tuple(numba.typeof(argument) for argument in arguments)
    try:
        ptx, _ = numba.cuda.compile(kernel.py_func, types, device=False, cc=TARGET, output="ptx", abi="numba")
    except Exception as error:  # Numba's errors run to many lines: the first says what went wrong
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        sys.exit(
            f'kernel_resources: compiling failed ({first}); NVVM comes with pip install "nvidia-nvvm==13.*"'
        )
    return ptx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env_id")
    parser.add_argument("--runners", type=int, help="Tag continuous's published game with this many runners")
    parser.add_argument(
        "--stage-registers", type=int, nargs="+", default=[cuda_backend.STAGES_APART_MAX_REGISTERS]
    )
    options = parser.parse_args()
    if options.runners is not None and options.env_id != "TagContinuous-v0":
        parser.error(
            "--runners applies to TagContinuous-v0 only (its published game); leave it out otherwise"
        )
    import numba.cuda.dispatcher as dispatcher

    # Device functions compile for the current device's compute capability: TARGET, no GPU asked.
    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=TARGET)

    try:
        definition = get_definition(options.env_id)
        params = definition.default_params()
        if options.runners is not None:
            params = definition.params_type(**published(options.runners))
        env = warpsci.make(
            options.env_id, num_envs=2, device="cpu", params=params, copy=False, check_actions=False
        )
    except ValueError as error:
        sys.exit(f"kernel_resources: {error}")
    env.reset(seed=0)
    env.random_rollout(1)
    (_, _, _, _), views = env._random_rollout_arrays
    run = (np.int64(0), np.int64(env.max_episode_steps), (views[0], views[1]), (views[2], views[3]))
    arguments = (np.uint32(0), env._state_view, env._params_tuple, env._buffer_view, run, 1)
    observation = definition.block_observation_for(env.num_agents)
    if observation is None or not observation.applies(params):
        observation = None
    if observation is not None:
        cap = observation.registers(params)
    elif env.num_agents > cuda_backend.default_threads_per_block(env.num_agents):
        cap = definition.wide_max_registers or cuda_backend.WIDE_MAX_REGISTERS
    else:
        cap = None
    print(f"{options.env_id}, {env.num_agents} agents, sm_{TARGET[0]}{TARGET[1]}", flush=True)
    fused = cuda_backend._compile_fused(definition, env.num_agents > 1, cap, observation)
    print(f"random steps, observed inside, cap {cap}: {resources(compile_ptx(fused[2], arguments), cap)}")
    if observation is None:
        return
    apart = cuda_backend._compile_fused(definition, env.num_agents > 1, None, observation, observe_apart=True)
    stages_ptx = compile_ptx(apart[2], arguments)
    for registers in options.stage_registers:
        print(f"random steps' stages apart, cap {registers}: {resources(stages_ptx, registers)}")
    observe = cuda_backend._compile_block_observation(definition, observation, cap)
    print(f"block observation apart, cap {cap}: {resources(compile_ptx(observe, arguments[:4]), cap)}")


if __name__ == "__main__":
    main()
