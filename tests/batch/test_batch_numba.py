"""The numba kernels of streamkm.batch against plain-numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm._numba.dp1d import kmeans_1d_dp
from streamkm._numba.lloyd import assign_from_inner, cluster_sums, sq_dist_to_assigned
from streamkm._numba.seeding import update_min_sq_dist
from streamkm._numba.ward import half_sq_distances, ward_nn_chain

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_assign_from_inner_matches_numpy_argmin(dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 5)).astype(dtype)
    c = rng.normal(size=(7, 5)).astype(dtype)
    x_sq = np.einsum("ij,ij->i", x, x)
    c_sq = np.einsum("ij,ij->i", c, c)
    labels = np.empty(300, dtype=np.int64)
    min_sq = np.empty(300)
    assign_from_inner(x @ c.T, x_sq, c_sq, labels, min_sq)
    ref = ((x[:, None, :].astype(np.float64) - c[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_array_equal(labels, ref.argmin(axis=1))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(min_sq, ref.min(axis=1), rtol=tol, atol=tol)


def test_assign_from_inner_takes_first_index_on_ties():
    inner = np.zeros((2, 3))
    labels = np.empty(2, dtype=np.int64)
    min_sq = np.empty(2)
    assign_from_inner(inner, np.ones(2), np.ones(3), labels, min_sq)
    np.testing.assert_array_equal(labels, [0, 0])
    np.testing.assert_array_equal(min_sq, [2.0, 2.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cluster_sums_and_direct_distances_match_numpy(dtype):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 4)).astype(dtype)
    labels = rng.integers(0, 5, size=200).astype(np.int64)
    labels[labels == 3] = 2  # cluster 3 gets no row: its sum and count must be 0
    sums = np.full((5, 4), 7.0)
    counts = np.full(5, 3, dtype=np.int64)
    cluster_sums(x, labels, sums, counts)
    for j in range(5):
        expected = x[labels == j].astype(np.float64).sum(axis=0)
        np.testing.assert_allclose(sums[j], expected, rtol=1e-12, atol=1e-12)
        assert counts[j] == np.sum(labels == j)
    np.testing.assert_array_equal(sums[3], 0.0)
    centers = rng.normal(size=(5, 4)).astype(np.float32)
    out = np.empty(200)
    sq_dist_to_assigned(x, centers, labels, out)
    ref = ((x.astype(np.float64) - centers[labels].astype(np.float64)) ** 2).sum(axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_update_min_sq_dist_matches_numpy():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(100, 3))
    current = rng.uniform(0, 5, size=100)
    expected = np.minimum(current, ((x - x[4]) ** 2).sum(axis=1))
    update_min_sq_dist(x, x[4], current)
    np.testing.assert_allclose(current, expected, rtol=1e-12)


def _dp_reference(values: np.ndarray, k: int) -> float:
    """O(k n^2) dynamic programme without the divide-and-conquer shortcut."""
    n = values.size
    cost = np.full((n, n), np.inf)
    for j in range(n):
        for i in range(j, n):
            seg = values[j : i + 1]
            cost[j, i] = np.sum((seg - seg.mean()) ** 2)
    best = cost[0].copy()
    for m in range(1, k):
        nxt = np.full(n, np.inf)
        for i in range(m, n):
            nxt[i] = min(best[j - 1] + cost[j, i] for j in range(m, i + 1))
        best = nxt
    return float(best[n - 1])


@pytest.mark.parametrize("n", [1, 2, 9, 40])
def test_kmeans_1d_dp_matches_quadratic_dp(n):
    rng = np.random.default_rng(n)
    values = np.sort(np.concatenate([rng.normal(size=n - n // 3), rng.integers(0, 3, n // 3)]))
    for k in range(1, n + 1):
        starts, cost = kmeans_1d_dp(values.astype(np.float64), k)
        assert starts[0] == 0 and starts[-1] == n and np.all(np.diff(starts) >= 1)
        direct = sum(
            np.sum((values[a:b] - values[a:b].mean()) ** 2) for a, b in zip(starts[:-1], starts[1:])
        )
        ref = _dp_reference(values, k)
        assert cost == pytest.approx(ref, rel=1e-9, abs=1e-9)
        assert direct == pytest.approx(ref, rel=1e-9, abs=1e-9)


def test_ward_kernels_match_numpy_and_scipy():
    from scipy.cluster.hierarchy import linkage

    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 3))
    cost = np.empty((40, 40))
    half_sq_distances(x, cost)
    ref = 0.5 * ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(cost, ref, rtol=1e-12, atol=1e-14)
    _, _, merge_cost = ward_nn_chain(cost)
    heights = np.sort(np.sqrt(2.0 * merge_cost))
    np.testing.assert_allclose(heights, linkage(x, "ward")[:, 2], rtol=1e-10)
