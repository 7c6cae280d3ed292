"""The rollout's per-step bookkeeping and GAE as single kernels, for the CPU and for CUDA.

Written with torch operations, sampling an action costs about ten kernel launches, recording a step
into the rollout buffer about ten more, and GAE a handful per step of its backward recursion. Even
replayed from a CUDA graph each launch costs a microsecond or two, which at a few thousand
environments is most of an iteration. Here each of those is one launch: a per-environment Numba
function, compiled for the CPU (a loop) and for CUDA (one thread per environment), as the
environments are.

Policy samples use the counter-based generator of :mod:`warpsci.random`, keyed by the environment's
reset seed, its index and its tick, so they are the same eager and graph-replayed and on both
backends.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numba import cuda, njit

import warpsci._numba_compat  # noqa: F401  (must precede numba-cuda compilation)
from warpsci.backends.torch_interop import current_numba_stream, numba_view
from warpsci.kernel_cache import cached_cuda_jit, cached_njit
from warpsci.random import POLICY_STREAM, make_key, mix64, normal, uniform

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_HALF_ULP = np.float32(2.0**-25)  # keeps a uniform draw inside (0, 1) for the Gumbel transform
_THREADS_PER_BLOCK = 128


@njit
def _gumbel_argmax(logits, row, key, first_draw):
    """Gumbel-max sample of ``logits[row]`` and its log-probability."""
    count = logits.shape[-1]
    maximum = logits[row, 0]
    for category in range(1, count):
        maximum = max(maximum, logits[row, category])
    total = 0.0
    best_score = -np.inf
    best = 0
    for category in range(count):
        value = logits[row, category]
        total += math.exp(value - maximum)
        u = uniform(key, first_draw + category) + _HALF_ULP
        score = value - math.log(-math.log(u))
        if score > best_score:
            best_score = score
            best = category
    return best, logits[row, best] - maximum - math.log(total)


@njit
def _row_agent(row, agents):
    """Environment and agent of rollout row ``row``: rows walk the agents ``agents`` of environment
    0, then of environment 1, and so on."""
    group_size = agents.shape[0]
    return np.uint32(row // group_size), np.uint32(agents[row % group_size])


@njit
def sample_discrete(row, arguments):
    """Categorical sample from ``logits (rows, n)`` into the rollout slot and the env's action buffer."""
    logits, log_std, tick, seed, step, actions, log_probs, env_actions, agents, active, valid = arguments
    env, agent = _row_agent(row, agents)
    key = make_key(seed, env, agent, tick[env], POLICY_STREAM)
    action, log_prob = _gumbel_argmax(logits, row, key, 0)
    actions[step, row] = action
    env_actions[env, agent, 0] = action
    log_probs[step, row] = log_prob
    valid[step, row] = 1.0 if active[env, agent] else 0.0


@njit
def sample_multi_discrete(row, arguments):
    """Independent categoricals from padded logits flattened to ``(rows * k, n_max)``."""
    logits, log_std, tick, seed, step, actions, log_probs, env_actions, agents, active, valid = arguments
    env, agent = _row_agent(row, agents)
    key = make_key(seed, env, agent, tick[env], POLICY_STREAM)
    components = actions.shape[2]
    total = 0.0
    for component in range(components):
        flat = row * components + component
        action, log_prob = _gumbel_argmax(logits, flat, key, component * logits.shape[1])
        actions[step, row, component] = action
        env_actions[env, agent, component] = action
        total += log_prob
    log_probs[step, row] = total
    valid[step, row] = 1.0 if active[env, agent] else 0.0


@njit
def sample_gaussian(row, arguments):
    """Diagonal Gaussian sample around ``mean (rows, d)`` with ``exp(log_std)``."""
    mean, log_std, tick, seed, step, actions, log_probs, env_actions, agents, active, valid = arguments
    env, agent = _row_agent(row, agents)
    key = make_key(seed, env, agent, tick[env], POLICY_STREAM)
    total = 0.0
    for dim in range(mean.shape[1]):
        noise = normal(key, dim)
        action = mean[row, dim] + math.exp(log_std[dim]) * noise
        actions[step, row, dim] = action
        env_actions[env, agent, dim] = action
        total += -0.5 * noise * noise - log_std[dim] - _HALF_LOG_TWO_PI
    log_probs[step, row] = total
    valid[step, row] = 1.0 if active[env, agent] else 0.0


