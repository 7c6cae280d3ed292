"""Where a fresh process spends its seconds before training: imports, CUDA contexts, kernel loads.

python benchmarks/startup_probe.py
"""

import time

start = time.perf_counter()


def mark(name: str) -> None:
    print(f"  {name:<40}{time.perf_counter() - start:7.2f} s", flush=True)


import torch  # noqa: E402

mark("import torch")
from numba import cuda  # noqa: E402

mark("import numba.cuda")
import warpsci  # noqa: E402
import warpsci.cli  # noqa: E402, F401
import warpsci.trainer  # noqa: E402

mark("import warpsci")
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
mark("CUDA context (torch)")
cuda.current_context()
mark("CUDA context (numba)")
env = warpsci.make("CartPole-v1", num_envs=32, device="cuda", copy=False, check_actions=False)
mark("environment built")
import cProfile  # noqa: E402
import pstats  # noqa: E402

profiler = cProfile.Profile()
profiler.enable()
env.reset()
torch.cuda.synchronize()
profiler.disable()
mark("reset kernel loaded and run")
pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
env.step_in_place()
torch.cuda.synchronize()
mark("step kernel loaded and run")
from warpsci.algorithms import make_trainer  # noqa: E402
from warpsci.cli import preset  # noqa: E402
from warpsci.config import TrainConfig  # noqa: E402

config = TrainConfig.from_dict({**preset("CartPole-v1"), "device": "cuda", "checkpoint_every": 0})

profiler = cProfile.Profile()
profiler.enable()
trainer = make_trainer(config)
profiler.disable()
mark("trainer built")
pstats.Stats(profiler).sort_stats("cumulative").print_stats(18)
trainer.env.reset()
torch.cuda.synchronize()
mark("trainer env reset")
for label in ("iteration 1 (eager warm-up)", "iteration 2 (capture)", "iteration 3 (replay)"):
    profiler = cProfile.Profile()
    profiler.enable()
    trainer.rollout_and_advantages()
    trainer.run_update()
    torch.cuda.synchronize()
    profiler.disable()
    mark(label)
    if label.startswith("iteration 1"):
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
import sys  # noqa: E402

print(f"  torch._dynamo imported: {'torch._dynamo' in sys.modules}")
