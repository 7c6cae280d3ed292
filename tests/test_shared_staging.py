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
