"""Births and retirements: a new compact mode becomes one cluster soon after enough of its
rows are pooled, inlier-only and uniform-noise streams give none (and stay calibrated),
k_max blocks births and says so once, an idle cluster is retired, the pool and counters
survive a checkpoint, and each condition of the birth test decides on its own (the
streams are those of benchmarks/novelty_births.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans
from streamkm.drift import DriftPolicy
from streamkm.drift.birth import (
    AxisGap,
    OutlierPool,
    birth_test,
    capped_distances,
    chance_flags,
    gap_test,
    line_positions,
)
from streamkm.exceptions import ParameterError

_spec = importlib.util.spec_from_file_location(
    "novelty_births", Path(__file__).resolve().parents[2] / "benchmarks" / "novelty_births.py")
births = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(births)

pytestmark = pytest.mark.unit

ALPHA = births.ALPHA


@pytest.mark.parametrize("kernel", list(births.KERNELS))
def test_a_new_compact_mode_is_born_once_within_five_batches_and_holds_its_rows(kernel):
    run = births.new_mode_run(kernel)
    assert len(run["born"]) == 1, run["born"]
    born = run["born"][0]
    assert born["batch"] - run["full_at"] <= 5
    assert born["cluster_id"] == 3 and born["reason"] == "compact_outliers"
    assert born["rows"] >= 64 and born["sse_reduction"] >= 0.8
    assert born["spread"] <= born["member_spread"] and born["rows"] > born["chance_rows"]
    assert born["gap_pvalue"] <= ALPHA and born["bridge_rows"] < born["side_rows"]
    assert run["purity"] >= 0.95 and run["recall"] >= 0.95


# digits with the default kernel (the anchor-graph kernel, about 11 s) runs in
# tests/drift/test_birth_slow.py
_INLIER_RUNS = [(name, kernel) for name in ("blobs", "moons", "digits")
                for kernel in births.KERNELS if (name, kernel) != ("digits", "auto")]


@pytest.mark.parametrize("name, kernel", _INLIER_RUNS)
def test_inlier_only_streams_give_no_birth_and_stay_calibrated_with_drift_on(name, kernel):
    share, n_births = births.inlier_run(name, kernel)
    assert n_births == 0
    assert ALPHA / 2 <= share <= 2 * ALPHA, f"{name} / {kernel}: {share:.4f} flagged"


@pytest.mark.parametrize("kernel", list(births.KERNELS))
def test_scattered_uniform_noise_gives_no_birth(kernel):
    assert births.noise_run(kernel) == 0


def test_at_k_max_no_birth_happens_and_one_event_says_why():
    rng = np.random.default_rng(0)
    model = MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=ALPHA, gamma="median",
                                  drift={"k_max": 3})
    events = []
    for b in range(births.N_BATCHES):
        events += list(model.step(births.blob_batch(rng, mode=b >= births.MODE_AT)[0]).events)
    assert not [e for e in events if e["event"] == "born"]
    blocked = [e for e in events if e["event"] == "birth_blocked"]
    assert len(blocked) == 1 and blocked[0]["reason"] == "k_max" and blocked[0]["k_max"] == 3
    assert model._drift.n_births_blocked >= 1 and model.cluster_ids_.tolist() == [0, 1, 2]


def _stopping_source(model, n_batches, stop_at, seed=0, left=2, scale=1.0):
    """Steps the three blobs (means times ``scale``); from ``stop_at`` on only the first
    ``left`` send rows."""
    rng = np.random.default_rng(seed)
    events = []
    for b in range(n_batches):
        comp = rng.integers(3 if b < stop_at else left, size=births.BATCH)
        x = scale * births.MEANS[comp] + rng.normal(size=(births.BATCH, 3))
        events += [{**e, "batch": b} for e in model.step(x).events]
    return events


def test_a_cluster_whose_source_stops_is_retired_and_its_id_never_comes_back():
    model = MiniBatchKernelKMeans(3, random_state=0, kernel="linear",
                                  drift={"retire_after": 5})
    events = _stopping_source(model, 10, stop_at=10)
    gone = int(np.argmin(np.linalg.norm(model.cluster_centers_ - births.MEANS[2], axis=1)))
    gone_id = int(model.cluster_ids_[gone])
    events = _stopping_source(model, 12, stop_at=0, seed=1)
    retired = [e for e in events if e["event"] == "retired"]
    assert len(retired) == 1 and retired[0]["cluster_id"] == gone_id
    assert retired[0]["batch"] == 4 and retired[0]["idle_batches"] == 5
    assert gone_id not in model.cluster_ids_.tolist() and model.cluster_centers_.shape[0] == 2
    assert model.counts_.shape == (2,) and model._drift.next_id == 3


@pytest.mark.parametrize("k_min, left", [(2, 2), (1, 1)])
def test_retirement_stops_at_k_min_and_at_one_cluster(k_min, left):
    model = MiniBatchKernelKMeans(3, random_state=0, kernel="linear",
                                  drift={"retire_after": 2, "k_min": k_min})
    # blobs 18 sd apart: no row of blob 0 ever lands nearer another blob's center
    _stopping_source(model, 6, stop_at=6, scale=3.0)
    _stopping_source(model, 8, stop_at=0, seed=1, left=1, scale=3.0)  # only blob 0 sends
    assert model.cluster_ids_.shape[0] == max(k_min, left)
    assert model._drift.n_retired == 3 - max(k_min, left)


def test_retirement_is_off_by_default():
    model = MiniBatchKernelKMeans(3, random_state=0, gamma="median", drift=True)
    events = _stopping_source(model, 20, stop_at=5)
    assert not [e for e in events if e["event"] == "retired"]


def test_pool_and_counters_round_trip_bit_identically_and_replay_the_same_birth(tmp_path):
    rng = np.random.default_rng(0)
    batches = [births.blob_batch(rng, mode=b >= births.MODE_AT)[0]
               for b in range(births.N_BATCHES)]
    model = MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=ALPHA, gamma="median",
                                  drift={"retire_after": 30})
    for x in batches[:births.MODE_AT + 2]:
        model.step(x)
    assert model._drift.pool.size > 0
    model.save(tmp_path / "model.npz")
    restored = MiniBatchKernelKMeans.load(tmp_path / "model.npz")
    want, got = model.get_state(), restored.get_state()
    assert want[1] == got[1] and want[0].keys() == got[0].keys()
    for name in want[0]:
        np.testing.assert_array_equal(want[0][name], got[0][name], err_msg=name)
    assert "drift_pool_rows" in want[0] and "drift_idle" in want[0]
    a_events, b_events = [], []
    for x in batches[births.MODE_AT + 2:]:
        a, b = model.step(x), restored.step(x)
        np.testing.assert_array_equal(a.cluster_ids, b.cluster_ids)
        a_events += list(a.events)
        b_events += list(b.events)
    assert a_events == b_events and any(e["event"] == "born" for e in a_events)


@pytest.mark.parametrize("field, value, shown", [
    ("birth_rows", 1, "1"), ("birth_rows", 300, "300"), ("quarantine_batches", 0, "0"),
    ("retire_after", 0, "0"), ("retire_after", 2.5, "2.5"),
])
def test_bad_birth_and_retirement_fields_are_refused_naming_the_value(field, value, shown):
    with pytest.raises(ParameterError, match=rf"drift\.{field}.*{shown}"):
        DriftPolicy(**{field: value})


def test_birth_rows_may_equal_the_reservoir_size():
    assert DriftPolicy(birth_rows=32, reservoir_size=32, min_reservoir=16).birth_rows == 32


# ---------------------------------------------------------------- the parts, one by one

def _linear_kernel():
    x = np.random.default_rng(0).normal(size=(64, 2))
    return MiniBatchKernelKMeans(1, kernel="linear", random_state=0).fit(x)._kernel_spec


def _test(rows, center, members, chance=0.0, birth_rows=20):
    kernel = _linear_kernel()
    d = ((rows - center) ** 2).sum(axis=1)
    return birth_test(rows, d, np.arange(rows.shape[0]), members, kernel, 0.8, birth_rows,
                      chance, 0)


def test_birth_test_passes_a_tight_far_group():
    rng = np.random.default_rng(1)
    members = rng.chisquare(2, size=200)  # a unit blob's squared distances in 2-D
    result = _test(np.array([10.0, 0.0]) + rng.normal(size=(60, 2)), np.zeros(2), members)
    assert result.passed and result.rows.shape == (60,)
    assert result.sse_reduction > 0.9 and result.spread <= result.member_spread


def test_birth_test_refuses_a_clusters_own_tail_rows():
    rng = np.random.default_rng(2)
    angle = rng.uniform(0, 2 * np.pi, 200)
    ring = 3.5 * np.c_[np.cos(angle), np.sin(angle)]  # flagged tail of a unit blob at 0
    result = _test(ring, np.zeros(2), rng.chisquare(2, size=200))
    assert not result.passed
    assert np.isnan(result.sse_reduction) or result.sse_reduction < 0.8


def test_birth_test_refuses_a_scattered_group():
    rng = np.random.default_rng(3)
    scattered = np.array([20.0, 0.0]) + rng.uniform(-8, 8, size=(80, 2))
    result = _test(scattered, np.zeros(2), rng.chisquare(2, size=200))
    assert result.sse_reduction >= 0.8 and result.spread > result.member_spread
    assert not result.passed


def test_birth_test_refuses_a_group_chance_explains_and_a_group_too_small():
    rng = np.random.default_rng(4)
    group = np.array([10.0, 0.0]) + rng.normal(size=(60, 2))
    members = rng.chisquare(2, size=200)
    assert not _test(group, np.zeros(2), members, chance=60.0).passed
    assert _test(group, np.zeros(2), members, chance=59.0).passed
    assert not _test(group, np.zeros(2), members, birth_rows=61).passed
    assert not _test(group, np.zeros(2), members[:0]).passed  # no members to compare with


def test_chance_flags_is_the_poisson_upper_quantile():
    assert chance_flags(0.01, 100) == 4.0  # P(Poisson(1) > 4) < 0.01 <= P(Poisson(1) > 3)
    assert chance_flags(0.01, 0) == 0.0
    assert chance_flags(0.01, 100, rate=0.02) == 6.0


class _Buffers:
    def __init__(self, values):
        self.ordered = np.sort(np.asarray(values, dtype=np.float64), axis=1)
        self.sizes = np.full(self.ordered.shape[0], self.ordered.shape[1], dtype=np.int64)


def test_flags_beyond_chance_join_the_buffer_capped_at_its_farthest_member():
    buffers = _Buffers([np.arange(1.0, 11.0), np.arange(1.0, 11.0)])
    labels = np.zeros(100, dtype=np.int64)
    labels[50:] = 1
    d = np.ones(100)
    outliers = np.zeros(100, dtype=bool)
    d[:8] = 100.0 + np.arange(8)  # cluster 0: 8 flags among 50 rows, chance allows 3
    outliers[:8] = True
    d[50] = 50.0  # cluster 1: one flag, within chance
    outliers[50] = True
    out = capped_distances(labels, d, outliers, buffers, 0.01)
    assert chance_flags(0.01, 50) == 3.0
    assert out[:3].tolist() == [100.0, 101.0, 102.0]  # the nearest three keep theirs
    assert out[3:8].tolist() == [10.0] * 5
    assert out[50] == 50.0 and (out[~outliers] == 1.0).all()
    assert capped_distances(labels, d, np.zeros(100, dtype=bool), buffers, 0.01) is d


def test_pool_keeps_recent_rows_up_to_its_capacity_and_round_trips():
    pool = OutlierPool(2, np.float64, capacity=5, keeps_raw=False)
    for step in range(1, 5):
        pool.add(step, np.full((2, 2), float(step)), None)
        pool.release(step, quarantine_batches=3)
    # step 1's rows left after 3 steps; the oldest beyond capacity 5 leave first
    assert pool.steps.tolist() == [2, 3, 3, 4, 4]
    again = OutlierPool(2, np.float64, capacity=5, keeps_raw=False)
    again.load_arrays(pool.to_arrays("p_"), "p_")
    np.testing.assert_array_equal(again.rows, pool.rows)
    np.testing.assert_array_equal(again.steps, pool.steps)
    rows, _ = pool.take(np.array([0, 4]))
    assert rows[:, 0].tolist() == [2.0, 4.0] and pool.size == 3


def test_the_outlier_pool_follows_a_graph_kernel_refit_to_its_new_feature_width():
    """A graph kernel refitted on the recent rows (drift handling on) may give its features
    another number of columns; the pool starts over in the new width and flagged rows keep
    being pooled after the refit (KEEL penbased, the anchor kernel: 36, then 39 columns)."""
    spec = importlib.util.spec_from_file_location(
        "novelty_data", Path(__file__).resolve().parents[2] / "benchmarks" / "_novelty_data.py")
    data = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, data)  # its dataclasses look their module up
    spec.loader.exec_module(data)
    penbased = data.keel_thinned("penbased", 0)
    keep = ~penbased.anomaly
    X = data.standardise(penbased.X[keep])[np.random.default_rng(0).permutation(keep.sum())]
    model = MiniBatchKernelKMeans(penbased.n_clusters, outlier_alpha=0.01,
                                  drift={"k_max": 2 * penbased.n_clusters}, random_state=0)
    widths = set()
    for start in range(0, X.shape[0], 500):
        model.step(X[start:start + 500])
        widths.add(model._drift.pool.rows.shape[1])
    assert model.kernel_.name == "anchor"
    assert len(widths) > 1, "the kernel was not refitted to another width: nothing is tested"


# ---------------------------------------------------------------- the gap test

def test_line_positions_project_rows_onto_the_line_from_the_center_to_the_mean():
    center, mean = np.zeros(2), np.array([2.0, 0.0])
    rows = np.array([[1.0, 5.0], [0.0, 0.0], [2.0, -3.0], [-1.0, 0.0]])
    to_center = ((rows - center) ** 2).sum(axis=1)
    to_mean = ((rows - mean) ** 2).sum(axis=1)
    np.testing.assert_allclose(line_positions(to_center, to_mean, 4.0), [0.5, 0.0, 1.0, -0.5])


def test_gap_test_passes_a_second_hump_beyond_an_empty_middle_third():
    rng = np.random.default_rng(5)
    t = np.concatenate([rng.normal(0.0, 0.12, 200), rng.normal(1.0, 0.08, 64)])
    gap = gap_test(t, ALPHA)
    assert gap.passed and gap.pvalue <= ALPHA
    assert gap.bridge_rows <= 2 and gap.side_rows >= 60


def test_gap_test_refuses_a_tail_whose_density_falls_toward_the_group():
    rng = np.random.default_rng(6)
    t = np.abs(rng.normal(0.0, 0.45, 400))  # the edge of a Gaussian cluster
    gap = gap_test(t, ALPHA)
    assert not gap.passed and gap.bridge_rows > 0


def test_gap_test_refuses_a_tail_whose_density_rises_toward_the_group():
    # a connected cluster in a graph kernel's leading coordinate: a cosine of the position
    # along it, whose density piles up at its end
    rng = np.random.default_rng(7)
    t = np.sin(rng.uniform(0.0, np.pi / 2, 400))
    gap = gap_test(t, ALPHA)
    assert not gap.passed and gap.bridge_rows >= gap.side_rows * 0.8


def test_gap_test_counts_no_row_beyond_the_center_and_refuses_without_rows():
    assert gap_test(np.array([-0.5, -2.0, np.nan]), ALPHA) == AxisGap(0, 0, 1.0, False)
    few = gap_test(np.array([-0.1] * 50 + [1.0] * 50), ALPHA)  # no near third: no gap seen
    assert few.side_rows == 0 and not few.passed


def _novelty_data():
    spec = importlib.util.spec_from_file_location(
        "novelty_data", Path(__file__).resolve().parents[2] / "benchmarks" / "_novelty_data.py")
    data = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, data)  # its dataclasses look their module up
    spec.loader.exec_module(data)
    return data


@pytest.mark.parametrize("name", ["moons", "penbased"])
def test_graph_kernel_streams_without_a_new_mode_give_no_birth(name):
    """The inlier streams of benchmarks/bench_novelty.py with the anchor-graph kernel: no
    cluster is born, the flag rate stays near ``outlier_alpha``, and a group that reaches the
    gap test and is refused leaves the pool. (The kernel's leading coordinate piles a
    connected cluster's rows up at its ends: such a group passes the first three birth
    conditions and the gap test refuses it,
    test_gap_test_refuses_a_tail_whose_density_rises_toward_the_group.)"""
    data = _novelty_data()
    s = (data.moons_with_noise(10_000, 0) if name == "moons"
         else data.keel_thinned("penbased", 0))
    keep = ~s.anomaly
    X = data.standardise(s.X[keep])[np.random.default_rng(0).permutation(keep.sum())]
    model = MiniBatchKernelKMeans(s.n_clusters, outlier_alpha=ALPHA, random_state=0,
                                  drift={"k_max": 2 * s.n_clusters})
    released = []  # (rows pooled before the step plus its flags, rows pooled after)
    flagged = []
    for start in range(0, X.shape[0], 500):
        refused, pooled = ((model._drift.n_births_refused, model._drift.pool.size) if start
                           else (0, 0))
        report = model.step(X[start:start + 500])
        assert not [e for e in report.events if e["event"] == "born"]
        if start >= 2000:
            flagged.append(report.outliers.mean())
        if model._drift.n_births_refused > refused:
            released.append((pooled + int(report.outliers.sum()), model._drift.pool.size))
    assert model.kernel_.name == "anchor"
    assert ALPHA / 2 <= np.mean(flagged) <= 2 * ALPHA, np.mean(flagged)
    # a refused group (at least birth_rows rows) left the pool
    assert all(after <= before - model._drift.policy.birth_rows for before, after in released)
