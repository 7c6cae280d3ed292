"""TagContinuous-v0's block observation on a GPU (needs a CUDA GPU; skipped without): a thread per
observer (:mod:`warpsci.envs.tag_continuous_threads`, up to 10 others) or a warp per observer
(:mod:`warpsci.envs.tag_continuous_warps`) writes, bit for bit, the observations and hints that the
per-agent ``observe_agent`` writes, step after step of random play with tags, runners leaving and
resets, after ``step`` and after ``random_rollout``, for the published game (scan and grid; started
off the square too), small and crowded ones, k from 1 to 32, 128 agents, and wider games in the
neighbour grid (300 to 2,048 agents), where the grid's threads (up to 10 others) or warps settle
nearly every observer; agents on a lattice with hints of any kind; the kernels do call the block
observation; steps replayed from a CUDA graph (the observation a launch of its own there) give what
steps launched from Python give; full observations keep ``observe_agent``. These games are too
large for Numba's CUDA simulator (``tests/test_tag_continuous_simulator.py`` runs small ones there,
its warp intrinsics emulated by :mod:`warpsci.simulated_warps`), so they need a GPU. Run on a GPU
host: ``python -m pytest -q -m gpu tests/test_tag_continuous_gpu.py``.
"""

import dataclasses
import math

import numpy as np
import pytest
import torch
from numba import cuda

import warpsci
from warpsci.backends.buffers import EnvBuffers
from warpsci.envs.tag_continuous import (
    SEARCH_AGAIN,
    TAG_CONTINUOUS,
    TagContinuousParams,
    observe_agent,
    observe_in_grid_by_block,
)
from warpsci.graphs import GraphReplay
from warpsci.multi_agent_env import vector_env_class

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

PARTIAL = {"use_full_observation": False}  # (the class default observes everyone)
PUBLISHED = {
    **PARTIAL,
    "num_taggers": 10,
    "num_runners": 100,
    "grid_length": 20.0,
    "num_other_agents_observed": 10,
}
GAMES = {
    "published": PUBLISHED,
    "published, neighbour grid": {**PUBLISHED, "neighbour_search": "grid"},
    "published, tags often": {**PUBLISHED, "tagging_distance": 0.08, "episode_length": 40},
    # Starts off the square (then clamped onto it): the first observation sees negative coordinates.
    "published, started off the square": {
        **PUBLISHED,
        "starting_location_x": tuple(np.random.RandomState(1).uniform(-70.0, -10.0, 110)),
        "starting_location_y": tuple(np.random.RandomState(2).uniform(-30.0, 30.0, 110)),
    },
    "five agents, k = all others": {
        **PARTIAL, "num_taggers": 2, "num_runners": 3, "num_other_agents_observed": 4,
        "tagging_distance": 0.2, "episode_length": 30,
    },
    "crowded, k = 32": {
        **PARTIAL, "num_taggers": 6, "num_runners": 54, "grid_length": 2.0, "num_other_agents_observed": 32,
        "tagging_distance": 0.05, "episode_length": 50,
    },
    "128 agents, k = 1": {**PARTIAL, "num_taggers": 8, "num_runners": 120, "num_other_agents_observed": 1},
    # Wider games: the grid's warps, and observe_agent for the observers they leave.
    "1,000 agents, neighbour grid": {**PUBLISHED, "num_runners": 990, "neighbour_search": "grid"},
    "1,000 agents, grid, k = 11": {
        **PUBLISHED, "num_runners": 990, "neighbour_search": "grid", "num_other_agents_observed": 11,
    },
    "300 agents, grid, tags often, k = 32": {
        **PARTIAL, "num_taggers": 30, "num_runners": 270, "grid_length": 6.0, "num_other_agents_observed": 32,
        "neighbour_search": "grid", "tagging_distance": 0.03, "episode_length": 40,
    },
    "2,048 agents, grid, k = 1": {
        **PARTIAL, "num_taggers": 48, "num_runners": 2000, "grid_length": 30.0,
        "num_other_agents_observed": 1, "neighbour_search": "grid",
    },
}  # fmt: skip


