"""SketchedKernelKMeans: sketcher + engine, sparse input, re-sketching, state round trips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.exceptions import NotFittedError, ParameterError, StateError, ValidationError
from streamkm.sketch import ApproxSVD, LeverageScoreSelector, RandomProjection
from streamkm.sketch.pipeline import SketchedKernelKMeans
from streamkm.sketch.reservoir import RowReservoir

pytestmark = pytest.mark.unit

K, N, D, BATCH = 4, 2048, 240, 256


@pytest.fixture(scope="module")
def blobs() -> tuple[np.ndarray, np.ndarray]:
    """Separated sparse blobs: cluster j lives on its own 20 features (about 12% nonzero)."""
    rng = np.random.default_rng(0)
    labels = rng.integers(K, size=N)
    centers = np.zeros((K, D))
    for j in range(K):
        centers[j, 20 * j:20 * (j + 1)] = 3.0
    noise = rng.normal(0, 0.3, (N, D)) * (rng.random((N, D)) < 0.05)
    return centers[labels] + noise, labels


def sketchers() -> list:
    return [ApproxSVD(K, random_state=0),
            RandomProjection(n_clusters=K, eps=0.5, random_state=0),
            RandomProjection(n_clusters=K, kind="sparse", eps=0.5, random_state=0),
            LeverageScoreSelector(n_clusters=K, random_state=0)]


def pipeline(sketcher, **kw) -> SketchedKernelKMeans:
    kw.setdefault("reservoir_size", 400)
    kw.setdefault("random_state", 1)
    return SketchedKernelKMeans(sketcher, MiniBatchKernelKMeans(K, tau=40, n_init=2,
                                                                random_state=0), **kw)


def stream(p: SketchedKernelKMeans, X, batches: range) -> None:
    for b in batches:
        p.step(X[b * BATCH:(b + 1) * BATCH])


@pytest.mark.parametrize("sketcher", sketchers(), ids=lambda s: repr(s)[:40])
def test_sparse_and_dense_input_give_the_same_clustering(blobs, sketcher) -> None:
    X, labels = blobs
    dense, sparse = pipeline(sketcher, resketch_every=3), pipeline(sketcher, resketch_every=3)
    stream(dense, X, range(7))
    stream(sparse, sp.csr_matrix(X), range(7))
    assert dense.sketch_epoch_ == sparse.sketch_epoch_ == 2
    assert not dense.raw_sparse_ and sparse.raw_sparse_
    np.testing.assert_array_equal(dense.predict(X), sparse.predict(sp.csr_matrix(X)))
    np.testing.assert_allclose(dense.transform(X), sparse.transform(sp.csr_matrix(X)),
                               rtol=1e-9, atol=1e-9)
    assert adjusted_rand_score(labels, dense.predict(X)) > 0.95


def test_state_round_trip_predicts_and_keeps_training_identically(blobs, tmp_path: Path) -> None:
    X, _ = blobs
    Xs = sp.csr_matrix(X)
    original = pipeline(ApproxSVD(K, random_state=0), resketch_every=2)
    stream(original, Xs, range(3))
    assert original.sketch_epoch_ == 1
    original.save(tmp_path / "p.npz")
    restored = SketchedKernelKMeans.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(restored.sketch(Xs), original.sketch(Xs))
    np.testing.assert_array_equal(restored.transform(Xs), original.transform(Xs))
    # continue both through two more re-sketches: identical state, bit for bit
    stream(original, Xs, range(3, 8))
    stream(restored, Xs, range(3, 8))
    assert restored.sketch_epoch_ == original.sketch_epoch_ == 4
    a_arrays, a_meta = original.get_state()
    b_arrays, b_meta = restored.get_state()
    assert set(a_arrays) == set(b_arrays)
    for name in a_arrays:
        np.testing.assert_array_equal(a_arrays[name], b_arrays[name], err_msg=name)
    a_meta["sketch"].pop("last_resketch_seconds")
    b_meta["sketch"].pop("last_resketch_seconds")
    assert a_meta == b_meta


@pytest.mark.parametrize("sketcher", sketchers(), ids=lambda s: repr(s)[:40])
def test_resketch_keeps_predictions_and_increments_the_epoch(blobs, sketcher) -> None:
    X, _ = blobs
    p = pipeline(sketcher)
    stream(p, X, range(4))
    before = p.predict(X)
    old = p.sketcher_
    p.resketch()
    assert p.sketch_epoch_ == 1 and p.sketcher_ is not old
    assert adjusted_rand_score(before, p.predict(X)) >= 0.95
    p.resketch(X[:300])  # on given rows
    assert p.sketch_epoch_ == 2
    assert adjusted_rand_score(before, p.predict(X)) >= 0.95
    stream(p, X, range(4, 6))  # later batches use the new sketch
    assert adjusted_rand_score(before, p.predict(X)) >= 0.95


def test_resketch_every_fires_at_the_right_batches(blobs) -> None:
    X, _ = blobs
    p = pipeline(ApproxSVD(K, random_state=0), resketch_every=3)
    epochs, fired = [], []
    for b in range(7):
        p.step(X[b * BATCH:(b + 1) * BATCH])
        epochs.append(p.sketch_epoch_)
        fired.append(p.resketched_)
    assert epochs == [0, 0, 1, 1, 1, 2, 2]
    assert fired == [False, False, True, False, False, True, False]
    never = pipeline(ApproxSVD(K, random_state=0))
    stream(never, X, range(4))
    assert never.sketch_epoch_ == 0


def test_drift_resketches_only_data_dependent_sketches(blobs) -> None:
    X, _ = blobs
    svd, projection = pipeline(ApproxSVD(K, random_state=0)), pipeline(sketchers()[1])
    stream(svd, X, range(2))
    stream(projection, X, range(2))
    assert svd.notify_drift() is True and svd.sketch_epoch_ == 1
    components = projection.sketcher_.components_.copy()
    assert projection.notify_drift() is False and projection.sketch_epoch_ == 0
    np.testing.assert_array_equal(projection.sketcher_.components_, components)
    projection.resketch()  # an explicit request draws a new random matrix
    assert projection.sketch_epoch_ == 1
    assert not np.array_equal(projection.sketcher_.components_, components)


def test_fit_and_mixed_input_kinds(blobs) -> None:
    X, labels = blobs
    p = SketchedKernelKMeans(ApproxSVD(K, random_state=0),
                             MiniBatchKernelKMeans(K, gamma="median", batch_size=256,
                                                   max_iter=20, tau=40, random_state=0),
                             random_state=3)
    p.fit(sp.csr_matrix(X))
    assert p.raw_sparse_
    assert adjusted_rand_score(labels, p.predict(X)) > 0.95  # dense rows are accepted too
    assert p.score(X) <= 0.0
    p.partial_fit(X[:100])  # a dense batch is stored as CSR like the others
    assert sp.issparse(p.model_._centers.raw)


def test_errors_quote_the_problem(blobs) -> None:
    X, _ = blobs
    p = pipeline(ApproxSVD(K, random_state=0))
    with pytest.raises(NotFittedError):
        p.predict(X)
    with pytest.raises(ParameterError, match="resketch_every"):
        pipeline(ApproxSVD(K), resketch_every=0).step(X[:BATCH])
    with pytest.raises(ParameterError, match="sketcher"):
        SketchedKernelKMeans("svd", MiniBatchKernelKMeans(K)).step(X[:BATCH])
    p.step(X[:BATCH])
    with pytest.raises(ValidationError, match=f"{D - 1} features"):
        p.step(X[:BATCH, :-1])
    arrays, meta = p.get_state()
    meta["sketch"]["format_version"] = 99
    with pytest.raises(StateError, match="99"):
        SketchedKernelKMeans.from_state(arrays, meta)


@pytest.mark.parametrize("sparse", [False, True])
def test_reservoir_is_uniform_bounded_and_resumable(sparse: bool) -> None:
    rows = np.arange(4000, dtype=float)[:, None] * np.ones((1, 3))
    data = sp.csr_matrix(rows) if sparse else rows
    full = RowReservoir(200, seed=5)
    for lo in range(0, 2000, 100):
        full.add(data[lo:lo + 100])
    arrays, meta = full.get_state()
    resumed = RowReservoir.from_state(arrays, meta)
    for lo in range(2000, 4000, 100):
        full.add(data[lo:lo + 100])
        resumed.add(data[lo:lo + 100])
    kept = full.rows()
    assert kept.shape == (200, 3) and len(full) == 200 and full.n_seen == 4000
    dense_kept = kept.toarray() if sparse else kept
    np.testing.assert_array_equal(dense_kept, resumed.rows().toarray() if sparse
                                  else resumed.rows())
    values = dense_kept[:, 0]
    assert len(np.unique(values)) == 200
    assert 1300 < values.mean() < 2700  # a uniform sample of 0..3999, not the newest rows


def test_novelty_and_outlier_labels_pass_through_the_sketch(blobs) -> None:
    X, _ = blobs
    p = SketchedKernelKMeans(RandomProjection(n_clusters=K, eps=0.5, random_state=0),
                             MiniBatchKernelKMeans(K, tau=40, n_init=2, random_state=0,
                                                   outlier_alpha=0.01, label_outliers=True),
                             reservoir_size=400, random_state=1)
    for b in range(6):
        report = p.step(X[b * BATCH:(b + 1) * BATCH])
    assert report.novelty.shape == (BATCH,) and report.outliers.dtype == bool
    far = X[:4] * 0.0 + 40.0  # every feature far from every blob
    scores = p.score_samples(far)
    np.testing.assert_array_equal(scores, p.model_.score_samples(p.sketch(far)))
    assert (scores <= 0.01).all() and (p.predict(far) == -1).all()
    assert (p.score_samples(X[:200]) > 0.01).mean() > 0.9
