"""The shared-memory layout of a step's staged scalar arrays (:mod:`warpsci.backends.shared_staging`)
and where the CUDA backend applies it. The staged kernels themselves run under Numba's CUDA
simulator in ``tests/test_tag_continuous_simulator.py`` (launched apart) and on a GPU in
``tests/test_tag_continuous_gpu.py`` (graph-replayed steps equal to launched ones, bit for bit)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from warpsci.backends import cuda as cuda_backend
from warpsci.backends import shared_staging
from warpsci.backends.buffers import SCALAR_BUFFERS, EnvBuffers
from warpsci.environment import StateField
from warpsci.envs.tag_continuous import TAG_CONTINUOUS


@pytest.mark.parametrize("width", [32, 110, 128])
def test_staged_rows_are_aligned_disjoint_and_sized_for_their_fields(width):
    state_plan, buffer_plan, total = shared_staging._plans(TAG_CONTINUOUS, width)
    fields = [(field.dtype, field.per_agent, field.shape == ()) for field in TAG_CONTINUOUS.state_fields]
    fields += [
        (*SCALAR_BUFFERS.get(name, (np.float32, True)), name in shared_staging.STAGED_BUFFERS)
        for name in EnvBuffers._fields
    ]
    rows = []
    for row, (dtype, per_agent, expected) in zip(state_plan + buffer_plan, fields, strict=True):
        assert row.staged == expected
        if row.staged:
            itemsize = np.dtype(dtype).itemsize
            assert row.per_agent == per_agent
            assert row.size == itemsize * (width if per_agent else 1)
            assert row.strides == ((0, itemsize) if per_agent else (0,))  # 0 between environments
            assert row.offset % 8 == 0
            rows.append((row.offset, row.offset + row.size))
    rows.sort()
    assert all(end <= start for (_, end), (start, _) in zip(rows, rows[1:], strict=False))
    assert rows[0][0] == 0 and rows[-1][1] <= total == shared_staging.staged_bytes(TAG_CONTINUOUS, width)
    # The hints (a shape of their own), the observations and the final returns stay in global memory.
    assert "final_return" not in shared_staging.STAGED_BUFFERS
    assert not any(row.staged for row in buffer_plan[: EnvBuffers._fields.index("rewards")])


def test_fields_of_elements_wider_than_the_rows_alignment_stay_in_global_memory():
    wide = SimpleNamespace(
        state_fields=(StateField("x", np.float32), StateField("z", np.complex128), StateField("t", np.int64))
    )
    state_plan, _, _ = shared_staging._plans(wide, 4)
    assert [row.staged for row in state_plan] == [True, False, True]


def test_the_backend_stages_where_the_agents_fit_the_block_and_the_rows_fit_the_limit(monkeypatch):
    assert cuda_backend._staged_width(TAG_CONTINUOUS, 110, 128) == 128
    assert cuda_backend._staged_width(TAG_CONTINUOUS, 128, 128) == 128
    assert cuda_backend._staged_width(TAG_CONTINUOUS, 129, 128) is None
    needed = shared_staging.staged_bytes(TAG_CONTINUOUS, 128)
    monkeypatch.setattr(cuda_backend, "MAX_STAGED_BYTES", needed - 1)
    assert cuda_backend._staged_width(TAG_CONTINUOUS, 110, 128) is None
    monkeypatch.setattr(cuda_backend, "MAX_STAGED_BYTES", needed)
    assert cuda_backend._staged_width(TAG_CONTINUOUS, 110, 128) == 128


def test_staging_is_refused_outside_the_kernels_observed_apart():
    observation = TAG_CONTINUOUS.block_observation[0]  # the narrow games'
    for by_block, apart in ((None, True), (observation, False)):
        with pytest.raises(ValueError, match="staged_width applies to the kernels observed apart"):
            cuda_backend._compile_fused(TAG_CONTINUOUS, True, None, by_block, apart, staged_width=128)


@pytest.mark.parametrize("env_id", ["TagContinuous-v0", "CartPole-v1"])
def test_staged_arrays_are_placed_in_groups_as_the_staging_reads_them(env_id):
    """Each group of staged arrays (one element size and kind) is one tensor whose entries are the
    arrays, in :func:`staged_groups`' order: the staged kernels read a group's arrays through a view
    made from its first array, ``shape[0] * strides[0]`` bytes apart. Each array is contiguous and
    its own: writing one leaves the others as they were."""
    import torch

    import warpsci

    env = warpsci.make(env_id, num_envs=3, device="cpu")
    state_groups, buffer_groups = shared_staging.staged_groups(env.definition)
    tensors = {**env.state_tensors}
    buffers = env.buffers._asdict()
    placed = [[tensors[name] for name in group] for group in state_groups]
    placed += [[buffers[name] for name in group] for group in buffer_groups]
    assert sum(map(len, placed)) == len(shared_staging.STAGED_BUFFERS) + sum(
        field.shape == () for field in env.definition.state_fields
    )
    for group in placed:
        first = group[0]
        apart = first.numel() * first.element_size()
        assert len({tensor.element_size() for tensor in group}) == 1
        for index, tensor in enumerate(group):
            assert tensor.is_contiguous() and tensor.shape == first.shape
            assert tensor.data_ptr() == first.data_ptr() + index * apart
    before = [tensor.clone() for group in placed for tensor in group]
    placed[0][0].view(torch.uint8).fill_(255)
    after = [tensor for group in placed for tensor in group]
    assert all(torch.equal(old, new) for old, new in zip(before[1:], after[1:], strict=True))
