"""CUDA-graph replay gives the same results as eager execution (needs a CUDA GPU; skipped without).

Run on a GPU host: ``python -m pytest -q -m gpu tests/test_graphs_gpu.py``; results in BENCHMARKS.md.
"""

import pytest
import torch

import warpsci
from warpsci.algorithms import make_trainer
from warpsci.bench import action_sampler
from warpsci.config import TrainConfig
from warpsci.graphs import GraphReplay

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_numba_frees_queued_during_a_capture_wait_until_it_ends():
    """Numba frees device memory in batches, when a finalizer queues more than
    ``CUDA_DEALLOCS_COUNT``; Python may run finalizers (an array's last reference dropped, the
    garbage collector) inside a captured function, and a cuMemFree while capturing invalidates the
    capture. Seen as a flaky failure of a Tag continuous graph test in a process that had run other
    tests first. The capture defers the frees."""
    from numba import config
    from numba import cuda as numba_cuda

    total = torch.zeros(4, device="cuda")
    doomed = []

    def work() -> None:
        doomed.clear()  # on the capturing call: more frees queued than Numba keeps pending
        total.add_(1.0)

    replay = GraphReplay(work, torch.device("cuda"))
    replay()  # the warm-up, eager
    numba_cuda.current_context().deallocations.clear()
    doomed.extend(numba_cuda.device_array(256) for _ in range(config.CUDA_DEALLOCS_COUNT + 2))
    replay()  # captures (the frees queued inside) and replays
    replay()
    torch.cuda.synchronize()
    assert replay.captures == 1
    assert torch.equal(total, torch.full((4,), 3.0, device="cuda"))


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_replayed_env_steps_equal_eager_steps(env_id):
    def trajectory(capture: bool) -> list[torch.Tensor]:
        env = warpsci.make(env_id, num_envs=2048, device="cuda", seed=4, copy=False, check_actions=False)
        generator = torch.Generator(device="cuda").manual_seed(9)
        sample = action_sampler(env.single_action_space, env.actions_buffer, generator)
        env.reset()
        frames = []

        def ten_steps() -> None:
            for _ in range(10):
                sample()
                env.step_in_place()

        replay = GraphReplay(ten_steps, env.device, (generator,)) if capture else ten_steps
        for _ in range(4):  # warm-up, capture, two replays
            replay()
            frames += [env.buffers.obs.clone(), env.buffers.final_return.clone(), env.buffers.tick.clone()]
        if capture:
            assert replay.captures == 1
        return frames

    for eager, replayed in zip(trajectory(False), trajectory(True), strict=True):
        assert torch.equal(eager, replayed)


