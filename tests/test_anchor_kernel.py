"""The anchor-graph kernel (``kernel="anchor"``, and ``gamma="auto"`` on convex data):
its numba kernel against numpy, the kernel against a dense eigendecomposition of the
anchor graph, new rows, state, validation, and the quality the defaults get from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from streamkm import MiniBatchKernelKMeans
from streamkm._numba.anchor_graph import nearest_anchors
from streamkm.exceptions import ParameterError, StreamkmError
from streamkm.kernels import KernelSpec

_spec = importlib.util.spec_from_file_location(
    "_quality_data", Path(__file__).resolve().parents[1] / "benchmarks" / "_quality_data.py")
quality_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quality_data)


def _reference_weights(x: np.ndarray, anchors: np.ndarray, r: int) -> np.ndarray:
    """Dense Z: exp(-d2 / mean of the r nearest d2) on the r nearest anchors, rows sum to 1."""
    d2 = ((x[:, None, :] - anchors[None, :, :]) ** 2).sum(axis=2)
    order = np.argsort(d2, axis=1, kind="stable")[:, :r]
    near = np.take_along_axis(d2, order, axis=1)
    w = np.exp(-near / near.mean(axis=1, keepdims=True))
    z = np.zeros((x.shape[0], anchors.shape[0]))
    np.put_along_axis(z, order, w / w.sum(axis=1, keepdims=True), axis=1)
    return z


@pytest.mark.unit
def test_nearest_anchors_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 7))
    anchors = rng.normal(size=(50, 7))
    for r in (1, 5, 50):
        indices, sq = nearest_anchors(x, np.ascontiguousarray(anchors.T), r)
        d2 = ((x[:, None, :] - anchors[None, :, :]) ** 2).sum(axis=2)
        order = np.argsort(d2, axis=1, kind="stable")[:, :r]
        np.testing.assert_array_equal(indices, order)
        np.testing.assert_allclose(sq, np.take_along_axis(d2, order, axis=1), rtol=1e-12)
    # equal distances: the lower anchor index comes first
    grid = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, -1.0], [-1.0, 0.0], [3.0, 3.0]])
    indices, sq = nearest_anchors(np.zeros((1, 2)), np.ascontiguousarray(grid.T), 4)
    np.testing.assert_array_equal(indices[0], [0, 1, 2, 3])
    np.testing.assert_array_equal(sq[0], [1.0, 1.0, 1.0, 1.0])


def _in_order_nearest(x: np.ndarray, anchors: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy reference: squared distances summed feature by feature in order (one IEEE
    operation per term, as the search by differences sums them), the r smallest by
    (distance, anchor index)."""
    d2 = np.zeros((x.shape[0], anchors.shape[0]))
    for f in range(x.shape[1]):
        t = x[:, f, None] - anchors[None, :, f]
        d2 += t * t
    order = np.argsort(d2, axis=1, kind="stable")[:, :r]
    return order, np.take_along_axis(d2, order, axis=1)


@pytest.mark.unit
@pytest.mark.parametrize("d", [1, 5, 16, 62])
@pytest.mark.parametrize("m", [3, 257, 700])
@pytest.mark.parametrize("case", ["normal", "ties", "grid"])
def test_search_by_differences_equals_the_in_order_sums_bit_for_bit(d, m, case):
    """The search by differences (anchors a chunk at a time, features four at a time) gives
    the indices and the exact bits of the feature-by-feature sums, ties to the lower
    index, whatever the number of anchors and features."""
    from streamkm._numba import anchor_graph

    rng = np.random.default_rng(10 * d + m)
    anchors = rng.normal(size=(m, d))
    x = rng.normal(size=(90, d))
    if case == "ties":  # repeated anchors, rows on anchors
        anchors[m // 2:2 * (m // 2)] = anchors[:m // 2]
        x[:min(30, m)] = anchors[:min(30, m)]
    elif case == "grid":  # integers: many equal distances
        anchors, x = np.round(2 * anchors), np.round(2 * x)
    for r in sorted({1, min(10, m), m}):
        got = anchor_graph.nearest_anchors_by_differences(x, np.ascontiguousarray(anchors.T), r)
        want = _in_order_nearest(x, anchors, r)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.unit
def test_distinct_rows_keep_first_occurrences_in_order():
    """Repeated rows are dropped (0.0 and -0.0 are equal), the rest keep their order; rows
    without repeats come back as the same array."""
    from streamkm.kernels._graph import distinct_rows

    x = np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0], [-0.0, 1.0], [3.0, 0.5], [0.0, 1.0]])
    for dtype in (np.float64, np.float32):
        got = distinct_rows(x.astype(dtype))
        np.testing.assert_array_equal(got, np.array([[1.0, 2.0], [0.0, 1.0], [3.0, 0.5]]))
        assert got.dtype == dtype
    unique = np.random.default_rng(0).normal(size=(50, 3))
    assert distinct_rows(unique) is unique
    np.testing.assert_array_equal(distinct_rows(unique[:1]), unique[:1])


