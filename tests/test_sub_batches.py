"""How the CUDA backend splits the environments of a step observed apart into sub-batches, each
launched on a stream of its own (``warpsci.backends.cuda.SUB_BATCHES_APART``). The launches run under
Numba's CUDA simulator in ``tests/test_tag_continuous_simulator.py`` (two environments, one a
sub-batch) and on a GPU in ``tests/test_tag_continuous_gpu.py`` (graph-replayed steps on two streams
equal to launched ones, bit for bit)."""

from __future__ import annotations

import pytest

from warpsci.backends.cuda import sub_batches


@pytest.mark.parametrize("num_envs", [1, 2, 3, 7, 64, 2000, 2001])
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_sub_batches_cover_every_environment_once_in_order_and_differ_by_at_most_one(num_envs, parts):
    batches = sub_batches(num_envs, parts)
    assert len(batches) == min(parts, num_envs)
    covered = [env for first, count in batches for env in range(first, first + count)]
    assert covered == list(range(num_envs))
    counts = [count for _, count in batches]
    assert min(counts) >= 1 and max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)  # the larger ones first


def test_no_more_sub_batches_than_environments_and_at_least_one():
    assert sub_batches(3, 8) == [(0, 1), (1, 1), (2, 1)]
    assert sub_batches(5, 0) == [(0, 5)]
