"""Spectral clustering: SVD projection and normalised-Laplacian bisection."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles
from sklearn.metrics import adjusted_rand_score

from streamkm.batch import SpectralClustering
from streamkm.batch.spectral import normalized_cut_bisection
from streamkm.exceptions import ParameterError, ValidationError

pytestmark = pytest.mark.unit


def _two_block_sbm(n: int, p: float, q: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.permutation(np.repeat([0, 1], n // 2))
    prob = np.where(truth[:, None] == truth[None, :], p, q)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    return (upper | upper.T).astype(np.float64), truth


@pytest.fixture(scope="module")
def circles():
    return make_circles(400, factor=0.5, noise=0.05, random_state=0)


@pytest.mark.parametrize("kwargs", [{"affinity": "nearest_neighbors"}, {"gamma": 30.0}])
def test_laplacian_mode_separates_concentric_circles(circles, kwargs):
    x, y = circles
    model = SpectralClustering(2, mode="laplacian", random_state=0, **kwargs).fit(x)
    assert adjusted_rand_score(y, model.labels_) >= 0.95
    assert model.affinity_matrix_.shape == (400, 400)


@pytest.mark.parametrize("solver", ["full", "randomized"])
def test_svd_mode_recovers_stochastic_block_model(solver):
    adjacency, truth = _two_block_sbm(400, 0.20, 0.04, seed=1)
    model = SpectralClustering(2, mode="svd", svd_solver=solver, random_state=0).fit(adjacency)
    assert adjusted_rand_score(truth, model.labels_) >= 0.95
    assert model.embedding_.shape == (400, 2)
    np.testing.assert_allclose(model.components_ @ model.components_.T, np.eye(2), atol=1e-8)


def test_laplacian_mode_recovers_stochastic_block_model_from_precomputed_affinity():
    adjacency, truth = _two_block_sbm(300, 0.25, 0.05, seed=2)
    model = SpectralClustering(2, mode="laplacian", affinity="precomputed").fit(adjacency)
    assert adjusted_rand_score(truth, model.labels_) >= 0.95


def test_svd_singular_values_match_numpy_and_randomized_agrees():
    scales = np.concatenate([[10.0, 8.0, 6.0], np.linspace(1.0, 0.1, 37)])
    x = np.random.default_rng(3).normal(size=(300, 40)) * scales
    full = SpectralClustering(3, mode="svd", svd_solver="full", random_state=0).fit(x)
    rand = SpectralClustering(3, mode="svd", svd_solver="randomized", random_state=0).fit(x)
    np.testing.assert_allclose(full.singular_values_, np.linalg.svd(x, compute_uv=False)[:3])
    np.testing.assert_allclose(rand.singular_values_, full.singular_values_, rtol=1e-6)
    np.testing.assert_allclose(np.abs(rand.components_ @ full.components_.T), np.eye(3), atol=1e-4)


def test_recursive_bisection_finds_four_separated_groups():
    x, y = make_blobs(400, centers=[[0, 0], [20, 0], [0, 20], [20, 20]], random_state=4)
    model = SpectralClustering(4, mode="laplacian", affinity="nearest_neighbors").fit(x)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    assert len(model.split_ncuts_) == 3


def test_normalized_cut_bisection_finds_zero_cut_of_disconnected_graph():
    w = np.zeros((6, 6))
    w[:3, :3] = 1.0
    w[3:, 3:] = 2.0
    ncut, side = normalized_cut_bisection(w)
    assert ncut == pytest.approx(0.0, abs=1e-12)
    assert side[:3].all() != side[3:].any() or side[3:].all() != side[:3].any()
    assert side.sum() == 3 and len(set(side[:3])) == 1


def test_spectral_errors_name_the_bad_value():
    x = np.random.default_rng(5).normal(size=(20, 3))
    with pytest.raises(ParameterError, match="'spectral'"):
        SpectralClustering(2, mode="spectral").fit(x)
    with pytest.raises(ParameterError, match="'cosine'"):
        SpectralClustering(2, mode="laplacian", affinity="cosine").fit(x)
    with pytest.raises(ParameterError, match="gamma.*-1"):
        SpectralClustering(2, mode="laplacian", gamma=-1.0).fit(x)
    with pytest.raises(ParameterError, match="n_neighbors.*50"):
        SpectralClustering(
            2, mode="laplacian", affinity="nearest_neighbors", n_neighbors=50
        ).fit(x)
    with pytest.raises(ValidationError, match=r"\(20, 3\)"):
        SpectralClustering(2, mode="laplacian", affinity="precomputed").fit(x)
    precomputed = SpectralClustering(2, mode="laplacian", affinity="precomputed")
    with pytest.raises(ValidationError, match="symmetric"):
        precomputed.fit(np.triu(np.ones((4, 4))))
    with pytest.raises(ValidationError, match="non-negative"):
        precomputed.fit(-np.ones((4, 4)))
    with pytest.raises(ParameterError, match="n_clusters=30"):
        SpectralClustering(30).fit(x)
