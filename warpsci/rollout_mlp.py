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

Shared memory, in floats: the first layer's weights transposed (``n_in x n_h1``, so that the lanes,
which take consecutive units, read consecutive words), its biases, the second layer's weights
transposed (``n_h1 x n_h2``) and biases, the output layer's weights as stored (``n_out x n_h2``) and
biases; then, per environment of the block, its observation, both hidden layers and its outputs.
"""

from __future__ import annotations

import math

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
    for index in range(thread, n_out * n_h2, threads):
        shared[offset + index] = w3[index // n_h2, index % n_h2]
    offset += n_out * n_h2
    for index in range(thread, n_out, threads):
        shared[offset + index] = b3[index]


@cuda.jit(device=True)
def _tanh_layer(shared, weights, biases, inputs, outputs, n_inputs, n_outputs, lane):
    """``outputs = tanh(biases + inputs @ weights)``, ``weights`` input-major from ``shared[weights]``;
    the lanes take every ``LANES``-th unit."""
    for unit in range(lane, n_outputs, LANES):
        total = shared[biases + unit]
        for k in range(n_inputs):
            total += shared[weights + k * n_outputs + unit] * shared[inputs + k]
        shared[outputs + unit] = math.tanh(total)


@cuda.jit(device=True)
def actor_forward(network, shared, slot, lane):
    """The actor's output for the observation of the block's environment ``slot`` (already in its
    place in ``shared``), written to its output place, whose offset is returned; the block waits
    between layers, so every thread of it must call this."""
    w1, _, w2, _, w3, _ = network
    n_h1, n_in = w1.shape
    n_h2 = w2.shape[0]
    n_out = w3.shape[0]
    biases1 = n_in * n_h1
    weights2 = biases1 + n_h1
    biases2 = weights2 + n_h1 * n_h2
    weights3 = biases2 + n_h2
    biases3 = weights3 + n_h2 * n_out
    observation = biases3 + n_out + slot * (n_in + n_h1 + n_h2 + n_out)
    hidden1 = observation + n_in
    hidden2 = hidden1 + n_h1
    outputs = hidden2 + n_h2
    _tanh_layer(shared, 0, biases1, observation, hidden1, n_in, n_h1, lane)
    cuda.syncthreads()
    _tanh_layer(shared, weights2, biases2, hidden1, hidden2, n_h1, n_h2, lane)
    cuda.syncthreads()
    for unit in range(lane, n_out, LANES):
        total = shared[biases3 + unit]
        for k in range(n_h2):
            total += shared[weights3 + unit * n_h2 + k] * shared[hidden2 + k]
        shared[outputs + unit] = total
    cuda.syncthreads()
    return outputs


@cuda.jit(device=True)
def observation_offset(network, slot):
    """Where in shared memory the block's environment ``slot`` keeps its observation."""
    w1, _, w2, _, w3, _ = network
    n_h1, n_in = w1.shape
    n_h2 = w2.shape[0]
    n_out = w3.shape[0]
    return n_in * n_h1 + n_h1 + n_h1 * n_h2 + n_h2 + n_h2 * n_out + n_out + slot * (n_in + n_h1 + n_h2 + n_out)
