"""The CUDA kernels, run under Numba's CUDA simulator, against the CPU backend.

The simulator must be switched on (``NUMBA_ENABLE_CUDASIM=1``) before numba is imported, so the CUDA
side runs in a fresh interpreter.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
from fresh_interpreter import run_script

import warpsci
from warpsci.envs.cartpole import CARTPOLE
from warpsci.testing.kernel_runner import HostKernelRunner

SIMULATOR_SCRIPT = textwrap.dedent(
    """
    import sys

    import numpy as np
    from numba import config

    if not config.ENABLE_CUDASIM:
        sys.exit("the CUDA simulator is not enabled")

    from warpsci.envs.cartpole import CARTPOLE
    from warpsci.testing.kernel_runner import HostKernelRunner

    NUM_ENVS, THREADS_PER_BLOCK, NUM_STEPS, SEED = 6, 4, 40, 1234

    cpu = HostKernelRunner(CARTPOLE, NUM_ENVS, "cpu")
    cuda = HostKernelRunner(CARTPOLE, NUM_ENVS, "cuda", threads_per_block=THREADS_PER_BLOCK)
    # 6 single-agent environments, 4 per block: 2 blocks, the second half empty.
    layout = (cuda._kernels.grid, cuda._kernels.block)
    assert layout == (2, (1, 4)), layout


    def compare(where):
        pairs = [("buffers", cpu.buffers, cuda.buffers), ("state", cpu.state, cuda.state)]
        for group, host_arrays, simulated_arrays in pairs:
            for name, host, simulated in zip(host_arrays._fields, host_arrays, simulated_arrays):
                if host.dtype != simulated.dtype or not np.array_equal(host, simulated):
                    sys.exit(
                        f"{where}: {group}.{name} differs\\n"
                        f"cpu:  {host.tolist()}\\ncuda: {simulated.tolist()}"
                    )


    cpu.reset(SEED)
    cuda.reset(SEED)
    compare("after reset")
    initial = cpu.buffers.obs.copy()

    rng = np.random.default_rng(0)
    terminations = np.zeros(NUM_ENVS, dtype=int)
    for step in range(NUM_STEPS):
        if step < 12:
            # Push right until every pole falls, so autoresets happen early.
            actions = np.ones(NUM_ENVS, dtype=np.int32)
        else:
            actions = rng.integers(0, 2, size=NUM_ENVS).astype(np.int32)
        cpu.step(actions, SEED)
        cuda.step(actions, SEED)
        compare(f"after step {step + 1}")
        terminations += cpu.buffers.terminated

    # The comparison means something only if the kernels did work in every environment.
    if not np.all(terminations >= 1):
        sys.exit(f"some environments never ended an episode: {terminations.tolist()}")
    if np.array_equal(initial, cpu.buffers.obs) or not np.all(cpu.buffers.tick == NUM_STEPS):
        sys.exit("the environments did not advance")
    print("episodes ended per environment:", terminations.tolist())
    """
)


def test_cuda_kernels_under_simulator_match_cpu_backend():
    result = run_script(SIMULATOR_SCRIPT, simulator=True, timeout=300)
    assert result.returncode == 0, (
        f"simulator run failed (exit code {result.returncode})\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    )
    assert "episodes ended per environment" in result.stdout


@pytest.mark.parametrize("seed", [0, 99])
def test_host_runner_cpu_matches_vector_env(seed):
    num_envs, num_steps = 10, 60
    runner = HostKernelRunner(CARTPOLE, num_envs, "cpu")
    env = warpsci.make("CartPole-v1", num_envs=num_envs, device="cpu", seed=0)

    obs, _ = env.reset(seed=seed)
    runner.reset(seed)
    np.testing.assert_array_equal(runner.buffers.obs[:, 0, :], obs.numpy())

    rng = np.random.default_rng(seed)
    ended = 0
    for step in range(num_steps):
        actions = np.ones(num_envs, dtype=np.int64) if step < 10 else rng.integers(0, 2, size=num_envs)
        obs, reward, terminated, truncated, info = env.step(torch.from_numpy(actions))
        runner.step(actions, seed)
        np.testing.assert_array_equal(runner.buffers.obs[:, 0, :], obs.numpy(), err_msg=f"step {step}")
        np.testing.assert_array_equal(runner.buffers.rewards[:, 0], reward.numpy())
        np.testing.assert_array_equal(runner.buffers.terminated, terminated.numpy())
        np.testing.assert_array_equal(runner.buffers.truncated, truncated.numpy())
        done = info["_final_obs"].numpy()
        np.testing.assert_array_equal(runner.buffers.final_obs[done, 0, :], info["final_obs"].numpy()[done])
        ended += int(done.sum())
    assert ended >= num_envs


def test_simulated_warp_intrinsics_exchange_within_each_warp():
    """``warpsci.simulated_warps``: under the simulator, a lane's ``shfl_xor_sync`` gets its partner's
    value and ``shfl_sync`` its source lane's (an int and a float), a ballot sets the bits of the
    lanes that voted, ``match_any_sync`` the bits of the lanes that hold the lane's value, each warp
    of a block on its own (two warps, the second running one more round than the first), and
    ``syncwarp`` orders a warp's shared-memory writes before its reads."""
    script = textwrap.dedent(
        """
        import numpy as np
        from numba import cuda, int32

        from warpsci import simulated_warps

        simulated_warps.enable()

        @cuda.jit
        def kernel(partners, sources, halves, votes, matches, neighbours, rounds):
            tid = cuda.threadIdx.x
            lane = tid % 32
            row = cuda.shared.array(64, int32)
            partners[tid] = cuda.shfl_xor_sync(0xFFFFFFFF, tid * 10, 5)
            sources[tid] = cuda.shfl_sync(0xFFFFFFFF, tid * 10, (lane * 7) % 32)
            halves[tid] = cuda.shfl_sync(0xFFFFFFFF, tid * 0.5, 31 - lane)
            votes[tid] = cuda.ballot_sync(0xFFFFFFFF, lane % 3 == 0)
            matches[tid] = cuda.match_any_sync(-1, lane % 4 + 4 * (tid // 32))
            row[tid] = tid + 1000
            cuda.syncwarp(0xFFFFFFFF)
            neighbours[tid] = row[tid - lane + (lane + 1) % 32]
            count = 0
            for _ in range(2 + tid // 32):
                count += cuda.shfl_xor_sync(0xFFFFFFFF, 1, 1)
            rounds[tid] = count

        partners, sources, votes, matches, neighbours, rounds = (np.zeros(64, np.int64) for _ in range(6))
        halves = np.zeros(64, np.float64)
        kernel[1, 64](partners, sources, halves, votes, matches, neighbours, rounds)
        tids = np.arange(64)
        lanes = tids % 32
        assert (partners == (tids ^ 5) * 10).all(), partners
        assert (sources == (tids - lanes + (lanes * 7) % 32) * 10).all(), sources
        assert (halves == (tids - lanes + 31 - lanes) * 0.5).all(), halves
        expected = sum(1 << lane for lane in range(32) if lane % 3 == 0)
        assert (votes == expected).all(), votes
        same = [sum(1 << other for other in range(32) if other % 4 == lane % 4) for lane in lanes]
        assert (matches == same).all(), matches
        assert (neighbours == tids - lanes + (lanes + 1) % 32 + 1000).all(), neighbours
        assert (rounds == 2 + tids // 32).all(), rounds
        print("warps ok")
        """
    )
    completed = run_script(script, simulator=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "warps ok" in completed.stdout


def test_simulated_shared_arrays_are_one_a_block_when_threads_declare_them_together():
    """After ``warpsci.simulated_warps.enable()`` the simulator's static shared arrays are one a
    declaration a launch even where a block's threads reach the declarations together (after a
    ``syncthreads``, as the block observation does) and Python switches threads often: each thread
    reads what another wrote. Without the lock, this script saw about one launch in five read an
    array nobody wrote (2026-11-27, this machine)."""
    script = textwrap.dedent(
        """
        import sys

        import numpy as np
        from numba import cuda, int32

        from warpsci import simulated_warps

        simulated_warps.enable()
        sys.setswitchinterval(1e-6)

        @cuda.jit
        def kernel(out):
            tid = cuda.threadIdx.x
            cuda.syncthreads()
            a = cuda.shared.array(32, int32)
            b = cuda.shared.array(32, int32)
            c = cuda.shared.array(32, int32)
            d = cuda.shared.array(32, int32)
            a[tid] = tid
            b[tid] = 2 * tid
            c[tid] = 3 * tid
            d[tid] = 4 * tid
            cuda.syncthreads()
            other = 31 - tid
            out[tid] = a[other] + b[other] + c[other] + d[other]

        expected = 10 * np.arange(32)[::-1]
        wrong = 0
        for _ in range(60):
            out = np.full(32, -1, np.int64)
            kernel[1, 32](out)
            wrong += int((out != expected).any())
        print("wrong launches", wrong)
        """
    )
    completed = run_script(script, simulator=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.split()[-3:] == ["wrong", "launches", "0"], completed.stdout


def test_simulated_blocks_meet_at_barriers_and_stop_at_a_failing_thread():
    """``warpsci.simulated_blocks`` (installed before warpsci builds a kernel under the simulator):
    threads meet at ``syncthreads`` round after round, threads that returned early count as arrived
    (as on a GPU), ``syncthreads_count`` counts, and a thread that fails stops its block: the
    threads waiting at a barrier or at a warp's shuffle give up, and the launch raises the failing
    thread's error, not theirs."""
    script = textwrap.dedent(
        """
        import numpy as np
        from numba import cuda, int32

        from warpsci import simulated_blocks, simulated_warps

        simulated_warps.enable()
        assert simulated_blocks.installed()

        @cuda.jit
        def rounds(out, counts):
            tid = cuda.threadIdx.x
            row = cuda.shared.array(64, int32)
            if tid >= 40:
                return
            total = 0
            for step in range(3):
                row[tid] = tid * 10 + step
                cuda.syncthreads()
                total += row[(tid + 1) % 40]
                cuda.syncthreads()
            out[tid] = total
            counts[tid] = cuda.syncthreads_count(tid % 3 == 0)

        out, counts = np.zeros(64, np.int64), np.zeros(64, np.int64)
        rounds[1, 64](out, counts)
        tids = np.arange(40)
        assert (out[:40] == 3 * ((tids + 1) % 40) * 10 + 3).all(), out
        assert (counts[:40] == 14).all(), counts

        @cuda.jit
        def failing(values, culprit):
            tid = cuda.threadIdx.x
            if tid == culprit:
                values[1000] = 1  # out of range: an IndexError under the simulator
            if tid < 32:
                values[tid] = cuda.shfl_xor_sync(0xFFFFFFFF, tid, 1)
            cuda.syncthreads()
            values[tid] += 1

        # Lane 0 fails before any lane of its warp has met there, lane 5 most likely after some.
        for culprit in (0, 5, 40):
            try:
                failing[1, 64](np.zeros(64, np.int64), culprit)
            except IndexError as error:
                print("raised", culprit, f"tid=[{culprit}, 0, 0]" in str(error))
        """
    )
    # A lane left waiting for a failed one would wait out the warp's 300 s timeout.
    completed = run_script(script, simulator=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    raised = [line for line in completed.stdout.splitlines() if line.startswith("raised")]
    assert raised == ["raised 0 True", "raised 5 True", "raised 40 True"], completed.stdout
