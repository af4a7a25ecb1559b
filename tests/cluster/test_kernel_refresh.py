"""Graph kernels follow the stream: refits on the recent rows carry the clusters over, keep
following moving shapes, survive a checkpoint bit for bit and follow a new sketch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.cluster._kernel_refresh import (CANDIDATES, RESERVOIR_ROWS, RowReservoir,
                                              choose_refit, refit_rows, refresh_kernel,
                                              refresh_reason, unsplit_refits)
from streamkm.kernels import KernelSpec

pytestmark = pytest.mark.unit

BATCH = 512


def moving_moons(seed: int, n_batches: int, *, shift_per_batch: float = 0.25
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Two interleaving half-moons (noise 0.08) sliding right by ``shift_per_batch`` a batch."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_batches):
        side = rng.integers(0, 2, BATCH)
        u = rng.uniform(0.0, np.pi, BATCH)
        upper = np.c_[np.cos(u), np.sin(u)]
        lower = np.c_[1 - np.cos(u), 0.5 - np.sin(u)]
        x = np.where(side[:, None] == 0, upper, lower) + rng.normal(0.0, 0.08, (BATCH, 2))
        out.append((x + [i * shift_per_batch, 0.0], side))
    return out


def test_reservoir_keeps_the_newest_rows_and_counts_the_turnover() -> None:
    rows = np.arange(20.0).reshape(10, 2)
    reservoir = RowReservoir(6, rows[:4])
    reservoir.add(rows[4:], None)
    np.testing.assert_array_equal(reservoir.rows, rows[4:])
    assert reservoir.rows_since_fit == 6 and reservoir.turned_over
    arrays, meta = reservoir.to_state()
    back = RowReservoir.from_state(arrays, meta, np.float64)
    np.testing.assert_array_equal(back.rows, reservoir.rows)
    assert (back.rows_since_fit, back.capacity) == (6, 6)


def _refits(events) -> list[dict]:
    return [e for e in events if e["event"] in ("kernel_refreshed", "kernel_kept")]


def test_every_refit_adopts_the_candidate_that_cuts_the_reservoir_graph_least() -> None:
    batches = moving_moons(0, 48, shift_per_batch=0.01)
    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0)
    refits = []
    for x, _ in batches:
        refits += _refits(model.step(x).events)
    assert len(refits) == 47 * BATCH // RESERVOIR_ROWS
    resolution = 2 / RESERVOIR_ROWS  # k / n
    for i, e in enumerate(refits):
        assert e["reason"] == "turnover" and e["n_rows"] == RESERVOIR_ROWS
        # the first refit has no runner-up of an earlier one to weigh
        assert sorted(e["cuts"]) == (["carried", "fresh", "recent"] if i == 0
                                     else sorted(CANDIDATES))
        cuts, chosen = e["cuts"], e["outcome"]
        assert (e["event"] == "kernel_kept") == (chosen == "carried")
        if chosen == "fresh":
            assert min(cuts.values()) >= cuts["fresh"] - resolution
        else:
            assert cuts[chosen] == min(cuts.values())
            assert cuts[chosen] < cuts["fresh"] - resolution
    x, truth = batches[-1]
    assert adjusted_rand_score(truth, model.predict(x)) >= 0.95
    assert model._reservoir.n_refreshes + model._reservoir.n_kept == len(refits)


def test_a_kernel_whose_landmarks_the_shapes_have_left_is_replaced() -> None:
    batches = moving_moons(0, 40, shift_per_batch=0.02)
    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0)
    refits = []
    for x, _ in batches:
        refits += _refits(model.step(x).events)
    assert "fresh" in [e["outcome"] for e in refits]
    x, truth = batches[-1]
    assert adjusted_rand_score(truth, model.predict(x)) >= 0.95
    landmarks = model.kernel_.fitted.anchors
    # fitted on recent rows: the first batches' rows are 0.8 to the left
    assert landmarks[:, 0].mean() > batches[0][0][:, 0].mean() + 0.4


def _fitted_on_moons(seed: int) -> tuple[MiniBatchKernelKMeans, np.ndarray]:
    rows = np.concatenate([x for x, _ in moving_moons(seed, RESERVOIR_ROWS // BATCH,
                                                      shift_per_batch=0.0)])
    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0).fit(rows)
    return model, rows


def test_a_refit_that_cuts_as_little_as_the_current_kernel_is_adopted() -> None:
    model, rows = _fitted_on_moons(4)
    got = refresh_kernel(model._kernel_spec, model._centers, rows)
    # separated moons: the refit finds the same partition, a tie the refit wins
    assert got.outcome == "fresh" and got.kernel is not model._kernel_spec
    assert got.cuts["fresh"] == pytest.approx(got.cuts["carried"], abs=2 / rows.shape[0])
    assert adjusted_rand_score(got.labels, model.predict(rows)) == 1.0
    assert got.runner_up is model._kernel_spec  # the current kernel is kept for the next


@pytest.mark.parametrize(("cuts", "expected"), [
    ({"carried": 0.10, "fresh": 0.10}, ("fresh", "carried")),  # a tie: the refit
    ({"carried": 0.10, "fresh": 0.10 + 1e-4}, ("fresh", "carried")),  # within resolution
    ({"carried": 0.10, "fresh": 0.20}, ("carried", "fresh")),  # the refit cuts a shape
    ({"carried": 0.30, "fresh": 0.20, "kept": 0.05}, ("kept", "fresh")),
    ({"carried": 0.05, "fresh": 0.20, "kept": 0.05}, ("carried", "kept")),  # ties: order
    ({"fresh": 0.20}, ("fresh", None)),  # a re-sketch's only candidate
    ({"carried": 0.30, "fresh": 0.20, "kept": 0.25, "recent": 0.05}, ("recent", "fresh")),
    ({"carried": 0.05, "fresh": 0.20, "recent": 0.05}, ("carried", "recent")),
])
def test_the_refit_choice_is_the_lowest_cut_with_ties_to_the_refit(cuts, expected) -> None:
    assert choose_refit(cuts, 1e-3) == expected


def test_a_refit_choice_without_the_refit_is_an_error() -> None:
    with pytest.raises(ValueError, match="include 'fresh'"):
        choose_refit({"carried": 0.1}, 1e-3)


def test_a_kept_kernel_that_cuts_a_shape_is_not_adopted() -> None:
    model, rows = _fitted_on_moons(5)
    # fitted on one moon only: it cannot tell the other moon's rows apart from each other
    blind = KernelSpec("anchor").fit(rows[rows[:, 1] > 0.6], 2)
    got = refresh_kernel(model._kernel_spec, model._centers, rows, kept=blind)
    assert got.outcome != "kept"
    assert got.cuts["kept"] > got.cuts["carried"] + 2 / rows.shape[0]


def test_a_refresh_carries_centers_and_ids_over() -> None:
    batches = moving_moons(1, RESERVOIR_ROWS // BATCH + 1, shift_per_batch=0.0)
    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0, drift=True)
    for x, _ in batches[:-1]:
        model.step(x)
    x = batches[-1][0]
    before = model.predict(x)
    report = model.step(x)
    assert [e["event"] for e in report.events][-1:] in (["kernel_refreshed"], ["kernel_kept"])
    assert model.cluster_ids_.tolist() == [0, 1]
    # the same rows, clustered the same way in the new feature space
    assert adjusted_rand_score(before, model.predict(x)) >= 0.97
    np.testing.assert_array_equal(np.sort(np.unique(model.predict(x))), [0, 1])


def test_state_after_a_refresh_restores_and_steps_bit_identically(tmp_path: Path) -> None:
    batches = moving_moons(2, 2 * RESERVOIR_ROWS // BATCH + 4)
    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0, drift=True)
    half = RESERVOIR_ROWS // BATCH + 2
    for x, _ in batches[:half]:
        model.step(x)
    assert model._reservoir.n_refreshes + model._reservoir.n_kept >= 1
    assert model._reservoir.kept is not None  # the runner-up is part of the state
    model.save(tmp_path / "model.npz")
    restored = MiniBatchKernelKMeans.load(tmp_path / "model.npz")
    kinds = []
    for x, _ in batches[half:]:
        a, b = model.step(x), restored.step(x)
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.sq_distances, b.sq_distances)
        assert a.events == b.events
        kinds += [e["event"] for e in a.events]
    assert {"kernel_refreshed", "kernel_kept"} & set(kinds)  # a refit after the restore
    np.testing.assert_array_equal(model._reservoir.kept.fitted.anchors,
                                  restored._reservoir.kept.fitted.anchors)
    arrays_a, meta_a = model.get_state()
    arrays_b, meta_b = restored.get_state()
    assert meta_a == meta_b and arrays_a.keys() == arrays_b.keys()
    for name in arrays_a:
        np.testing.assert_array_equal(arrays_a[name], arrays_b[name])


def test_a_resketch_refits_the_graph_kernel_on_the_new_features() -> None:
    rng = np.random.default_rng(3)
    proj = rng.normal(size=(6, 2))
    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0)
    batches = moving_moons(3, 4, shift_per_batch=0.0)
    for x, _ in batches:
        model.step(x, raw=x @ proj.T)
    x, truth = batches[-1]
    before = adjusted_rand_score(truth, model.predict(x))
    assert before >= 0.95
    model.resketch(lambda raw: np.asarray(raw) @ np.linalg.pinv(proj).T * 3.0)
    # the refit in the new space is adopted; no kernel of the old space stays a candidate
    assert model._reservoir.kept is None and model._reservoir.n_refreshes == 1
    assert model.kernel_.fitted.anchors[:, 0].max() > 2.5  # landmarks in the new space
    assert adjusted_rand_score(truth, model.predict(x * 3.0)) >= before - 0.05


class _Rejections:
    """What :func:`refresh_reason` reads of drift handling: its count of rejected splits."""

    def __init__(self, n_rejected: int) -> None:
        self.n_rejected = n_rejected


@pytest.mark.parametrize(("events", "rejected", "since_fit", "expected"), [
    ([{"event": "split"}], 0, 10, "drift"),
    ([{"event": "merge"}], 5, 10, "drift"),
    ([], 1, 10, "alarm"),  # drift handling rejected a split since the reservoir looked
    ([], 1, 0, None),  # ... but the kernel was fitted on these very rows
    ([], 0, RESERVOIR_ROWS, "turnover"),
    ([], 0, RESERVOIR_ROWS - 1, None),
])
def test_a_refit_follows_drift_handling_and_the_reservoir_turnover(events, rejected, since_fit,
                                                                   expected) -> None:
    reservoir = RowReservoir(RESERVOIR_ROWS, np.zeros((1, 2)), rows_since_fit=since_fit)
    assert refresh_reason(reservoir, events, _Rejections(rejected)) == expected
    assert refresh_reason(reservoir, [], _Rejections(rejected)) in (None, "turnover")
    assert reservoir.rejected_seen == rejected  # each rejection leads to one refit at most


def test_a_state_whose_kept_kernel_is_not_fitted_is_refused() -> None:
    from streamkm.exceptions import StateError

    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0)
    for x, _ in moving_moons(6, RESERVOIR_ROWS // BATCH + 2, shift_per_batch=0.0):
        model.step(x)
    arrays, meta = model.get_state()
    assert meta["kernel_reservoir"]["kept"] is not None
    meta["kernel_reservoir"]["kept"]["fitted"] = {}
    with pytest.raises(StateError, match="kept kernel 'anchor'"):
        MiniBatchKernelKMeans.from_state(arrays, meta)


class _InputSplit(_Rejections):
    """Drift handling whose split test on the input rows finds ``found`` (a position or
    None)."""

    def __init__(self, n_rejected: int, found: int | None) -> None:
        super().__init__(n_rejected)
        from streamkm.drift import DriftPolicy

        self.policy = DriftPolicy()
        self.found = found
        self.tested = 0

    def input_split(self, rows: np.ndarray, labels: np.ndarray) -> int | None:
        self.tested += 1
        return self.found


@pytest.mark.parametrize(("events", "rejected", "found", "since_fit", "unsplit", "expected"), [
    ([], 0, 1, 1, 0, "input_split"),
    ([], 0, 1, RESERVOIR_ROWS, 2, "input_split"),  # before the turnover it coincides with
    ([], 0, 1, 0, 0, None),  # the kernel was fitted on these very rows
    ([], 0, None, 1, 0, None),
    ([], 0, None, RESERVOIR_ROWS, 0, "turnover"),
    ([], 0, 1, 1, 3, None),  # max_rejections refits in a row split nothing: paused ...
    ([], 0, 1, RESERVOIR_ROWS, 3, "turnover"),  # ... until the turnover
    ([{"event": "split"}], 0, 1, 1, 0, "drift"),  # drift handling's own events first
    ([], 1, 1, 1, 0, "alarm"),
])
def test_a_cluster_of_two_groups_in_the_input_rows_refits_the_kernel(
        events, rejected, found, since_fit, unsplit, expected) -> None:
    reservoir = RowReservoir(RESERVOIR_ROWS, np.zeros((1, 2)), rows_since_fit=since_fit,
                             unsplit_refits=unsplit)
    drift = _InputSplit(rejected, found)
    rows, labels = np.zeros((BATCH, 2)), np.zeros(BATCH, dtype=np.int64)
    assert refresh_reason(reservoir, events, drift, rows, labels) == expected
    # the test on the input rows runs only when no earlier reason holds and it may refit
    assert drift.tested == int(not events and not rejected and since_fit > 0 and unsplit < 3)


def test_the_input_rows_are_not_tested_without_them() -> None:
    reservoir = RowReservoir(RESERVOIR_ROWS, np.zeros((1, 2)), rows_since_fit=1)
    drift = _InputSplit(0, 1)
    assert refresh_reason(reservoir, [], drift) is None and drift.tested == 0


@pytest.mark.parametrize(("count", "reason", "events", "expected"), [
    (1, "input_split", [{"event": "kernel_kept"}], 2),
    (2, "input_split", [{"event": "kernel_refreshed"}, {"event": "split"}], 0),
    (2, "input_split", [{"event": "kernel_refresh_failed"}], 3),
    (2, "turnover", [{"event": "kernel_kept"}], 0),
    (2, "drift", [{"event": "kernel_refreshed"}], 0),
    (2, "alarm", [{"event": "kernel_refreshed"}, {"event": "split"}], 2),
    (2, "resketch", [{"event": "kernel_refreshed"}], 2),
])
def test_input_split_refits_that_split_nothing_are_counted_until_a_turnover(
        count, reason, events, expected) -> None:
    assert unsplit_refits(count, reason, events) == expected


def test_the_refits_are_fitted_on_the_whole_reservoir_and_on_its_newest_half() -> None:
    rows = np.arange(20.0).reshape(10, 2)
    got = refit_rows(rows, 2)
    assert sorted(got) == ["fresh", "recent"]
    np.testing.assert_array_equal(got["fresh"], rows)
    np.testing.assert_array_equal(got["recent"], rows[5:])
    assert sorted(refit_rows(rows[:4], 2)) == ["fresh"]  # 2 newest rows cannot fit 2 clusters


def test_a_refit_for_two_groups_fits_the_kernel_for_one_more_cluster() -> None:
    from streamkm.cluster._kernel_refresh import _fit_clusters

    assert _fit_clusters("input_split", 4) == 5
    for reason in ("turnover", "drift", "alarm", "resketch"):
        assert _fit_clusters(reason, 4) == 4


def test_the_fresh_refit_is_fitted_for_the_clusters_it_is_asked_for() -> None:
    x = np.concatenate([b[0] for b in moving_moons(7, 4, shift_per_batch=0.0)])
    model = MiniBatchKernelKMeans(2, kernel="anchor", random_state=0).fit(x)
    centers = model._centers
    for n_fit in (2, 3):
        out = refresh_kernel(model.kernel_, centers, x, x, fit_clusters=n_fit)
        expected = KernelSpec("anchor").fit(x, n_fit)
        np.testing.assert_array_equal(out.kernel.fitted.projection,
                                      expected.fitted.projection)


def _pulling_apart(seed: int, n_batches: int, start: int) -> list[np.ndarray]:
    """Two moons and a blob (deviation 0.25) at (4, 0) whose halves move apart along y from
    batch ``start`` on, by 0.2 a batch."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_batches):
        group = rng.integers(0, 3, BATCH)
        u = rng.uniform(0.0, np.pi, BATCH)
        moons = np.where((group == 0)[:, None], np.c_[np.cos(u), np.sin(u)],
                         np.c_[1 - np.cos(u), 0.5 - np.sin(u)])
        half = max(0, i - start) * 0.2 * np.where(rng.random(BATCH) < 0.5, -1.0, 1.0)
        blob = np.c_[np.full(BATCH, 4.0), half] + rng.normal(0.0, 0.25, (BATCH, 2))
        x = np.where((group == 2)[:, None], blob, moons) + rng.normal(0.0, 0.08, (BATCH, 2))
        out.append(x)
    return out


