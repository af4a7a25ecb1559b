"""Drift building blocks: policy, spread monitor, windows of recent rows, Ward choice, and the
center stores' split / merge / inner products against brute-force references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamkm.cluster._centers import ExplicitCenters, SupportCenters
from streamkm.drift import (
    DriftPolicy,
    RecentRows,
    SpreadMonitor,
    most_redundant_pair,
    redundancy_matrix,
    smallest_ward_pair,
    ward_cost_matrix,
)
from streamkm.exceptions import ParameterError, ValidationError
from streamkm.kernels import KernelSpec, pairwise_kernel

pytestmark = pytest.mark.unit

RBF = KernelSpec("rbf", 0.3)


# ---------------------------------------------------------------------- policy

def test_policy_from_param_forms() -> None:
    assert DriftPolicy.from_param(None) is None
    assert DriftPolicy.from_param(False) is None
    assert DriftPolicy.from_param(True) == DriftPolicy()
    assert DriftPolicy.from_param({"k_max": 9}).k_max == 9
    policy = DriftPolicy(delta=0.2)
    assert DriftPolicy.from_param(policy) is policy
    assert DriftPolicy(**policy.to_dict()) == policy


@pytest.mark.parametrize("value, quoted", [
    ({"nope": 1}, "'nope'"),
    ({"threshold": 0.0}, "0.0"),
    ({"min_reservoir": 500}, "500"),
    ({"k_min": 4, "k_max": 3}, "3"),
    ({"merge_below": 0.9}, "0.9"),
    ("yes", "'yes'"),
])
def test_policy_errors_quote_the_value(value: object, quoted: str) -> None:
    with pytest.raises(ParameterError, match=quoted):
        DriftPolicy.from_param(value)


def test_policy_k_range_against_n_clusters() -> None:
    assert DriftPolicy().resolved_k_max(4) == 8
    DriftPolicy(k_max=4).check_against(4)
    with pytest.raises(ParameterError, match="n_clusters=5"):
        DriftPolicy(k_max=4).check_against(5)


# ---------------------------------------------------------------------- monitor

def _monitor(**kw: float) -> SpreadMonitor:
    args = dict(smoothing=0.3, warmup_batches=3, delta=0.1, threshold=1.0, min_batch_rows=10,
                cooldown_batches=2, max_rejections=2)
    args.update(kw)
    return SpreadMonitor(2, **args)  # type: ignore[arg-type]


def test_monitor_alarms_on_a_doubling_and_not_on_a_constant_spread() -> None:
    mon = _monitor()
    counts = np.array([100, 100])
    for _ in range(20):
        assert mon.observe(counts, counts * np.array([1.0, 1.0])).size == 0
    alarm_at = None
    for t in range(10):
        alarmed = mon.observe(counts, counts * np.array([1.0, 2.0]))
        if alarmed.size:
            assert alarmed.tolist() == [1]
            alarm_at = t
            break
    # e: 1.3, 1.51, 1.657 -> g: 0.2, 0.61, 1.167 > 1 on the third batch
    assert alarm_at == 2
    np.testing.assert_allclose(mon.reference, [1.0, 1.0])


def test_monitor_skips_thin_batches_and_tracks_recent_size() -> None:
    mon = _monitor()
    mon.observe(np.array([5, 50]), np.array([500.0, 50.0]))
    assert np.isnan(mon.ewma[0]) and mon.ewma[1] == 1.0
    mon.observe(np.array([15, 0]), np.array([15.0, 0.0]))
    np.testing.assert_allclose(mon.recent_size, [5 + 0.3 * 10, 50 - 0.3 * 50])


def test_monitor_rejections_rebaseline_and_split_merge_keep_shapes() -> None:
    mon = _monitor()
    counts = np.array([100, 100])
    for spread in [1.0] * 3 + [3.0] * 5:
        mon.observe(counts, counts * np.array([1.0, spread]))
    assert mon.statistic[1] > 1.0
    assert mon.reject(1) is False and mon.cooldown[1] == 2
    assert mon.reject(1) is True
    assert mon.statistic[1] == 0.0 and mon.reference[1] == mon.ewma[1]
    mon.split(0, 0.25)
    assert mon.n_clusters == 3 and np.isnan(mon.reference[[0, 2]]).all()
    np.testing.assert_allclose(mon.recent_size[[0, 2]], [25.0, 75.0])
    mon.merge(2, 0)
    assert mon.n_clusters == 2 and mon.recent_size[1] == 100.0
    restored = _monitor()
    restored.load_arrays(mon.to_arrays("m_"), "m_")
    for name, arr in mon.to_arrays("").items():
        np.testing.assert_array_equal(getattr(restored, name), arr)


# ---------------------------------------------------------------------- windows of recent rows

def test_recent_rows_keep_the_newest_and_subsample_big_batches() -> None:
    rng = np.random.default_rng(0)
    recent = RecentRows(2, 1, np.float64, 4, keeps_raw=False)
    recent.add(np.array([0, 1, 0]), np.array([[1.0], [2.0], [3.0]]), None, rng)
    recent.add(np.array([0, 0, 0]), np.array([[4.0], [5.0], [6.0]]), None, rng)
    assert recent.rows[0].ravel().tolist() == [3.0, 4.0, 5.0, 6.0]
    assert recent.rows[1].ravel().tolist() == [2.0]
    big = np.arange(100.0)[:, None]
    recent.add(np.zeros(100, dtype=np.int64), big, None, rng)
    got = recent.rows[0].ravel()
    assert got.shape == (4,) and np.all(np.diff(got) > 0) and set(got) <= set(big.ravel())


@pytest.mark.parametrize("sparse", [False, True])
def test_recent_rows_raw_split_merge_and_arrays(sparse: bool) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 2))
    raw = rng.normal(size=(12, 5))
    raw_in = sp.csr_matrix(raw) if sparse else raw
    labels = np.array([0, 1] * 6)
    recent = RecentRows(2, 2, np.float64, 8, keeps_raw=True)
    recent.add(labels, x, raw_in, rng)

    def dense(r: object) -> np.ndarray:
        return r.toarray() if sparse else np.asarray(r)  # type: ignore[union-attr]

    np.testing.assert_array_equal(dense(recent.raw[0]), raw[labels == 0])
    side = np.array([0, 1, 0, 1, 1, 0])
    recent.split(0, side)
    np.testing.assert_array_equal(recent.rows[2], x[labels == 0][side == 1])
    np.testing.assert_array_equal(dense(recent.raw[2]), raw[labels == 0][side == 1])
    back = RecentRows.from_arrays(recent.to_arrays("r_"), "r_", n_features=2,
                                  dtype=np.float64, capacity=8, keeps_raw=True)
    for j in range(3):
        np.testing.assert_array_equal(back.rows[j], recent.rows[j])
        np.testing.assert_array_equal(dense(back.raw[j]), dense(recent.raw[j]))
    recent.merge(1, 2, rng)
    assert recent.n_clusters == 2 and recent.rows[1].shape[0] == 8  # 6 + 3 capped at 8
    recent.reproject(lambda r: dense(r)[:, :3] * 2.0, 3)
    np.testing.assert_allclose(recent.rows[0], dense(recent.raw[0])[:, :3] * 2.0)


# ---------------------------------------------------------------------- Ward choice

def test_smallest_ward_pair_matches_brute_force() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        k = int(rng.integers(2, 7))
        c = rng.normal(size=(k, 3))
        sizes = rng.uniform(0.5, 50.0, size=k)
        choice = smallest_ward_pair(c @ c.T, sizes)
        best = min(
            ((sizes[a] * sizes[b] / (sizes[a] + sizes[b]) * np.sum((c[a] - c[b]) ** 2), a, b)
             for a in range(k) for b in range(a + 1, k)),
        )
        assert (choice.a, choice.b) == (best[1], best[2])
        assert choice.cost == pytest.approx(best[0], rel=1e-9, abs=1e-12)


def test_ward_cost_matrix_empty_clusters_cost_nothing() -> None:
    cost = ward_cost_matrix(np.eye(3), np.array([0.0, 0.0, 5.0]))
    assert cost[0, 1] == 0.0 and cost[0, 2] == 0.0 and np.isinf(cost[1, 1])
    with pytest.raises(ValidationError, match="shape"):
        ward_cost_matrix(np.eye(2), np.ones(3))


def test_most_redundant_pair_matches_brute_force_share_of_merged_sse() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        k = int(rng.integers(2, 7))
        c = rng.normal(size=(k, 3))
        sizes = rng.uniform(0.5, 50.0, size=k)
        sse = sizes * rng.uniform(0.1, 2.0, size=k)
        choice, share = most_redundant_pair(c @ c.T, sizes, sse)

        def pair_share(a: int, b: int) -> float:
            cost = sizes[a] * sizes[b] / (sizes[a] + sizes[b]) * np.sum((c[a] - c[b]) ** 2)
            return cost / (cost + sse[a] + sse[b])

        best = min((pair_share(a, b), a, b) for a in range(k) for b in range(a + 1, k))
        assert (choice.a, choice.b) == (best[1], best[2])
        assert share == pytest.approx(best[0], rel=1e-9)


def test_most_redundant_pair_is_not_the_cheapest_ward_pair() -> None:
    # two tight one-row clusters side by side are the cheapest Ward pair but are distinct;
    # two broad clusters whose centers are close together are the redundant pair
    c = np.array([[0.0, 0.0], [2.0, 0.0], [30.0, 0.0], [31.0, 0.0]])
    sizes = np.array([100.0, 100.0, 1.0, 1.0])
    sse = np.array([2000.0, 2000.0, 0.001, 0.001])
    ward = smallest_ward_pair(c @ c.T, sizes)
    assert (ward.a, ward.b) == (2, 3)
    choice, share = most_redundant_pair(c @ c.T, sizes, sse)
    assert (choice.a, choice.b) == (0, 1)
    assert share == pytest.approx(200.0 / 4200.0)
    assert choice.cost == pytest.approx(200.0)


def test_redundancy_skips_pairs_with_unknown_spread() -> None:
    c = np.array([[0.0], [1.0], [5.0]])
    share = redundancy_matrix(c @ c.T, np.ones(3), np.array([np.nan, 1.0, 1.0]))
    assert np.isinf(share[0, 1]) and np.isinf(share[0, 2]) and np.isfinite(share[1, 2])
    assert most_redundant_pair(c[:2] @ c[:2].T, np.ones(2), np.array([np.nan, 1.0])) is None
    with pytest.raises(ValidationError, match="sse must have shape"):
        redundancy_matrix(np.eye(2), np.ones(2), np.ones(3))


# ---------------------------------------------------------------------- center stores

def _support_store(rng: np.random.Generator, k: int = 3) -> SupportCenters:
    sample = rng.normal(size=(40, 2))
    weights = np.zeros((k, 40))
    for j in range(k):
        idx = rng.choice(40, size=6, replace=False)
        weights[j, idx] = rng.dirichlet(np.ones(6))
    kmat = RBF.block(sample, sample)
    store = SupportCenters.from_sample_weights(RBF, 50, sample, kmat, weights)
    store.tags = rng.integers(0, 3, size=store.tags.shape[0]).astype(np.int64)
    for j in range(k):  # oldest batch first inside each segment, as the engine keeps them
        a, b = store.offsets[j], store.offsets[j + 1]
        order = np.argsort(store.tags[a:b], kind="stable")
        for name in ("rows", "row_sq_norms", "weights", "tags"):
            getattr(store, name)[a:b] = getattr(store, name)[a:b][order]
        store.grams[j] = store.grams[j][np.ix_(order, order)]
    return store


def _brute_inner(store: SupportCenters) -> np.ndarray:
    k = store.n_clusters
    out = np.empty((k, k))
    for a in range(k):
        for b in range(k):
            sa = slice(store.offsets[a], store.offsets[a + 1])
            sb = slice(store.offsets[b], store.offsets[b + 1])
            kab = pairwise_kernel(store.rows[sa], store.rows[sb], "rbf", gamma=RBF.gamma)
            out[a, b] = store.weights[sa] @ kab @ store.weights[sb]
    return out


def test_support_center_inner_products_match_brute_force() -> None:
    store = _support_store(np.random.default_rng(3))
    np.testing.assert_allclose(store.center_inner_products(), _brute_inner(store), atol=1e-12)


def test_support_split_builds_means_of_the_halves() -> None:
    rng = np.random.default_rng(4)
    store = _support_store(rng)
    before = _brute_inner(store)
    rows_a, rows_b = rng.normal(size=(5, 2)), rng.normal(size=(7, 2)) + 3.0
    store.split(1, rows_a, rows_b)
    assert store.n_clusters == 4
    x = rng.normal(size=(9, 2))
    dist = store.sq_distances(x, np.einsum("ij,ij->i", x, x), RBF.diagonal(x))
    for col, rows in ((1, rows_a), (3, rows_b)):
        kx = pairwise_kernel(x, rows, "rbf", gamma=RBF.gamma)
        krr = pairwise_kernel(rows, rows, "rbf", gamma=RBF.gamma)
        np.testing.assert_allclose(dist[:, col], 1 - 2 * kx.mean(1) + krr.mean(), atol=1e-12)
    after = _brute_inner(store)
    np.testing.assert_allclose(after[np.ix_([0, 2], [0, 2])], before[np.ix_([0, 2], [0, 2])])
    np.testing.assert_allclose(store.center_sq_norms, np.diagonal(after), atol=1e-12)


def test_support_merge_is_the_size_weighted_mean_with_sorted_tags() -> None:
    rng = np.random.default_rng(5)
    store = _support_store(rng, k=4)
    x = rng.normal(size=(9, 2))
    xsq = np.einsum("ij,ij->i", x, x)
    inner = store.inner_products(x, xsq)
    g = _brute_inner(store)
    pos = store.merge(3, 1, 2.0, 6.0)
    assert pos == 2 and store.n_clusters == 3
    want_inner = 0.25 * inner[:, 3] + 0.75 * inner[:, 1]
    np.testing.assert_allclose(store.inner_products(x, xsq)[:, 2], want_inner, atol=1e-12)
    want_sq = 0.25**2 * g[3, 3] + 0.75**2 * g[1, 1] + 2 * 0.25 * 0.75 * g[1, 3]
    assert store.center_sq_norms[2] == pytest.approx(want_sq, abs=1e-12)
    seg = store.tags[store.offsets[2]:store.offsets[3]]
    assert np.all(np.diff(seg) >= 0)
    np.testing.assert_allclose(store.center_inner_products(), _brute_inner(store), atol=1e-12)


def test_support_split_with_raw_rows_needs_them() -> None:
    rng = np.random.default_rng(6)
    sample = rng.normal(size=(10, 2))
    raw = rng.normal(size=(10, 4))
    weights = np.zeros((2, 10))
    weights[0, :5] = 0.2
    weights[1, 5:] = 0.2
    store = SupportCenters.from_sample_weights(RBF, 50, sample, RBF.block(sample, sample),
                                               weights, raw)
    with pytest.raises(ValidationError, match="raw_a"):
        store.split(0, sample[:2], sample[2:4])
    store.split(0, sample[:2], sample[2:4], raw_a=raw[:2], raw_b=raw[2:4])
    np.testing.assert_array_equal(store.raw[store.offsets[2]:store.offsets[3]], raw[2:4])


def test_explicit_centers_split_and_merge() -> None:
    rng = np.random.default_rng(7)
    c = rng.normal(size=(3, 2))
    store = ExplicitCenters(c.copy(), raw=rng.normal(size=(3, 4)))
    rows_a, rows_b = rng.normal(size=(4, 2)), rng.normal(size=(6, 2))
    raw_a, raw_b = rng.normal(size=(4, 4)), rng.normal(size=(6, 4))
    store.split(0, rows_a, rows_b, raw_a=raw_a, raw_b=sp.csr_matrix(raw_b))
    np.testing.assert_allclose(store.centers[[0, 3]], [rows_a.mean(0), rows_b.mean(0)])
    np.testing.assert_allclose(store.raw[3], raw_b.mean(0))
    pos = store.merge(1, 3, 3.0, 1.0)
    assert pos == 1 and store.n_clusters == 3
    np.testing.assert_allclose(store.centers[1], 0.75 * c[1] + 0.25 * rows_b.mean(0))
    np.testing.assert_allclose(store.center_inner_products(), store.centers @ store.centers.T)