@njit
def record_step(row, arguments):
    """Copy what the step kernel left in the env's buffers (``env_*``) into rollout slot ``step``
    (the final observation only where the row was truncated: elsewhere it is never read). ``valid``
    is the sampler's mark of this step: the agent was in the game when it acted."""
    (
        step,
        agents,
        env_rewards,
        env_terminated,
        env_truncated,
        env_agent_terminated,
        env_final_obs,
        env_final_return,
        env_final_length,
        rewards,
        dones,
        episode_ends,
        truncated,
        final_obs,
        episode_returns,
        episode_lengths,
        valid,
    ) = arguments
    env, agent = _row_agent(row, agents)
    ended = env_terminated[env] or env_truncated[env]
    # The agent's own end: it left the game, or the environment terminated (close_agent's flag).
    agent_ended = env_agent_terminated[env, agent]
    rewards[step, row] = env_rewards[env, agent]
    dones[step, row] = 1.0 if ended or agent_ended else 0.0
    episode_ends[step, row] = 1.0 if ended else 0.0
    # Truncated: the time limit ended the episode of an agent still in the game (one that left
    # earlier, not valid when it acted, has nothing to bootstrap).
    bootstrapped = env_truncated[env] and not agent_ended and valid[step, row] > 0.0
    truncated[step, row] = 1.0 if bootstrapped else 0.0
    episode_returns[step, row] = env_final_return[env, agent]
    episode_lengths[step, row] = env_final_length[env]
    # Only a truncated row's final observation is ever read (to bootstrap it). Copying every row's,
    # every step, took 360 us a step for Tag continuous's 220,000 rows of 70 entries on an H100.
    if bootstrapped:
        for feature in range(final_obs.shape[2]):
            final_obs[step, row, feature] = env_final_obs[env, agent, feature]


@njit
def record_step_and_observation(row, arguments):
    """:func:`record_step`, then the row's observation after the step (after a reset, where the
    episode ended) into rollout slot ``next_step`` unless that is past the rollout's end: the
    one-launch rollout step's stand-in for copying the observations before the next forward pass."""
    record_arguments, next_step, env_obs, buffer_obs = arguments
    record_step(row, record_arguments)
    if next_step < buffer_obs.shape[0]:
        env, agent = _row_agent(row, record_arguments[1])
        for feature in range(buffer_obs.shape[2]):
            buffer_obs[next_step, row, feature] = env_obs[env, agent, feature]


@njit
def generalized_advantages(env, arguments):
    """GAE's backward recursion for one environment; also writes ``returns = advantages + values``.
    Same definitions as :func:`warpsci.rollout.compute_gae`."""
    rewards, values, dones, next_value, gamma, gae_lambda, advantages, returns = arguments
    last_advantage = 0.0
    following_value = next_value[env]
    t = rewards.shape[0] - 1
    # Four steps' inputs are read before any is used, so that on a GPU their loads are in flight
    # together and the recursion waits on its arithmetic, not on memory once a step.
    while t >= 3:
        r0, r1, r2, r3 = rewards[t, env], rewards[t - 1, env], rewards[t - 2, env], rewards[t - 3, env]
        v0, v1, v2, v3 = values[t, env], values[t - 1, env], values[t - 2, env], values[t - 3, env]
        d0, d1, d2, d3 = dones[t, env], dones[t - 1, env], dones[t - 2, env], dones[t - 3, env]
        last_advantage = _gae_step(arguments, env, t, r0, v0, d0, following_value, last_advantage)
        last_advantage = _gae_step(arguments, env, t - 1, r1, v1, d1, v0, last_advantage)
        last_advantage = _gae_step(arguments, env, t - 2, r2, v2, d2, v1, last_advantage)
        last_advantage = _gae_step(arguments, env, t - 3, r3, v3, d3, v2, last_advantage)
        following_value = v3
        t -= 4
    while t >= 0:
        value = values[t, env]
        last_advantage = _gae_step(
            arguments, env, t, rewards[t, env], value, dones[t, env], following_value, last_advantage
        )
        following_value = value
        t -= 1


