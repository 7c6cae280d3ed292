"""The trainer's fused kernels: sampling, recording a step, GAE - against torch references, and the
CUDA versions (under Numba's simulator) against the CPU ones."""

from __future__ import annotations

import math
import textwrap

import pytest
import torch
from fresh_interpreter import run_script

import warpsci
from warpsci.rollout import RolloutBuffer, compute_gae
from warpsci.rollout_kernels import SHUFFLE_ROUNDS, RolloutKernels, RowShuffle
from warpsci.sampling import MASKED_LOGIT

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")],
    ),
]


def kernels_for(
    env_id: str, num_envs: int, kind: str, log_std=None, num_steps: int = 3, device="cpu", params=None
):
    env = warpsci.make(
        env_id, num_envs=num_envs, device=device, seed=5, params=params, copy=False, check_actions=False
    )
    env.reset()
    space = env.single_action_space
    action_shape = tuple(space.shape)
    dtype = torch.float32 if kind == "continuous" else torch.int64
    buffer = RolloutBuffer(
        num_steps,
        num_envs,
        tuple(env.single_observation_space.shape),
        action_shape,
        env.device,
        action_dtype=dtype,
    )
    return env, buffer, RolloutKernels(env, buffer, kind, log_std)


@pytest.mark.parametrize("device", DEVICES)
def test_categorical_samples_follow_softmax_and_report_their_log_prob(device):
    num_envs = 20000
    env, buffer, kernels = kernels_for("Acrobot-v1", num_envs, "discrete", device=device)
    logits = torch.tensor([0.5, -1.0, 1.5], device=device).expand(num_envs, 3).contiguous()
    kernels.sample(logits, step=1)
    actions = buffer.actions[1]
    frequencies = torch.bincount(actions, minlength=3).float() / num_envs
    torch.testing.assert_close(frequencies, torch.softmax(logits[0], 0), atol=0.015, rtol=0)
    expected = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
    torch.testing.assert_close(buffer.log_probs[1], expected)
    assert torch.equal(env.actions_buffer.long(), actions)  # the env will apply the same actions
    assert torch.all(buffer.actions[0] == 0), "other rollout slots are untouched"


@pytest.mark.parametrize("device", DEVICES)
def test_multi_discrete_samples_each_component_from_its_own_logits(device):
    import action_toys  # noqa: F401  (registers PickPair-v0: MultiDiscrete([3, 4]))

    num_envs = 20000
    env, buffer, kernels = kernels_for("PickPair-v0", num_envs, "multi_discrete", device=device)
    first = torch.tensor([1.0, 0.0, -1.0, MASKED_LOGIT])
    second = torch.tensor([0.0, 0.5, 1.0, 2.0])
    logits = torch.stack([first, second]).to(device).expand(num_envs, 2, 4).contiguous()
    kernels.sample(logits, step=0)
    actions = buffer.actions[0]
    assert int(actions[:, 0].max()) <= 2, "a masked category was sampled"
    for component, row in enumerate((first, second)):
        frequencies = torch.bincount(actions[:, component], minlength=4).float() / num_envs
        torch.testing.assert_close(frequencies, torch.softmax(row, 0).to(device), atol=0.015, rtol=0)
    log_softmax = torch.log_softmax(logits, -1)
    expected = log_softmax.gather(2, actions[:, :, None]).squeeze(2).sum(1)
    torch.testing.assert_close(buffer.log_probs[0], expected)


