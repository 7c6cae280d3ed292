"""One ``random_rollout`` launch of Cartpole, for a kernel profiler (Nsight Compute):

    ncu --kernel-name regex:random_steps --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
        python benchmarks/profile_random_rollout.py 1000000 100 [SASS_FILE]

With ``SASS_FILE``, also writes the kernel's SASS there (needs ``nvdisasm``) and prints the 25 most
frequent opcodes in it (a static count).
"""

import collections
import re
import sys
from pathlib import Path

import torch

import warpsci

num_envs, steps = int(sys.argv[1]), int(sys.argv[2])
env = warpsci.make("CartPole-v1", num_envs=num_envs, device="cuda", copy=False, check_actions=False)
env.reset()
for _ in range(2):  # the first launch loads the kernel; the profiler takes the second
    env.random_rollout(steps)
torch.cuda.synchronize()
if len(sys.argv) > 3:
    sass = env._kernels._random_steps_kernel.inspect_sass()
    text = "\n".join(sass.values()) if isinstance(sass, dict) else str(sass)
    Path(sys.argv[3]).write_text(text)
    opcodes = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9]*)", text)
    print(f"{len(opcodes)} SASS instructions; most frequent:")
    for opcode, count in collections.Counter(opcodes).most_common(25):
        print(f"  {opcode:<10} {count}")
print("done")