@njit
def _gae_step(arguments, env, t, reward, value, done, following_value, last_advantage):
    """One step of GAE's recursion at step ``t``: writes the advantage and the return, and returns
    the advantage."""
    gamma, gae_lambda, advantages, returns = arguments[4:]
    not_done = 1.0 - done
    delta = reward + gamma * following_value * not_done - value
    last_advantage = delta + gamma * gae_lambda * not_done * last_advantage
    advantages[t, env] = last_advantage
    returns[t, env] = last_advantage + value
    return last_advantage


#: Rounds of the Feistel network that shuffles an epoch's rows (:class:`RowShuffle`).
SHUFFLE_ROUNDS = 12


@njit
def _feistel(value, left_bits, right_bits, keys):
    """A bijection of ``[0, 2**(left_bits + right_bits))``: :data:`SHUFFLE_ROUNDS` (even) Feistel
    rounds over the value's high ``left_bits`` and low ``right_bits``. Each round replaces
    ``(left, right)`` by ``(right, left ^ f(right))``, ``f`` the low bits of SplitMix64 of the right
    part and that round's key; the parts swap widths each round and are back after an even count."""
    left = np.uint64(value) >> np.uint64(right_bits)
    right = np.uint64(value) & ((np.uint64(1) << np.uint64(right_bits)) - np.uint64(1))
    for round_index in range(SHUFFLE_ROUNDS):
        mask = (np.uint64(1) << np.uint64(left_bits)) - np.uint64(1)
        left, right = right, left ^ (mix64(right ^ np.uint64(keys[round_index])) & mask)
        left_bits, right_bits = right_bits, left_bits
    return (left << np.uint64(right_bits)) | right


@njit
def shuffled_row(row, arguments):
    """Entry ``row`` of a random permutation of ``range(count)``: the Feistel bijection of
    ``[0, 2**bits)`` (``2**bits < 2 count``) applied until the value falls below ``count`` (cycle
    walking, which makes it a bijection of ``range(count)``; under two applications on average)."""
    count, left_bits, right_bits, keys, order = arguments
    value = _feistel(row, left_bits, right_bits, keys)
    while value >= count:
        value = _feistel(value, left_bits, right_bits, keys)
    order[row] = value


class PerEnvironmentKernel:
    """Runs ``function(env, arguments)`` for ``env`` in ``range(count)`` on a device: a loop on the
    CPU, one CUDA thread per environment on torch's current stream."""

    def __init__(self, function: Callable, device: torch.device) -> None:
        self.device = device
        self._cpu, self._cuda = _compiled(function)

    def __call__(self, count: int, arguments: tuple) -> None:
        if self.device.type == "cpu":
            self._cpu(count, arguments)
            return
        blocks = (count + _THREADS_PER_BLOCK - 1) // _THREADS_PER_BLOCK
        self._cuda[blocks, _THREADS_PER_BLOCK, current_numba_stream(self.device)](count, arguments)


@functools.cache
def _compiled(function: Callable) -> tuple[Any, Any]:
    # A plain loop on the CPU: the work per call is tiny, and waking a thread pool three times per
    # step, between torch's own parallel regions, made CPU training four times slower.
    @cached_njit(label=f"trainer's {function.__name__}")
    def on_cpu(count, arguments):
        for env in range(count):
            function(env, arguments)

    def on_cuda(count, arguments):
        env = cuda.grid(1)
        if env < count:
            function(env, arguments)

    return on_cpu, _LazyCudaKernel(on_cuda, f"trainer's {function.__name__}")


class _LazyCudaKernel:
    """Builds the CUDA kernel on first use, so CPU-only runs never touch numba-cuda's compiler."""

    def __init__(self, function: Callable, label: str) -> None:
        self._function, self._label = function, label
        self._kernel = None

    def __getitem__(self, configuration: tuple) -> Any:
        if self._kernel is None:
            self._kernel = cached_cuda_jit(self._function, label=self._label)
        return self._kernel[configuration]


