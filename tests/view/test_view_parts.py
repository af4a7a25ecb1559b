"""The cluster view's building blocks: recent sample, plane projection, the JSON document,
per-cluster size gauge (no service, no browser)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from prometheus_client import CollectorRegistry, Gauge

from streamkm.exceptions import ParameterError, ValidationError
from streamkm.view.cluster_view import ClusterView
from streamkm.view.projection import project_to_plane
from streamkm.view.sample import RecentSample
from streamkm.view.sizes import RecentClusterSizes

pytestmark = pytest.mark.unit


def _batch(rng: np.random.Generator, n: int, d: int = 2) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 3, size=n)
    return rng.normal(size=(n, d)) + 10.0 * labels[:, None], labels


def test_sample_is_bounded_recent_and_keeps_assignments() -> None:
    rng = np.random.default_rng(0)
    sample = RecentSample(capacity=100, per_batch=30, random_state=1)
    for step in range(1, 11):
        x, labels = _batch(rng, 500)
        sample.add(x, labels + 100, np.abs(x[:, 0]), step=step)
        snap = sample.snapshot()
        assert snap.n_rows == min(100, 30 * step)
    snap = sample.snapshot()
    # only the last ceil(100 / 30) = 4 batches are left, oldest first
    assert set(snap.steps.tolist()) == {7, 8, 9, 10}
    assert np.all(np.diff(snap.steps) >= 0)
    # each row keeps the cluster it was assigned to
    nearest = np.rint(snap.rows[:, 0] / 10.0)
    assert np.mean(nearest == snap.cluster_ids - 100) > 0.9
    assert snap.rows.dtype == np.float32 and not snap.projected


def test_sample_projects_wide_and_sparse_rows_and_restarts_on_new_dimension() -> None:
    rng = np.random.default_rng(1)
    sample = RecentSample(capacity=50, per_batch=50, max_dim=8)
    x = sp.random(200, 5000, density=0.01, format="csr", random_state=2)
    sample.add(x, np.zeros(200, np.int64), np.zeros(200), step=1)
    snap = sample.snapshot()
    assert snap.projected and snap.rows.shape == (50, 8)
    sample.add(rng.normal(size=(20, 3)), np.ones(20, np.int64), np.zeros(20), step=2)
    snap = sample.snapshot()
    assert not snap.projected and snap.rows.shape == (20, 3)
    assert set(snap.cluster_ids.tolist()) == {1}


def test_sample_rejects_bad_arguments_naming_the_value() -> None:
    with pytest.raises(ParameterError, match="capacity.*0"):
        RecentSample(0)
    with pytest.raises(ParameterError, match="per_batch.*True"):
        RecentSample(10, per_batch=True)
    sample = RecentSample(10)
    with pytest.raises(ValidationError, match="5, 4, 5 and 5"):
        sample.add(np.zeros((5, 2)), np.zeros(4), np.zeros(5), step=1)
    with pytest.raises(ValidationError, match="5, 5, 5 and 3"):
        sample.add(np.zeros((5, 2)), np.zeros(5), np.zeros(5), step=1,
                   outliers=np.zeros(3, dtype=bool))


def test_sample_keeps_each_rows_outlier_flag_with_the_row() -> None:
    sample = RecentSample(8, per_batch=8)
    x = np.arange(12.0).reshape(6, 2)
    flags = np.array([False, True, False, False, True, False])
    sample.add(x, np.arange(6), np.zeros(6), step=1, outliers=flags)
    sample.add(x[:4] + 100, np.arange(4), np.zeros(4), step=2)  # not scored: none flagged
    snap = sample.snapshot()
    assert snap.n_rows == 8                                  # the oldest two overwritten
    np.testing.assert_array_equal(snap.rows[:, 0], [4, 6, 8, 10, 100, 102, 104, 106])
    np.testing.assert_array_equal(snap.outliers, [False, False, True, False] + [False] * 4)


def test_plane_projection_raw_and_pca_with_fixed_signs() -> None:
    rng = np.random.default_rng(3)
    flat = rng.normal(size=(40, 2))
    plane = project_to_plane(flat)
    assert plane.method == "raw" and np.array_equal(plane.coords, flat)
    x = rng.normal(size=(300, 6)) * np.array([5.0, 2.0, 0.1, 0.1, 0.1, 0.1])
    first = project_to_plane(x)
    mirrored = project_to_plane(-x)  # same cloud mirrored: signs are normalised
    assert first.method == "pca" and "PC1" in first.axes[0]
    # the first component is the widest direction: its spread dominates
    assert first.coords[:, 0].std() > 2 * first.coords[:, 1].std()
    assert np.allclose(np.abs(first.coords), np.abs(mirrored.coords), atol=1e-8)
    assert project_to_plane(np.zeros((0, 4))).method == "none"


def test_view_document_matches_the_sample() -> None:
    rng = np.random.default_rng(4)
    view = ClusterView(sample_size=300, random_state=0)
    for step in range(1, 6):
        x, labels = _batch(rng, 400)
        ids = np.array([2, 5, 9])[labels]
        view.observe_batch(x, ids, np.abs(x[:, 1] - 10.0 * labels), step=step,
                           objective=1.0 / step, converged=step > 3, n_clusters=3)
    view.observe_event({"event": "split", "step": 4, "cluster": 2, "into": [2, 9]})
    doc = view.to_dict()
    snap = view.sample.snapshot()
    assert doc["step"] == 5 and doc["converged"] is True and doc["n_clusters"] == 3
    assert len(doc["points"]["x"]) == snap.n_rows == 5 * (300 // 8)
    assert sum(c["sample_size"] for c in doc["clusters"]) == snap.n_rows
    assert sorted(c["id"] for c in doc["clusters"]) == [2, 5, 9]
    for cluster in doc["clusters"]:
        members = snap.cluster_ids == cluster["id"]
        central = np.argmin(np.where(members, snap.sq_distances, np.inf))
        assert cluster["medoid"] == pytest.approx(snap.rows[central].astype(float).tolist(),
                                                  abs=1e-5)
    assert [p["step"] for p in doc["objective"]] == [1, 2, 3, 4, 5]
    assert doc["events"][0]["event"] == "split" and "time" in doc["events"][0]
    assert view.to_dict() is doc  # cached until the next batch or event


def test_cluster_size_gauge_windows_and_drops_vanished_clusters() -> None:
    registry = CollectorRegistry()
    gauge = Gauge("streamkm_cluster_records", "x", ["cluster"], registry=registry)
    sizes = RecentClusterSizes(gauge, window=2)
    sizes.observe(np.array([0, 0, 1]), [0, 1])
    sizes.observe(np.array([1, 1]), [0, 1])
    assert registry.get_sample_value("streamkm_cluster_records", {"cluster": "0"}) == 2
    assert registry.get_sample_value("streamkm_cluster_records", {"cluster": "1"}) == 3
    totals = sizes.observe(np.array([4, 4, 1]), [1, 4])  # 0 merged away, 4 is new
    assert totals == {1: 3, 4: 2}
    assert registry.get_sample_value("streamkm_cluster_records", {"cluster": "0"}) is None
    assert registry.get_sample_value("streamkm_cluster_records", {"cluster": "4"}) == 2


def test_cluster_size_gauge_without_the_model_follows_the_window() -> None:
    registry = CollectorRegistry()
    gauge = Gauge("streamkm_cluster_records", "x", ["cluster"], registry=registry)
    sizes = RecentClusterSizes(gauge, window=2)
    sizes.observe(np.array([0, 0, 1]))
    sizes.observe(np.array([1, 1]))
    assert sizes.observe(np.array([1, 2])) == {1: 3, 2: 1}
    assert registry.get_sample_value("streamkm_cluster_records", {"cluster": "0"}) is None