@pytest.mark.unit
@pytest.mark.parametrize("case", ["normal", "ties", "offset", "tiny", "grid", "overflow"])
@pytest.mark.parametrize("d", [5, 100, 300])
@pytest.mark.filterwarnings("error")
def test_gemm_narrowed_search_equals_every_distance_by_differences(case, d, monkeypatch):
    """In many dimensions a GEMM narrows each row's anchors first: the nearest anchors and
    their distances stay those of the search by differences, bit for bit, with equal
    distances, data far from the origin or near it, and squares that overflow."""
    from streamkm._numba import anchor_graph

    monkeypatch.setattr(anchor_graph, "GEMM_MIN_FEATURES", 0)  # narrow at every d
    rng = np.random.default_rng(d)
    anchors = rng.normal(size=(700, d))
    x = rng.normal(size=(1100, d))  # more than one GEMM block of rows
    if case == "ties":  # repeated anchors, rows on anchors: equal distances
        anchors[350:] = anchors[:350]
        x[:350] = anchors[:350]
    elif case == "offset":
        shift = 1e8 * rng.normal(size=d)
        anchors, x = anchors + shift, x + shift
    elif case == "tiny":
        anchors, x = anchors * 1e-150, x * 1e-150
    elif case == "grid":  # integers: many distances exactly equal
        anchors, x = np.round(2 * anchors), np.round(2 * x)
    elif case == "overflow":
        anchors, x = anchors * 1e160, x * 1e160
    anchors_t = np.ascontiguousarray(anchors.T)
    for r in (1, 10):
        got = anchor_graph.nearest_anchors(x, anchors_t, r)
        want = anchor_graph.nearest_anchors_by_differences(x, anchors_t, r)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.unit
@pytest.mark.parametrize("t", [0.5, 3.0])
def test_anchor_kernel_is_the_heat_kernel_of_the_anchor_graph(t):
    """K = features @ features.T equals exp(-t (I - W)), W = Z Lambda^-1 Z^T, over the
    eigenpairs of W above 0.1, for fitted rows and for new rows (their extension)."""
    rng = np.random.default_rng(1)
    x = np.vstack([rng.normal(size=(150, 3)), rng.normal(size=(150, 3)) + 4.0])
    spec = KernelSpec("anchor", options={"n_anchors": 40, "n_nearest": 4, "t": t,
                                         "n_components": 40}).fit(x, 2)
    anchors = spec.fitted.anchors
    assert anchors.shape == (40, 3)
    z = _reference_weights(x, anchors, 4)
    np.testing.assert_allclose(spec.fitted.weights(x).toarray(), z, atol=1e-12)
    lam = z.sum(axis=0)
    w = z @ np.diag(1.0 / lam) @ z.T
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-10)
    mu, u = np.linalg.eigh(w)
    kept = mu > 0.1
    reference = (u[:, kept] * np.exp(-t * (1.0 - mu[kept]))) @ u[:, kept].T
    features = spec.prepare(x)
    np.testing.assert_allclose(features @ features.T, reference, atol=1e-8)
    # new rows: the same map of their anchor weights (B = Z Lambda^-1/2 = U S V^T)
    new = rng.normal(size=(20, 3)) * 2.0
    b = z / np.sqrt(lam)[None, :]
    s2, v = np.linalg.eigh(b.T @ b)
    use = s2 > 0.1
    extension = (_reference_weights(new, anchors, 4) / np.sqrt(lam)[None, :]) @ v[:, use] \
        * (np.exp(-t * (1.0 - s2[use]) / 2.0) / np.sqrt(s2[use]))[None, :]
    np.testing.assert_allclose(spec.prepare(new) @ features.T, extension @ (
        b @ v[:, use] * (np.exp(-t * (1.0 - s2[use]) / 2.0) / np.sqrt(s2[use]))[None, :]).T,
        atol=1e-8)


