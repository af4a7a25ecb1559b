"""Lloyd's k-means, the seedings and k-center."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.cluster import KMeans as SkKMeans
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.datasets import make_blobs

from streamkm.batch import KMeans, farthest_traversal, k_center, kmeans_plusplus, lloyd
from streamkm.exceptions import NotFittedError, ParameterError, ValidationError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "n, d, k, dtype, seed",
    [(2000, 5, 6, np.float64, 0), (1500, 20, 12, np.float64, 1), (3000, 3, 9, np.float32, 2)],
)
def test_lloyd_matches_sklearn_from_same_centers(n, d, k, dtype, seed):
    x, _ = make_blobs(n, n_features=d, centers=k, cluster_std=2.5, random_state=seed)
    x = x.astype(dtype)
    init, _ = kmeans_plusplus(x, k, np.random.default_rng(seed))
    ours = KMeans(k, init=init, max_iter=300, tol=1e-4).fit(x)
    ref = SkKMeans(k, init=init, n_init=1, max_iter=300, tol=1e-4, algorithm="lloyd").fit(x)
    rtol = 1e-6 if dtype == np.float64 else 1e-4
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=rtol)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert ours.n_iter_ == ref.n_iter_
    assert ours.cluster_centers_.dtype == dtype
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=rtol, atol=rtol)


def test_lloyd_reaches_a_fixed_point_and_inertia_is_consistent():
    x, _ = make_blobs(800, n_features=4, centers=5, cluster_std=3.0, random_state=3)
    res = lloyd(x, x[:5].copy(), max_iter=500, tol=0.0)
    for j in range(5):
        np.testing.assert_allclose(res.centers[j], x[res.labels == j].mean(axis=0), atol=1e-10)
    assert res.inertia == pytest.approx(np.sum((x - res.centers[res.labels]) ** 2), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(3, 40), st.integers(1, 3)),
           elements=st.floats(-100, 100)),
    st.integers(1, 3),
    st.integers(0, 2**16),
)
def test_property_lloyd_never_worse_than_its_start(x, k, seed):
    k = min(k, x.shape[0])
    init, _ = kmeans_plusplus(x, k, seed)
    start = np.sum(np.min(((x[:, None, :] - init[None]) ** 2).sum(axis=2), axis=1))
    res = lloyd(x, init, max_iter=50)
    assert res.inertia <= start * (1 + 1e-9) + 1e-9
    dist = ((x[:, None, :] - res.centers[None]) ** 2).sum(axis=2)
    own = dist[np.arange(x.shape[0]), res.labels]
    np.testing.assert_allclose(own, dist.min(axis=1), rtol=1e-9, atol=1e-9)


def test_kmeans_predict_transform_score_and_dtype():
    x, _ = make_blobs(600, n_features=3, centers=4, random_state=4)
    x32 = x.astype(np.float32)
    km = KMeans(4, random_state=0).fit(x32)
    assert km.cluster_centers_.dtype == np.float32 and km.n_features_in_ == 3
    np.testing.assert_array_equal(km.predict(x32), km.labels_)
    dist = km.transform(x32)
    assert dist.shape == (600, 4) and dist.dtype == np.float32
    np.testing.assert_array_equal(dist.argmin(axis=1), km.labels_)
    assert km.score(x32) == pytest.approx(-km.inertia_, rel=1e-5)
    np.testing.assert_array_equal(KMeans(4, random_state=0).fit_predict(x32), km.labels_)


@pytest.mark.parametrize("init", ["k-means++", "farthest", "random"])
def test_kmeans_inits_find_well_separated_blobs(init):
    from sklearn.metrics import adjusted_rand_score

    x, y = make_blobs(500, n_features=2, centers=[[0, 0], [10, 0], [0, 10]], random_state=5)
    km = KMeans(3, init=init, random_state=1).fit(x)
    assert adjusted_rand_score(y, km.labels_) == 1.0


def test_kmeans_is_deterministic_under_random_state():
    x, _ = make_blobs(400, centers=6, random_state=6)
    a = KMeans(6, init="random", random_state=11).fit(x)
    b = KMeans(6, init="random", random_state=11).fit(x)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == b.inertia_


def test_empty_cluster_is_reseeded():
    x = np.array([[0.0], [0.1], [10.0], [10.1], [20.0]])
    km = KMeans(3, init=np.array([[0.0], [100.0], [10.0]])).fit(x)
    assert np.unique(km.labels_).size == 3
    assert km.inertia_ == pytest.approx(0.01, abs=1e-9)


def test_seedings_return_distinct_rows():
    x, _ = make_blobs(300, centers=5, random_state=7)
    for seeding in (kmeans_plusplus, farthest_traversal):
        centers, idx = seeding(x, 5, np.random.default_rng(0))
        assert np.unique(idx).size == 5
        np.testing.assert_array_equal(centers, x[idx])


def test_kmeans_plusplus_handles_duplicate_rows():
    x = np.repeat(np.array([[0.0, 0.0], [1.0, 1.0]]), 5, axis=0)
    _, idx = kmeans_plusplus(x, 4, 0)
    assert np.unique(idx).size == 4


def _brute_force_k_center(x: np.ndarray, k: int) -> float:
    dist = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=2))
    return min(dist[:, list(c)].min(axis=1).max() for c in itertools.combinations(range(len(x)), k))


@pytest.mark.parametrize("seed", range(6))
def test_k_center_is_within_twice_the_optimum(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(12, 2)) * rng.uniform(0.5, 3.0)
    for k in (1, 2, 3, 4):
        optimum = _brute_force_k_center(x, k)
        for start in range(3):
            idx, radius = k_center(x, k, random_state=start)
            assert idx.shape == (k,)
            dist = np.sqrt(((x[:, None, :] - x[idx][None, :, :]) ** 2).sum(axis=2))
            assert radius == pytest.approx(dist.min(axis=1).max(), rel=1e-12)
            assert radius <= 2.0 * optimum + 1e-12


def test_kmeans_errors_name_the_bad_value():
    x = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ParameterError, match="n_clusters.*11"):
        KMeans(11).fit(x)
    with pytest.raises(ParameterError, match="'kmeans'"):
        KMeans(2, init="kmeans").fit(x)
    with pytest.raises(ParameterError, match="n_init.*0"):
        KMeans(2, n_init=0).fit(x)
    with pytest.raises(ParameterError, match="max_iter.*-1"):
        KMeans(2, max_iter=-1).fit(x)
    with pytest.raises(ParameterError, match="tol.*-0.5"):
        KMeans(2, tol=-0.5).fit(x)
    with pytest.raises(ParameterError, match=r"\(3, 2\)"):
        KMeans(2, init=np.zeros((3, 2))).fit(x)
    with pytest.raises(ParameterError, match="random_state"):
        KMeans(2, random_state="seed").fit(x)
    with pytest.raises(ValidationError, match="nan"):
        KMeans(2).fit(np.array([[0.0, np.nan], [1.0, 1.0]]))
    with pytest.raises(ValidationError, match="2-D"):
        KMeans(2).fit(np.zeros(5))
    with pytest.raises(NotFittedError, match="KMeans"):
        KMeans(2).predict(x)
    km = KMeans(2, random_state=0).fit(x)
    with pytest.raises(ValidationError, match="3 features"):
        km.predict(np.zeros((4, 3)))
    with pytest.raises(ParameterError, match="n_clusters.*0"):
        k_center(x, 0)
    with pytest.raises(ParameterError, match="n_clusters.*20"):
        kmeans_plusplus(x, 20, 0)
