"""FRUS centers (uniform in the feature range, dense and CSR) and the bisection seedings."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.config.schema import DriftConfig
from streamkm.drift import (
    DriftPolicy,
    feature_range,
    frus_centers,
    kernel_2means_from_labels,
    kernel_2means_from_pairs,
    kernel_bisect,
    rscd_pairs,
    rtmm_pairs,
)
from streamkm.exceptions import ParameterError, StreamkmError, ValidationError
from streamkm.kernels import KernelSpec

pytestmark = pytest.mark.unit

SIGNIFICANCE = 1e-3


@pytest.fixture(scope="module")
def boxed() -> np.ndarray:
    """Rows whose features span very different ranges, one of them negative only."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(300, 4)) * np.array([1.0, 10.0, 0.01, 3.0])
    x[:, 2] -= 5.0
    return x


@pytest.fixture(scope="module")
def sparse_rows() -> sp.csr_matrix:
    """A CSR matrix with each case of the range definition, checked against its dense form.

    col 0: positive values plus implicit zeros -> [0, max]; col 1: negative values plus
    implicit zeros -> [min, 0]; col 2: stored in every row, all positive -> [min, max] > 0;
    col 3: never stored -> [0, 0]; col 4: one stored value, mixed sign elsewhere.
    """
    dense = np.zeros((6, 5))
    dense[[0, 2, 5], 0] = [1.0, 3.0, 2.0]
    dense[[1, 4], 1] = [-2.0, -0.5]
    dense[:, 2] = [4.0, 5.0, 6.0, 7.0, 4.5, 5.5]
    dense[[0, 3], 4] = [-1.0, 2.0]
    return sp.csr_matrix(dense)


def test_centers_are_uniform_in_the_box(boxed: np.ndarray) -> None:
    low, high = boxed.min(axis=0), boxed.max(axis=0)
    centers = frus_centers(boxed, 4000, random_state=0)
    assert centers.shape == (4000, 4)
    assert ((centers >= low) & (centers <= high)).all()
    unit = (centers - low) / (high - low)
    for j in range(unit.shape[1]):
        assert stats.kstest(unit[:, j], "uniform").pvalue > SIGNIFICANCE, j
    # coordinates are independent: the joint histogram of two features is flat
    counts, _, _ = np.histogram2d(unit[:, 0], unit[:, 1], bins=8, range=[[0, 1], [0, 1]])
    assert stats.chisquare(counts.ravel()).pvalue > SIGNIFICANCE


def test_uniformity_check_rejects_a_draw_outside_the_box(boxed: np.ndarray) -> None:
    """The statistical check above can fail: centers of a wider box are not uniform in this one."""
    low, high = boxed.min(axis=0), boxed.max(axis=0)
    wider = np.vstack([boxed, 2 * high - low])
    unit = (frus_centers(wider, 4000, random_state=0) - low) / (high - low)
    assert stats.kstest(unit[:, 0], "uniform").pvalue < SIGNIFICANCE


def test_sparse_range_counts_implicit_zeros(sparse_rows: sp.csr_matrix) -> None:
    low, high = feature_range(sparse_rows)
    np.testing.assert_array_equal(low, [0.0, -2.0, 4.0, 0.0, -1.0])
    np.testing.assert_array_equal(high, [3.0, 0.0, 7.0, 0.0, 2.0])
    dense_low, dense_high = feature_range(sparse_rows.toarray())
    np.testing.assert_array_equal(low, dense_low)
    np.testing.assert_array_equal(high, dense_high)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_and_dense_give_the_same_centers(sparse_rows: sp.csr_matrix, fmt: str) -> None:
    from_sparse = frus_centers(sparse_rows.asformat(fmt), 50, random_state=3)
    from_dense = frus_centers(sparse_rows.toarray(), 50, random_state=3)
    np.testing.assert_array_equal(from_sparse, from_dense)
    assert isinstance(from_sparse, np.ndarray)
    assert (from_sparse[:, 3] == 0.0).all()


