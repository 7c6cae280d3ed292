"""Observations staged in block-shared memory (CUDA backend, environments of one block).

An agent writes its observation row ``obs[env, agent, :]`` one entry at a time. The rows of a warp's
32 agents lie hundreds of bytes apart, so each store of a warp touches 32 cache sectors, and a
step's observations cost the L2 cache several times their size (H100, Tag continuous 2,000 x 110
agents, k = 10: 15.6M sector writes a step for 62.5 MB of rows, the step kernel bound by L2
traffic). Staged, an environment's rows are copied into shared memory (every agent a strided share
of the entries, so that a warp reads consecutive words), the agents observe into that copy through
an array indexed exactly like ``buffers.obs``, and the copy goes back the same way: every global
load and store coalesced. Entries the environment does not write keep their values, as without
staging. A block's rows must fit :data:`MAX_STAGED_BYTES` of shared memory.

The view is an array of the observation buffer's type whose data pointer is shifted so that the
block's first environment lands on the start of the shared memory; environment code indexes it
with its global ``env`` and ``agent`` as it would the buffer.
"""

from __future__ import annotations

import os

import numpy as np
from numba import config, cuda
from numba.core import cgutils, types
from numba.cuda.extending import intrinsic

#: The most bytes of observation rows a block stages: the default limit of a launch's dynamic
#: shared memory (a block of 110 agents of 71 floats takes 31 KB).
MAX_STAGED_BYTES = 48 * 1024


def staged_bytes(obs_shape: tuple[int, ...], envs_per_block: int, num_agents: int) -> int:
    """Shared memory a block needs to stage its observation rows, or 0 where they are not staged:
    single-agent environments (no barriers between an agent's stages), observations of other than
    one dimension, rows past :data:`MAX_STAGED_BYTES`, the CUDA simulator, or
    ``WARPSCI_STAGE_OBSERVATIONS=0`` in the environment (for comparisons)."""
    if os.environ.get("WARPSCI_STAGE_OBSERVATIONS", "1") == "0" or config.ENABLE_CUDASIM:
        return 0
    if num_agents < 2 or len(obs_shape) != 3:
        return 0
    needed = envs_per_block * num_agents * obs_shape[2] * 4
    return needed if needed <= MAX_STAGED_BYTES else 0


@intrinsic
def _shifted_like(typingctx, storage, like, first_env):
    """An array of ``like``'s type, shape and strides (C-contiguous ``(envs, agents, width)``) over
    ``storage`` (1-D), shifted so that ``view[first_env + e, agent, i]`` is entry ``(e, agent, i)``
    of the block's rows in ``storage``."""

    def codegen(context, builder, signature, args):
        storage_type, like_type, first_type = signature.args
        storage_array = context.make_array(storage_type)(context, builder, args[0])
        like_array = context.make_array(like_type)(context, builder, args[1])
        env_stride = cgutils.unpack_tuple(builder, like_array.strides, 3)[0]
        first = context.cast(builder, args[2], first_type, types.intp)
        start = builder.ptrtoint(storage_array.data, env_stride.type)
        data = builder.inttoptr(builder.sub(start, builder.mul(first, env_stride)), like_array.data.type)
        view = context.make_array(signature.return_type)(context, builder)
        context.populate_array(
            view,
            data=data,
            shape=like_array.shape,
            strides=like_array.strides,
            itemsize=like_array.itemsize,
            meminfo=None,
        )
        return view._getvalue()

    return like(storage, like, first_env), codegen


@intrinsic
def _env_rows(typingctx, array, env):
    """Environment ``env``'s rows of a C-contiguous ``(envs, agents, width)`` array as one 1-D
    array of ``agents * width`` entries."""
    result = types.Array(array.dtype, 1, "C")

    def codegen(context, builder, signature, args):
        array_type, env_type = signature.args
        source = context.make_array(array_type)(context, builder, args[0])
        shape = cgutils.unpack_tuple(builder, source.shape, 3)
        env_stride = cgutils.unpack_tuple(builder, source.strides, 3)[0]
        index = context.cast(builder, args[1], env_type, types.intp)
        start = builder.ptrtoint(source.data, env_stride.type)
        data = builder.inttoptr(builder.add(start, builder.mul(index, env_stride)), source.data.type)
        rows = context.make_array(signature.return_type)(context, builder)
        context.populate_array(
            rows,
            data=data,
            shape=[builder.mul(shape[1], shape[2])],
            strides=[source.itemsize],
            itemsize=source.itemsize,
            meminfo=None,
        )
        return rows._getvalue()

    return result(array, env), codegen


@cuda.jit(device=True, inline="always")
def staged_rows(buffers):
    """The block's staged observation rows, indexed like ``buffers.obs`` (inlined: a function may
    not return an array it was not given)."""
    storage = cuda.shared.array(0, np.float32)
    first_env = np.uint32(cuda.blockIdx.x * cuda.blockDim.y)
    return _shifted_like(storage, buffers.obs, first_env)


@cuda.jit(device=True)
def _copy_share(source, target, agent, num_agents):
    """Agent ``agent``'s share of a copy of an environment's rows: entries ``agent``, ``agent +
    num_agents``, ... (a warp's agents copy consecutive words)."""
    index = np.uint32(agent)
    count = np.uint32(source.shape[0])
    while index < count:
        target[index] = source[index]
        index = np.uint32(index + num_agents)


@cuda.jit(device=True)
def stage_in(state, params, buffers, run, env, agent, keys):
    """A stage: the agent's share of copying its environment's rows into shared memory."""
    num_agents = np.uint32(buffers.obs.shape[1])
    _copy_share(_env_rows(buffers.obs, env), _env_rows(staged_rows(buffers), env), agent, num_agents)


@cuda.jit(device=True)
def stage_out(state, params, buffers, run, env, agent, keys):
    """A stage: the agent's share of copying its environment's staged rows back."""
    num_agents = np.uint32(buffers.obs.shape[1])
    _copy_share(_env_rows(staged_rows(buffers), env), _env_rows(buffers.obs, env), agent, num_agents)
