"""The actor's forward pass inside the one-launch rollout kernel: one warp per environment.

A rollout step through torch is the actor's forward kernel and then the sampling-and-step kernel;
at a few thousand environments each launch waits mostly on its own latency (H100, 2,048 Cartpole
environments: 4.3 us and 6.7 us a step, a third of a PPO iteration). The one-launch rollout runs
every step of every environment in one kernel (:meth:`warpsci.backends.cuda.CudaKernels.policy_rollout`):
the block copies the actor's weights into shared memory once, and then, step after step, each warp
computes one environment's actor output (its 32 lanes take the hidden units), one lane samples the
action, steps the environment and records the step.

The network is a ``Linear, Tanh, Linear, Tanh, Linear`` actor (:func:`warpsci.fused_mlp.mlp_layers`),
computed in float32 arithmetic (the separate forward kernels round products to TF32 where the
configuration allows it).

Shared memory, in floats: each layer's weights transposed (input-major: ``n_in x n_h1``, ``n_h1 x
n_h2``, ``n_h2 x n_out``, so that the lanes, which take consecutive units, read consecutive words)
followed by its biases; then, per environment of the block, its observation, both hidden layers and
its outputs.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

#: Threads that share one environment's forward pass: a warp, its lanes taking the units.
LANES = 32
#: Environments (warps) per block.
ENVS_PER_BLOCK = 4
#: ``TrainConfig.one_launch_rollout="auto"`` takes the one-launch rollout up to this many
#: environments; beyond, the forward kernels' tensor cores win over a warp per environment.
AUTO_MAX_ENVS = 16_384
#: The most shared memory a block takes without opting in to more (bytes; every CUDA GPU).
MAX_SHARED_BYTES = 48 * 1024


def weight_floats(n_in: int, n_h1: int, n_h2: int, n_out: int) -> int:
    """Floats of the actor's weights and biases in shared memory."""
    return n_in * n_h1 + n_h1 + n_h1 * n_h2 + n_h2 + n_h2 * n_out + n_out


def shared_bytes(n_in: int, n_h1: int, n_h2: int, n_out: int) -> int:
    """Bytes of shared memory a block of the one-launch rollout needs (see the module docstring)."""
    per_env = n_in + n_h1 + n_h2 + n_out
    return 4 * (weight_floats(n_in, n_h1, n_h2, n_out) + ENVS_PER_BLOCK * per_env)


@cuda.jit(device=True)
def load_actor(network, shared, thread, threads):
    """Copy the actor's ``network`` (``(w1, b1, w2, b2, w3, b3)`` in torch's Linear layout) into
    ``shared`` as the module docstring lays it out, ``threads`` threads of the block sharing the
    copy (this one ``thread``); the caller waits for the block before reading it."""
    w1, b1, w2, b2, w3, b3 = network
    n_h1, n_in = w1.shape
    n_h2 = w2.shape[0]
    n_out = w3.shape[0]
    for index in range(thread, n_in * n_h1, threads):
        shared[index] = w1[index % n_h1, index // n_h1]
    offset = n_in * n_h1
    for index in range(thread, n_h1, threads):
        shared[offset + index] = b1[index]
    offset += n_h1
    for index in range(thread, n_h1 * n_h2, threads):
        shared[offset + index] = w2[index % n_h2, index // n_h2]
    offset += n_h1 * n_h2
    for index in range(thread, n_h2, threads):
        shared[offset + index] = b2[index]
    offset += n_h2
    for index in range(thread, n_h2 * n_out, threads):
        shared[offset + index] = w3[index % n_out, index // n_out]
    offset += n_h2 * n_out
    for index in range(thread, n_out, threads):
        shared[offset + index] = b3[index]


@cuda.jit(device=True)
def _dense(shared, weights, biases, inputs, outputs, n_inputs, n_outputs, lane, activate):
    """``outputs = biases + inputs @ weights`` (``tanh`` of it where ``activate``), ``weights``
    input-major at ``shared[weights]``; the lanes take every ``LANES``-th unit. Offsets and counts
    are uint32 and the loops while loops: with signed 64-bit indices every shared-memory read
    cost about twenty instructions of index arithmetic and wrap-around checks (H100: 21 us a step
    at 2,048 environments), several times the product itself."""
    unit = lane
    while unit < n_outputs:
        total = shared[biases + unit]
        weight = weights + unit
        k = np.uint32(0)
        while k < n_inputs:
            total += shared[weight] * shared[inputs + k]
            weight = np.uint32(weight + n_outputs)
            k = np.uint32(k + 1)
        shared[outputs + unit] = math.tanh(total) if activate else total
        unit = np.uint32(unit + LANES)


@cuda.jit(device=True)
def _sizes(network):
    """``(n_in, n_h1, n_h2, n_out)`` of the actor, as uint32."""
    w1, _, w2, _, w3, _ = network
    return np.uint32(w1.shape[1]), np.uint32(w1.shape[0]), np.uint32(w2.shape[0]), np.uint32(w3.shape[0])


@cuda.jit(device=True)
def actor_forward(network, shared, slot, lane):
    """The actor's output for the observation of the block's environment ``slot`` (already in its
    place in ``shared``), written to its output place, whose offset is returned; the block waits
    between layers, so every thread of it must call this."""
    n_in, n_h1, n_h2, n_out = _sizes(network)
    biases1 = np.uint32(n_in * n_h1)
    weights2 = np.uint32(biases1 + n_h1)
    biases2 = np.uint32(weights2 + n_h1 * n_h2)
    weights3 = np.uint32(biases2 + n_h2)
    biases3 = np.uint32(weights3 + n_h2 * n_out)
    observation = observation_offset(network, slot)
    hidden1 = np.uint32(observation + n_in)
    hidden2 = np.uint32(hidden1 + n_h1)
    outputs = np.uint32(hidden2 + n_h2)
    _dense(shared, np.uint32(0), biases1, observation, hidden1, n_in, n_h1, lane, True)
    cuda.syncthreads()
    _dense(shared, weights2, biases2, hidden1, hidden2, n_h1, n_h2, lane, True)
    cuda.syncthreads()
    _dense(shared, weights3, biases3, hidden2, outputs, n_h2, n_out, lane, False)
    cuda.syncthreads()
    return outputs


@cuda.jit(device=True)
def observation_offset(network, slot):
    """Where in shared memory (uint32) the block's environment ``slot`` keeps its observation."""
    n_in, n_h1, n_h2, n_out = _sizes(network)
    weights = n_in * n_h1 + n_h1 + n_h1 * n_h2 + n_h2 + n_h2 * n_out + n_out
    return np.uint32(weights + slot * (n_in + n_h1 + n_h2 + n_out))
