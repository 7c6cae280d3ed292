"""One ``random_rollout`` launch of Cartpole, for a kernel profiler (Nsight Compute):

    ncu --kernel-name regex:random_steps --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis \
        python benchmarks/profile_random_rollout.py 1000000 100
"""

import sys

import torch

import warpsci

num_envs, steps = int(sys.argv[1]), int(sys.argv[2])
env = warpsci.make("CartPole-v1", num_envs=num_envs, device="cuda", copy=False, check_actions=False)
env.reset()
for _ in range(2):  # the first launch loads the kernel; the profiler takes the second
    env.random_rollout(steps)
torch.cuda.synchronize()
print("done")
