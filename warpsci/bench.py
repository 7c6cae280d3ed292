"""Throughput measurements: environment-only steps/s and end-to-end PPO training steps/s.

Each figure is the median of several timed repeats after a warm-up (compilation excluded). On CUDA
the device is synchronised before the clock is read.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import torch

from warpsci.config import TrainConfig
from warpsci.graphs import GraphReplay
from warpsci.ppo import PPOTrainer
from warpsci.registry import make


@dataclasses.dataclass
class BenchResult:
    """One measurement: ``steps_per_second`` is environment steps (over all envs) per second."""

    env_id: str
    mode: str
    device: str
    num_envs: int
    steps_per_second: float
    repeats: list[float]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def action_sampler(
    space: gymnasium.Space, actions: torch.Tensor, generator: torch.Generator
) -> Callable[[], None]:
    """A function that fills ``actions`` with uniform random actions of ``space``, on its device."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return lambda: torch.randint(
            int(space.start),
            int(space.start + space.n),
            actions.shape,
            generator=generator,
            device=actions.device,
            out=actions,
        )
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, dtype=torch.float32, device=actions.device)
        uniform = torch.empty(actions.shape, device=actions.device)

        def multi_discrete() -> None:
            uniform.uniform_(generator=generator)
            torch.floor(uniform * nvec, out=uniform)
            actions.copy_(uniform)

        return multi_discrete
    if isinstance(space, gymnasium.spaces.Box):
        low = torch.as_tensor(space.low, device=actions.device)
        width = torch.as_tensor(space.high, device=actions.device) - low

        def box() -> None:
            actions.uniform_(generator=generator)
            actions.mul_(width).add_(low)

        return box
    raise TypeError(f"no random sampler for action space {space!r}")


def group_action_sampler(env: Any, generator: torch.Generator) -> Callable[[], None]:
    """Uniform random actions for every group of a multi-group environment, written into its
    action buffer (through the group's rows, or a scratch tensor scattered back when the group's
    agents are not contiguous)."""
    actions = env.buffers.actions
    steps = []
    for group in env.groups:
        if group.contiguous:
            rows = env.group_rows(actions, group)
            steps.append(action_sampler(group.action_space, rows, generator))
            continue
        scratch = env.group_rows(actions, group).clone()
        index = torch.as_tensor(group.agents, device=actions.device)
        fill = action_sampler(group.action_space, scratch, generator)

        def scatter(
            fill: Callable[[], None] = fill, scratch: torch.Tensor = scratch, index: torch.Tensor = index
        ):
            fill()
            actions.index_copy_(1, index, scratch)

        steps.append(scatter)

    def sample() -> None:
        for step in steps:
            step()

    return sample