@pytest.mark.unit
@pytest.mark.filterwarnings("error")
def test_anchor_kernel_state_dtypes_outliers_and_repeated_rows(tmp_path):
    from sklearn.datasets import make_blobs

    x, y = make_blobs(1200, centers=3, cluster_std=0.6, random_state=2)
    model = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0).fit(x)
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    model.save(tmp_path / "a.npz")
    loaded = MiniBatchKernelKMeans.load(tmp_path / "a.npz")
    assert loaded.kernel_.name == "anchor"
    np.testing.assert_array_equal(loaded.transform(x), model.transform(x))
    # float32 rows: a float32 model; far outliers and values of extreme scale stay finite
    far = np.array([[1e6, -1e6], [1e3, 1e3]])
    for scale in (1.0, 1e30, 1e-30):
        rows = (x * scale).astype(np.float32)
        small = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0).fit(rows)
        out = small.transform(np.vstack([rows[:5], (far * scale).astype(np.float32)]))
        assert out.dtype == np.float32 and np.all(np.isfinite(out))
        assert adjusted_rand_score(y, small.labels_) >= 0.95
    # more copies of a row than anchors it joins: still one anchor, finite features
    repeated = np.vstack([np.repeat(x[:5], 200, axis=0), x])
    model = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0).fit(repeated)
    assert np.all(np.isfinite(model.transform(repeated)))
    assert adjusted_rand_score(y, model.predict(x)) >= 0.95


@pytest.mark.unit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_fitted_rows_are_prepared_from_their_kept_weights_once(dtype, monkeypatch):
    """fit(X) fits the kernel on X and then prepares X: the second search of X's nearest
    anchors is skipped, with the same features to the bit; other rows of X's shape, and X
    prepared again, are searched."""
    import streamkm.kernels.anchor as anchor_module

    x = np.random.default_rng(4).normal(size=(3000, 5)).astype(dtype)
    spec = KernelSpec("anchor", options={"n_anchors": 300}).fit(x.astype(np.float64), 4)
    state = spec.fitted
    searched = []
    search = anchor_module.nearest_anchors
    monkeypatch.setattr(anchor_module, "nearest_anchors",
                        lambda rows, *args: searched.append(rows.shape[0]) or search(rows, *args))
    fresh = np.empty((x.shape[0], state.eigenvalues.shape[0]), dtype=dtype)
    fresh[:] = state.features(x)  # computed from a new search of x's anchors
    assert sum(searched) == x.shape[0]
    shifted = x + dtype(1e-3)
    assert np.array_equal(spec.prepare(shifted), state.features(shifted).astype(dtype))
    assert sum(searched) == 3 * x.shape[0]
    kept = spec.prepare(x)
    assert sum(searched) == 3 * x.shape[0]  # no search
    assert kept.dtype == dtype and np.array_equal(kept, fresh)
    assert state.take_fitted_weights(x) is None  # used once, then let go
    assert np.array_equal(spec.prepare(x), fresh)
    assert sum(searched) == 4 * x.shape[0]
    restored = KernelSpec.from_dict(spec.to_dict(), *spec.to_arrays())
    assert restored.fitted.take_fitted_weights(x) is None


@pytest.mark.unit
@pytest.mark.parametrize("option, value", [("n_anchors", 0), ("n_nearest", 2.5),
                                           ("n_components", True), ("t", -1.0), ("t", "fast")])
def test_anchor_kernel_options_are_checked(option, value):
    with pytest.raises(ParameterError, match=repr(value).replace(".", r"\.")) as info:
        MiniBatchKernelKMeans(2, kernel="anchor", kernel_params={option: value}).fit(
            np.random.default_rng(0).normal(size=(50, 2)))
    assert isinstance(info.value, StreamkmError) and isinstance(info.value, ValueError)


