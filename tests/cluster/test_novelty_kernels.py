"""The novelty kernels against plain-numpy references: nearest and second-nearest center in
one pass, conformal p-values by binary search, the ring buffers' update, and the base score
(mean distance to the nearest support rows of the two nearest clusters)."""

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
    d = diag[:, None].astype(np.float64) - 2.0 * inner + cc[None, :]
    order = np.argsort(d, axis=1, kind="stable")
    np.testing.assert_array_equal(labels, order[:, 0])
    nearest = np.maximum(d[np.arange(n), order[:, 0]], 0.0).astype(dtype)
    np.testing.assert_array_equal(mind, nearest)
    assert total == pytest.approx(float(nearest.astype(np.float64).sum()), rel=1e-12)
    one_labels, one_mind = np.empty(n, np.int64), np.empty(n, dtype)
    assert nc.nearest_center(diag, inner, cc, one_labels, one_mind) == total
    np.testing.assert_array_equal(one_labels, labels)
    np.testing.assert_array_equal(one_mind, mind)
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
    ring = np.full((k, window), np.inf)
    ordered = ring.copy()
    heads = np.zeros(k, np.int64)
    sizes = np.zeros(k, np.int64)
    buffers: list[list[float]] = [[] for _ in range(k)]
    for batch in range(12):
        n = int(rng.integers(1, 30))
        labels = rng.integers(0, k - 1, n)  # cluster k - 1 never gets a member
        d = rng.random(n).astype(dtype)
        d[: n // 3] = np.round(d[: n // 3], 1)  # ties with buffered values
        out = np.empty(n)
        uncalibrated = nn.conformal_pvalues(labels, d, ordered, sizes, min_members, out)
        np.testing.assert_array_equal(out, _reference_pvalues(labels, d, buffers, min_members))
        assert uncalibrated == int((sizes[labels] < min_members).sum())
        assert ((out > 0) & (out <= 1)).all()
        nn.push_members(labels, d, ring, ordered, heads, sizes)
        # the buffers stay sorted as they are written: the same as sorting the ring anew
        np.testing.assert_array_equal(ordered, np.sort(ring, axis=1))
        for j, v in zip(labels, d):
            buffers[j] = (buffers[j] + [float(v)])[-window:]
        for j in range(k):
            assert sizes[j] == len(buffers[j])
            np.testing.assert_array_equal(np.sort(ring[j])[:sizes[j]], np.sort(buffers[j]))
            assert np.isinf(ring[j, sizes[j]:]).all()
    assert sizes[k - 1] == 0 and sizes[: k - 1].tolist() == [window] * (k - 1)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 255, 256])
def test_branch_free_search_counts_values_at_least_d_for_every_buffer_size(n):
    rng = np.random.default_rng(n)
    window = 256
    ordered = np.full((1, window), np.inf)
    ordered[0, :n] = np.sort(np.round(rng.random(n), 2))
    d = np.concatenate([ordered[0, :n], ordered[0, :n] + 1e-9, ordered[0, :n] - 1e-9,
                        [-1.0, 2.0]])
    out = np.empty(d.shape[0])
    nn.conformal_pvalues(np.zeros(d.shape[0], np.int64), d, ordered, np.array([n]), 1, out)
    expected = (1 + (ordered[0, :n][None, :] >= d[:, None]).sum(1)) / (n + 1)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("per_batch", [1, 7, 63, 64, 200])
def test_pushed_buffers_stay_sorted_when_a_cluster_gets_few_or_a_whole_window(per_batch):
    """Fewer values than the window are merged into the sorted row, a window's worth or more
    re-sorts it; either way the row equals the ring sorted anew (ties and +inf included)."""
    rng = np.random.default_rng(per_batch)
    k, window = 3, 64
    ring = np.full((k, window), np.inf)
    ordered = ring.copy()
    heads = np.zeros(k, np.int64)
    sizes = np.zeros(k, np.int64)
    for _ in range(6):
        labels = np.repeat(np.arange(2), per_batch)  # cluster 2 gets nothing
        d = np.round(rng.random(labels.shape[0]), 2)  # many ties
        nn.push_members(labels, d, ring, ordered, heads, sizes)
        np.testing.assert_array_equal(ordered, np.sort(ring, axis=1))
    assert np.isinf(ordered[2]).all() and sizes.tolist() == [min(6 * per_batch, window)] * 2 + [0]


def _reference_support_means(kblock, first, second, lo, hi, x_diag, s_diag, m):
    """Mean of the m smallest x_diag + s_diag - 2 K (clipped at 0) over the columns of the
    row's two clusters, by a full sort."""
    out = np.empty(kblock.shape[0])
    for i in range(kblock.shape[0]):
        cols = np.concatenate([np.arange(lo[j], hi[j]) for j in (first[i], second[i])
                               if j >= 0])
        d = np.maximum(float(x_diag[i]) + s_diag[cols].astype(np.float64)
                       - 2.0 * kblock[i, cols].astype(np.float64), 0.0)
        out[i] = np.sort(d)[:m].mean() if cols.shape[0] else 0.0
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 3, 20])
def test_support_means_match_a_full_sort_of_the_two_clusters_distances(dtype, m):
    """Segments of 0, 2, 7 (under a run of eight), 19 and 150 rows; rows whose second
    cluster is -1 (one center); many ties (rounded values) and distances clipped at 0."""
    rng = np.random.default_rng(m)
    sizes = np.array([0, 2, 7, 19, 150])
    hi = np.cumsum(sizes)
    lo = hi - sizes
    n = 300
    kblock = np.round(rng.random((n, int(hi[-1]))), 2).astype(dtype)
    s_diag = (1.0 + 0.5 * rng.random(int(hi[-1]))).astype(dtype)
    x_diag = (1.0 + 0.5 * rng.random(n)).astype(dtype)
    kblock[:5] = 1.5  # distances below 0 before clipping
    first = rng.integers(5, size=n).astype(np.int64)
    second = (first + 1 + rng.integers(4, size=n)) % 5
    second[::7] = -1
    out = np.empty(n)
    nn.nearest_support_means(kblock, first, second, lo, hi, x_diag, s_diag, m, out)
    expected = _reference_support_means(kblock, first, second, lo, hi, x_diag, s_diag, m)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    empty = (sizes[first] == 0) & ((second < 0) | (sizes[np.maximum(second, 0)] == 0))
    assert (out[empty] == 0.0).all()