def test_a_blob_pulling_apart_inside_a_graph_kernel_is_split_by_a_refit() -> None:
    model = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0, drift={"k_max": 6},
                                  init_size=3 * BATCH)
    batches = _pulling_apart(0, 14, start=6)
    events = []
    for x in batches:
        events += list(model.step(x).events)
    reasons = [e["reason"] for e in events if e["event"] in ("kernel_refreshed", "kernel_kept")]
    splits = [e for e in events if e["event"] == "split"]
    assert "input_split" in reasons
    assert splits and model.n_clusters_ == 4


def test_a_cluster_of_two_groups_is_split_along_its_input_rows() -> None:
    from streamkm.cluster._kernel_refresh import split_partition

    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.normal(0.0, 0.1, (20, 2)), rng.normal(0.0, 0.1, (10, 2)) + [3, 0],
                           rng.normal(0.0, 0.1, (10, 2)) + [-3, 0]])
    labels = np.r_[np.zeros(20, np.int64), np.ones(20, np.int64)]  # cluster 1: two groups
    fallback = np.array([0, 20])
    out, starts, cluster = split_partition(rows, labels, fallback, 1)
    assert cluster == 1
    np.testing.assert_array_equal(out[:20], 0)  # the other cluster is untouched
    # the two groups of cluster 1, one of them now cluster 2 (= k)
    assert {tuple(np.unique(out[20:30])), tuple(np.unique(out[30:]))} == {(1,), (2,)}
    np.testing.assert_array_equal(starts[:2], fallback)
    assert out[starts[2]] == 2  # the new cluster starts from one of its rows