class RowShuffle:
    """A fresh random order of a batch's ``count`` rows at each call, for an epoch's minibatches:
    one kernel (a keyed Feistel bijection, :func:`shuffled_row`) instead of sorting random keys,
    whose radix sort took about 42 us an epoch, 167 us of a 4.3 ms iteration at 2,048 Cartpole
    environments on an H200 (2026-11-26). The keys are drawn from ``generator``, so that eager and
    graph-replayed runs, and resumed ones, shuffle alike. 12 rounds: with 4, small batches (tens
    of rows) were measurably not uniform."""

    def __init__(self, count: int, device: torch.device, generator: torch.Generator) -> None:
        if count < 1:
            raise ValueError(f"a shuffle needs at least one row, got {count}")
        self.count, self.device, self.generator = count, device, generator
        bits = max(1, (count - 1).bit_length())  # 2**bits >= count > 2**(bits - 1)
        self.left_bits, self.right_bits = bits // 2, bits - bits // 2
        self._kernel = PerEnvironmentKernel(shuffled_row, device)

    def __call__(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """A permutation of ``range(count)`` (int64, on the device), written into ``out`` (``count``
        contiguous int64) where given."""
        keys = torch.randint(0, 2**62, (SHUFFLE_ROUNDS,), device=self.device, generator=self.generator)
        order = torch.empty(self.count, dtype=torch.int64, device=self.device) if out is None else out
        arguments = (self.count, self.left_bits, self.right_bits, numba_view(keys), numba_view(order))
        self._kernel(self.count, arguments)
        return order


_SAMPLERS = {
    "discrete": sample_discrete,
    "multi_discrete": sample_multi_discrete,
    "continuous": sample_gaussian,
}


class RolloutKernels:
    """The trainer's per-step work for one policy: ``sample`` actions from the actor's output,
    ``record`` the step's results, and ``advantages`` (GAE) at the end.

    A policy plays the agents ``agents`` of every environment; its rollout rows are ``(environment,
    agent)`` pairs, environment-major (``num_envs`` rows for a single-agent environment). Views of
    the long-lived tensors are made once here; only per-call tensors (the actor's output, the
    bootstrapped rewards) are wrapped on each call.

    Args:
        env: The vector environment the rollout steps.
        buffer: The rollout buffer (:class:`warpsci.rollout.RolloutBuffer`), ``num_envs *
            len(agents)`` rows.
        action_kind: ``"discrete"``, ``"multi_discrete"`` or ``"continuous"`` (``ActorCritic.kind``).
        log_std: The Gaussian policy's log standard deviation (continuous actions only).
        agents: The agent indices this policy plays; default every agent of the environment.
    """

    def __init__(
        self,
        env: Any,
        buffer: Any,
        action_kind: str,
        log_std: torch.Tensor | None = None,
        agents: tuple[int, ...] | None = None,
    ) -> None:
        if action_kind not in _SAMPLERS:
            raise ValueError(f"action_kind must be one of {list(_SAMPLERS)}, got {action_kind!r}")
        agents = tuple(range(env.num_agents)) if agents is None else tuple(agents)
        self.env, self.buffer, self.num_rows = env, buffer, buffer.num_rows
        if self.num_rows != env.num_envs * len(agents):
            raise ValueError(f"the buffer has {self.num_rows} rows, expected {env.num_envs} x {len(agents)}")
        device = env.device
        self._sampler = _SAMPLERS[action_kind]
        self._sample = PerEnvironmentKernel(self._sampler, device)
        self._record = PerEnvironmentKernel(record_step, device)
        self._advantages = PerEnvironmentKernel(generalized_advantages, device)
        self._agent_tensor = torch.tensor(agents, dtype=torch.int32, device=device)
        self._agents = numba_view(self._agent_tensor)
        # The parameter is updated in place by the optimiser, so one view serves every step.
        self._log_std = numba_view(log_std if log_std is not None else torch.zeros(1, device=device))
        env_buffers = env.buffers
        self._tick = numba_view(env_buffers.tick)
        self._actions = numba_view(buffer.actions)
        self._log_probs = numba_view(buffer.log_probs)
        actions = env_buffers.actions
        self._env_actions = numba_view(actions if actions.dim() == 3 else actions.unsqueeze(-1))
        self._active = numba_view(env_buffers.active)
        self._valid = numba_view(buffer.valid)
        self._from_env = tuple(
            numba_view(tensor)
            for tensor in (
                env_buffers.rewards,
                env_buffers.terminated,
                env_buffers.truncated,
                env_buffers.agent_terminated,
                env_buffers.final_obs.reshape(env.num_envs, env.num_agents, -1),
                env_buffers.final_return,
                env_buffers.final_length,
            )
        )
        self._recorded = tuple(
            numba_view(tensor)
            for tensor in (
                buffer.rewards,
                buffer.dones,
                buffer.episode_ends,
                buffer.truncated,
                buffer.final_obs.reshape(buffer.num_steps, self.num_rows, -1),
                buffer.episode_returns,
                buffer.episode_lengths,
            )
        )
        self._advantage_outputs = (numba_view(buffer.advantages), numba_view(buffer.returns))
        self._env_obs = numba_view(env_buffers.obs.reshape(env.num_envs, env.num_agents, -1))
        self._buffer_obs = numba_view(buffer.obs.reshape(buffer.num_steps, self.num_rows, -1))
        self._values = numba_view(buffer.values)

    def sample(self, actor_output: torch.Tensor, step: int) -> None:
        """Sample from ``actor_output`` (logits, padded logits ``(rows, k, n_max)``, or means) into
        ``buffer.actions[step]``, ``buffer.log_probs[step]`` and the env's action buffer; marks
        ``buffer.valid[step]`` for the agents in the game."""
        self._sample(self.num_rows, self._sample_arguments(actor_output, step))

    def record(self, step: int) -> None:
        """Copy the step's rewards, flags, final observations and episode statistics into the
        rollout buffer at ``step``."""
        self._record(self.num_rows, self._record_arguments(step))

    @property
    def fuses_step(self) -> bool:
        """Whether :meth:`sample_step_record` runs as one launch: on CUDA, for a policy of the only
        agent of environments that fit a block each."""
        return getattr(self.env, "fuses_policy_step", False) and self.num_rows == self.env.num_envs

    def sample_step_record(self, actor_output: torch.Tensor, step: int) -> None:
        """Where :attr:`fuses_step`, one kernel launch: :meth:`sample`, the environment's step,
        :meth:`record`, and the observations after the step into ``buffer.obs[step + 1]`` (the
        caller stores step 0's). Otherwise :meth:`sample`, the step and :meth:`record`, three
        launches (the caller stores every step's observations)."""
        if not self.fuses_step:
            self.sample(actor_output, step)
            self.env.step_in_place()
            self.record(step)
            return
        record = (self._record_arguments(step), step + 1, self._env_obs, self._buffer_obs)
        self.env.policy_step_in_place(
            self._sampler, self._sample_arguments(actor_output, step), record_step_and_observation, record
        )

    def _sample_arguments(self, actor_output: torch.Tensor, step: int) -> tuple:
        rows = actor_output.reshape(-1, actor_output.shape[-1])
        return (
            numba_view(rows.contiguous()),
            self._log_std,
            self._tick,
            self.env.current_seed,
            step,
            self._actions,
            self._log_probs,
            self._env_actions,
            self._agents,
            self._active,
            self._valid,
        )

    def _record_arguments(self, step: int) -> tuple:
        return (step, self._agents, *self._from_env, *self._recorded, self._valid)

    def advantages(
        self, rewards: torch.Tensor, next_value: torch.Tensor, gamma: float, gae_lambda: float
    ) -> None:
        """GAE into ``buffer.advantages`` and ``buffer.returns`` from ``rewards`` (truncation
        bootstrapping folded in), ``buffer.values``, ``buffer.dones`` and ``next_value``."""
        arguments = (
            numba_view(rewards.contiguous()),
            self._values,
            self._recorded[1],
            numba_view(next_value.contiguous()),
            float(gamma),
            float(gae_lambda),
            *self._advantage_outputs,
        )
        self._advantages(self.num_rows, arguments)