def test_new_reset_seed_triggers_a_new_capture():
    env = warpsci.make("CartPole-v1", num_envs=64, device="cuda", copy=False, check_actions=False)
    env.reset(seed=1)
    replay = GraphReplay(env.step_in_place, env.device, key=lambda: env.current_seed)
    for _ in range(3):
        replay()
    env.reset(seed=2)
    replay()
    assert replay.captures == 2


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_captured_training_equals_eager_training(env_id, algo):
    def run(capture: bool):
        config = TrainConfig(
            env_id=env_id,
            algo=algo,
            device="cuda",
            seed=3,
            num_envs=512,
            num_steps=32,
            total_timesteps=512 * 32 * 5,
            capture_graphs=capture,
            normalize_obs=True,
            normalize_reward=True,
        )
        trainer = make_trainer(config)
        result = trainer.train()
        return trainer, result

    eager, eager_result = run(False)
    captured, captured_result = run(True)
    assert captured._graph is not None and captured._graph.captures == 1
    assert captured._update_graph is not None and captured._update_graph.captures == 1
    for name in ("obs", "actions", "log_probs", "rewards", "dones", "advantages", "returns"):
        torch.testing.assert_close(
            getattr(captured.buffer, name), getattr(eager.buffer, name), rtol=1e-4, atol=1e-4, msg=name
        )
    for a, b in zip(captured.policy.parameters(), eager.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    returns = [row["charts/episodic_return"] for row in captured_result.history]
    expected = [row["charts/episodic_return"] for row in eager_result.history]
    assert returns == pytest.approx(expected, rel=1e-4, nan_ok=True)


def small_cartpole(iterations: int, **fields) -> TrainConfig:
    """Cartpole on CUDA, 256 environments, 16-step rollouts, ``iterations`` iterations, no
    checkpoints; other TrainConfig ``fields`` as given."""
    return TrainConfig(
        env_id="CartPole-v1",
        device="cuda",
        num_envs=256,
        num_steps=16,
        total_timesteps=256 * 16 * iterations,
        checkpoint_every=0,
        **fields,
    )


@pytest.mark.parametrize("capture", [True, False])
def test_rollouts_queued_ahead_train_as_the_loop_without_them(capture):
    def run(queue_ahead: bool):
        trainer = make_trainer(small_cartpole(6, seed=5, capture_graphs=capture))
        trainer.queue_ahead = queue_ahead
        return trainer, trainer.train()

    plain, plain_result = run(False)
    queued, queued_result = run(True)
    for a, b in zip(queued.policy.parameters(), plain.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    for name in ("charts/episodic_return", "losses/value_loss", "losses/approx_kl"):
        got = [row[name] for row in queued_result.history]
        assert got == pytest.approx([row[name] for row in plain_result.history], rel=0, nan_ok=True), name


def test_a_run_that_stops_with_a_rollout_queued_ends_cleanly():
    trainer = make_trainer(small_cartpole(6, target_return=0.0))
    result = trainer.train()
    assert result.iterations == 1 and result.solved_at_step == 256 * 16
    torch.cuda.synchronize()
    again = trainer.train()  # the unused rollout is overwritten by the next one
    assert again.iterations == 2


def test_fused_loss_training_clips_and_steps_in_one_kernel(monkeypatch):
    from warpsci import optimizers

    calls = []
    original = optimizers.clipped_adam_step

    def counted(*arguments, **keywords):
        calls.append(1)
        original(*arguments, **keywords)

    monkeypatch.setattr(optimizers, "clipped_adam_step", counted)
    config = small_cartpole(2, capture_graphs=False)
    make_trainer(config).train()
    assert len(calls) == 2 * config.update_epochs * config.num_minibatches


def test_resumed_captured_run_anneals_the_learning_rate(tmp_path):
    from warpsci.algorithms import resume_trainer

    iteration = 256 * 16
    config = TrainConfig(
        env_id="CartPole-v1",
        device="cuda",
        num_envs=256,
        num_steps=16,
        total_timesteps=iteration * 3,
        checkpoint_every=0,
    )
    make_trainer(config, tmp_path).train()
    resumed = resume_trainer(tmp_path, total_timesteps=iteration * 6)
    result = resumed.train()
    assert isinstance(resumed.optimizer.param_groups[0]["lr"], torch.Tensor)
    rates = [row["charts/learning_rate"] for row in result.history]
    assert len(rates) == 3 and rates == sorted(rates, reverse=True) and rates[-1] < rates[0]
    assert float(resumed.optimizer.param_groups[0]["lr"]) == pytest.approx(rates[-1])


def test_random_rollout_on_the_gpu_is_one_step_at_a_time_and_replays_exactly():
    def env():
        made = warpsci.make("CartPole-v1", num_envs=4096, device="cuda", seed=8, copy=False)
        made.reset()
        return made

    stepwise, fused, replayed, on_cpu = env(), env(), env(), None
    for _ in range(60):
        stepwise.random_rollout(1)
    fused.random_rollout(60)
    replay = GraphReplay(
        lambda: replayed.random_rollout(20), replayed.device, key=lambda: replayed.current_seed
    )
    for _ in range(3):  # warm-up, capture, replay
        replay()
    assert replay.captures == 1
    for name in stepwise.buffers._fields:
        if name != "actions":
            assert torch.equal(getattr(fused.buffers, name), getattr(stepwise.buffers, name)), name
            assert torch.equal(getattr(replayed.buffers, name), getattr(stepwise.buffers, name)), name
    # The first draw is the same on both backends (integer draws from the same counter-based keys).
    on_cpu = warpsci.make("CartPole-v1", num_envs=4096, device="cpu", seed=8, copy=False)
    on_cpu.reset()
    on_cpu.random_rollout(1)
    first = env()
    first.random_rollout(1)
    assert torch.equal(first.actions_buffer.cpu(), on_cpu.actions_buffer)


def eager_and_captured(num_steps: int = 32, **fields):
    """Cartpole trained for 5 iterations of 512 environments eagerly and with graph capture, with
    the TrainConfig ``fields``: ``(eager trainer, its result, captured trainer, its result)``."""

    def run(capture: bool):
        config = TrainConfig(
            env_id="CartPole-v1",
            device="cuda",
            seed=3,
            num_envs=512,
            num_steps=num_steps,
            total_timesteps=512 * num_steps * 5,
            capture_graphs=capture,
            **fields,
        )
        trainer = make_trainer(config)
        return trainer, trainer.train()

    return (*run(False), *run(True))


def assert_same_weights(first, second, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    for a, b in zip(first.policy.parameters(), second.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


def test_captured_compiled_training_equals_eager_compiled_training():
    eager, eager_result, captured, captured_result = eager_and_captured(compile=True)
    assert captured._update_graph is not None and captured._update_graph.captures == 1
    assert_same_weights(captured, eager)
    losses = [row["losses/value_loss"] for row in captured_result.history]
    expected = [row["losses/value_loss"] for row in eager_result.history]
    assert losses == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_down_sampled_rows_are_drawn_alike_captured_and_eager(algo):
    """neg_pos_env_ratio inside the captured rollout: the same rows kept, the same weights, as eager."""
    eager, eager_result, captured, captured_result = eager_and_captured(16, algo=algo, neg_pos_env_ratio=0.5)
    assert captured._graph is not None and captured._graph.captures == 1
    torch.testing.assert_close(captured.buffer.valid, eager.buffer.valid)
    kept = [row["charts/rows_trained"] for row in captured_result.history]
    assert kept == [row["charts/rows_trained"] for row in eager_result.history]
    assert min(kept) < 1.0
    assert_same_weights(captured, eager)


def test_bf16_training_captured_equals_eager():
    """autocast inside the captured rollout and update (WarpDrive's network: PyTorch's layers)."""
    eager, _, captured, _ = eager_and_captured(bf16=True, activation="relu", shared_trunk=True)
    assert captured._graph is not None and captured._update_graph is not None
    for name in ("obs", "actions", "advantages", "returns"):
        torch.testing.assert_close(
            getattr(captured.buffer, name), getattr(eager.buffer, name), rtol=1e-3, atol=1e-3, msg=name
        )
    assert_same_weights(captured, eager, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize(("env_id", "algo"), [("CartPole-v1", "ppo"), ("Pendulum-v1", "ppo")])
def test_one_launch_rollout_step_equals_three_launches(monkeypatch, env_id, algo):
    """On the GPU, a rollout whose sampling, environment step and recording are one kernel launch
    per step fills the buffer exactly as the three launches do (Discrete and Box actions)."""
    from warpsci.rollout_kernels import RolloutKernels

    buffers = []
    for one_launch in (True, False):
        if not one_launch:
            monkeypatch.setattr(RolloutKernels, "fuses_step", property(lambda self: False))
        config = TrainConfig(
            env_id=env_id, algo=algo, device="cuda", num_envs=300, num_steps=64, total_timesteps=300 * 64,
            checkpoint_every=0, capture_graphs=False, seed=4,
        )  # fmt: skip
        trainer = make_trainer(config)
        assert trainer.single.kernels.fuses_step is one_launch
        trainer.env.reset()
        trainer.collect_rollout()
        buffer = trainer.single.buffer
        names = (
            "obs",
            "actions",
            "log_probs",
            "rewards",
            "dones",
            "truncated",
            "final_obs",
            "valid",
            "episode_ends",
        )
        buffers.append({name: getattr(buffer, name).clone() for name in names})
    for name, fused in buffers[0].items():
        assert torch.equal(fused, buffers[1][name]), name


def test_an_error_inside_forked_streams_reaches_the_caller_during_capture():
    """A Python error between the fork and the join of the sub-batches' streams (a kernel's
    compilation or arguments, say), after a side stream took work: the side streams are joined on
    the way out, so the capture ends cleanly and the caller sees that error, not the capture's
    complaint of an unjoined stream; a new capture works after it. (A launch that fails inside CUDA
    invalidates the capture itself.)"""
    from numba import cuda

    from warpsci.backends.torch_interop import forked_streams, numba_view

    @cuda.jit
    def add_one(values):
        i = cuda.grid(1)
        if i < values.size:
            values[i] += 1

    class CompileFailed(Exception):
        pass

    data = torch.zeros(4, device="cuda")
    with pytest.raises(CompileFailed):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            with forked_streams(1) as (side,):
                add_one[1, 32, side](numba_view(data))
                raise CompileFailed
    again = torch.cuda.CUDAGraph()
    with torch.cuda.graph(again):
        with forked_streams(1) as (side,):
            add_one[1, 32, side](numba_view(data))
    again.replay()
    torch.cuda.synchronize()
    assert data.tolist() == [1.0] * 4
