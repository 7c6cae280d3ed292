"""TagContinuous-v0's block observation on a GPU (needs a CUDA GPU; skipped without): a warp per
observer (:mod:`warpsci.envs.tag_continuous_warps`) writes, bit for bit, the observations that the
per-agent ``observe_agent`` writes inside the step kernel, step after step of random play with
tags, runners leaving and resets, after ``step`` and after ``random_rollout``, for the published
game, small and crowded ones, k up to 32, 128 agents, and full observations (which the block
observation hands to ``observe_agent``). Numba's CUDA simulator has no warp shuffles, so only a
GPU can run this. Run on a GPU host: ``python -m pytest -q -m gpu tests/test_tag_continuous_gpu.py``.
"""

import pytest
import torch

import warpsci
from warpsci.envs.tag_continuous import TagContinuousParams

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

PUBLISHED = {"num_taggers": 10, "num_runners": 100, "grid_length": 20.0, "num_other_agents_observed": 10}
GAMES = {
    "published": PUBLISHED,
    "published, tags often": {**PUBLISHED, "tagging_distance": 0.08, "episode_length": 40},
    "five agents, k above those in the game": {
        "num_taggers": 2, "num_runners": 3, "num_other_agents_observed": 4, "tagging_distance": 0.2,
        "episode_length": 30,
    },
    "crowded, k = 32": {
        "num_taggers": 6, "num_runners": 54, "grid_length": 2.0, "num_other_agents_observed": 32,
        "tagging_distance": 0.05, "episode_length": 50,
    },
    "128 agents, k = 1": {"num_taggers": 8, "num_runners": 120, "num_other_agents_observed": 1},
    "full observations": {"num_taggers": 3, "num_runners": 12, "use_full_observation": True},
}  # fmt: skip


def _env(fields: dict, block_observation: bool):
    params = TagContinuousParams(**fields, neighbour_search="scan", seed=11)
    return warpsci.make(
        "TagContinuous-v0", num_envs=64, device="cuda", seed=3, params=params, copy=False,
        check_actions=False, block_observation=block_observation,
    )  # fmt: skip


@pytest.mark.parametrize("game", list(GAMES))
def test_block_observation_equals_observe_agent(game):
    by_block, by_agent = _env(GAMES[game], True), _env(GAMES[game], False)
    assert by_block._kernels.observes_by_block and not by_agent._kernels.observes_by_block
    generator = torch.Generator(device="cuda").manual_seed(5)
    high = torch.tensor(by_block.definition.agent_groups(by_block.params)[0].action_space.nvec, device="cuda")
    by_block.reset(seed=3)
    by_agent.reset(seed=3)
    assert torch.equal(by_block.buffers.obs, by_agent.buffers.obs)
    tagged = 0
    for step in range(120):
        if step % 2:
            shape = by_block.actions_buffer.shape
            actions = (torch.rand(shape, generator=generator, device="cuda") * high).long()
            for env in (by_block, by_agent):
                env.actions_buffer.copy_(actions.to(env.actions_buffer.dtype))
                env.step_in_place()
        else:
            by_block.random_rollout(1)
            by_agent.random_rollout(1)
        torch.cuda.synchronize()
        for name in ("obs", "rewards", "final_obs", "active"):
            assert torch.equal(getattr(by_block.buffers, name), getattr(by_agent.buffers, name)), (step, name)
        tagged += int((~by_block.buffers.active).sum())
    if "tags often" in game or "crowded" in game:
        assert tagged > 0  # runners left the game on the way