def test_sparse_input_is_not_densified() -> None:
    """A 200 x 2e6 CSR matrix would take 3.2 GB dense; the range and a draw stay far below."""
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, 200, size=800), rng.integers(0, 2_000_000, size=800)
    x = sp.csr_matrix((rng.uniform(0.5, 1.0, size=800), (rows, cols)), shape=(200, 2_000_000))
    tracemalloc.start()
    try:
        low, high = feature_range(x)
        centers = frus_centers(x, 2, random_state=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 * 2**20
    assert low.shape == high.shape == (2_000_000,)
    assert (low == 0).all() and np.count_nonzero(high) == np.unique(x.indices).size
    varying = high > 0
    assert (centers[:, ~varying] == 0).all() and (centers[:, varying] > 0).all()


def test_constant_columns_are_not_drawn(boxed: np.ndarray) -> None:
    """Adding constant columns leaves the varying columns' draws unchanged: only they are drawn."""
    padded = np.hstack([np.full((boxed.shape[0], 1), 2.5), boxed, np.zeros((boxed.shape[0], 3))])
    plain = frus_centers(boxed, 20, random_state=11)
    with_constants = frus_centers(padded, 20, random_state=11)
    np.testing.assert_array_equal(with_constants[:, 1:5], plain)
    assert (with_constants[:, 0] == 2.5).all() and (with_constants[:, 5:] == 0.0).all()


def test_same_seed_same_centers_and_generator_advances(boxed: np.ndarray) -> None:
    np.testing.assert_array_equal(
        frus_centers(boxed, 10, random_state=5), frus_centers(boxed, 10, random_state=5)
    )
    assert not np.array_equal(
        frus_centers(boxed, 10, random_state=5), frus_centers(boxed, 10, random_state=6)
    )
    rng = np.random.default_rng(5)
    first, second = frus_centers(boxed, 10, random_state=rng), frus_centers(boxed, 10, random_state=rng)
    assert not np.array_equal(first, second)


def test_dtypes_and_zero_centers(boxed: np.ndarray) -> None:
    assert frus_centers(boxed.astype(np.float32), 3, random_state=0).dtype == np.float32
    assert frus_centers(sp.csr_matrix(boxed.astype(np.float32)), 3, random_state=0).dtype == np.float32
    assert frus_centers(np.arange(12).reshape(4, 3), 3, random_state=0).dtype == np.float64
    assert frus_centers(boxed, 0, random_state=0).shape == (0, 4)


@pytest.mark.parametrize(
    ("m", "pattern"),
    [(-1, r"m must be >= 0, got m=-1"), (2.5, r"m must be an integer, got 2\.5"),
     (True, r"m must be an integer, got True"), ("3", r"m must be an integer, got '3'")],
)
def test_bad_m_rejected(boxed: np.ndarray, m: object, pattern: str) -> None:
    with pytest.raises(ParameterError, match=pattern):
        frus_centers(boxed, m, random_state=0)  # type: ignore[arg-type]


def test_bad_data_and_seed_rejected(boxed: np.ndarray) -> None:
    with pytest.raises(ValidationError, match=r"must be 2-D .* got shape \(3,\)"):
        frus_centers(np.ones(3), 2)
    with pytest.raises(ValidationError, match=r"non-empty, got shape \(0, 4\)"):
        frus_centers(np.empty((0, 4)), 2)
    bad = boxed.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValidationError, match=r"finite, got .*nan.* at row 4, column 1"):
        frus_centers(bad, 2)
    with pytest.raises(ValidationError, match=r"finite, got .*inf.* at row 2, column 0"):
        frus_centers(sp.csr_matrix(([np.inf], ([2], [0])), shape=(3, 2)), 2)
    with pytest.raises(ParameterError, match=r"random_state must be .* got 'seed'"):
        frus_centers(boxed, 2, random_state="seed")
    with pytest.raises(StreamkmError):
        frus_centers(boxed, -3)
    with pytest.raises(ValueError):
        frus_centers(boxed, -3)


def _lloyd_from_centers(x: np.ndarray, centers: np.ndarray, max_iter: int = 50) -> np.ndarray:
    """Plain Euclidean 2-means from two given centers (ties keep the current side)."""
    dist = ((x[:, None, :] - centers[None]) ** 2).sum(axis=2)
    labels = (dist[:, 1] < dist[:, 0]).astype(int)
    for _ in range(max_iter):
        if labels.min() == labels.max():
            break
        means = np.stack([x[labels == c].mean(axis=0) for c in (0, 1)])
        dist = ((x[:, None, :] - means[None]) ** 2).sum(axis=2)
        new = np.where(dist[:, 1] < dist[:, 0], 1, np.where(dist[:, 0] < dist[:, 1], 0, labels))
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def test_frus_bisection_matches_a_plain_lloyd_reference() -> None:
    x = make_blobs(n_samples=120, centers=3, cluster_std=2.0, random_state=4)[0]
    result = kernel_bisect(x, n_pairs=6, seeding="frus", random_state=9)
    centers = frus_centers(x, 12, random_state=np.random.default_rng(9)).reshape(6, 2, -1)
    runs = [_lloyd_from_centers(x, c) for c in centers]
    sses = [sum(((x[r == c] - x[r == c].mean(axis=0)) ** 2).sum() for c in np.unique(r)) for r in runs]
    best = int(np.argmin(sses))
    np.testing.assert_array_equal(result.labels, runs[best])
    assert result.sse == pytest.approx(sses[best], rel=1e-9)
    assert result.pair is None and result.seeding == "frus" and result.n_pairs_tried == 6


