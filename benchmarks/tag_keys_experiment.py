"""Experiment: how much of a wide Tag gridworld step is the hashing of per-agent random keys?

Run on a CUDA machine:  WARPSCI_KERNEL_CACHE=0 python benchmarks/tag_keys_experiment.py [cheap]

With ``cheap``, ``agent_keys`` (two SplitMix64 chains per agent, recomputed in every agent stage for
the agents a thread takes after its first) is replaced by one multiply per key before anything is
compiled. The random actions then differ, so this measures time only. Prints env-only
``random_rollout`` rates at 2,000 x 1,000 (partial observations) for a few register caps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numba import njit

import warpsci.backends.cuda as cuda_backend
import warpsci.backends.stages as stages

sys.path.insert(0, str(Path(__file__).resolve().parent))

if "cheap" in sys.argv[1:]:

    @njit
    def cheap_agent_keys(seed, env, agent):
        base = np.uint64(seed) ^ (np.uint64(env) * np.uint64(0x9E3779B97F4A7C15))
        key = base ^ (np.uint64(agent) * np.uint64(0xBF58476D1CE4E5B9))
        return (key, key ^ np.uint64(0x94D049BB133111EB))

    stages.agent_keys = cheap_agent_keys
    cuda_backend.agent_keys = cheap_agent_keys

import multi_agent_session as session  # noqa: E402

label = "cheap keys" if "cheap" in sys.argv[1:] else "keys as shipped"
for registers in (None, 64):
    cuda_backend.WIDE_MAX_REGISTERS = registers
    row = session.throughput(2000, 999, False, "cuda", 200, repeats=5)
    print(
        f"{label}: 2000x1000 partial regs<={registers} rollout {row['rollout_env_steps_per_s']:.4g} env/s "
        f"step {row['step_env_steps_per_s']:.4g} env/s"
    )