def bench_env(
    env_id: str,
    num_envs: int,
    device: str = "cpu",
    steps: int = 1000,
    repeats: int = 5,
    seed: int = 0,
    capture: bool = False,
    threads_per_block: int | None = None,
    steps_per_launch: int = 1,
    params: dict | None = None,
) -> BenchResult:
    """Steps/s of the environment alone, uniform random actions sampled on the device each step.
    ``params``: overrides of the environment's params fields (default none).

    With ``steps_per_launch`` 1 (default) each step is a ``torch`` sampling call into the action
    buffer and one step kernel launch. Above 1, ``env.random_rollout(steps_per_launch)`` draws the
    actions inside the kernel and takes that many steps per launch (``steps`` must be a multiple).
    With ``capture`` (CUDA only) the ``steps`` steps of a repeat are captured once as a CUDA graph
    and each repeat replays it.
    """
    if steps_per_launch < 1 or steps % steps_per_launch:
        raise ValueError(f"steps_per_launch must be >= 1 and divide steps={steps}, got {steps_per_launch}")
    options = {} if threads_per_block is None else {"threads_per_block": threads_per_block}
    env = make(
        env_id,
        num_envs=num_envs,
        device=device,
        seed=seed,
        params=params,
        copy=False,
        check_actions=False,
        **options,
    )
    generator = torch.Generator(device=env.device)
    generator.manual_seed(seed)
    if isinstance(env.single_action_space, gymnasium.spaces.Dict):
        sample_actions = group_action_sampler(env, generator)
    else:
        sample_actions = action_sampler(env.single_action_space, env.actions_buffer, generator)
    env.reset()

    def run(count: int) -> None:
        if steps_per_launch > 1:
            for _ in range(count // steps_per_launch):
                env.random_rollout(steps_per_launch)
            return
        for _ in range(count):
            sample_actions()
            env.step_in_place()

    if capture:
        replay = GraphReplay(lambda: run(steps), env.device, (generator,))
        replay()  # warm-up (compiles)
        replay()  # capture
        timed = replay
    else:
        run(min(steps, max(20, steps_per_launch)))  # compile and warm up
        timed = lambda: run(steps)  # noqa: E731
    _synchronize(env.device)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        timed()
        _synchronize(env.device)
        rates.append(num_envs * steps / (time.perf_counter() - start))
    mode = ("env-graph" if capture else "env") + (f"-x{steps_per_launch}" if steps_per_launch > 1 else "")
    return BenchResult(env_id, mode, str(env.device), num_envs, statistics.median(rates), rates)


def bench_versus_gymnasium(
    env_id: str, num_envs: int, steps: int = 100, repeats: int = 5, seed: int = 0
) -> list[BenchResult]:
    """warpsci's CPU ``step()`` (copies, actions checked), ``step_in_place`` and ``random_rollout``
    beside Gymnasium's vector environment of the same id (``gymnasium.make_vec`` with
    ``vectorization_mode="vector_entry_point"``: NumPy-batched where Gymnasium has such a class),
    measured one after the other in this process, each the median of ``repeats`` repeats of
    ``steps`` steps after a warm-up. ``step()`` and Gymnasium's ``step`` are handed the same
    pre-drawn uniform random actions (sampling is not timed); ``step_in_place`` reuses the actions
    in the buffer, ``random_rollout`` draws its own in the kernel. Modes: ``gymnasium-vector``,
    ``step``, ``step_in_place``, ``random_rollout``."""
    import numpy as np

    gym_env = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    env = make(env_id, num_envs=num_envs, device="cpu", seed=seed)
    gym_env.action_space.seed(seed)
    pool = [gym_env.action_space.sample() for _ in range(8)]
    pool_tensors = [
        torch.as_tensor(np.asarray(actions)).reshape(env.actions_buffer.shape) for actions in pool
    ]
    gym_env.reset(seed=seed)
    env.reset()

    def gym_steps() -> None:
        for index in range(steps):
            gym_env.step(pool[index % len(pool)])

    def warp_steps() -> None:
        for index in range(steps):
            env.step(pool_tensors[index % len(pool_tensors)])

    def in_place_steps() -> None:
        for _ in range(steps):
            env.step_in_place()

    runs = (
        ("gymnasium-vector", gym_steps),
        ("step", warp_steps),
        ("step_in_place", in_place_steps),
        ("random_rollout", lambda: env.random_rollout(steps)),
    )
    results = []
    for mode, run in runs:
        run()  # warm-up (the first warpsci call compiles)
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            rates.append(num_envs * steps / (time.perf_counter() - start))
        results.append(BenchResult(env_id, mode, "cpu", num_envs, statistics.median(rates), rates))
    gym_env.close()
    return results


def bench_train(
    env_id: str,
    num_envs: int,
    device: str = "cpu",
    num_steps: int = 128,
    iterations: int = 5,
    seed: int = 0,
    capture: bool = True,
    compile: bool = False,
    overrides: dict[str, Any] | None = None,
) -> BenchResult:
    """End-to-end PPO steps/s (rollout + advantages + update, CleanRL's Cartpole network: 64x64
    tanh, 4 epochs, 4 minibatches), median over ``iterations`` timed iterations. The first two
    iterations (compilation, warm-up, and on CUDA the graph capture) are not timed; ``capture``
    sets ``TrainConfig.capture_graphs``, ``compile`` sets ``TrainConfig.compile``, and
    ``overrides`` other :class:`TrainConfig` fields (e.g. ``{"bf16": True}``; they win over the
    arguments, ``compile`` included)."""
    fields = {
        "env_id": env_id,
        "device": device,
        "seed": seed,
        "num_envs": num_envs,
        "num_steps": num_steps,
        "total_timesteps": num_envs * num_steps * (iterations + 2),
        "checkpoint_every": 0,
        "capture_graphs": capture,
        "compile": compile,
    }
    config = TrainConfig(**{**fields, **(overrides or {})})
    trainer = PPOTrainer(config)
    rates: list[float] = []
    trainer.train(on_iteration=lambda metrics: rates.append(metrics["charts/SPS_iteration"]))
    timed = rates[2:] or rates
    mode = "train" + ("-compiled" if config.compile else "") + ("-bf16" if config.bf16 else "")
    return BenchResult(env_id, mode, str(trainer.device), num_envs, statistics.median(timed), timed)
