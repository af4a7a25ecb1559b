"""Ward's merge cost and Ward agglomerative clustering against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.cluster.hierarchy import cut_tree, linkage
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from streamkm.batch import WardAgglomerative, ward_cost
from streamkm.exceptions import NotFittedError, ParameterError

pytestmark = pytest.mark.unit


def test_ward_cost_is_the_increase_of_the_kmeans_cost():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(7, 3)), rng.normal(2.0, 1.0, size=(4, 3))
    sse = lambda z: float(np.sum((z - z.mean(axis=0)) ** 2))  # noqa: E731
    increase = sse(np.vstack([a, b])) - sse(a) - sse(b)
    sq = float(np.sum((a.mean(axis=0) - b.mean(axis=0)) ** 2))
    assert ward_cost(7, 4, sq) == pytest.approx(increase, rel=1e-12)
    assert isinstance(ward_cost(7, 4, sq), float)


def test_ward_cost_broadcasts():
    out = ward_cost(np.array([1, 2, 3])[:, None], np.array([1, 4]), 2.0)
    np.testing.assert_allclose(out, [[1.0, 1.6], [4 / 3, 8 / 3], [1.5, 24 / 7]])


@pytest.mark.parametrize("seed, n", [(0, 60), (1, 200), (2, 350)])
def test_ward_matches_scipy_linkage_cut_at_every_k(seed, n):
    x, _ = make_blobs(n, n_features=3, centers=5, cluster_std=1.5, random_state=seed)
    z = linkage(x, "ward")
    model = WardAgglomerative(5).fit(x)
    np.testing.assert_array_equal(model.linkage_[:, [0, 1, 3]], z[:, [0, 1, 3]])
    np.testing.assert_allclose(model.linkage_[:, 2], z[:, 2], rtol=1e-9)
    assert np.all(np.diff(model.merge_costs_) >= 0)
    for k in (1, 2, 3, 5, 8, 20, n - 1, n):
        ref = cut_tree(z, n_clusters=k).ravel()
        assert adjusted_rand_score(ref, model.labels_at(k)) == 1.0
        assert np.unique(model.labels_at(k)).size == k
    assert adjusted_rand_score(cut_tree(z, n_clusters=5).ravel(), model.labels_) == 1.0


def test_ward_merge_costs_are_kmeans_cost_increases():
    x = np.random.default_rng(3).normal(size=(30, 2))
    model = WardAgglomerative(1).fit(x)
    sse = lambda lab: sum(  # noqa: E731
        np.sum((x[lab == j] - x[lab == j].mean(axis=0)) ** 2) for j in np.unique(lab)
    )
    for k in (29, 10, 3):
        step = 30 - k - 1
        before, after = sse(model.labels_at(k + 1)), sse(model.labels_at(k))
        assert after - before == pytest.approx(model.merge_costs_[step], rel=1e-9)


def test_ward_float32_single_row_and_errors():
    x = np.random.default_rng(4).normal(size=(20, 2)).astype(np.float32)
    assert WardAgglomerative(3).fit_predict(x).shape == (20,)
    assert WardAgglomerative(1).fit(x[:1]).labels_.tolist() == [0]
    with pytest.raises(ParameterError, match="n_clusters=21"):
        WardAgglomerative(21).fit(x)
    with pytest.raises(NotFittedError, match="WardAgglomerative"):
        WardAgglomerative(2).labels_at(2)