def test_no_cluster_or_one_that_does_not_spread_is_not_split() -> None:
    from streamkm.cluster._kernel_refresh import split_partition

    rows = np.r_[np.zeros((5, 2)), np.ones((5, 2))]
    labels = np.r_[np.zeros(5, np.int64), np.ones(5, np.int64)]
    fallback = np.array([0, 5])
    assert split_partition(rows, labels, fallback, None) is None
    assert split_partition(rows, labels, fallback, 0) is None  # five equal rows
    one = np.r_[np.zeros(9, np.int64), np.ones(1, np.int64)]
    assert split_partition(rows, one, fallback, 1) is None  # a single row


def test_a_candidate_compared_split_is_adopted_with_its_groups_together_again() -> None:
    from streamkm.cluster._kernel_refresh import _Candidate, _rejoin

    features = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0], [0.0, 6.0]])
    candidate = _Candidate(KernelSpec("anchor"), np.array([[1.0, 0.0], [9.0, 9.0], [0.0, 5.0]]),
                           np.array([0, 0, 2, 2]), features)
    got = _rejoin(candidate, 1, 2)
    np.testing.assert_array_equal(got.labels, [0, 0, 1, 1])
    np.testing.assert_allclose(got.centers, [[1.0, 0.0], [0.0, 5.0]])
    # a cluster none of whose rows is left keeps its center
    empty = _Candidate(candidate.kernel, candidate.centers, np.array([0, 0, 0, 0]), features)
    np.testing.assert_allclose(_rejoin(empty, 1, 2).centers, [[0.5, 2.5], [9.0, 9.0]])


