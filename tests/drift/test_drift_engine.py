"""Drift handling in the estimator: a cluster that becomes two modes is split, a stationary
stream is never split, merges keep k <= k_max with the smallest Ward cost, and a restored
checkpoint produces the same future events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.drift import DriftPolicy
from streamkm.exceptions import ParameterError
from streamkm.kernels import pairwise_kernel

pytestmark = pytest.mark.unit

CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
CHANGE = 12  # batch at which blob 2 becomes two modes


def blobs(rng: np.random.Generator, n: int, *, split: bool, sep: float = 4.0
          ) -> tuple[np.ndarray, np.ndarray]:
    """Three blobs (sd 0.5); with ``split`` blob 2 is two modes ``sep`` apart (truth 2, 3)."""
    comp = rng.integers(0, 3, n)
    x = CENTERS[comp] + rng.normal(0.0, 0.5, (n, 2))
    truth = comp.copy()
    if split:
        left = (comp == 2) & (rng.random(n) < 0.5)
        x[comp == 2, 0] += sep / 2
        x[left, 0] -= sep
        truth[left] = 3
    return x, truth


def drifting_batches(seed: int, n_batches: int, size: int = 500
                     ) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [blobs(rng, size, split=i >= CHANGE) for i in range(n_batches)]


def test_a_cluster_that_becomes_two_modes_is_split() -> None:
    model = MiniBatchKernelKMeans(3, random_state=0, drift=True)
    split_at = None
    for i, (x, _) in enumerate(drifting_batches(0, CHANGE + 20)):
        report = model.step(x)
        kinds = [e["event"] for e in report.events]
        if "split" in kinds:
            assert split_at is None, "exactly one split expected"
            split_at = i
            event = report.events[kinds.index("split")]
            assert event["into"][0] == event["cluster"] and event["into"][1] == 3
            assert event["sse_reduction"] >= 0.8
    assert split_at is not None and CHANGE <= split_at <= CHANGE + 10
    assert model.n_clusters_ == 4 and model.cluster_ids_.tolist() == [0, 1, 2, 3]
    assert model.n_splits_ == 1 and model.n_merges_ == 0
    assert model.counts_.sum() == (CHANGE + 20) * 500
    x, truth = blobs(np.random.default_rng(99), 4000, split=True)
    ids = model.cluster_ids_[model.predict(x)]
    assert adjusted_rand_score(truth, ids) >= 0.9


def test_step_report_gives_stable_ids_of_the_assignment() -> None:
    model = MiniBatchKernelKMeans(3, random_state=0, drift=True)
    batches = drifting_batches(0, CHANGE + 20)
    seen_new_id = False
    for x, _ in batches:
        ids_before = model.cluster_ids_ if model.__dict__.get("_centers") else None
        report = model.step(x)
        if ids_before is not None:
            np.testing.assert_array_equal(report.cluster_ids, ids_before[report.labels])
        seen_new_id |= bool((report.cluster_ids == 3).any())
    assert seen_new_id


def test_a_stationary_stream_of_1e5_records_is_never_split() -> None:
    rng = np.random.default_rng(5)
    model = MiniBatchKernelKMeans(3, random_state=5, drift=True)
    for _ in range(100):
        report = model.step(blobs(rng, 1000, split=False)[0])
        assert not [e for e in report.events if e["event"] in ("split", "merge")]
    assert model.n_splits_ == 0 and model.n_clusters_ == 3
    assert model.counts_.sum() == 100_000


def test_without_a_split_drift_handling_does_not_change_the_clustering() -> None:
    rng = np.random.default_rng(6)
    batches = [blobs(rng, 400, split=False)[0] for _ in range(15)]
    plain = MiniBatchKernelKMeans(3, random_state=1)
    watched = MiniBatchKernelKMeans(3, random_state=1, drift={"k_max": 5})
    for x in batches:
        a, b = plain.step(x), watched.step(x)
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.cluster_ids, a.labels)
        assert a.sq_distances.tobytes() == b.sq_distances.tobytes()
    arrays, meta = plain.get_state()
    assert "drift" not in meta and not [k for k in arrays if k.startswith("drift_")]
    assert meta["params"]["drift"] is None
    assert plain.n_splits_ == 0 and plain.cluster_ids_.tolist() == [0, 1, 2]


def _brute_force_ward_pair(store: object, sizes: np.ndarray, gamma: float) -> tuple[int, int]:
    offs, rows, w = store.offsets, store.rows, store.weights  # type: ignore[attr-defined]
    k = offs.shape[0] - 1
    seg = [slice(offs[j], offs[j + 1]) for j in range(k)]

    def inner(a: int, b: int) -> float:
        kab = pairwise_kernel(rows[seg[a]], rows[seg[b]], "rbf", gamma=gamma)
        return float(w[seg[a]] @ kab @ w[seg[b]])

    best = None
    for a in range(k):
        for b in range(a + 1, k):
            sq = inner(a, a) + inner(b, b) - 2 * inner(a, b)
            cost = sizes[a] * sizes[b] / (sizes[a] + sizes[b]) * sq
            if best is None or cost < best[0]:
                best = (cost, a, b)
    assert best is not None
    return best[1], best[2]


def test_merges_keep_k_max_and_take_the_smallest_ward_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    # the brute-force Ward pair below is computed with the rbf kernel at the model's width
    model = MiniBatchKernelKMeans(3, gamma="median", random_state=0, drift={"k_max": 3})
    merges: list[tuple[set[int], set[int]]] = []
    batches = drifting_batches(0, CHANGE + 20)
    model.step(batches[0][0])
    store = model._centers
    original = type(store).merge

    def spying_merge(self: object, keep: int, drop: int, size_keep: float, size_drop: float) -> int:
        sizes = np.nan_to_num(model._drift.monitor.recent_size, nan=0.0)
        want = _brute_force_ward_pair(self, sizes, model.gamma_)
        merges.append(({keep, drop}, set(want)))
        return original(self, keep, drop, size_keep, size_drop)

    monkeypatch.setattr(type(store), "merge", spying_merge)
    events = []
    for x, _ in batches[1:]:
        report = model.step(x)
        events += [e for e in report.events if e["event"] in ("split", "merge")]
        assert model.n_clusters_ <= 3
    assert [e["event"] for e in events][:2] == ["split", "merge"]
    assert merges and all(got == want for got, want in merges)
    merge = events[1]
    assert merge["reason"] == "k_max" and merge["into"] in merge["clusters"]
    assert 3 not in model.cluster_ids_.tolist() or merge["into"] == 3
    assert model.counts_.sum() == (CHANGE + 20) * 500


def test_redundant_clusters_are_merged_down_to_k_min() -> None:
    rng = np.random.default_rng(8)
    model = MiniBatchKernelKMeans(
        5, random_state=0, drift={"k_min": 3, "k_max": 5, "merge_below": 0.6, "merge_every": 2})
    for _ in range(10):
        model.step(blobs(rng, 500, split=False)[0])
    assert model.n_clusters_ == 3 and model.n_merges_ == 2
    ids = model.cluster_ids_.tolist()
    assert len(set(ids)) == 3 and set(ids) <= {0, 1, 2, 3, 4}
    x, truth = blobs(np.random.default_rng(9), 3000, split=False)
    assert adjusted_rand_score(truth, model.predict(x)) >= 0.9


def test_a_checkpoint_taken_mid_detection_replays_the_same_events(tmp_path: Path) -> None:
    batches = drifting_batches(3, CHANGE + 20)
    # the median-width rbf's spread rises at the change itself (a graph kernel's refit shows it)
    model = MiniBatchKernelKMeans(3, gamma="median", random_state=0, drift=True)
    for x, _ in batches[:CHANGE + 1]:
        model.step(x)
    assert model._drift.monitor.statistic.max() > 0 or model._drift.n_rejected > 0
    assert model.n_splits_ == 0
    model.save(tmp_path / "model.npz")
    restored = MiniBatchKernelKMeans.load(tmp_path / "model.npz")
    got, want = [], []
    for x, _ in batches[CHANGE + 1:]:
        a, b = model.step(x), restored.step(x)
        np.testing.assert_array_equal(a.cluster_ids, b.cluster_ids)
        want += list(a.events)
        got += list(b.events)
    assert got == want and any(e["event"] == "split" for e in want)
    np.testing.assert_array_equal(model.counts_, restored.counts_)


def test_params_and_validation() -> None:
    model = MiniBatchKernelKMeans(4, drift=DriftPolicy(k_max=6))
    assert model.get_params()["drift"] == DriftPolicy(k_max=6)
    clone = MiniBatchKernelKMeans(**model.get_params())
    assert clone.get_params() == model.get_params()
    with pytest.raises(ParameterError, match="n_clusters=4"):
        MiniBatchKernelKMeans(4, drift={"k_max": 3}).partial_fit(np.zeros((8, 2)))
    with pytest.raises(ParameterError, match="'bogus'"):
        MiniBatchKernelKMeans(4, drift={"bogus": 1}).partial_fit(np.zeros((8, 2)))


def test_linear_kernel_with_raw_rows_splits_and_resketches() -> None:
    rng = np.random.default_rng(10)
    proj = rng.normal(size=(5, 2))
    model = MiniBatchKernelKMeans(3, kernel="linear", random_state=0, drift=True)
    for i in range(CHANGE + 15):
        x2, _ = blobs(rng, 500, split=i >= CHANGE, sep=6.0)
        raw = x2 @ proj.T  # raw 5-D rows whose sketch (pseudo-inverse) gives x2 back
        model.step(raw @ np.linalg.pinv(proj).T, raw=raw)
    assert model.n_splits_ == 1 and model._centers.raw.shape == (4, 5)
    reference = model._drift.monitor.reference.copy()
    model.resketch(lambda r: np.asarray(r) @ np.linalg.pinv(proj).T * 2.0)
    # features doubled: linear-kernel spreads scale by 4, the alarm statistics carry on
    np.testing.assert_allclose(model._drift.monitor.reference, 4 * reference, rtol=1e-6)
    window = model._drift.recent
    j = int(np.argmax(window.sizes()))
    np.testing.assert_allclose(window.rows[j], window.raw[j] @ np.linalg.pinv(proj).T * 2.0)
    arrays, meta = model.get_state()
    again = MiniBatchKernelKMeans.from_state(arrays, meta)
    np.testing.assert_array_equal(again.cluster_ids_, model.cluster_ids_)
