"""The novelty kernels against plain-numpy references: nearest and second-nearest center in
one pass, conformal p-values by binary search, the ring buffers' update."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm._numba import centers as nc
from streamkm._numba import novelty as nn

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_nearest_two_centers_matches_a_sort_of_the_distances(dtype, k):
    rng = np.random.default_rng(k)
    n = 50
    diag = (rng.random(n) + 1).astype(dtype)
    inner = rng.random((n, k)).astype(dtype)
    cc = rng.random(k)
    if k > 1:  # row 7 is equally near centers 0 and 1, nearer than to any other
        cc[1] = cc[0]
        inner[7, :2] = 2.0
    labels, mind = np.empty(n, np.int64), np.empty(n, dtype)
    second, second_d = np.empty(n, np.int64), np.empty(n, dtype)
    total = nc.nearest_two_centers(diag, inner, cc, labels, mind, second, second_d)
    ref_labels, ref_mind = np.empty(n, np.int64), np.empty(n, dtype)
    ref_total = nc.nearest_center(diag, inner, cc, ref_labels, ref_mind)
    np.testing.assert_array_equal(labels, ref_labels)  # bit for bit the one-center kernel
    np.testing.assert_array_equal(mind, ref_mind)
    assert total == ref_total
    d = diag[:, None].astype(np.float64) - 2.0 * inner + cc[None, :]
    order = np.argsort(d, axis=1, kind="stable")
    np.testing.assert_array_equal(labels, order[:, 0])
    if k == 1:
        assert (second == -1).all() and np.isinf(second_d).all()
        return
    np.testing.assert_array_equal(second, order[:, 1])
    expected = np.maximum(d[np.arange(n), order[:, 1]], 0.0).astype(dtype)
    np.testing.assert_array_equal(second_d, expected)
    assert labels[7] == 0 and second[7] == 1 and second_d[7] == mind[7]  # first wins a tie


def _reference_pvalues(labels, d, buffers, min_members):
    out = np.empty(labels.shape[0])
    for i, (j, v) in enumerate(zip(labels, d)):
        values = np.asarray(buffers[j], dtype=np.float64)
        n = values.shape[0]
        out[i] = 1.0 if n < min_members else (1 + (values >= v).sum()) / (n + 1)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pvalues_and_ring_buffers_match_python_lists(dtype):
    rng = np.random.default_rng(0)
    k, window, min_members = 4, 16, 5
    ring = np.zeros((k, window))
    ordered = np.zeros((k, window))
    heads = np.zeros(k, np.int64)
    sizes = np.zeros(k, np.int64)
    buffers: list[list[float]] = [[] for _ in range(k)]
    for batch in range(12):
        n = int(rng.integers(1, 30))
        labels = rng.integers(0, k - 1, n)  # cluster k - 1 never gets a member
        d = rng.random(n).astype(dtype)
        d[: n // 3] = np.round(d[: n // 3], 1)  # ties with buffered values
        out = np.empty(n)
        nn.conformal_pvalues(labels, d, ordered, sizes, min_members, out)
        np.testing.assert_array_equal(out, _reference_pvalues(labels, d, buffers, min_members))
        assert ((out > 0) & (out <= 1)).all()
        nn.push_members(labels, d, ring, heads, sizes, ordered)
        for j, v in zip(labels, d):
            buffers[j] = (buffers[j] + [float(v)])[-window:]
        for j in range(k):
            assert sizes[j] == len(buffers[j])
            np.testing.assert_array_equal(ordered[j, :sizes[j]], np.sort(buffers[j]))
    assert sizes[k - 1] == 0 and sizes[: k - 1].tolist() == [window] * (k - 1)