def _moons_and_two_groups(seed: int, dtype: type = np.float64
                          ) -> tuple[MiniBatchKernelKMeans, np.ndarray]:
    """A 3-cluster anchor model fitted on two moons and a round blob, and rows where the
    blob's halves have moved 1.5 apart (one group of rows for the model's blob cluster)."""
    rng = np.random.default_rng(seed)
    moons = np.concatenate([b[0] for b in moving_moons(seed, 2, shift_per_batch=0.0)])
    blob = rng.normal(0.0, 0.25, (512, 2)) + [4.0, 0.0]
    model = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0).fit(
        np.r_[moons, blob].astype(dtype))
    halves = blob + np.where(rng.random(512) < 0.5, -0.75, 0.75)[:, None] * [0.0, 1.0]
    return model, np.r_[moons, halves].astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_input_split_refit_compares_its_candidates_with_the_cluster_split(dtype) -> None:
    from streamkm.cluster._kernel_refresh import split_partition
    from streamkm.kernels._auto import mutual_knn_graph, normalized_cut

    model, rows = _moons_and_two_groups(0, dtype)
    blob = int(np.bincount(model.predict(rows[-512:])).argmax())
    got = refresh_kernel(model._kernel_spec, model._centers, rows, fit_clusters=4,
                         split_cluster=blob)
    labels = model.predict(rows)
    split, _, _ = split_partition(rows, labels, np.zeros(3, np.int64), blob)
    graph = mutual_knn_graph(rows.astype(np.float64))
    # the carried partition is cut with the blob's cluster split: k + 1 clusters
    assert got.cuts["carried"] == pytest.approx(normalized_cut(graph, split, 4))
    assert got.cuts["carried"] != pytest.approx(normalized_cut(graph, labels, 3))
    # whichever is adopted continues with the model's k clusters
    assert got.centers.shape[0] == 3 and got.labels.max() == 2
    assert got.centers.dtype == dtype
    assert adjusted_rand_score(labels, got.labels) == 1.0


def test_a_split_cluster_is_ignored_by_a_refit_for_the_model_s_clusters() -> None:
    model, rows = _moons_and_two_groups(1)
    plain = refresh_kernel(model._kernel_spec, model._centers, rows)
    named = refresh_kernel(model._kernel_spec, model._centers, rows, split_cluster=0)
    assert named.cuts == plain.cuts and named.outcome == plain.outcome


def test_a_refit_whose_review_splits_a_cluster_keeps_no_runner_up() -> None:
    model = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0, drift={"k_max": 6},
                                  init_size=3 * BATCH)
    kept_before_split = []
    for x in _pulling_apart(0, 14, start=6):
        events = model.step(x).events
        refit = [e for e in events if e["event"] in ("kernel_refreshed", "kernel_kept")]
        if refit:
            split = any(e["event"] == "split" and e.get("cause") == "kernel_refreshed"
                        for e in events)
            kept_before_split.append((split, model._reservoir.kept is None))
    # the runner-up was weighed for the partition before the split: dropped with it
    assert any(split for split, _ in kept_before_split)
    assert all(dropped for split, dropped in kept_before_split if split)
    assert not all(dropped for split, dropped in kept_before_split if not split)
