"""The Gymnasium ``VectorEnv`` API of warpsci's vector environment (CPU backend)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.vector.utils import batch_space

import warpsci
from warpsci.envs.cartpole import step_agent as cartpole_step_agent
from warpsci.vector_env import WarpVectorEnv


def _random_actions(generator: torch.Generator, num_envs: int) -> torch.Tensor:
    return torch.randint(0, 2, (num_envs,), generator=generator, dtype=torch.int64)


def _rollout(env, seed: int, num_steps: int, action_seed: int = 0):
    """Observations, rewards and flags of ``num_steps`` random steps after ``reset(seed=seed)``."""
    generator = torch.Generator().manual_seed(action_seed)
    obs, _ = env.reset(seed=seed)
    trajectory = [obs]
    for _ in range(num_steps):
        obs, reward, terminated, truncated, info = env.step(_random_actions(generator, env.num_envs))
        # final_obs is only defined where an episode ended.
        done = info["_final_obs"]
        trajectory += [obs, reward, terminated, truncated, done, info["final_obs"][done]]
    return trajectory


# ----------------------------------------------------------------------------- spaces and outputs


def test_spaces_match_gymnasium_cartpole(make_cartpole):
    num_envs = 5
    env = make_cartpole(num_envs=num_envs)
    reference = CartPoleEnv()

    assert isinstance(env, gymnasium.vector.VectorEnv)
    assert env.num_envs == num_envs
    assert env.single_observation_space == reference.observation_space
    assert env.single_observation_space.dtype == np.float32
    assert env.single_action_space == gymnasium.spaces.Discrete(2)
    assert env.observation_space == batch_space(reference.observation_space, num_envs)
    assert env.observation_space.shape == (num_envs, 4)
    assert env.action_space == gymnasium.spaces.MultiDiscrete([2] * num_envs)
    assert env.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP


def test_output_types_shapes_and_devices(make_cartpole):
    num_envs = 6
    env = make_cartpole(num_envs=num_envs)
    obs, info = env.reset()
    assert isinstance(obs, torch.Tensor)
    assert obs.dtype == torch.float32 and obs.shape == (num_envs, 4) and obs.device.type == "cpu"
    assert info == {}

    obs, reward, terminated, truncated, info = env.step(torch.zeros(num_envs, dtype=torch.int64))
    assert obs.dtype == torch.float32 and obs.shape == (num_envs, 4)
    assert reward.dtype == torch.float32 and reward.shape == (num_envs,)
    assert terminated.dtype == torch.bool and terminated.shape == (num_envs,)
    assert truncated.dtype == torch.bool and truncated.shape == (num_envs,)
    for tensor in (obs, reward, terminated, truncated, info["final_obs"], info["_final_obs"]):
        assert tensor.device.type == "cpu"
    assert info["final_obs"].shape == (num_envs, 4)
    assert info["_final_obs"].dtype == torch.bool and info["_final_obs"].shape == (num_envs,)
    assert info["episode"]["r"].shape == (num_envs,)
    assert info["episode"]["l"].shape == (num_envs,)
    assert info["_episode"].shape == (num_envs,)


def test_observations_stay_in_observation_space(make_cartpole):
    num_envs = 32
    env = make_cartpole(num_envs=num_envs, seed=4)
    generator = torch.Generator().manual_seed(4)
    obs, _ = env.reset()
    assert env.observation_space.contains(obs.numpy())
    finals_checked = 0
    for _ in range(150):
        obs, _, _, _, info = env.step(_random_actions(generator, num_envs))
        assert env.observation_space.contains(obs.numpy())
        for final in info["final_obs"][info["_final_obs"]]:
            assert env.single_observation_space.contains(final.numpy())
            finals_checked += 1
    assert finals_checked > num_envs


# ----------------------------------------------------------------------------- autoreset


def test_same_step_autoreset(make_cartpole):
    num_envs = 16
    env = make_cartpole(num_envs=num_envs, seed=21)
    params = env.params
    obs, _ = env.reset()
    lengths = torch.zeros(num_envs, dtype=torch.int64)
    ended = 0
    for step in range(120):
        # All right for a while, then all left: every cart falls over within a few dozen steps.
        actions = torch.full((num_envs,), 1 if step < 60 else 0, dtype=torch.int64)
        previous_elapsed = env.buffers.elapsed.clone()
        obs, reward, terminated, truncated, info = env.step(actions)
        lengths += 1
        done = terminated | truncated
        assert torch.equal(info["_final_obs"], done)
        assert torch.equal(info["_episode"], done)
        assert torch.all(reward == 1.0)
        for i in torch.nonzero(done).flatten().tolist():
            ended += 1
            final = info["final_obs"][i]
            # The final observation is past a termination threshold ...
            assert bool(terminated[i]) and not bool(truncated[i])
            assert abs(final[0]) > params.x_threshold or abs(final[2]) > params.theta_threshold_radians
            # ... and the returned one is a fresh start.
            assert torch.all(obs[i].abs() <= params.reset_bound), obs[i]
            assert not torch.equal(obs[i], final)
            assert int(env.buffers.elapsed[i]) == 0
            assert int(previous_elapsed[i]) == lengths[i] - 1
            # CartPole pays 1 per step, so the return equals the length.
            assert int(info["episode"]["l"][i]) == lengths[i]
            assert float(info["episode"]["r"][i]) == float(lengths[i])
            lengths[i] = 0
        running = ~done
        assert torch.equal(env.buffers.elapsed[running].to(torch.int64), lengths[running])
        # The returned observation is the live state of the (possibly new) episode.
        assert torch.equal(obs[:, 0], env.state_tensors["x"][:, 0])
    assert ended >= 2 * num_envs


# ----------------------------------------------------------------------------- determinism and seeding


def test_same_seed_same_trajectory(make_cartpole):
    first = _rollout(make_cartpole(num_envs=12, seed=0), seed=77, num_steps=80)
    second = _rollout(make_cartpole(num_envs=12, seed=123), seed=77, num_steps=80)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


def test_reset_with_seed_replays_on_the_same_env(make_cartpole):
    env = make_cartpole(num_envs=12)
    first = _rollout(env, seed=5, num_steps=60)
    second = _rollout(env, seed=5, num_steps=60)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


def test_constructor_seed_is_used_by_first_reset(make_cartpole):
    obs_from_constructor, _ = make_cartpole(num_envs=10, seed=31).reset()
    obs_from_reset, _ = make_cartpole(num_envs=10, seed=0).reset(seed=31)
    assert torch.equal(obs_from_constructor, obs_from_reset)


def test_different_seeds_differ(make_cartpole):
    env = make_cartpole(num_envs=10)
    obs_a, _ = env.reset(seed=1)
    obs_b, _ = env.reset(seed=2)
    assert not torch.any(torch.all(obs_a == obs_b, dim=1)), "some env started identically"
    # Environments of one reset start differently too.
    assert len({tuple(row.tolist()) for row in obs_a}) == 10


def test_reset_without_seed_gives_new_starts(make_cartpole):
    env = make_cartpole(num_envs=10, seed=3)
    obs_a, _ = env.reset()
    obs_b, _ = env.reset()
    obs_c, _ = env.reset()
    assert not torch.any(torch.all(obs_a == obs_b, dim=1))
    assert not torch.any(torch.all(obs_b == obs_c, dim=1))
    assert torch.all(obs_b.abs() <= 0.05)


def test_reset_clears_running_episode(make_cartpole):
    env = make_cartpole(num_envs=4)
    env.reset(seed=0)
    for _ in range(5):
        env.step(torch.ones(4, dtype=torch.int64))
    assert torch.all(env.buffers.elapsed == 5)
    env.reset(seed=0)
    assert torch.all(env.buffers.elapsed == 0)
    assert torch.all(env.buffers.episode_return == 0)
    # The first episode after the reset is counted from scratch.
    for step in range(1, 200):
        _, _, terminated, _, info = env.step(torch.ones(4, dtype=torch.int64))
        if terminated.any():
            assert torch.all(info["episode"]["l"][terminated] == step)
            break
    else:
        pytest.fail("no episode ended")


# ----------------------------------------------------------------------------- copies and buffers


def test_copy_false_returns_live_buffers(make_cartpole):
    env = make_cartpole(num_envs=8, copy=False)
    obs, _ = env.reset(seed=0)
    assert obs.data_ptr() == env.buffers.obs.data_ptr()
    obs, reward, terminated, truncated, info = env.step(torch.ones(8, dtype=torch.int64))
    assert obs.data_ptr() == env.buffers.obs.data_ptr()
    assert reward.data_ptr() == env.buffers.rewards.data_ptr()
    assert terminated.data_ptr() == env.buffers.terminated.data_ptr()
    assert truncated.data_ptr() == env.buffers.truncated.data_ptr()
    assert info["final_obs"].data_ptr() == env.buffers.final_obs.data_ptr()
    snapshot = obs.clone()
    env.step(torch.ones(8, dtype=torch.int64))
    assert not torch.equal(obs, snapshot), "the live buffer should have moved on"


def test_copy_true_returns_copies(make_cartpole):
    env = make_cartpole(num_envs=8, copy=True)
    obs, _ = env.reset(seed=0)
    assert obs.data_ptr() != env.buffers.obs.data_ptr()
    obs, reward, terminated, truncated, info = env.step(torch.ones(8, dtype=torch.int64))
    returned = [obs, reward, terminated, truncated, info["final_obs"]]
    owned = [
        env.buffers.obs,
        env.buffers.rewards,
        env.buffers.terminated,
        env.buffers.truncated,
        env.buffers.final_obs,
    ]
    for mine, theirs in zip(returned, owned, strict=True):
        assert mine.data_ptr() != theirs.data_ptr()
    snapshot = [t.clone() for t in returned]
    for _ in range(30):
        env.step(torch.ones(8, dtype=torch.int64))
    for mine, kept in zip(returned, snapshot, strict=True):
        assert torch.equal(mine, kept), "a returned copy was overwritten by a later step"
    # Writing into a returned tensor does not touch the environment.
    state_before = env.buffers.obs.clone()
    obs.fill_(123.0)
    assert torch.equal(env.buffers.obs, state_before)


def test_state_tensors_are_live_and_writable(make_cartpole):
    env = make_cartpole(num_envs=3)
    env.reset(seed=0)
    # Put env 1 just short of the right edge, moving right: the next step terminates it.
    env.state_tensors["x"][1] = 2.39
    env.state_tensors["x_dot"][1] = 1.0
    env.state_tensors["theta"][1] = 0.0
    env.state_tensors["theta_dot"][1] = 0.0
    _, _, terminated, _, info = env.step(torch.ones(3, dtype=torch.int64))
    assert terminated.tolist() == [False, True, False]
    assert abs(float(info["final_obs"][1, 0]) - (2.39 + 0.02 * 1.0)) < 1e-5
    assert env.state().keys() == {"x", "x_dot", "theta", "theta_dot"}
    assert env.state()["x"].data_ptr() == env.state_tensors["x"].data_ptr()


# ----------------------------------------------------------------------------- construction paths


def test_gymnasium_make_vec():
    env = gymnasium.make_vec("warpsci/CartPole-v1", num_envs=4, device="cpu")
    assert isinstance(env.unwrapped, WarpVectorEnv)
    assert env.num_envs == 4
    obs, _ = env.reset(seed=9)
    assert obs.shape == (4, 4)
    obs, reward, terminated, truncated, info = env.step(torch.ones(4, dtype=torch.int64))
    assert reward.shape == (4,)
    reference = warpsci.make("CartPole-v1", num_envs=4, device="cpu")
    reference.reset(seed=9)
    expected, *_ = reference.step(torch.ones(4, dtype=torch.int64))
    assert torch.equal(obs, expected)


def test_registry_lists_cartpole():
    assert "CartPole-v1" in warpsci.registered_ids()
    assert warpsci.get_definition("warpsci/CartPole-v1") is warpsci.get_definition("CartPole-v1")


def test_numpy_actions_are_accepted(make_cartpole):
    env = make_cartpole(num_envs=6)
    env.reset(seed=0)
    env.action_space.seed(0)
    numpy_actions = env.action_space.sample()
    assert isinstance(numpy_actions, np.ndarray)
    obs_numpy, *_ = env.step(numpy_actions)

    twin = make_cartpole(num_envs=6)
    twin.reset(seed=0)
    obs_torch, *_ = twin.step(torch.from_numpy(numpy_actions.astype(np.int64)))
    assert torch.equal(obs_numpy, obs_torch)
    # 32-bit integer arrays too.
    env.step(np.ones(6, dtype=np.int32))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.uint16, np.uint32, np.uint64])
def test_every_integer_numpy_action_dtype_is_accepted(make_cartpole, dtype):
    env = make_cartpole(num_envs=3)
    env.reset(seed=0)
    obs, *_ = env.step(np.array([0, 1, 1], dtype=dtype))
    twin = make_cartpole(num_envs=3)
    twin.reset(seed=0)
    expected, *_ = twin.step(torch.tensor([0, 1, 1]))
    assert torch.equal(obs, expected)


# ----------------------------------------------------------------------------- errors


def test_unknown_env_id():
    with pytest.raises(ValueError, match="NoSuchEnv-v0"):
        warpsci.make("NoSuchEnv-v0")


@pytest.mark.parametrize("num_envs", [0, -1, 2.5, True, "4"])
def test_bad_num_envs(num_envs):
    with pytest.raises(ValueError, match="num_envs"):
        warpsci.make("CartPole-v1", num_envs=num_envs)


@pytest.mark.parametrize("shape", [(3,), (5,), (4, 1), ()])
def test_wrong_action_shape(make_cartpole, shape):
    env = make_cartpole(num_envs=4)
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(shape, dtype=torch.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_non_integer_action_dtype(make_cartpole, dtype):
    env = make_cartpole(num_envs=4)
    env.reset()
    with pytest.raises(TypeError, match="integer"):
        env.step(torch.zeros(4, dtype=dtype))


def test_non_array_actions(make_cartpole):
    env = make_cartpole(num_envs=2)
    env.reset()
    with pytest.raises(TypeError):
        env.step([0, 1])


@pytest.mark.parametrize("bad_value", [2, -1, 100])
def test_out_of_range_action(make_cartpole, bad_value):
    env = make_cartpole(num_envs=4)
    obs, _ = env.reset()
    actions = torch.tensor([0, 1, bad_value, 0])
    with pytest.raises(ValueError, match=str(bad_value)):
        env.step(actions)
    # The rejected step changed nothing.
    assert torch.equal(env.buffers.obs.squeeze(1), obs)
    assert torch.all(env.buffers.elapsed == 0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised where there is no GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_gpu(device):
    with pytest.raises(RuntimeError, match="cuda"):
        warpsci.make("CartPole-v1", num_envs=2, device=device)


@pytest.mark.parametrize("device", ["tpu", "not a device"])
def test_invalid_device(device):
    with pytest.raises(ValueError, match="device"):
        warpsci.make("CartPole-v1", num_envs=2, device=device)


def test_unknown_params_field():
    with pytest.raises(ValueError, match="nope"):
        warpsci.make("CartPole-v1", num_envs=2, params={"nope": 1})


def test_params_of_wrong_type():
    with pytest.raises(TypeError):
        warpsci.make("CartPole-v1", num_envs=2, params=object())


def test_step_before_reset(make_cartpole):
    env = make_cartpole(num_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, dtype=torch.int64))


@pytest.mark.parametrize("seed", [-1, 1.5])
def test_bad_seed(make_cartpole, seed):
    env = make_cartpole(num_envs=2)
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=seed)


@warpsci.agent_function
def _allocating_step_agent(state, params, actions, env, agent, phase, key):
    """Cartpole's step through a scratch array: needs Numba's reference counting."""
    scratch = np.zeros(1, np.float32)
    scratch[0] = cartpole_step_agent(state, params, actions, env, agent, phase, key)
    return scratch[0]


def test_cpu_kernels_of_an_allocating_environment_compile_with_reference_counting():
    import dataclasses

    from warpsci.envs.cartpole import CARTPOLE

    allocating = dataclasses.replace(CARTPOLE, name="AllocatingCartPole", step_agent=_allocating_step_agent)
    plain, allocating_env = WarpVectorEnv(CARTPOLE, 16, seed=3), WarpVectorEnv(allocating, 16, seed=3)
    plain.reset(), allocating_env.reset()
    actions = torch.tensor([0, 1] * 8)
    for _ in range(30):
        expected, got = plain.step(actions), allocating_env.step(actions)
        torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
    # (Whether it compiled here or came from the kernel cache, where the counted variant is kept.)
    plain.random_rollout(7), allocating_env.random_rollout(7)
    torch.testing.assert_close(allocating_env.buffers.obs, plain.buffers.obs, rtol=0, atol=0)