@pytest.mark.parametrize("seeding", ["rtmm", "rscd", "frus"])
@pytest.mark.parametrize("kernel", [None, KernelSpec("rbf", gamma=0.05)])
def test_every_seeding_finds_separated_blobs(seeding: str, kernel: KernelSpec | None) -> None:
    x, y = make_blobs(n_samples=200, centers=[[0.0, 0.0], [12.0, 12.0]], cluster_std=1.0, random_state=0)
    result = kernel_bisect(x, kernel=kernel, n_pairs=10, seeding=seeding, random_state=0)
    assert (result.labels == y).all() or (result.labels == 1 - y).all()
    assert result.sse_reduction > 0.5


def test_rscd_seeding_runs_rscd_pairs() -> None:
    x = make_blobs(n_samples=60, centers=3, random_state=1)[0]
    result = kernel_bisect(x, n_pairs=4, seeding="rscd", random_state=2)
    pairs = rscd_pairs(60, 4, random_state=np.random.default_rng(2))
    runs = kernel_2means_from_pairs(x @ x.T, pairs)
    assert result.pair == tuple(map(int, pairs[int(np.argmin(runs.sse))]))
    assert result.sse == pytest.approx(float(runs.sse.min()))


def test_runs_from_labels_match_runs_from_pairs() -> None:
    x = make_blobs(n_samples=80, centers=4, random_state=3)[0]
    k = x @ x.T
    pairs = rtmm_pairs(80, 7, random_state=0)
    diag = np.diag(k)
    start = np.stack([
        (diag - 2 * k[:, j] + k[j, j]) < (diag - 2 * k[:, i] + k[i, i]) for i, j in pairs
    ])
    from_pairs = kernel_2means_from_pairs(k, pairs)
    from_labels = kernel_2means_from_labels(k, start.astype(int))
    np.testing.assert_array_equal(from_labels.labels, from_pairs.labels)
    np.testing.assert_allclose(from_labels.sse, from_pairs.sse)


def test_empty_start_side_stays_unsplit() -> None:
    x = make_blobs(n_samples=30, centers=2, random_state=0)[0]
    runs = kernel_2means_from_labels(x @ x.T, np.zeros((1, 30), dtype=int))
    assert (runs.labels == 0).all()
    assert runs.sse[0] == pytest.approx(((x - x.mean(axis=0)) ** 2).sum())


def test_seeding_arguments_rejected(boxed: np.ndarray) -> None:
    with pytest.raises(ParameterError, match=r"seeding must be one of .* got 'kmeans\+\+'"):
        kernel_bisect(boxed, seeding="kmeans++")
    with pytest.raises(ParameterError, match=r"seeding='frus' .* needs x"):
        kernel_bisect(kernel_matrix=boxed @ boxed.T, seeding="frus")
    with pytest.raises(ParameterError, match=r"initial_labels must have shape \(m, 3\), got \(2,\)"):
        kernel_2means_from_labels(np.eye(3), [0, 1])
    with pytest.raises(ParameterError, match=r"initial_labels must be 0 or 1, got 2"):
        kernel_2means_from_labels(np.eye(3), [[0, 2, 1]])


def test_policy_and_service_config_take_the_seeding() -> None:
    assert DriftPolicy().seeding == "rtmm"
    assert DriftPolicy.from_param({"seeding": "frus"}).seeding == "frus"
    with pytest.raises(ParameterError, match=r"drift.seeding must be one of .* got 'random'"):
        DriftPolicy(seeding="random")
    config = DriftConfig(enabled=True, seeding="rscd")
    assert config.policy == DriftPolicy(seeding="rscd")
    with pytest.raises(ValueError, match="seeding"):
        DriftConfig(enabled=True, seeding="random")


@pytest.mark.parametrize("seeding", ["rscd", "frus"])
def test_the_estimator_splits_a_drifting_cluster_with_every_seeding(seeding: str) -> None:
    from tests.drift.test_drift_engine import CHANGE, blobs, drifting_batches

    model = MiniBatchKernelKMeans(3, random_state=0, drift={"seeding": seeding})
    events = []
    for x, _ in drifting_batches(0, CHANGE + 20):
        events += [e for e in model.step(x).events if e["event"] == "split"]
    assert len(events) == 1 and events[0]["sse_reduction"] >= 0.8
    x, truth = blobs(np.random.default_rng(99), 4000, split=True)
    assert adjusted_rand_score(truth, model.cluster_ids_[model.predict(x)]) >= 0.9
