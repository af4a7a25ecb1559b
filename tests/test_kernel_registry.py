"""Kernel registry, gamma rules, and seed 002's graph kernels against plain numpy references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from streamkm import MiniBatchKernelKMeans
from streamkm._numba import knn_graph
from streamkm.batch import KernelKMeans
from streamkm.exceptions import ParameterError
from streamkm.kernels import (
    KERNELS, KernelSpec, KernelType, build_kernel, get_kernel_type, kernel_names, register,
    resolve_gamma,
)

pytestmark = pytest.mark.unit


def _points(n=120, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _knn_reference(x, k):
    """D^-1 A D^-1 of the symmetrised k-nn graph with self loops, dense numpy."""
    dist = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    r2 = np.sort(dist, axis=1)[:, k]  # k-th other row (index 0 is the row itself)
    adj = (dist <= np.maximum(r2[:, None], r2[None, :])).astype(float)
    deg = adj.sum(1)
    return adj / np.outer(deg, deg), adj, deg


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kth", [0, 1, 5, 39])
def test_knn_graph_kernels_match_numpy(dtype, kth):
    rng = np.random.default_rng(kth)
    landmarks = rng.normal(size=(40, 3)).astype(dtype)
    landmarks_t = np.ascontiguousarray(landmarks.T)
    # rows with repeated distances (copies of landmarks) and fresh rows
    x = np.vstack([landmarks[:7], rng.normal(size=(30, 3)).astype(dtype)])
    # the kernels sum the squared differences of x's dtype in float64, feature by feature
    diff = x[:, None, :] - landmarks[None, :, :]
    dist = np.zeros((x.shape[0], landmarks.shape[0]))
    for f in range(x.shape[1]):
        dist += diff[:, :, f] * diff[:, :, f]
    radius = np.sort(dist, axis=1)[:, kth]
    if dtype == np.float32:  # rounded up to float32
        stored = radius.astype(np.float32)
        low = stored.astype(np.float64) < radius
        stored[low] = np.nextafter(stored[low], np.float32(np.inf))
        radius = stored.astype(np.float64)
    got = np.empty(x.shape[0])
    indptr, indices = knn_graph.join_rows(x, landmarks_t, np.zeros(landmarks.shape[0]), kth,
                                          dtype == np.float32, got)
    np.testing.assert_array_equal(got, radius)
    assert np.all(got >= np.sort(dist, axis=1)[:, kth])
    within = dist <= radius[:, None]  # the k+1 nearest and any ties
    np.testing.assert_array_equal(np.diff(indptr), within.sum(axis=1))
    np.testing.assert_array_equal(indices, np.nonzero(within)[1])

    landmark_r2 = rng.uniform(0, 4, size=landmarks.shape[0])
    x_r2 = np.empty(x.shape[0])
    indptr, indices = knn_graph.join_rows(x, landmarks_t, landmark_r2, kth,
                                          dtype == np.float32, x_r2)
    np.testing.assert_array_equal(x_r2, radius)
    joined = dist <= np.maximum(radius[:, None], landmark_r2[None, :])
    np.testing.assert_array_equal(np.diff(indptr), joined.sum(axis=1))
    np.testing.assert_array_equal(indices, np.nonzero(joined)[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_landmark_graph_is_the_symmetrised_knn_graph(dtype):
    from streamkm.kernels._graph import LandmarkGraph

    rng = np.random.default_rng(7)
    # a grid has many tied distances: ties at the radius join both ways
    landmarks = np.vstack([np.indices((6, 6)).reshape(2, -1).T, rng.normal(size=(40, 2)) * 3])
    landmarks = landmarks.astype(dtype)
    graph = LandmarkGraph.fit(landmarks, 5)
    diff = landmarks[:, None, :] - landmarks[None, :, :]
    dist = (diff[:, :, 0] * diff[:, :, 0]).astype(np.float64) + diff[:, :, 1] * diff[:, :, 1]
    reference = dist <= np.maximum(graph.r2[:, None], graph.r2[None, :])
    np.testing.assert_array_equal(graph.landmark_adjacency.toarray() > 0, reference)
    np.testing.assert_array_equal(graph.degrees, reference.sum(axis=1))
    # a graph read back from its arrays rebuilds the same adjacency
    loaded = LandmarkGraph.from_arrays(graph.to_arrays("k_"), "k_", 5)
    assert (loaded.landmark_adjacency != graph.landmark_adjacency).nnz == 0
    # and a landmark placed as a new row gets its own radius and edges
    r2, adjacency = graph.join(landmarks[:9])
    np.testing.assert_array_equal(r2, graph.r2[:9])
    np.testing.assert_array_equal(adjacency.toarray() > 0, reference[:9])


def test_join_rows_grows_its_index_buffer_for_dense_neighbourhoods():
    rng = np.random.default_rng(1)
    landmarks = rng.normal(size=(300, 2))
    x = rng.normal(size=(5, 2))
    # every landmark is joined: radii far beyond every distance
    indptr, indices = knn_graph.join_rows(x, np.ascontiguousarray(landmarks.T),
                                          np.full(300, 1e9), 0, False, np.empty(5))
    np.testing.assert_array_equal(np.diff(indptr), np.full(5, 300))
    np.testing.assert_array_equal(indices, np.tile(np.arange(300), 5))


def test_registry_lists_every_kernel_with_traits():
    assert set(KERNELS) == {"rbf", "laplacian", "polynomial", "cosine", "linear", "knn", "heat",
                            "anchor", "level_set"}
    for graph in ("anchor", "level_set"):
        assert get_kernel_type(graph).fitted and get_kernel_type(graph).explicit_features
    assert get_kernel_type("rbf").normalized and get_kernel_type("rbf").shift_invariant
    assert get_kernel_type("linear").explicit_features
    assert get_kernel_type("knn").fitted and not get_kernel_type("knn").needs_gamma
    with pytest.raises(ParameterError, match="'nope'"):
        get_kernel_type("nope")


def test_a_new_kernel_is_one_registered_class():
    @register
    class Scaled(KernelType):
        name = "test-scaled-linear"
        explicit_features = True

        def block(self, params, x, y, x_sq, y_sq):
            return 2.0 * (x @ y.T)

        def diagonal(self, params, x):
            return 2.0 * np.einsum("ij,ij->i", x, x)

    try:
        assert "test-scaled-linear" in kernel_names()
        x = _points(60)
        model = MiniBatchKernelKMeans(2, kernel="test-scaled-linear", batch_size=30,
                                      random_state=0).fit(x)
        assert model.predict(x).shape == (60,)
    finally:
        from streamkm.kernels import _registry

        _registry._REGISTRY.pop("test-scaled-linear")


def test_gamma_rules_and_errors():
    x = _points(200)
    rng = np.random.default_rng(0)
    kind = get_kernel_type("rbf")
    median = resolve_gamma(kind, "median", x, rng, 2)
    assert resolve_gamma(kind, "auto", x, np.random.default_rng(0), 2) == median
    eigengap = resolve_gamma(kind, "eigengap", x, np.random.default_rng(0), 2)
    assert any(eigengap == pytest.approx(median * 2.0 ** j) for j in range(7))
    assert resolve_gamma(kind, 0.5, x, rng, 2) == 0.5
    for bad in ("wide", -1.0, 0.0, float("nan"), True):
        with pytest.raises(ParameterError, match="gamma"):
            resolve_gamma(kind, bad, x, rng, 2)


def test_auto_gamma_round_trips_through_the_state(tmp_path):
    x = _points(400)
    model = MiniBatchKernelKMeans(3, gamma="eigengap", batch_size=100, max_iter=5,
                                  random_state=1).fit(x)
    assert model.gamma_ > 0
    model.save(tmp_path / "m.npz")
    back = MiniBatchKernelKMeans.load(tmp_path / "m.npz")
    assert back.gamma_ == model.gamma_
    np.testing.assert_array_equal(back.predict(x), model.predict(x))


def test_knn_kernel_is_exact_on_the_landmarks():
    x = _points(150)
    spec = build_kernel("knn", None, sample=x, rng=np.random.default_rng(0), n_clusters=2,
                        kernel_params={"n_neighbors": 7})
    xp = spec.prepare(x)
    ref, _, _ = _knn_reference(x, 7)
    np.testing.assert_allclose(spec.block(xp, xp), ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(spec.diagonal(xp), np.diag(ref), rtol=1e-12)


def test_knn_out_of_sample_row_joins_like_a_landmark():
    x = _points(150)
    spec = build_kernel("knn", None, sample=x, rng=np.random.default_rng(0), n_clusters=2,
                        kernel_params={"n_neighbors": 7})
    new = _points(5, seed=9)
    both = np.vstack([x, new])
    # reference: the new rows' radius from the landmarks only, the rule applied to the pair
    dist = ((new[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    r2_new = np.sort(dist, axis=1)[:, 7]
    _, adj, deg = _knn_reference(x, 7)
    r2_l = np.sort(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1), axis=1)[:, 7]
    joined = dist <= np.maximum(r2_new[:, None], r2_l[None, :])
    expected = joined / np.outer(joined.sum(1), deg)
    got = spec.block(spec.prepare(new), spec.prepare(x))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert both.shape[0] == 155


def test_graph_kernels_keep_repeated_landmark_rows_once():
    x = _points(60)
    repeated = np.vstack([x, np.repeat(x[:5], 12, axis=0)])
    for name in ("knn", "heat"):
        once = build_kernel(name, None, sample=x, rng=np.random.default_rng(0), n_clusters=2,
                            kernel_params={"n_neighbors": 6})
        spec = build_kernel(name, None, sample=repeated, rng=np.random.default_rng(0),
                            n_clusters=2, kernel_params={"n_neighbors": 6})
        graph = getattr(spec.fitted, "graph", spec.fitted)  # heat keeps it beside its spectrum
        np.testing.assert_array_equal(graph.landmarks, x)
        np.testing.assert_allclose(spec.block(spec.prepare(repeated), spec.prepare(x)),
                                   once.block(once.prepare(repeated), once.prepare(x)),
                                   atol=1e-12)
    with pytest.raises(ParameterError, match="2 distinct landmark rows, got 1"):
        build_kernel("knn", None, sample=np.ones((10, 2)), rng=np.random.default_rng(0),
                     n_clusters=2)


def test_heat_kernel_is_exact_on_the_landmarks():
    x = _points(120)
    spec = build_kernel("heat", None, sample=x, rng=np.random.default_rng(0), n_clusters=2,
                        kernel_params={"n_neighbors": 6, "t": 3.0})
    _, adj, deg = _knn_reference(x, 6)
    lap = np.eye(len(x)) - adj / np.sqrt(np.outer(deg, deg))
    ref = scipy.linalg.expm(-3.0 * lap)
    xp = spec.prepare(x)
    # landmarks get their exact features, every eigenpair included
    np.testing.assert_allclose(spec.block(xp, xp), ref, atol=1e-6)
    assert spec.fitted.truncation == 0.0


def test_heat_kernel_drops_only_eigenpairs_of_negligible_weight():
    # two separated groups: t="auto" diffuses long, so most eigenpairs weigh nothing
    x = np.vstack([_points(100), _points(100, seed=1) + 8.0])
    spec = build_kernel("heat", None, sample=x, rng=np.random.default_rng(0), n_clusters=2,
                        kernel_params={"n_neighbors": 6})
    state = spec.fitted
    _, adj, deg = _knn_reference(x, 6)
    lap = np.eye(len(x)) - adj / np.sqrt(np.outer(deg, deg))
    lam = np.sort(1.0 - np.linalg.eigvalsh(lap))[::-1]
    weights = np.exp(-state.t * (1.0 - lam))
    # exactly the eigenpairs weighing at least 1e-6 of the leading one are kept
    assert state.eigenvalues.shape[0] == np.count_nonzero(weights >= 1e-6 * weights[0]) < 20
    xp = spec.prepare(x)
    assert xp.shape == (200, state.eigenvalues.shape[0])
    np.testing.assert_allclose(spec.block(xp, xp), scipy.linalg.expm(-state.t * lap),
                               atol=1e-6)
    assert 0.0 < state.truncation <= 1.0


def _density_reference(x, k):
    """Density-weighted k-nn affinity exp(-max(r2_i, r2_j) / median r2), dense numpy."""
    dist = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    r2 = np.sort(dist, axis=1)[:, k]
    adj = dist <= np.maximum(r2[:, None], r2[None, :])
    return adj * np.exp(-np.maximum(r2[:, None], r2[None, :]) / np.median(r2)), r2


def test_density_weighted_heat_kernel_matches_numpy_on_landmarks_and_new_rows():
    x = _points(120)
    spec = build_kernel("heat", None, sample=x, rng=np.random.default_rng(0), n_clusters=2,
                        kernel_params={"n_neighbors": 6, "t": 3.0, "weights": "density"})
    weights, r2 = _density_reference(x, 6)
    deg = weights.sum(1)
    norm = weights / np.sqrt(np.outer(deg, deg))
    np.testing.assert_allclose(spec.block(spec.prepare(x), spec.prepare(x)),
                               scipy.linalg.expm(-3.0 * (np.eye(len(x)) - norm)), atol=1e-6)
    # a new row: its radius from the landmarks, the same edge rule and weights (Nystroem)
    new = _points(6, seed=9)
    dist = ((new[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    r2_new = np.sort(dist, axis=1)[:, 6]
    reach = np.maximum(r2_new[:, None], r2[None, :])
    w_new = (dist <= reach) * np.exp(-reach / np.median(r2))
    n_new = w_new / np.sqrt(np.outer(w_new.sum(1), deg))
    lam, vec = np.linalg.eigh(norm)
    keep = np.abs(lam) > 0.1
    expected = n_new @ vec[:, keep] @ np.diag(np.exp(-3.0 * (1 - lam[keep])) / lam[keep]) \
        @ vec[:, keep].T
    np.testing.assert_allclose(spec.block(spec.prepare(new), spec.prepare(x)), expected,
                               atol=1e-9)


def test_density_weighted_heat_state_round_trips(tmp_path):
    x = _points(300)
    model = MiniBatchKernelKMeans(3, kernel="heat", batch_size=100, max_iter=5, random_state=0,
                                  kernel_params={"weights": "density"}).fit(x)
    model.save(tmp_path / "h.npz")
    back = MiniBatchKernelKMeans.load(tmp_path / "h.npz")
    assert back.kernel_.fitted.weights == "density"
    new = _points(40, seed=5)
    np.testing.assert_array_equal(back.transform(new), model.transform(new))


@pytest.mark.parametrize("kernel", ["knn", "heat"])
def test_graph_kernels_fit_predict_partial_fit_and_state(kernel, tmp_path):
    x = _points(300)
    model = MiniBatchKernelKMeans(3, kernel=kernel, batch_size=100, max_iter=10,
                                  random_state=0).fit(x)
    labels = model.predict(x)
    assert labels.shape == (300,) and set(labels) <= {0, 1, 2}
    new = _points(40, seed=5)
    model.partial_fit(new)
    model.save(tmp_path / "g.npz")
    back = MiniBatchKernelKMeans.load(tmp_path / "g.npz")
    np.testing.assert_array_equal(back.predict(new), model.predict(new))
    streaming = MiniBatchKernelKMeans(3, kernel=kernel, random_state=0)
    streaming.partial_fit(x[:150]).partial_fit(x[150:])
    assert streaming.predict(new).shape == (40,)


def test_exact_kernel_kmeans_accepts_graph_kernels():
    x = _points(200)
    model = KernelKMeans(2, kernel="knn", n_init=2, random_state=0).fit(x)
    np.testing.assert_array_equal(model.predict(x), model.labels_)


def test_kernel_params_are_checked():
    with pytest.raises(ParameterError, match="n_neighbors"):
        KernelSpec("knn", options={"n_neighbors": 0})
    with pytest.raises(ParameterError, match="unknown"):
        KernelSpec("knn", options={"k": 3})
    with pytest.raises(ParameterError, match="'gauss'"):
        KernelSpec("heat", options={"weights": "gauss"})


@pytest.mark.parametrize("kernel", ["heat", "knn"])
def test_graph_kernels_place_rows_in_blocks_with_the_same_result(kernel, monkeypatch):
    """Large inputs are placed in the graph a block of rows at a time (bounded memory); the
    features do not depend on the block size."""
    from streamkm.kernels import _graph

    rng = np.random.default_rng(11)
    landmarks = rng.normal(size=(200, 3))
    spec = KernelSpec(kernel).fit(landmarks, 3)
    x = np.vstack([rng.normal(size=(150, 3)), landmarks[:20]])  # new rows and landmarks
    whole = spec.prepare(x)
    monkeypatch.setattr(_graph, "PLACE_ROWS", 16)
    np.testing.assert_array_equal(spec.prepare(x), whole)


@pytest.mark.unit
def test_heat_kernel_keeps_every_piece_of_a_graph_above_the_dense_limit():
    """Above ``dense_limit`` landmarks the spectrum comes from Lanczos, which from one start
    found 10 of the 12 unit eigenvalues of a 12-piece graph; it is now solved per piece."""
    from sklearn.datasets import make_blobs

    x, _ = make_blobs(6000, centers=12, cluster_std=0.2, center_box=(-40, 40), random_state=1)
    spec = KernelSpec("heat", options={"dense_limit": 2000}).fit(x, 12)
    lam = spec.fitted.eigenvalues
    assert np.count_nonzero(lam > 1 - 1e-9) == 12
    vec = spec.fitted.eigenvectors
    np.testing.assert_allclose(vec.T @ vec, np.eye(vec.shape[1]), atol=1e-8)


@pytest.mark.unit
@pytest.mark.parametrize("options", [{"n_components": 0}, {"dense_limit": 2.5},
                                     {"n_neighbors": True}, {"t": -1.0}])
def test_heat_kernel_options_are_checked_whatever_t(options):
    """With t="auto" (the default) n_components and dense_limit went unchecked: the check
    returned as soon as it had seen t."""
    with pytest.raises(ParameterError, match=next(iter(options))):
        KernelSpec("heat", options=options)