def _env(fields: dict, block_observation: bool):
    params = TagContinuousParams(**{"neighbour_search": "scan", **fields}, seed=11)
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
        hints = by_block.state_tensors["nearest_hint"], by_agent.state_tensors["nearest_hint"]
        assert torch.equal(*hints), step
        tagged += int((~by_block.buffers.active).sum())
    if "tags often" in game or "crowded" in game:
        assert tagged > 0  # runners left the game on the way


@pytest.mark.parametrize(
    "game", ["published", "crowded, k = 32", "1,000 agents, neighbour grid", "1,000 agents, grid, k = 11"]
)
def test_lattice_positions_and_any_hints_give_what_observe_agent_gives(game):
    """Agents on a lattice (many exactly equal distances, pairs at one point) and hints of any
    kind (out of range, negative, repeated, the observer itself, NO_AGENT, SEARCH_AGAIN): after a
    step in which nobody moves, the block observation writes what ``observe_agent`` writes, bit for
    bit, observations and hints, three times over."""
    by_block, by_agent = _env(GAMES[game], True), _env(GAMES[game], False)
    by_block.reset(seed=3)
    by_agent.reset(seed=3)
    envs, agents = by_block.state_tensors["x"].shape
    spacing = float(by_block.params.grid_length) / 16
    ids = torch.arange(agents, device="cuda")
    generator = torch.Generator(device="cuda").manual_seed(7)
    for _ in range(3):
        shift = torch.randint(0, 16, (envs, 1), generator=generator, device="cuda")
        x = ((ids + shift) % 12).float() * spacing
        y = (((ids + shift) // 12) % 9).float() * spacing
        hint_shape = by_block.state_tensors["nearest_hint"].shape
        hints = torch.randint(
            -3, agents + 3, hint_shape, generator=generator, device="cuda", dtype=torch.int32
        )
        hints[..., 1] = hints[..., 0]  # repeated
        hints[:, :, 2] = ids.to(torch.int32)  # the observer itself
        hints[:, ::3, 3] = 2**31 - 1  # NO_AGENT
        hints[:, ::5, 4] = 2**31 - 2  # SEARCH_AGAIN
        for env in (by_block, by_agent):
            env.state_tensors["x"].copy_(x)
            env.state_tensors["y"].copy_(y)
            env.state_tensors["v"].zero_()
            env.state_tensors["accel"].zero_()
            env.state_tensors["nearest_hint"].copy_(hints)
            env.actions_buffer.zero_()  # no acceleration change, no turn: nobody moves
            env.step_in_place()
        torch.cuda.synchronize()
        assert torch.equal(by_block.state_tensors["x"], x)  # still on the lattice
        assert torch.equal(by_block.buffers.obs, by_agent.buffers.obs)
        assert torch.equal(by_block.state_tensors["nearest_hint"], by_agent.state_tensors["nearest_hint"])


@cuda.jit(device=True)
def _marking_searched_again(state, params, obs, env):
    """``observe_by_block`` for grid games, where the observers the warps leave, once observed by
    ``observe_agent``, get -1 for the time (their last entry)."""
    observe_in_grid_by_block(state, params, obs, env)
    cuda.syncthreads()
    agent = cuda.threadIdx.x
    while agent < obs.shape[1]:
        if state.nearest_hint[env, agent, 0] == SEARCH_AGAIN:
            observe_agent(state, params, obs, env, agent)
            obs[env, agent, obs.shape[2] - 1] = np.float32(-1.0)
        agent += cuda.blockDim.x


@pytest.mark.parametrize("slots", [10, 11])
def test_the_grid_block_observation_settles_most_observers(slots):
    """The grid's block observation alone (a thread per observer for k = 10, a warp per observer for
    k = 11) settles nearly every observer once the hints are warm: at each step fewer than 2% of
    the observers in the game are searched again by ``observe_agent``, and what it writes equals
    ``observe_agent``. At the first reset every hint is agent 0 (the state starts at zeros), so
    agent 0 at least, and observers with fewer than k others (agent 0 among them) at a square up
    to agent 0's, are searched again (the warps also leave those with more than ``GRID_KEPT``
    within the limit)."""
    definition = dataclasses.replace(
        TAG_CONTINUOUS,
        block_observation=(
            TAG_CONTINUOUS.block_observation[0],
            dataclasses.replace(TAG_CONTINUOUS.block_observation[1], function=_marking_searched_again),
        ),
    )
    fields = {**GAMES["1,000 agents, neighbour grid"], "num_other_agents_observed": slots}
    params = TagContinuousParams(**fields, seed=11)
    marking = vector_env_class(definition.agent_groups(params))(
        definition, num_envs=64, device="cuda", seed=3, params=params, copy=False, check_actions=False
    )
    by_agent = _env(fields, False)
    assert marking._kernels.observes_by_block and marking._kernels.block == (128, 1)
    marking.reset(seed=3)
    by_agent.reset(seed=3)
    at_reset = marking.buffers.obs[..., -1] == -1.0
    assert bool(at_reset[:, 0].all())  # agent 0's hints are itself
    assert torch.equal(marking.buffers.obs[~at_reset], by_agent.buffers.obs[~at_reset])
    generator = torch.Generator(device="cuda").manual_seed(5)
    high = torch.tensor(marking.definition.agent_groups(params)[0].action_space.nvec, device="cuda")
    searched_again = []
    for _ in range(20):
        actions = (torch.rand(marking.actions_buffer.shape, generator=generator, device="cuda") * high).long()
        for env in (marking, by_agent):
            env.actions_buffer.copy_(actions.to(env.actions_buffer.dtype))
            env.step_in_place()
        torch.cuda.synchronize()
        again = marking.buffers.obs[..., -1] == -1.0
        settled = ~again
        assert torch.equal(marking.buffers.obs[settled], by_agent.buffers.obs[settled])
        playing = marking.state_tensors["in_game_before"] == 1
        searched_again.append(float(again.sum()) / float(playing.sum()))
    assert max(searched_again) < 0.02, searched_again


@pytest.mark.parametrize(
    "game", ["published, tags often", "1,000 agents, neighbour grid", "1,000 agents, grid, k = 11"]
)
def test_graph_replayed_steps_observe_apart_and_equal_launched_steps(game):
    """Captured in a CUDA graph, a step leaves the block observation to a launch of its own
    (``CudaKernels.observes_apart``), and the narrow game's stages run on its scalar arrays staged
    in shared memory (:mod:`warpsci.backends.shared_staging`); replayed, steps and random steps
    leave, bit for bit, every buffer and state array as the same steps launched from Python do (in
    the game with frequent tags, through runners leaving and resets)."""
    replayed, launched = _env(GAMES[game], True), _env(GAMES[game], True)
    kernels = replayed._kernels
    apart = []
    kernels.observes_apart = lambda: apart.append(type(kernels).observes_apart(kernels)) or apart[-1]
    step = GraphReplay(replayed.step_in_place, replayed.device)
    random_step = GraphReplay(lambda: replayed.random_rollout(1), replayed.device)
    generator = torch.Generator(device="cuda").manual_seed(5)
    high = torch.tensor(replayed.definition.agent_groups(replayed.params)[0].action_space.nvec, device="cuda")
    replayed.reset(seed=3)
    launched.reset(seed=3)
    tagged = ended = 0
    for number in range(90):
        if number % 3 == 2:
            actions = (
                torch.rand(replayed.actions_buffer.shape, generator=generator, device="cuda") * high
            ).long()
            for env in (replayed, launched):
                env.actions_buffer.copy_(actions.to(env.actions_buffer.dtype))
            step()
            launched.step_in_place()
        else:
            random_step()
            launched.random_rollout(1)
        torch.cuda.synchronize()
        for name in EnvBuffers._fields:
            assert torch.equal(getattr(replayed.buffers, name), getattr(launched.buffers, name)), (
                number,
                name,
            )
        for name, tensor in replayed.state_tensors.items():
            assert torch.equal(tensor, launched.state_tensors[name]), (number, name)
        tagged += int((~replayed.buffers.active).sum())
        ended += int((replayed.buffers.terminated | replayed.buffers.truncated).sum())
    assert step.captures == 1 and random_step.captures == 1
    assert True in apart and False in apart  # captured apart, warmed up in one launch
    assert (kernels.staged_width is not None) == ("published" in game)  # the grid's games are wider
    if "tags often" in game:
        assert tagged > 0 and ended > 0


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("capture", [True, False])
def test_chains_of_a_pipeline_equal_whole_batch_steps(parts, capture):
    """``WarpVectorEnv.pipeline``: each chain's random steps and steps of given actions on a stream of
    its own, replayed from a CUDA graph (each chain's stages and observation launched apart, no
    join between steps) or launched from Python (the one-launch kernel over the chain's blocks),
    leave every buffer and state array as whole-batch steps do, bit for bit, through tags and
    resets."""
    chained, whole = _env(GAMES["published, tags often"], True), _env(GAMES["published, tags often"], True)
    generator = torch.Generator(device="cuda").manual_seed(5)
    high = torch.tensor(chained.definition.agent_groups(chained.params)[0].action_space.nvec, device="cuda")
    actions = torch.empty_like(chained.actions_buffer)
    steps = 6

    def chained_steps():
        with chained.pipeline(parts) as chains:
            assert len(chains) == parts
            for number in range(steps):
                for chain in chains:
                    with torch.cuda.stream(chain.stream):
                        if number % 3 == 2:
                            chained.actions_buffer[chain.envs] = actions[chain.envs]
                            chained.step_in_place(envs=chain.envs)
                        else:
                            chained.random_rollout(1, envs=chain.envs)

    run = GraphReplay(chained_steps, chained.device) if capture else chained_steps
    chained.reset(seed=3)
    whole.reset(seed=3)
    tagged = ended = 0
    for _ in range(15):
        actions.copy_(
            (torch.rand(actions.shape, generator=generator, device="cuda") * high).to(actions.dtype)
        )
        run()
        for number in range(steps):
            if number % 3 == 2:
                whole.actions_buffer.copy_(actions)
                whole.step_in_place()
            else:
                whole.random_rollout(1)
            tagged += int((~whole.buffers.active).sum())
            ended += int((whole.buffers.terminated | whole.buffers.truncated).sum())
        torch.cuda.synchronize()
        for name in EnvBuffers._fields:
            assert torch.equal(getattr(chained.buffers, name), getattr(whole.buffers, name)), name
        for name, tensor in chained.state_tensors.items():
            assert torch.equal(tensor, whole.state_tensors[name]), name
    if capture:
        assert run.captures == 1
    assert tagged > 0 and ended > 0
    with chained.pipeline(parts) as chains:
        with pytest.raises(RuntimeError, match="on another stream than their chain's"):
            chained.random_rollout(1, envs=chains[1].envs)  # on chain 0's stream


def test_full_observations_keep_observe_agent():
    env = _env({"num_taggers": 3, "num_runners": 12, "use_full_observation": True}, True)
    assert not env._kernels.observes_by_block
    assert env._kernels.block[1] > 1  # several environments to a block, as without a block observation


@cuda.jit(device=True)
def _write_sevens(state, params, obs, env):
    width = obs.shape[2]
    entry = cuda.threadIdx.x
    while entry < obs.shape[1] * width:
        obs[env, entry // width, entry % width] = np.float32(7.0)
        entry += cuda.blockDim.x


def test_the_kernels_observe_by_the_block_observation():
    """A block observation that writes sevens everywhere: after a reset, a step and a random
    rollout the observations are sevens (the kernels call it, not observe_agent), while the final
    observations still come from observe_agent."""
    definition = dataclasses.replace(
        TAG_CONTINUOUS,
        block_observation=(
            dataclasses.replace(TAG_CONTINUOUS.block_observation[0], function=_write_sevens),
            TAG_CONTINUOUS.block_observation[1],
        ),
    )
    params = TagContinuousParams(**GAMES["published, tags often"], neighbour_search="scan", seed=11)
    env = vector_env_class(definition.agent_groups(params))(
        definition, num_envs=64, device="cuda", seed=3, params=params, copy=False, check_actions=False
    )
    assert env._kernels.observes_by_block and env._kernels.block == (128, 1)
    env.reset(seed=3)
    assert bool((env.buffers.obs == 7.0).all())
    for _ in range(45):
        env.step_in_place()
        assert bool((env.buffers.obs == 7.0).all())
    env.random_rollout(1)
    assert bool((env.buffers.obs == 7.0).all())
    assert not bool((env.buffers.final_obs == 7.0).all())


def test_captured_training_equals_eager_training(monkeypatch):
    """A2C on the published game with frequent tags, 64 environments: the rollout captured in a
    CUDA graph, where each step is observed apart and its environments run in two sub-batches on
    two streams (``SUB_BATCHES_APART``), trains as the same rollouts launched from Python do."""
    from warpsci.algorithms import make_trainer
    from warpsci.backends import cuda as cuda_backend
    from warpsci.config import TrainConfig

    split = cuda_backend.sub_batches
    batches = []
    monkeypatch.setattr(
        cuda_backend,
        "sub_batches",
        lambda num_envs, parts: batches.append(split(num_envs, parts)) or batches[-1],
    )

    def run(capture: bool):
        config = TrainConfig(
            env_id="TagContinuous-v0", algo="a2c", device="cuda", seed=3, num_envs=64, num_steps=16,
            total_timesteps=64 * 16 * 4, capture_graphs=capture, hidden_sizes=(32, 32), checkpoint_every=0,
            env_params={**GAMES["published, tags often"], "seed": 11},
        )  # fmt: skip
        trainer = make_trainer(config)
        return trainer, trainer.train()

    eager, eager_result = run(False)
    assert not batches  # launched from Python: one launch a step
    captured, captured_result = run(True)
    assert captured._graph is not None and captured._graph.captures == 1
    assert batches and all(batch == [(0, 32), (32, 32)] for batch in batches)
    for learner, other in zip(captured.learners, eager.learners, strict=True):
        for name in ("obs", "actions", "rewards", "dones"):
            torch.testing.assert_close(
                getattr(learner.buffer, name), getattr(other.buffer, name), rtol=1e-4, atol=1e-4, msg=name
            )
    for name, tensor in captured.env.state_tensors.items():
        torch.testing.assert_close(tensor, eager.env.state_tensors[name], rtol=1e-4, atol=1e-4, msg=name)
    for learner, other in zip(captured.learners, eager.learners, strict=True):
        for a, b in zip(learner.policy.parameters(), other.policy.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    learned = ("charts/return_last100/", "losses/value_loss/", "losses/policy_loss/")
    for row, other in zip(captured_result.history, eager_result.history, strict=True):
        keys = [key for key in row if key.startswith(learned)]
        assert len(keys) == 6  # three figures, two groups
        # No episode ends before step 40 (the game's length): the first two rows' returns are NaN.
        assert [row[key] for key in keys] == pytest.approx(
            [other[key] for key in keys], rel=1e-4, abs=1e-6, nan_ok=True
        )
    assert any(not math.isnan(row["charts/return_last100/tagger"]) for row in captured_result.history)