@pytest.mark.parametrize("device", DEVICES)
def test_gaussian_samples_have_the_policy_mean_and_spread(device):
    num_envs = 20000
    log_std = torch.tensor([math.log(0.5)], device=device)
    env, buffer, kernels = kernels_for("Pendulum-v1", num_envs, "continuous", log_std=log_std, device=device)
    mean = torch.full((num_envs, 1), 0.3, device=device)
    kernels.sample(mean, step=2)
    actions = buffer.actions[2]
    assert abs(float(actions.mean()) - 0.3) < 0.02 and abs(float(actions.std()) - 0.5) < 0.02
    expected = torch.distributions.Normal(mean, 0.5).log_prob(actions).sum(-1)
    torch.testing.assert_close(buffer.log_probs[2], expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(env.actions_buffer, actions)


def test_samples_differ_between_steps_and_repeat_for_the_same_tick():
    env, buffer, kernels = kernels_for("CartPole-v1", 4096, "discrete")
    logits = torch.zeros(4096, 2)
    kernels.sample(logits, step=0)
    again = buffer.actions[0].clone()
    kernels.sample(logits, step=0)
    assert torch.equal(buffer.actions[0], again), "same seed and tick, same draw"
    env.step_in_place()
    kernels.sample(logits, step=1)
    assert not torch.equal(buffer.actions[1], again), "a new tick draws anew"


@pytest.mark.parametrize("device", DEVICES)
def test_record_copies_the_step_results(device):
    """Rewards, flags and episode statistics every step; the final observation only where a row
    was truncated (time limit 7 steps), the only place it is read."""
    from warpsci.envs.cartpole import CartPoleParams

    params = CartPoleParams(max_episode_steps=7)
    env, buffer, kernels = kernels_for(
        "CartPole-v1", 16, "discrete", num_steps=40, device=device, params=params
    )
    buffer.valid.fill_(1.0)  # what the sampler marks: every agent in the game when it acted
    for step in range(40):
        env.actions_buffer.copy_(torch.arange(16, device=device) % 2)
        env.step_in_place()
        kernels.record(step)
        b = env.buffers
        done = b.terminated | b.truncated
        truncated = b.truncated & ~b.terminated
        assert torch.equal(buffer.rewards[step], b.rewards[:, 0])
        assert torch.equal(buffer.dones[step], done.float())
        assert torch.equal(buffer.truncated[step], truncated.float())
        assert torch.equal(buffer.final_obs[step][truncated], b.final_obs[truncated, 0])
        assert torch.all(buffer.final_obs[step][~truncated] == 0), "not copied where it is never read"
        assert torch.equal(buffer.episode_returns[step], b.final_return[:, 0])
        assert torch.equal(buffer.episode_lengths[step], b.final_length.float())
    assert buffer.truncated.sum() >= 16, "alternating pushes keep the poles up for 7 steps"


@pytest.mark.parametrize("device", DEVICES)
def test_gae_kernel_matches_the_reference_recursion(device):
    generator = torch.Generator().manual_seed(0)
    env, buffer, kernels = kernels_for("CartPole-v1", 6, "discrete", num_steps=50, device=device)
    rewards = torch.randn(50, 6, generator=generator).to(device)
    buffer.values.copy_(torch.randn(50, 6, generator=generator).to(device))
    buffer.dones.copy_((torch.rand(50, 6, generator=generator) < 0.1).float().to(device))
    next_value = torch.randn(6, generator=generator).to(device)
    kernels.advantages(rewards, next_value, 0.99, 0.95)
    expected = compute_gae(rewards, buffer.values, buffer.dones, next_value, 0.99, 0.95)
    torch.testing.assert_close(buffer.advantages, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(buffer.returns, expected + buffer.values, atol=1e-5, rtol=1e-5)


SIMULATOR_SCRIPT = textwrap.dedent(
    """
    import sys

    import numpy as np
    from numba import config

    if not config.ENABLE_CUDASIM:
        sys.exit("the CUDA simulator is not enabled")

    from warpsci import rollout_kernels as rk

    rng = np.random.default_rng(0)
    N, T = 5, 4
    tick = rng.integers(0, 100, N).astype(np.int64)

    def run(function, make_arguments, outputs):
        cpu_arguments, sim_arguments = make_arguments(), make_arguments()
        cpu, cuda = rk._compiled(function)
        cpu(N, cpu_arguments)
        cuda[2, 4](N, sim_arguments)  # 2 blocks of 4 threads: the last 3 threads idle
        for index in outputs:
            if not np.allclose(cpu_arguments[index], sim_arguments[index], atol=1e-6):
                sys.exit(f"{function.__name__}: argument {index} differs")

    # Rows are (environment, agent) pairs: agents 0 and 2 of N // 2 environments with 3 agents each.
    agents, active = np.array([0, 2], np.int32), rng.random((N // 2 + 1, 3)) < 0.7
    def extra(T=T):
        return (agents, active.copy(), np.zeros((T, N), np.float32))
    logits = rng.normal(size=(N, 3)).astype(np.float32)
    run(rk.sample_discrete, lambda: (logits, np.zeros(1, np.float32), tick, 7, 1,
        np.zeros((T, N), np.int64), np.zeros((T, N), np.float32), np.zeros((N, 3, 1), np.int32), *extra()),
        (5, 6, 7, 10))
    padded = rng.normal(size=(N * 2, 4)).astype(np.float32)
    run(rk.sample_multi_discrete, lambda: (padded, np.zeros(1, np.float32), tick, 7, 2,
        np.zeros((T, N, 2), np.int64), np.zeros((T, N), np.float32), np.zeros((N, 3, 2), np.int32), *extra()),
        (5, 6, 7, 10))
    mean = rng.normal(size=(N, 2)).astype(np.float32)
    log_std = np.array([0.1, -0.3], np.float32)
    run(rk.sample_gaussian, lambda: (mean, log_std, tick, 7, 0, np.zeros((T, N, 2), np.float32),
        np.zeros((T, N), np.float32), np.zeros((N, 3, 2), np.float32), *extra()),
        (5, 6, 7, 10))
    rewards, values = rng.normal(size=(T, N)).astype(np.float32), rng.normal(size=(T, N)).astype(np.float32)
    dones = (rng.random((T, N)) < 0.3).astype(np.float32)
    next_value = rng.normal(size=N).astype(np.float32)
    run(rk.generalized_advantages, lambda: (rewards, values, dones, next_value,
        0.99, 0.95, np.zeros((T, N), np.float32), np.zeros((T, N), np.float32)), (6, 7))
    keys = rng.integers(0, 2**62, rk.SHUFFLE_ROUNDS).astype(np.int64)
    run(rk.shuffled_row, lambda: (N, 1, 2, keys, np.zeros(N, np.int64)), (4,))
    print("fused kernels agree")
    """
)


@pytest.mark.parametrize("count", [1, 2, 3, 10, 64, 1000, 4097])
def test_row_shuffle_is_a_permutation_drawn_from_the_generator(count):
    generator = torch.Generator().manual_seed(5)
    shuffle = RowShuffle(count, torch.device("cpu"), generator)
    orders = [shuffle() for _ in range(3)]
    for order in orders:
        assert order.dtype == torch.int64
        assert torch.equal(torch.sort(order).values, torch.arange(count))
    if count >= 10:
        assert not torch.equal(orders[0], orders[1]), "each call draws a new order"
    again = RowShuffle(count, torch.device("cpu"), torch.Generator().manual_seed(5))
    assert all(torch.equal(order, again()) for order in orders), "the generator's state decides the order"


@pytest.mark.parametrize("count", [3, 10, 37])
def test_row_shuffle_puts_every_row_everywhere_alike(count):
    """Each row lands at each position about equally often (chi-square over positions, well below
    the 0.1% critical value; a weak shuffle of a small batch, such as 4 Feistel rounds, fails)."""
    generator = torch.Generator().manual_seed(0)
    shuffle = RowShuffle(count, torch.device("cpu"), generator)
    draws = 8000
    counts = torch.zeros(count, count)
    for _ in range(draws):
        counts[torch.arange(count), shuffle()] += 1
    expected = draws / count
    chi_square = ((counts - expected) ** 2 / expected).sum().item()
    freedom = (count - 1) ** 2
    assert chi_square < freedom + 4.5 * (2 * freedom) ** 0.5, (chi_square, freedom)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("count", [1, 1000, 262_144, 2_097_153])
def test_row_shuffle_on_the_gpu_is_the_cpu_permutation_of_its_keys(count):
    """The CUDA kernel gives a permutation, the one the CPU loop gives from the same round keys."""
    generator = torch.Generator(device="cuda").manual_seed(3)
    state = generator.get_state()
    order = RowShuffle(count, torch.device("cuda"), generator)().cpu()
    assert torch.equal(torch.sort(order).values, torch.arange(count))
    replay = torch.Generator(device="cuda")
    replay.set_state(state)
    keys = torch.randint(0, 2**62, (SHUFFLE_ROUNDS,), device="cuda", generator=replay).cpu()
    shuffle = RowShuffle(count, torch.device("cpu"), torch.Generator())
    expected = torch.empty(count, dtype=torch.int64)
    shuffle._kernel(count, (count, shuffle.left_bits, shuffle.right_bits, keys.numpy(), expected.numpy()))
    assert torch.equal(order, expected)


def test_fused_kernels_under_simulator_match_cpu():
    result = run_script(SIMULATOR_SCRIPT, simulator=True)
    assert result.returncode == 0, f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert "fused kernels agree" in result.stdout


POLICY_STEP_SCRIPT = textwrap.dedent(
    """
    import sys

    import numpy as np
    from numba import config

    if not config.ENABLE_CUDASIM:
        sys.exit("the CUDA simulator is not enabled")

    from warpsci import registry
    from warpsci import rollout_kernels as rk
    from warpsci.backends.cuda import CudaKernels
    from warpsci.testing.kernel_runner import HostKernelRunner

    N, T, SEED = 5, 9, 3
    definition = registry.get_definition("CartPole-v1")
    assert not CudaKernels(registry.get_definition("TagGridworld-v0"), 2, 4).fuses_policy_step
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(T, N, 2)).astype(np.float32) * 3

    def rollout(fused):
        runner = HostKernelRunner(definition, N, "cuda", threads_per_block=4)  # 2 blocks, 3 idle threads
        assert runner._kernels.fuses_policy_step
        runner.max_episode_steps = 4  # truncations within the rollout
        runner.reset(SEED)
        b = runner.buffers
        agents = np.array([0], np.int32)
        out = dict(actions=np.zeros((T, N), np.int64), log_probs=np.zeros((T, N), np.float32),
                   valid=np.zeros((T, N), np.float32), rewards=np.zeros((T, N), np.float32),
                   dones=np.zeros((T, N), np.float32), ends=np.zeros((T, N), np.float32),
                   truncated=np.zeros((T, N), np.float32), final_obs=np.zeros((T, N, 4), np.float32),
                   returns=np.zeros((T, N), np.float32), lengths=np.zeros((T, N), np.float32),
                   obs=np.zeros((T, N, 4), np.float32))
        out["obs"][0] = b.obs[:, 0]  # the trainer stores step 0's observations; the fused step the rest
        for t in range(T):
            sample = (logits[t], np.zeros(1, np.float32), b.tick, SEED, t, out["actions"], out["log_probs"],
                      b.actions.reshape(N, 1, 1), agents, b.active, out["valid"])
            record = (t, agents, b.rewards, b.terminated, b.truncated, b.agent_terminated,
                      b.final_obs.reshape(N, 1, -1), b.final_return, b.final_length, out["rewards"],
                      out["dones"], out["ends"], out["truncated"], out["final_obs"], out["returns"],
                      out["lengths"], out["valid"])
            if fused:
                record = (record, t + 1, b.obs.reshape(N, 1, -1), out["obs"])
                runner._kernels.policy_step(rk.sample_discrete, sample, rk.record_step_and_observation,
                                            record, runner.state, runner.params, b, SEED,
                                            runner.max_episode_steps)
            else:
                out["obs"][t] = b.obs[:, 0]
                rk._compiled(rk.sample_discrete)[1][2, 4](N, sample)
                runner._kernels.step(runner.state, runner.params, b, SEED, runner.max_episode_steps)
                rk._compiled(rk.record_step)[1][2, 4](N, record)
        return {**out, **{f"state.{k}": v for k, v in runner.state._asdict().items()},
                **{f"buffers.{k}": v for k, v in b._asdict().items()}}

    apart, fused = rollout(False), rollout(True)
    for name in apart:
        if not np.array_equal(apart[name], fused[name]):
            sys.exit(f"{name} differs between the fused policy step and three launches")
    if not apart["truncated"].any() or not apart["dones"].any():
        sys.exit("the rollout saw no truncation: the check would not cover final observations")
    print("policy step agrees")
    """
)


def test_fused_policy_step_equals_three_launches_under_simulator():
    """Sampling, the environment's step, recording and storing the next observations in one CUDA
    launch (environments of one agent) leave every state array, environment buffer and rollout slot
    as the three launches and the observation copy do, through resets and truncations."""
    result = run_script(POLICY_STEP_SCRIPT, simulator=True)
    assert result.returncode == 0, f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert "policy step agrees" in result.stdout


def test_trainer_one_launch_path_fills_the_rollout_as_three_launches(monkeypatch):
    """The trainer's wiring of the one-launch rollout step (taken on CUDA), emulated on the CPU:
    the environment runs the CPU-compiled sampler, step and recorder it is handed, in the kernel's
    order. The rollout buffer must come out as the three-launch path fills it, observations of every
    step included (the one-launch step stores them for the next step)."""
    from warpsci import rollout_kernels
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig

    def one_launch(env, sampler, sample_arguments, recorder, record_arguments):
        rollout_kernels._compiled(sampler)[0](env.num_envs, sample_arguments)
        env.step_in_place()
        rollout_kernels._compiled(recorder)[0](env.num_envs, record_arguments)

    buffers = []
    for fused in (False, True):
        config = TrainConfig(env_id="CartPole-v1", num_envs=16, num_steps=40, total_timesteps=640, seed=2)
        trainer = make_trainer(config)
        if fused:
            env_class = type(trainer.env)
            monkeypatch.setattr(env_class, "fuses_policy_step", property(lambda self: True))
            monkeypatch.setattr(env_class, "policy_step_in_place", one_launch)
        assert trainer.single.kernels.fuses_step is fused
        trainer.env.reset()
        trainer.collect_rollout()
        buffer = trainer.single.buffer
        names = ("obs", "actions", "log_probs", "rewards", "dones", "episode_ends", "valid")
        buffers.append({name: getattr(buffer, name).clone() for name in names})
    assert buffers[0]["dones"].any(), "no episode ended: resets would go untested"
    for name, expected in buffers[0].items():
        assert torch.equal(buffers[1][name], expected), name