@pytest.mark.slow
def test_defaults_reach_the_papers_pendigits_quality():
    """PenDigits with every parameter default (the issue's floor: ARI 0.66, NMI 0.76; the
    median-width rbf gives 0.62-0.64 / 0.72)."""
    x, y = quality_data.pendigits()
    ari, nmi = [], []
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(x.shape[0])
        model = MiniBatchKernelKMeans(10, random_state=seed).fit(x[order])
        assert model.kernel_.name == "anchor"
        labels = model.predict(x)
        ari.append(adjusted_rand_score(y, labels))
        nmi.append(normalized_mutual_info_score(y, labels))
    assert np.median(ari) >= 0.66 and np.median(nmi) >= 0.76, (ari, nmi)


@pytest.mark.slow
def test_defaults_on_digits_and_blobs_are_no_worse_than_the_median_width():
    from sklearn.datasets import load_digits, make_blobs

    cases = [load_digits(return_X_y=True)] + [make_blobs(3000, centers=5, random_state=s)
                                              for s in range(3)]
    for x, y in cases:
        k = len(np.unique(y))
        auto = [adjusted_rand_score(y, MiniBatchKernelKMeans(k, random_state=s).fit(x).labels_)
                for s in range(2)]
        median = [adjusted_rand_score(y, MiniBatchKernelKMeans(k, gamma="median",
                                                               random_state=s).fit(x).labels_)
                  for s in range(2)]
        assert np.mean(auto) >= np.mean(median) - 0.01, (auto, median)


@pytest.mark.unit
def test_auto_keeps_the_median_width_where_the_anchor_graph_joins_clusters():
    """Three clusters, two of them thin lines whose tails nearly touch once the columns are
    standardised: the anchor graph joins those two (its partition: ARI 0.46), the median
    width separates them. "auto" sees the anchor partition cut more and keeps rbf."""
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    y = rng.integers(3, size=600)
    x = np.array([[0, 0], [6, 0], [0, 6]])[y] * [1, 50] + rng.normal(size=(600, 2))
    x = StandardScaler().fit_transform(x)
    anchor = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0).fit(x)
    assert adjusted_rand_score(y, anchor.labels_) < 0.6
    model = MiniBatchKernelKMeans(3, random_state=0).fit(x)
    assert model.kernel_.name == "rbf"
    assert adjusted_rand_score(y, model.labels_) >= 0.99


@pytest.mark.unit
@pytest.mark.parametrize("centers", [1, 12])
def test_leading_eigenpairs_match_lapack_on_graphs_of_several_pieces(centers):
    """Lanczos from one start finds one vector of a repeated eigenvalue; a graph of c pieces
    has eigenvalue 1 c times. Per connected block, every copy is found."""
    import scipy.linalg
    import scipy.sparse as sp
    from sklearn.datasets import make_blobs

    from streamkm.kernels._spectral import leading_eigenpairs
    from streamkm.kernels.anchor import _choose_anchors, anchor_weights

    x, _ = make_blobs(3000, centers=centers, cluster_std=0.2, center_box=(-40, 40),
                      random_state=1)
    anchors = _choose_anchors(x, 1500)
    z = anchor_weights(x, np.ascontiguousarray(anchors.T), 10)
    column = np.asarray(z.sum(axis=0)).ravel()
    b = z @ sp.diags(1.0 / np.sqrt(column))
    gram = (b.T @ b).tocsr()
    lam, vec = leading_eigenpairs(gram, 50, np.sqrt(column))
    reference = scipy.linalg.eigh(gram.toarray(), eigvals_only=True)[::-1][:50]
    np.testing.assert_allclose(lam, reference, atol=1e-10)
    assert np.count_nonzero(lam > 1 - 1e-9) == np.count_nonzero(reference > 1 - 1e-9) >= centers
    np.testing.assert_allclose(gram @ vec, vec * lam, atol=1e-10)
    np.testing.assert_allclose(vec.T @ vec, np.eye(50), atol=1e-10)
