"""Kernel bisection: batched kernel 2-means from RTMM pairs against a plain numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score

from streamkm.drift import (
    BisectResult,
    kernel_2means_from_pairs,
    kernel_bisect,
    rtmm_pairs,
)
from streamkm.exceptions import ParameterError, ValidationError
from streamkm.kernels import KernelSpec

pytestmark = pytest.mark.unit

RBF = KernelSpec("rbf", gamma=2.0)


def _reference_2means(k: np.ndarray, first: int, second: int, max_iter: int = 50) -> tuple[np.ndarray, float]:
    """One kernel 2-means run, written out per cluster with explicit indicator vectors."""
    n = k.shape[0]
    diag = np.diag(k)
    dist = np.stack([
        diag - 2 * k[:, first] + k[first, first],
        diag - 2 * k[:, second] + k[second, second],
    ])
    labels = (dist[1] < dist[0]).astype(int)
    for _ in range(max_iter):
        dist = np.full((2, n), np.inf)
        for c in (0, 1):
            members = labels == c
            if members.any():
                size = members.sum()
                dist[c] = diag - 2 * k[:, members].sum(axis=1) / size + k[np.ix_(members, members)].sum() / size**2
        new = np.where(dist[1] < dist[0], 1, np.where(dist[0] < dist[1], 0, labels))
        if np.array_equal(new, labels):
            break
        labels = new
    sse = 0.0
    for c in (0, 1):
        members = labels == c
        if members.any():
            sub = k[np.ix_(members, members)]
            sse += np.trace(sub) - sub.sum() / members.sum()
    return labels, sse


def _euclidean_sse(x: np.ndarray, labels: np.ndarray) -> float:
    return float(sum(((x[labels == c] - x[labels == c].mean(axis=0)) ** 2).sum() for c in np.unique(labels)))


@pytest.fixture(scope="module")
def blobs() -> tuple[np.ndarray, np.ndarray]:
    return make_blobs(n_samples=200, centers=[[0.0, 0.0], [12.0, 12.0]], cluster_std=1.0, random_state=0)


@pytest.fixture(scope="module")
def moons() -> np.ndarray:
    return make_moons(n_samples=150, noise=0.08, random_state=1)[0]


@pytest.mark.parametrize("kernel", [None, KernelSpec("rbf", gamma=0.05), KernelSpec("polynomial", gamma=0.1, degree=2)])
def test_separated_blobs_found(blobs: tuple[np.ndarray, np.ndarray], kernel: KernelSpec | None) -> None:
    x, truth = blobs
    result = kernel_bisect(x, kernel=kernel, n_pairs=10, random_state=0)
    assert isinstance(result, BisectResult)
    assert result.labels.shape == (200,) and result.labels.dtype == np.int64
    assert set(np.unique(result.labels)) == {0, 1}
    assert adjusted_rand_score(truth, result.labels) == 1.0
    assert result.sse < result.sse_unsplit
    assert 0.0 < result.sse_reduction < 1.0
    assert result.n_pairs_tried == 10
    i, j = result.pair
    assert 0 <= i < j < 200


def test_linear_sse_is_euclidean_sse(blobs: tuple[np.ndarray, np.ndarray]) -> None:
    x = blobs[0]
    result = kernel_bisect(x, n_pairs=5, random_state=2)
    assert result.sse == pytest.approx(_euclidean_sse(x, result.labels), rel=1e-9)
    assert result.sse_unsplit == pytest.approx(((x - x.mean(axis=0)) ** 2).sum(), rel=1e-9)


@pytest.mark.parametrize("kernel", [KernelSpec("linear"), RBF, KernelSpec("laplacian", gamma=1.0)])
def test_batched_runs_match_reference(moons: np.ndarray, kernel: KernelSpec) -> None:
    k = kernel.block(moons, moons)
    pairs = rtmm_pairs(len(moons), 25, random_state=4)
    runs = kernel_2means_from_pairs(k, pairs)
    for row, (first, second) in enumerate(pairs):
        ref_labels, ref_sse = _reference_2means(k, int(first), int(second))
        np.testing.assert_array_equal(runs.labels[row], ref_labels)
        assert runs.sse[row] == pytest.approx(ref_sse, rel=1e-9, abs=1e-9)
        assert 1 <= runs.n_iter[row] <= 50


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_of_m_not_worse_than_any_pair(moons: np.ndarray, seed: int) -> None:
    k = RBF.block(moons, moons)
    n_pairs = 20
    result = kernel_bisect(kernel_matrix=k, n_pairs=n_pairs, random_state=seed)
    # kernel_bisect draws exactly these pairs from the same seed
    pairs = rtmm_pairs(len(moons), n_pairs, random_state=seed)
    reference_sse = [_reference_2means(k, int(i), int(j))[1] for i, j in pairs]
    assert result.pair in {(int(i), int(j)) for i, j in pairs}
    assert all(result.sse <= sse + 1e-9 for sse in reference_sse)
    assert result.sse == pytest.approx(min(reference_sse), rel=1e-9)
    best = int(np.argmin(reference_sse))
    assert result.pair == tuple(map(int, pairs[best]))


def test_same_seed_same_result(moons: np.ndarray) -> None:
    first = kernel_bisect(moons, kernel=RBF, n_pairs=8, random_state=42)
    second = kernel_bisect(moons, kernel=RBF, n_pairs=8, random_state=42)
    np.testing.assert_array_equal(first.labels, second.labels)
    assert (first.sse, first.pair, first.sse_unsplit) == (second.sse, second.pair, second.sse_unsplit)


def test_rows_and_kernel_matrix_agree(moons: np.ndarray) -> None:
    from_rows = kernel_bisect(moons, kernel=RBF, n_pairs=8, random_state=3)
    from_matrix = kernel_bisect(kernel_matrix=RBF.block(moons, moons), n_pairs=8, random_state=3)
    np.testing.assert_array_equal(from_rows.labels, from_matrix.labels)
    assert from_rows.pair == from_matrix.pair
    assert from_rows.sse == pytest.approx(from_matrix.sse, rel=1e-12)
    assert from_rows.sse_unsplit == pytest.approx(from_matrix.sse_unsplit, rel=1e-12)


def test_float32_rows(moons: np.ndarray) -> None:
    result32 = kernel_bisect(moons.astype(np.float32), kernel=RBF, n_pairs=8, random_state=3)
    result64 = kernel_bisect(moons, kernel=RBF, n_pairs=8, random_state=3)
    assert result32.sse == pytest.approx(result64.sse, rel=1e-4)


def test_n_pairs_capped_at_all_pairs() -> None:
    x = np.array([[0.0], [0.1], [5.0], [5.2]])
    result = kernel_bisect(x, n_pairs=100, random_state=0)
    assert result.n_pairs_tried == 6
    assert adjusted_rand_score([0, 0, 1, 1], result.labels) == 1.0


def test_two_rows() -> None:
    result = kernel_bisect(np.array([[0.0, 1.0], [3.0, 4.0]]), random_state=0)
    assert result.pair == (0, 1)
    assert result.sse == 0.0 and result.sse_unsplit > 0.0
    assert sorted(result.labels.tolist()) == [0, 1]


def test_identical_rows_do_not_split() -> None:
    result = kernel_bisect(np.ones((6, 3)), n_pairs=4, random_state=0)
    assert result.sse == 0.0 and result.sse_unsplit == 0.0
    assert result.sse_reduction == 0.0
    assert len(np.unique(result.labels)) == 1


def test_repeated_pairs_allowed_in_runs(moons: np.ndarray) -> None:
    k = RBF.block(moons, moons)
    runs = kernel_2means_from_pairs(k, np.array([[3, 7], [3, 7], [7, 3]]))
    np.testing.assert_array_equal(runs.labels[0], runs.labels[1])
    np.testing.assert_array_equal(runs.labels[0], 1 - runs.labels[2])
    assert runs.sse[0] == pytest.approx(runs.sse[2], rel=1e-12)


def test_chunked_runs_match_unchunked(moons: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    import streamkm.drift.two_means as two_means

    k = RBF.block(moons, moons)
    pairs = rtmm_pairs(len(moons), 30, random_state=9)
    whole = kernel_2means_from_pairs(k, pairs)
    monkeypatch.setattr(two_means, "_CHUNK_ELEMENTS", len(moons) * 7)
    chunked = kernel_2means_from_pairs(k, pairs)
    np.testing.assert_array_equal(whole.labels, chunked.labels)
    np.testing.assert_allclose(whole.sse, chunked.sse, rtol=1e-12)


def test_bad_arguments(moons: np.ndarray) -> None:
    k = RBF.block(moons, moons)
    with pytest.raises(ParameterError, match="exactly one"):
        kernel_bisect(moons, kernel_matrix=k)
    with pytest.raises(ParameterError, match="exactly one"):
        kernel_bisect()
    with pytest.raises(ParameterError, match="kernel="):
        kernel_bisect(kernel_matrix=k, kernel=RBF)
    with pytest.raises(ParameterError, match="'rbf'"):
        kernel_bisect(moons, kernel="rbf")
    with pytest.raises(ParameterError, match="n_pairs.*0"):
        kernel_bisect(moons, n_pairs=0)
    with pytest.raises(ParameterError, match="max_iter.*0"):
        kernel_bisect(moons, max_iter=0)
    with pytest.raises(ValidationError, match=r"\(3, 4\)"):
        kernel_bisect(kernel_matrix=np.zeros((3, 4)))
    with pytest.raises(ValidationError, match="n=1"):
        kernel_bisect(kernel_matrix=np.ones((1, 1)))
    with pytest.raises(ValidationError, match="nan"):
        kernel_bisect(kernel_matrix=np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(ParameterError, match=r"\(2, 2\)"):
        kernel_2means_from_pairs(k, np.array([[0, 1], [2, 2]]))
    with pytest.raises(ParameterError, match=r"\(0, 150\)"):
        kernel_2means_from_pairs(k, np.array([[0, 150]]))
