"""Multi-agent environments: phases, barriers, agents reading each other, CPU vs CUDA simulator."""

from pathlib import Path

import numpy as np
import torch
from fresh_interpreter import run_script
from multi_agent_toy import TOY

import warpsci

TESTS = Path(__file__).resolve().parent


def test_rewards_read_the_other_agents_after_phase_zero():
    env = warpsci.WarpVectorEnv(TOY, num_envs=5, seed=2)
    obs, _ = env.reset()
    assert obs.shape == (5, 3, 1)
    rng = np.random.default_rng(0)
    for _ in range(30):
        counters = env.state_tensors["counter"].clone()
        actions = torch.from_numpy(rng.integers(0, 3, size=(5, 3)))
        _, rewards, terminated, truncated, info = env.step(actions)
        after = (counters + actions).double()
        expected = after.sum(dim=1, keepdim=True) - after  # sum over the other agents
        assert torch.equal(rewards.double(), expected)
        assert torch.equal(terminated, after[:, 0] > 6)
        done = terminated | truncated
        assert torch.equal(info["final_obs"][done, :, 0].double(), after[done])


SIMULATOR_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {tests!r})
from multi_agent_toy import TOY
from warpsci.testing.kernel_runner import HostKernelRunner

cpu = HostKernelRunner(TOY, 3, "cpu")
gpu = HostKernelRunner(TOY, 3, "cuda", threads_per_block=6)
assert gpu._kernels.block == (3, 2) and gpu._kernels.grid == 2, (gpu._kernels.block, gpu._kernels.grid)
cpu.reset(5)
gpu.reset(5)
rng = np.random.default_rng(1)
for step in range(12):
    actions = rng.integers(0, 3, size=(3, 3)).astype(np.int32)
    cpu.step(actions, 5)
    gpu.step(actions, 5)
    for name in cpu.buffers._fields:
        if not np.array_equal(getattr(cpu.buffers, name), getattr(gpu.buffers, name)):
            sys.exit(f"step {{step}}: {{name}} differs")
assert cpu.buffers.tick[0] == 12
"""


def test_cuda_simulator_matches_cpu_with_barriers_and_two_blocks():
    completed = run_script(SIMULATOR_SCRIPT.format(tests=str(TESTS)), simulator=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr
