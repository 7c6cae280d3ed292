"""``WarpVectorEnv.random_rollout``: many steps per launch with actions drawn inside the kernel.

It must be exactly the trajectory that ``step`` produces from the same actions, for every registered
environment and action kind; its actions must be uniform over the action space; its episode tallies
must be the episodes that ended; and the CUDA kernel (under Numba's simulator) must match the CPU one.
"""

from __future__ import annotations

import textwrap

import gymnasium
import numpy as np
import pytest
import torch
from fresh_interpreter import run_script

import warpsci
from warpsci.backends.stages import random_action_bounds

ENV_IDS = warpsci.registered_ids()
SHORT_EPISODE = 9


def short_env(env_id: str, num_envs: int, seed: int) -> warpsci.WarpVectorEnv:
    params = warpsci.get_definition(env_id).default_params()
    changes = {
        name: SHORT_EPISODE for name in ("max_episode_steps", "episode_length") if hasattr(params, name)
    }
    if hasattr(params, "seed"):  # a set-up seed (None draws one per environment object, as the reference)
        changes["seed"] = 5
    return warpsci.make(env_id, num_envs=num_envs, seed=seed, params=changes, copy=False, check_actions=False)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_random_rollout_is_the_trajectory_step_takes_with_the_same_actions(env_id):
    num_envs, num_steps = 7, 3 * SHORT_EPISODE + 2
    one_at_a_time, stepped, fused = (short_env(env_id, num_envs, seed=11) for _ in range(3))
    for env in (one_at_a_time, stepped, fused):
        env.reset()
    episodes = torch.zeros(num_envs, dtype=torch.int64)
    return_sum = torch.zeros_like(one_at_a_time.buffers.final_return, dtype=torch.float64)
    for _ in range(num_steps):
        stats = one_at_a_time.random_rollout(1)
        episodes += stats.episodes
        return_sum += stats.return_sum.reshape(return_sum.shape)
        actions = one_at_a_time.actions_buffer.clone()
        if isinstance(stepped, warpsci.MultiAgentVectorEnv):  # actions per group
            actions = {group.name: stepped.group_rows(actions, group) for group in stepped.groups}
        assert one_at_a_time.action_space.contains(
            {name: a.numpy() for name, a in actions.items()} if isinstance(actions, dict) else actions.numpy()
        )
        _, _, _, _, info = stepped.step(actions)
        done = info["_final_obs"]
        assert torch.equal(stats.episodes, done.to(torch.int64))
    fused_stats = fused.random_rollout(num_steps)

    for name in one_at_a_time.buffers._fields:
        reference = getattr(stepped.buffers, name)
        assert torch.equal(getattr(one_at_a_time.buffers, name), reference), name
        if name != "actions":  # the fused run's buffer holds only its last actions
            assert torch.equal(getattr(fused.buffers, name), reference), name
    for name, tensor in stepped.state_tensors.items():
        assert torch.equal(fused.state_tensors[name], tensor), name
    assert torch.equal(fused_stats.episodes, episodes)
    torch.testing.assert_close(fused_stats.return_sum.reshape(return_sum.shape), return_sum)
    assert int(episodes.sum()) >= num_envs, "short episodes must have ended during the rollout"


def test_random_discrete_actions_are_uniform():
    env = warpsci.make("Acrobot-v1", num_envs=2000, seed=4, copy=False)
    env.reset()
    counts = torch.zeros(3)
    for _ in range(20):
        env.random_rollout(1)
        counts += torch.bincount(env.actions_buffer.long(), minlength=3)
    frequencies = counts / counts.sum()
    # 40,000 draws: the standard error of each frequency is about 0.0024.
    torch.testing.assert_close(frequencies, torch.full((3,), 1 / 3), atol=0.012, rtol=0)


def test_random_box_actions_fill_the_bounds():
    env = warpsci.make("Pendulum-v1", num_envs=5000, seed=2, copy=False)
    env.reset()
    env.random_rollout(1)
    actions = env.actions_buffer.flatten()
    assert float(actions.min()) >= -2.0 and float(actions.max()) < 2.0
    assert abs(float(actions.mean())) < 0.05  # uniform on [-2, 2]: standard error 0.016
    assert abs(float(actions.var()) - 16 / 12) < 0.06


def test_random_cartpole_return_matches_gymnasium_random_policy():
    """A random policy's mean return is a property of the dynamics, not of the generator."""
    env = warpsci.make("CartPole-v1", num_envs=1000, seed=0, copy=False)
    env.reset()
    stats = env.random_rollout(150)
    warpsci_mean = stats.mean_return()

    reference = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 64)
    reference.reset(seed=0)
    rng = np.random.default_rng(0)
    returns: list[float] = []
    running = np.zeros(64)
    for _ in range(5000):  # about 14,000 episodes; the loop stops long before
        _, rewards, terminated, truncated, _ = reference.step(rng.integers(0, 2, size=64))
        running += rewards
        done = terminated | truncated
        returns.extend(running[done].tolist())
        running[done] = 0.0
        if len(returns) >= 4000:
            break
    gymnasium_mean = float(np.mean(returns))
    assert int(stats.episodes.sum()) > 4000
    # Returns have a standard deviation of about 12; with >4000 episodes on each side the standard
    # error of the difference is about 0.27.
    assert abs(warpsci_mean - gymnasium_mean) < 1.2, (warpsci_mean, gymnasium_mean)
    assert 20.0 < warpsci_mean < 24.5


def test_random_rollout_refuses_bad_input():
    env = warpsci.make("CartPole-v1", num_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.random_rollout(3)
    env.reset()
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="num_steps must be a positive integer"):
            env.random_rollout(bad)
    with pytest.raises(ValueError, match="finite Box bounds"):
        random_action_bounds(gymnasium.spaces.Box(-np.inf, np.inf, (2,)))
    assert np.isnan(env.random_rollout(1).mean_return())  # Cartpole cannot end in one step


SIMULATOR_SCRIPT = textwrap.dedent(
    """
    import dataclasses
    import sys

    import numpy as np
    from numba import config

    if not config.ENABLE_CUDASIM:
        sys.exit("the CUDA simulator is not enabled")

    sys.path.insert(0, "tests")
    import action_toys
    import multi_agent_toy
    from warpsci.envs.cartpole import CARTPOLE
    from warpsci.envs.pendulum import PENDULUM
    from warpsci.testing.kernel_runner import HostKernelRunner

    cases = [
        (CARTPOLE, 5, 4),  # single agent: two blocks, the second partly empty
        (PENDULUM, 3, 2),  # Box actions
        (action_toys.PICK_PAIR, 3, 2),  # MultiDiscrete actions
        (multi_agent_toy.TOY, 3, 4),  # three agents, two phases: barriers in the loop
        (multi_agent_toy.TOY, 3, 2),  # three agents in two blocks: a launch per stage
        (multi_agent_toy.TOY, 3, 8),  # two environments a block, the second block half empty
    ]
    for definition, num_envs, threads in cases:
        # Episodes of at most 6 steps, so that autoresets happen within the 15 steps.
        params = dataclasses.replace(definition.default_params(), max_episode_steps=6)
        cpu = HostKernelRunner(definition, num_envs, "cpu", params=params)
        cuda = HostKernelRunner(definition, num_envs, "cuda", params=params, threads_per_block=threads)
        cpu.reset(7)
        cuda.reset(7)
        cpu_tallies = cpu.random_steps(15, 7)
        cuda_tallies = cuda.random_steps(15, 7)
        pairs = [
            *zip(cpu.buffers._fields, cpu.buffers, cuda.buffers),
            *zip(cpu.state._fields, cpu.state, cuda.state),
            *zip(["episodes", "return_sum"], cpu_tallies, cuda_tallies),
        ]
        for name, host, simulated in pairs:
            if not np.array_equal(host, simulated):
                sys.exit(f"{definition.name}: {name}\\ncpu: {host.tolist()}\\nsim: {simulated.tolist()}")
        if np.any(cpu_tallies[0] == 0) or not np.all(cpu.buffers.tick == 15):
            sys.exit(f"{definition.name}: an environment ended no episode, the comparison proves little")
        print(definition.name, "episodes", cpu_tallies[0].tolist())
    print("random rollouts agree")
    """
)


def test_random_rollout_kernel_under_simulator_matches_cpu():
    result = run_script(SIMULATOR_SCRIPT, simulator=True)
    assert result.returncode == 0, f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    assert "random rollouts agree" in result.stdout
