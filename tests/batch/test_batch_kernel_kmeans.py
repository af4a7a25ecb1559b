"""Exact full-batch kernel k-means against a plain-numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles
from sklearn.metrics import adjusted_rand_score

from streamkm._core.kernel_lloyd import (
    FactoredGram,
    _cluster_kernel_sums,
    _update_cluster_kernel_sums,
    feature_gram,
)
from streamkm.batch import KernelKMeans, KMeans, kernel_lloyd
from streamkm.exceptions import NotFittedError, ParameterError, ValidationError
from streamkm.kernels import KernelSpec, median_heuristic_gamma

pytestmark = pytest.mark.unit


def _reference(kernel_matrix: np.ndarray, seeds: np.ndarray, max_iter: int = 100):
    """Textbook kernel k-means: P = K H, <C_j, C_j> = diag(H^T K H), argmin, repeat."""
    diag = np.diag(kernel_matrix)
    k = seeds.size
    dist = diag[:, None] - 2.0 * kernel_matrix[:, seeds] + diag[seeds][None, :]
    labels = dist.argmin(axis=1)

    def distances(lab):
        h = np.eye(k)[lab] / np.bincount(lab, minlength=k)
        p = kernel_matrix @ h
        cc = np.einsum("ij,ik,kj->j", h, kernel_matrix, h)
        return diag[:, None] - 2.0 * p + cc[None, :]

    n_iter = 0
    for _ in range(max_iter):
        new = distances(labels).argmin(axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        n_iter += 1
    own = distances(labels)[np.arange(labels.size), labels]
    return labels, float(np.maximum(own, 0.0).mean()), n_iter


@pytest.mark.parametrize(
    "kernel, params",
    [
        ("rbf", {"gamma": 0.1}),
        ("laplacian", {"gamma": 0.2}),
        ("polynomial", {"gamma": 0.05, "degree": 2, "coef0": 1.0}),
        ("cosine", {}),
        ("linear", {}),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_numpy_reference_from_same_seeds(kernel, params, seed):
    x, _ = make_blobs(90, n_features=3, centers=4, cluster_std=2.0, random_state=seed)
    x = x + 3.0  # keep cosine meaningful
    seeds = np.random.default_rng(seed).choice(90, size=4, replace=False)
    model = KernelKMeans(4, kernel=kernel, init=seeds, **params).fit(x)
    spec = KernelSpec(
        kernel, params.get("gamma"), params.get("degree", 3), params.get("coef0", 1.0)
    )
    labels, objective, n_iter = _reference(spec.block(x, x), seeds)
    np.testing.assert_array_equal(model.labels_, labels)
    assert model.objective_ == pytest.approx(objective, rel=1e-10, abs=1e-12)
    assert model.n_iter_ == n_iter


def test_linear_kernel_equals_lloyd():
    x, _ = make_blobs(500, n_features=4, centers=5, cluster_std=2.5, random_state=3)
    seeds = np.arange(0, 500, 100)
    kernel_model = KernelKMeans(5, kernel="linear", init=seeds).fit(x)
    lloyd_model = KMeans(5, init=x[seeds], tol=0.0).fit(x)
    np.testing.assert_array_equal(kernel_model.labels_, lloyd_model.labels_)
    assert kernel_model.objective_ * 500 == pytest.approx(lloyd_model.inertia_, rel=1e-9)


@pytest.mark.parametrize("factored", [False, True])
def test_incremental_cluster_sums_equal_full_gemm(factored):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(70, 3))
    kmat = KernelSpec("rbf", 0.5).block(x, x)
    # a factored matrix (K = F F^T held as F) is updated from F; the reference is formed
    gram = FactoredGram(x) if factored else kmat
    reference = x @ x.T if factored else kmat
    old = rng.integers(0, 4, 70)
    new = old.copy()
    moved = rng.choice(70, 12, replace=False)
    new[moved] = rng.integers(0, 4, 12)
    sums = _cluster_kernel_sums(gram, old, 4)
    _update_cluster_kernel_sums(sums, gram, moved, old, new)
    np.testing.assert_allclose(sums, _cluster_kernel_sums(reference, new, 4), atol=1e-12)


def test_factored_gram_runs_the_same_lloyd_as_the_formed_matrix():
    # an explicit-feature kernel hands Lloyd F instead of F F^T: same labels, same objective
    rng = np.random.default_rng(5)
    features = rng.normal(size=(400, 6)) + np.repeat(rng.normal(scale=4, size=(4, 6)), 100, 0)
    gram = feature_gram(features)
    assert isinstance(gram, FactoredGram)
    seeds = np.array([3, 150, 220, 390])
    factored_run = kernel_lloyd(gram, seeds)
    formed_run = kernel_lloyd(features @ features.T, seeds)
    np.testing.assert_array_equal(factored_run.labels, formed_run.labels)
    assert factored_run.objective == pytest.approx(formed_run.objective, rel=1e-10)
    assert factored_run.n_iter == formed_run.n_iter
    # as many features as half the rows: the matrix is formed (cheaper)
    assert isinstance(feature_gram(features[:12]), np.ndarray)


def test_graph_kernel_predicts_its_own_labels_from_feature_sums():
    x, y = make_circles(600, factor=0.4, noise=0.04, random_state=1)
    model = KernelKMeans(2, kernel="heat", n_init=3, random_state=0).fit(x)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    np.testing.assert_array_equal(model.predict(x), model.labels_)
    # the feature-sum distances equal those from the kernel block with the fitted rows
    members = np.eye(2)[model.labels_]
    new = model.kernel_.prepare(x[:50])
    block = model.kernel_.block(new, model.X_fit_)
    expected = (model.kernel_.diagonal(new)[:, None] - 2 * block @ members / model.cluster_sizes_
                + model.center_sq_norms_[None, :])
    np.testing.assert_allclose(model.transform(x[:50]) ** 2, np.maximum(expected, 0), atol=1e-10)


def test_best_start_separates_concentric_circles():
    x, y = make_circles(300, factor=0.3, noise=0.03, random_state=0)
    model = KernelKMeans(2, gamma=5.0, n_init=10, random_state=0).fit(x)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    single = KernelKMeans(2, gamma=5.0, n_init=1, random_state=0).fit(x)
    assert model.objective_ <= single.objective_


def test_nearest_objective_is_that_of_the_means_as_centers():
    x, _ = make_blobs(300, n_features=2, centers=5, cluster_std=2.5, random_state=4)
    kmat = KernelSpec("rbf", 0.2).block(x, x)
    seeds = np.arange(5)
    capped = kernel_lloyd(kmat, seeds, max_iter=1)
    sizes = np.bincount(capped.labels, minlength=5)
    means = (np.eye(5)[capped.labels] / sizes).T  # (k, n) weights of the cluster means
    inner = means @ kmat
    dist = np.diagonal(kmat)[None, :] - 2.0 * inner + np.einsum("jn,jn->j", means, inner)[:, None]
    assert capped.nearest_objective == pytest.approx(np.maximum(dist.min(axis=0), 0).mean())
    assert capped.nearest_objective < capped.objective  # stopped before the labels were stable
    stable = kernel_lloyd(kmat, seeds)
    assert stable.nearest_objective == pytest.approx(stable.objective, rel=1e-12)


def test_empty_cluster_takes_a_row_and_all_clusters_stay_non_empty():
    x = np.repeat(np.array([[0.0, 0.0], [5.0, 5.0]]), 3, axis=0)
    result = kernel_lloyd(KernelSpec("rbf", 1.0).block(x, x), np.array([0, 1, 3]))
    assert np.unique(result.labels).size == 3
    assert result.objective == pytest.approx(0.0, abs=1e-12)
    assert result.cluster_sizes.sum() == 6


@pytest.mark.parametrize("init", ["k-means++", "farthest", "random"])
def test_inits_predict_transform_and_attributes(init):
    x, y = make_blobs(400, n_features=2, centers=[[0, 0], [8, 0], [0, 8]], random_state=5)
    model = KernelKMeans(3, init=init, n_init=10, random_state=2).fit(x)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    np.testing.assert_array_equal(model.predict(x), model.labels_)
    dist = model.transform(x[:10])
    assert dist.shape == (10, 3)
    np.testing.assert_array_equal(dist.argmin(axis=1), model.labels_[:10])
    assert model.cluster_sizes_.sum() == 400 and model.n_features_in_ == 2
    assert model.gamma_ == pytest.approx(median_heuristic_gamma(x, "rbf", np.random.default_rng()))
    np.testing.assert_array_equal(model.predict([[8.1, 0.2]]), model.labels_[y == 1][:1])


def test_float32_stays_float32_and_agrees_with_float64():
    x, _ = make_blobs(300, n_features=3, centers=3, random_state=6)
    seeds = np.array([0, 1, 2])
    m64 = KernelKMeans(3, gamma=0.05, init=seeds).fit(x)
    m32 = KernelKMeans(3, gamma=0.05, init=seeds).fit(x.astype(np.float32))
    assert m32.X_fit_.dtype == np.float32
    np.testing.assert_array_equal(m32.labels_, m64.labels_)
    assert m32.objective_ == pytest.approx(m64.objective_, rel=1e-4)


def test_tolerance_stops_no_later_and_is_deterministic():
    x, _ = make_blobs(300, n_features=2, centers=6, cluster_std=3.0, random_state=7)
    exact = KernelKMeans(6, n_init=1, random_state=3).fit(x)
    loose = KernelKMeans(6, n_init=1, tol=0.05, random_state=3).fit(x)
    assert loose.n_iter_ <= exact.n_iter_
    again = KernelKMeans(6, n_init=1, random_state=3).fit(x)
    np.testing.assert_array_equal(again.labels_, exact.labels_)


def test_errors_name_the_bad_value():
    x = np.random.default_rng(8).normal(size=(12, 2))
    with pytest.raises(ParameterError, match="'gaussian'"):
        KernelKMeans(2, kernel="gaussian").fit(x)
    with pytest.raises(ParameterError, match="gamma.*-2"):
        KernelKMeans(2, gamma=-2.0).fit(x)
    with pytest.raises(ParameterError, match="n_init.*0"):
        KernelKMeans(2, n_init=0).fit(x)
    with pytest.raises(ParameterError, match="tol.*-1"):
        KernelKMeans(2, tol=-1.0).fit(x)
    with pytest.raises(ParameterError, match="'kmeans'"):
        KernelKMeans(2, init="kmeans").fit(x)
    with pytest.raises(ParameterError, match=r"\[0, 0\]"):
        KernelKMeans(2, init=[0, 0]).fit(x)
    with pytest.raises(ParameterError, match="12"):
        KernelKMeans(2, init=[0, 12]).fit(x)
    with pytest.raises(ParameterError, match="degree.*0"):
        KernelKMeans(2, kernel="polynomial", degree=0).fit(x)
    with pytest.raises(ParameterError, match="n_clusters=13"):
        KernelKMeans(13).fit(x)
    with pytest.raises(ValidationError, match="inf"):
        KernelKMeans(2).fit(np.array([[0.0, np.inf], [1.0, 2.0]]))
    with pytest.raises(NotFittedError, match="KernelKMeans"):
        KernelKMeans(2).predict(x)
    model = KernelKMeans(2, random_state=0).fit(x)
    with pytest.raises(ValidationError, match="5 features"):
        model.predict(np.zeros((3, 5)))
