"""Steps Tag continuous at the published parameters (2,000 environments) with every step observed,
for Nsight Compute to profile one step kernel (issue 12: where an observed step's time goes).

Run on a machine with a CUDA GPU, under ncu, e.g.::

    ncu -k regex:step_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
        --section WarpStateStats --section SourceCounters \\
        python benchmarks/ncu_tag_continuous.py 100 scan

Arguments: the number of runners (10 taggers besides), ``neighbour_search``, and optionally
``random``: 40 steps of ``random_rollout(1)`` (random actions, every step observed, as
``tag_continuous_grid.py observed`` times them), then more, so that ``ncu -k
regex:random_steps_kernel --launch-skip 40 --launch-count 1`` profiles a step 41 steps into an
episode of random play (the default steps with the actions left at zero: nobody moves).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from warpsci.envs.tag_continuous import TAG_CONTINUOUS, TagContinuousParams
from warpsci.multi_agent_env import vector_env_class

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tag_continuous_session import published  # noqa: E402


def main() -> None:
    if len(sys.argv) not in (3, 4) or not sys.argv[1].isdigit() or sys.argv[3:] not in ([], ["random"]):
        sys.exit(
            "usage: python benchmarks/ncu_tag_continuous.py RUNNERS SEARCH [random] (SEARCH: auto/grid/scan)"
        )
    num_runners, search = int(sys.argv[1]), sys.argv[2]
    params = TagContinuousParams(**published(num_runners), neighbour_search=search)
    env = vector_env_class(TAG_CONTINUOUS.agent_groups(params))(
        TAG_CONTINUOUS, num_envs=2000, device="cuda", seed=0, params=params, copy=False, check_actions=False
    )
    env.reset(seed=0)
    if sys.argv[3:] == ["random"]:
        for _ in range(45):
            env.random_rollout(1)
    else:
        for _ in range(5):
            env.step_in_place()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
