"""The warm-up of initialisation candidates: full-batch kernel k-means on the sample, from the
candidate's seed rows, run by the same Lloyd implementation as exact KernelKMeans."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.cluster._warmup import WarmedCandidate, best_warm_start, warm_up
from streamkm.exceptions import ValidationError
from streamkm.kernels import KernelSpec

pytestmark = pytest.mark.unit


def _sample(dtype=np.float64, n=240, seed=3):
    x, _ = make_blobs(n, n_features=2, centers=4, cluster_std=2.5, random_state=seed)
    x = x.astype(dtype)
    spec = KernelSpec("rbf", 0.1)
    return spec.block(x, x), spec.diagonal(x)


def _reference(kmat, seeds, max_steps):
    """Plain dense Lloyd in feature space: weights (k, n) of the centers after at most
    ``max_steps`` center updates, and the mean squared distance to the nearest center."""
    kmat = kmat.astype(np.float64)
    diag = np.diagonal(kmat)
    k = seeds.shape[0]

    def nearest(weights):
        inner = weights @ kmat
        dist = diag[None, :] - 2.0 * inner + np.einsum("jn,jn->j", weights, inner)[:, None]
        return dist.argmin(axis=0), np.maximum(dist.min(axis=0), 0.0).mean()

    weights = np.zeros((k, kmat.shape[0]))
    weights[np.arange(k), seeds] = 1.0
    labels = None
    steps = 0
    for _ in range(max_steps):
        new, _ = nearest(weights)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        onehot = np.eye(k)[labels].T
        assert (onehot.sum(axis=1) > 0).all(), "the reference case must keep clusters non-empty"
        weights = onehot / onehot.sum(axis=1, keepdims=True)
        steps += 1
    return weights, nearest(weights)[1], steps


@pytest.mark.parametrize("max_steps", [1, 2, 100])
def test_warm_up_equals_a_plain_lloyd_from_the_same_seeds(max_steps):
    kmat, diag = _sample()
    seeds = np.array([0, 1, 2, 3])
    got = warm_up(kmat, diag, seeds, max_steps=max_steps)
    weights, objective, steps = _reference(kmat, seeds, max_steps)
    np.testing.assert_allclose(got.weights, weights, atol=1e-12)
    assert got.objective == pytest.approx(objective, rel=1e-10)
    assert got.n_steps == steps
    np.testing.assert_allclose(got.weights.sum(axis=1), 1.0)


def test_the_reference_case_runs_several_updates_and_stops_when_stable():
    kmat, diag = _sample()
    seeds = np.array([0, 1, 2, 3])
    full = warm_up(kmat, diag, seeds, max_steps=100)
    assert 3 <= full.n_steps < 100
    assert warm_up(kmat, diag, seeds, max_steps=2).objective > full.objective


def test_float32_kernel_matrix_gives_the_float64_result():
    kmat64, diag64 = _sample(np.float64)
    kmat32, diag32 = _sample(np.float32)
    assert kmat32.dtype == np.float32
    seeds = np.array([5, 6, 7, 8])
    a = warm_up(kmat64, diag64, seeds, max_steps=100)
    b = warm_up(kmat32, diag32, seeds, max_steps=100)
    np.testing.assert_array_equal(a.weights > 0, b.weights > 0)
    assert b.objective == pytest.approx(a.objective, rel=1e-4)


def test_no_warm_up_keeps_the_seed_rows_as_centers():
    kmat, diag = _sample()
    seeds = np.array([10, 50, 90, 130])
    got = warm_up(kmat, diag, seeds, max_steps=0)
    expected = np.zeros_like(got.weights)
    expected[np.arange(4), seeds] = 1.0
    np.testing.assert_array_equal(got.weights, expected)
    to_seeds = diag[:, None] - 2.0 * kmat[:, seeds] + diag[seeds][None, :]
    assert got.objective == pytest.approx(np.maximum(to_seeds.min(axis=1), 0.0).mean())
    assert got.n_steps == 0


def test_a_cluster_left_empty_takes_a_row_so_every_center_keeps_rows():
    # rows 0 and 1 are the same point: the seed at row 1 gets no row (ties go to the first
    # seed) and takes the row farthest from its center instead
    x = np.array([[0.0, 0.0]] * 3 + [[0.0, 0.3]] + [[5.0, 5.0]] * 3)
    spec = KernelSpec("rbf", 1.0)
    got = warm_up(spec.block(x, x), spec.diagonal(x), np.array([0, 1, 4]), max_steps=10)
    supports = got.weights > 0
    assert supports.sum(axis=1).min() >= 1
    assert (supports.sum(axis=0) == 1).all()  # each row in exactly one center
    np.testing.assert_allclose(got.weights.sum(axis=1), 1.0)
    assert np.flatnonzero(supports[1]).tolist() == [3]  # the odd row out is its own center
    assert got.objective == pytest.approx(0.0, abs=1e-12)


def test_fit_without_warm_up_starts_from_the_seeds_and_still_clusters():
    x, y = make_blobs(900, n_features=2, centers=[[0, 0], [8, 0], [0, 8]], random_state=1)
    cold = MiniBatchKernelKMeans(3, n_warmup=0, random_state=0).fit(x)
    warm = MiniBatchKernelKMeans(3, random_state=0).fit(x)
    assert cold.init_objective_ > warm.init_objective_
    assert adjusted_rand_score(y, cold.labels_) > 0.95


def _moons_and_two_partitions():
    """Two moons, the partition along the moons (labels) and a straight cut across them."""
    x, y = make_moons(600, noise=0.05, random_state=0)
    across = (x[:, 0] > 0.5).astype(np.int64)
    return x, y.astype(np.int64), across


def _candidate(labels, objective):
    weights = np.zeros((2, labels.shape[0]))
    for j in range(2):
        weights[j, labels == j] = 1.0 / max(int((labels == j).sum()), 1)
    return WarmedCandidate(weights, objective, 1, labels)


def test_a_graph_kernel_start_is_the_one_that_cuts_the_sample_graph_least():
    x, along, across = _moons_and_two_partitions()
    # the straight cut has the lower objective, the moons' partition the lower cut
    best = best_warm_start([_candidate(across, 1.0), _candidate(along, 2.0)], x)
    np.testing.assert_array_equal(best.labels, along)


def test_without_the_rows_the_start_with_the_lowest_objective_is_kept():
    x, along, across = _moons_and_two_partitions()
    best = best_warm_start([_candidate(along, 2.0), _candidate(across, 1.0)])
    np.testing.assert_array_equal(best.labels, across)


def test_starts_that_cut_the_same_go_to_the_lower_objective():
    x, along, _ = _moons_and_two_partitions()
    swapped = 1 - along  # the same partition, other cluster order: the same cut
    best = best_warm_start([_candidate(along, 2.0), _candidate(swapped, 1.5)], x)
    assert best.objective == 1.5


def test_a_single_start_is_returned_and_no_start_is_an_error():
    x, along, _ = _moons_and_two_partitions()
    only = _candidate(along, 3.0)
    assert best_warm_start([only], x) is only
    with pytest.raises(ValidationError, match="got 0"):
        best_warm_start([], x)


def test_warm_up_reports_the_sample_rows_nearest_center():
    kmat, diag = _sample()
    seeds = np.array([0, 1, 2, 3])
    for steps in (0, 5):
        got = warm_up(kmat, diag, seeds, max_steps=steps)
        inner = got.weights @ kmat
        dist = diag[None, :] - 2.0 * inner + np.einsum("jn,jn->j", got.weights, inner)[:, None]
        np.testing.assert_array_equal(got.labels, dist.argmin(axis=0))
