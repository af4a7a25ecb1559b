"""The engine step's numba kernels against plain-numpy references, the newest-batch subsample
(b_j > tau) and its estimator, and the thread setting."""

from __future__ import annotations

import numpy as np
import pytest

import streamkm
from streamkm import MiniBatchKernelKMeans, ParameterError
from streamkm._core import threads as _threads
from streamkm._core.threads import block_threads, row_chunks
from streamkm._numba import centers as nc
from streamkm._numba import kernels as nk
from streamkm.cluster._centers import SupportCenters, learning_rates, sq_norms
from streamkm.kernels import KernelSpec

pytestmark = pytest.mark.unit

DTYPES = [np.float32, np.float64]


def _segments(rng, m, n_seg):
    cuts = np.sort(rng.choice(np.arange(1, m), size=2 * n_seg - 1, replace=False))
    bounds = np.concatenate([[0], cuts, [m]])
    return bounds[0::2][:n_seg].astype(np.int64), bounds[1::2][:n_seg].astype(np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rbf_segment_sums_equals_block_then_sums(dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(11, 3)).astype(dtype)  # 11 rows: two blocks of 4 and a rest of 3
    y = rng.normal(size=(40, 3)).astype(dtype)
    lo, hi = _segments(rng, 40, 5)  # gaps between segments: columns outside every segment
    weights = rng.random(40)
    out = np.full((11, 5), 0.25)
    inner = x @ y.T
    nk.rbf_segment_sums(inner, sq_norms(x), sq_norms(y), 0.4, lo, hi, weights, out)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    kmat = np.exp(-0.4 * ((x64[:, None, :] - y64[None, :, :]) ** 2).sum(-1))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(inner, kmat, rtol=tol, atol=tol)
    ref = 0.25 + np.stack([kmat[:, a:b] @ weights[a:b] for a, b in zip(lo, hi)], axis=1)
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_segment_inner_products_all_row_remainders(dtype):
    rng = np.random.default_rng(1)
    for n in range(0, 9):
        kblock = rng.random((n, 30)).astype(dtype)
        lo, hi = _segments(rng, 30, 4)
        weights = rng.random(30)
        out = np.ones((n, 4))
        nc.segment_inner_products(kblock, lo, hi, weights, out)
        ref = 1 + np.stack([kblock[:, a:b].astype(np.float64) @ weights[a:b]
                            for a, b in zip(lo, hi)], axis=1)
        np.testing.assert_allclose(out, ref.reshape(n, 4), rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_sum_groups_per_center():
    rng = np.random.default_rng(2)
    group_sums = rng.random((7, 9))
    scale = rng.random(9)
    center_groups = np.array([0, 3, 3, 8, 9], dtype=np.int64)  # center 1 has no group
    out = np.full((7, 4), np.nan)
    nc.sum_groups_per_center(group_sums, scale, center_groups, out)
    ref = np.stack([(group_sums[:, a:b] * scale[a:b]).sum(1)
                    for a, b in zip(center_groups[:-1], center_groups[1:])], axis=1)
    np.testing.assert_allclose(out, ref, rtol=1e-13)


def test_copy_own_segment():
    rng = np.random.default_rng(3)
    kblock = rng.random((6, 12))
    lo = np.array([0, 5, 9], dtype=np.int64)
    hi = np.array([5, 9, 12], dtype=np.int64)
    labels = np.array([2, 0, 1, 1, 0, 2], dtype=np.int64)
    out = np.full((6, 5), -1.0)
    nc.copy_own_segment(kblock, labels, lo, hi, out)
    for i, j in enumerate(labels):
        size = hi[j] - lo[j]
        np.testing.assert_array_equal(out[i, :size], kblock[i, lo[j]:hi[j]])
        assert np.all(out[i, size:] == -1.0)


def _truncation_reference(tags, n_new, tau):
    """Walk the batches from the newest while old rows + n_new fit in tau."""
    if n_new == 0:
        return 0
    start = len(tags)
    for s in sorted({int(np.flatnonzero(tags == t)[0]) for t in np.unique(tags)}, reverse=True):
        if len(tags) - s + n_new <= tau:
            start = s
        else:
            break
    return start


def test_truncation_starts_matches_reference():
    rng = np.random.default_rng(4)
    for _ in range(50):
        k = int(rng.integers(1, 5))
        segs = [np.sort(rng.integers(0, 4, size=int(rng.integers(1, 12)))) for _ in range(k)]
        tags = np.concatenate(segs)
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in segs])]).astype(np.int64)
        starts = np.zeros(len(tags), dtype=bool)
        starts[offsets[:-1]] = True
        starts[1:] |= tags[1:] != tags[:-1]
        group_lo = np.flatnonzero(starts).astype(np.int64)
        center_groups = np.searchsorted(group_lo, offsets).astype(np.int64)
        n_new = rng.integers(0, 8, size=k).astype(np.int64)
        tau = int(rng.integers(1, 15))
        got = nc.truncation_starts(group_lo, center_groups, offsets[:-1], offsets[1:], n_new, tau)
        for j in range(k):
            want = offsets[j] + _truncation_reference(segs[j], int(n_new[j]), tau)
            assert got[j] == want, (segs[j], n_new[j], tau)


@pytest.mark.parametrize("dtype", DTYPES)
def test_assemble_grams_matches_numpy_blocks(dtype):
    rng = np.random.default_rng(5)
    spec = KernelSpec("rbf", 0.3)
    sizes = np.array([4, 3, 5])
    old_rows = rng.normal(size=(sizes.sum(), 2)).astype(dtype)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    lo, hi = offsets[:-1], offsets[1:]
    grams = [spec.block(old_rows[a:b], old_rows[a:b]) for a, b in zip(lo, hi)]
    old_start = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
    old_flat = np.concatenate([g.ravel() for g in grams])
    batch = rng.normal(size=(6, 2)).astype(dtype)
    labels = np.array([0, 2, 0, 2, 2, 0])
    members = np.array([0, 2, 5, 1, 4], dtype=np.int64)  # center 0: rows 0, 2, 5; center 2: 1, 4
    new_start = np.array([0, 3, 3, 5], dtype=np.int64)
    keep_from = np.array([lo[0] + 2, lo[1], lo[2] + 4], dtype=np.int64)  # center 1 unchanged
    own_old = np.zeros((6, 5), dtype=dtype)
    own_new = np.zeros((6, 3), dtype=dtype)
    for i, j in enumerate(labels):
        own_old[i, :sizes[j]] = spec.block(batch[i:i + 1], old_rows[lo[j]:hi[j]])[0]
        new_rows = batch[members[new_start[j]:new_start[j + 1]]]
        own_new[i, :len(new_rows)] = spec.block(batch[i:i + 1], new_rows)[0]
    new_sizes = (hi - keep_from) + np.diff(new_start)
    out_start = np.concatenate([[0], np.cumsum(new_sizes ** 2)]).astype(np.int64)
    weights = rng.random(new_sizes.sum())
    out = np.full(out_start[-1], np.nan, dtype=dtype)
    cc = np.array([-1.0, -2.0, -3.0])
    nc.assemble_grams(old_flat, old_start, lo, hi, keep_from, new_start, members, own_old,
                      own_new, weights, out_start, out, cc)
    w_lo = np.concatenate([[0], np.cumsum(new_sizes)])
    for j in range(3):
        rows = np.concatenate([old_rows[keep_from[j]:hi[j]],
                               batch[members[new_start[j]:new_start[j + 1]]]])
        ref = spec.block(rows, rows)
        got = out[out_start[j]:out_start[j + 1]].reshape(new_sizes[j], new_sizes[j])
        np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype == np.float32 else 1e-13)
        w = weights[w_lo[j]:w_lo[j + 1]]
        if j == 1:
            assert cc[1] == -2.0  # no new rows: <C_j, C_j> is left to the caller's value
        else:
            assert cc[j] == pytest.approx(w @ ref.astype(np.float64) @ w, rel=1e-5)


# ---------------------------------------------------------------- newest-batch subsample
def _store(tau, k=3, d=2, seed=0):
    rng = np.random.default_rng(seed)
    seeds = rng.normal(scale=5.0, size=(k, d))
    return SupportCenters.from_seeds(KernelSpec("linear"), tau, seeds, np.arange(k))


def test_newest_rows_keeps_every_row_when_clusters_fit():
    store = _store(tau=10)
    labels = np.array([0, 2, 0, 1, 2, 0])
    counts = np.bincount(labels, minlength=3)
    members, start, share = store._newest_rows(labels, counts, None, np.random.default_rng(0))
    np.testing.assert_array_equal(members, [0, 2, 5, 3, 1, 4])
    np.testing.assert_array_equal(start, [0, 3, 4, 6])
    np.testing.assert_allclose(share, [1 / 3] * 3 + [1.0] + [0.5] * 2)
    weights = np.array([1.0, 2.0, 3.0, 4.0, 1.0, 1.0])
    _, _, share = store._newest_rows(labels, counts, weights, np.random.default_rng(0))
    np.testing.assert_allclose(share, [1 / 5, 3 / 5, 1 / 5, 1.0, 2 / 3, 1 / 3])


def test_newest_rows_unweighted_is_a_uniform_sample_of_tau_rows():
    tau, b_j = 5, 12
    store = _store(tau=tau)
    labels = np.array([0] * b_j + [1] * 3)
    counts = np.bincount(labels, minlength=3)
    hits = np.zeros(len(labels))
    rng = np.random.default_rng(1)
    draws = 4000
    for _ in range(draws):
        members, start, share = store._newest_rows(labels, counts, None, rng)
        cluster0 = members[start[0]:start[1]]
        assert len(cluster0) == tau and len(set(cluster0)) == tau
        assert np.all(np.diff(cluster0) > 0)  # batch order kept
        np.testing.assert_allclose(share[start[0]:start[1]], 1 / tau)
        np.testing.assert_array_equal(members[start[1]:start[2]], [12, 13, 14])
        hits[members] += 1
    # Each row of the oversized cluster is kept with probability tau / b_j (binomial noise).
    freq = hits[:b_j] / draws
    assert np.all(np.abs(freq - tau / b_j) < 4 * np.sqrt(tau / b_j * (1 - tau / b_j) / draws))


def test_newest_rows_weighted_subsample_is_unbiased_and_convex():
    tau = 4
    store = _store(tau=tau, k=1)
    weights = np.array([1.0, 7.0, 1.0, 2.0, 1.0, 3.0, 1.0, 1.0, 5.0])
    labels = np.zeros(len(weights), dtype=np.int64)
    counts = np.array([len(weights)])
    rng = np.random.default_rng(2)
    total = np.zeros(len(weights))
    draws = 6000
    for _ in range(draws):
        members, start, share = store._newest_rows(labels, counts, weights, rng)
        assert len(members) <= tau and share.sum() == pytest.approx(1.0)
        assert np.all(share > 0) and np.all(np.diff(members) > 0)
        np.add.at(total, members, share)
    # E[share_i] = w_i / W: the kept part is an unbiased estimate of the weighted batch mean.
    np.testing.assert_allclose(total / draws, weights / weights.sum(), atol=0.015)


def _means(d=3, k=2):
    return np.random.default_rng(100).normal(scale=6.0, size=(k, d))


def _mixture(seed, n, d=3, k=2):
    """Batch ``seed`` of one fixed mixture (the means do not depend on the seed)."""
    rng = np.random.default_rng(seed)
    means = _means(d, k)
    return means[rng.integers(k, size=n)] + rng.normal(size=(n, d))


@pytest.mark.parametrize("dtype", DTYPES)
def test_batches_larger_than_tau_per_center_keep_supports_bounded(dtype):
    tau, k, b = 20, 2, 300  # b / k = 150 rows per center, far above tau
    model = MiniBatchKernelKMeans(k, tau=tau, tol=0.0, n_init=1, random_state=0)
    spec = None
    for step in range(6):
        x = _mixture(step, b).astype(dtype)
        report = model.step(x)
        store = model._centers
        spec = model._kernel_spec
        if step == 0:
            continue  # the initialisation sample may hold more than tau rows per center
        assert np.all(store.support_sizes() <= tau)
        assert store.rows.shape[0] <= k * tau
        for j, (a, e) in enumerate(zip(store.offsets[:-1], store.offsets[1:])):
            w = store.weights[a:e]
            assert np.all(w > 0) and w.sum() == pytest.approx(1.0, abs=1e-12)
            ref = spec.block(store.rows[a:e], store.rows[a:e])
            np.testing.assert_allclose(store.grams[j], ref, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                       atol=1e-6)
            # b_j > tau: the old rows are dropped and the newest tau rows carry 1 / tau each.
            np.testing.assert_allclose(w, 1.0 / tau)
            assert np.all(store.tags[a:e] == store.next_tag - 1)
        # The reported objective after the update is the batch's under the new centers.
        dist = model.transform(x).astype(np.float64)
        assert report.objective - report.improvement == pytest.approx(dist.min(1).mean(), rel=1e-4)


def test_subsampled_linear_centers_equal_the_mean_of_the_kept_rows():
    tau = 10
    spec = KernelSpec("linear")
    store = SupportCenters.from_seeds(spec, tau, _means(), np.array([0, 1]))
    counts = np.zeros(2, dtype=np.int64)
    for step in range(1, 4):
        x = _mixture(step, 80, k=2)
        out = store.step(x, sq_norms(x), spec.diagonal(x), learning_rate="sqrt", counts=counts,
                         update=True, rng=np.random.default_rng(step))
        counts += out.batch_counts
        for j, (a, e) in enumerate(zip(store.offsets[:-1], store.offsets[1:])):
            assert (out.labels == j).sum() > tau  # every center gets more than tau rows
            # Old rows dropped: the center is the mean of tau distinct rows of its batch part.
            kept = store.rows[a:e]
            assert kept.shape[0] == tau and np.unique(kept, axis=0).shape[0] == tau
            assert all((x[out.labels == j] == r).all(1).any() for r in kept)
            np.testing.assert_allclose(store.weights[a:e] @ kept, kept.mean(0), atol=1e-12)


def test_subsampling_is_deterministic_and_survives_a_checkpoint():
    batches = [_mixture(s, 400) for s in range(5)]
    a = MiniBatchKernelKMeans(2, tau=15, tol=0.0, n_init=1, random_state=3)
    b = MiniBatchKernelKMeans(2, tau=15, tol=0.0, n_init=1, random_state=3)
    for x in batches[:3]:
        a.step(x)
        b.step(x)
    arrays, meta = b.get_state()
    c = MiniBatchKernelKMeans.from_state(arrays, meta)
    for x in batches[3:]:
        ra, rc = a.step(x), c.step(x)
        np.testing.assert_array_equal(ra.labels, rc.labels)
        assert ra.improvement == rc.improvement
    np.testing.assert_array_equal(a._centers.rows, c._centers.rows)


# ---------------------------------------------------------------- threads
def test_thread_setting_validates_and_restores():
    before = streamkm.get_num_threads()
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ParameterError, match="number of threads"):
            streamkm.set_num_threads(bad)
    with streamkm.num_threads(3):
        assert streamkm.get_num_threads() == 3
    assert streamkm.get_num_threads() == before


def test_thread_setting_from_environment(monkeypatch):
    try:
        monkeypatch.setenv("STREAMKM_NUM_THREADS", "5")
        streamkm.set_num_threads(None)
        assert streamkm.get_num_threads() == 5
        assert block_threads(10, 10) == 5  # a fixed count applies to every block
        monkeypatch.setenv("STREAMKM_NUM_THREADS", "many")
        with pytest.raises(ParameterError, match="'many'"):
            streamkm.set_num_threads(None)
    finally:
        monkeypatch.delenv("STREAMKM_NUM_THREADS")
        streamkm.set_num_threads(None)


def test_default_threads_follow_the_block_size(monkeypatch):
    monkeypatch.delenv("STREAMKM_NUM_THREADS", raising=False)
    monkeypatch.setattr(_threads, "available_cpus", lambda: 4)
    monkeypatch.setattr(_threads, "_load_average", lambda: 1.5)
    streamkm.set_num_threads(None)
    per_thread = _threads.PARALLEL_BLOCK_ELEMENTS
    assert streamkm.get_num_threads() == 4  # the most a step may use
    # below one thread's share a block stays on one thread, then one thread per share
    assert block_threads(1024, per_thread // 1024 - 1) == 1
    assert block_threads(1, 1) == 1
    assert block_threads(2, per_thread) == 2
    assert block_threads(1024, 3 * per_thread // 1024) == 3
    assert block_threads(1 << 16, 1 << 16) == 4  # capped at the CPUs
    monkeypatch.setattr(_threads, "_load_average", lambda: 4.0)
    assert block_threads(1 << 16, 1 << 16) == 1  # no core to spare for a second thread
    monkeypatch.setattr(_threads, "_load_average", lambda: 1.5)
    with streamkm.num_threads(2):
        assert block_threads(1, 1) == 2
    assert block_threads(1, 1) == 1  # automatic again after the block


def test_row_chunks_cover_the_rows():
    for n_rows, n_cols in [(1, 10), (100, 10), (1024, 3000), (4096, 20000), (65, 5)]:
        chunks = row_chunks(n_rows, n_cols)
        assert chunks[0][0] == 0 and chunks[-1][1] == n_rows
        assert all(a[1] == b[0] for a, b in zip(chunks[:-1], chunks[1:]))
        assert all(hi > lo for lo, hi in chunks)
    assert row_chunks(1024, 100) == [(0, 1024)]  # one chunk: its block is small
    assert len(row_chunks(4096, 20000)) >= 4096 * 20000 // (1 << 21)


@pytest.mark.parametrize("kernel", ["rbf", "polynomial"])
def test_two_threads_give_the_same_model_as_one(kernel):
    batches = [_mixture(s, 700, d=5, k=4).astype(np.float64) for s in range(4)]
    models = {}
    for n in (1, 2):
        with streamkm.num_threads(n):
            # gamma "median": the rbf support-row centers under test ("auto" may pick the
            # heat kernel's explicit centers on these well-separated clusters)
            model = MiniBatchKernelKMeans(4, kernel=kernel, gamma="median", tau=50, tol=0.0,
                                          n_init=1, random_state=0)
            models[n] = (model, [model.step(x) for x in batches])
    (m1, r1), (m2, r2) = models[1], models[2]
    for a, b in zip(r1, r2):
        np.testing.assert_array_equal(a.labels, b.labels)
        assert a.objective == b.objective
    np.testing.assert_array_equal(m1._centers.weights, m2._centers.weights)


def test_combine_rows():
    rng = np.random.default_rng(6)
    old, new = rng.normal(size=(5, 3)), rng.normal(size=(4, 3))
    source = np.array([4, 6, 0, 8, 1, 5], dtype=np.int64)
    out = nc.combine_rows(old, new, source, np.empty((6, 3)))
    np.testing.assert_array_equal(out, np.vstack([old, new])[source])


@pytest.mark.parametrize("params", [{}, {"kernel": "linear"}, {"drift": True}],
                         ids=["support", "explicit", "drift"])
def test_state_arrays_are_a_snapshot(params):
    # The store alternates between two buffers for its rows and Gram matrices, explicit
    # centers and counts_ are updated in place: what get_state handed out must not change
    # with later steps, and changing it must not change the model.
    model = MiniBatchKernelKMeans(3, tau=30, tol=0.0, n_init=1, random_state=0, **params)
    for s in range(3):
        model.step(_mixture(s, 120, k=3))
    arrays, _ = model.get_state()
    probe = _mixture(99, 200, k=3)
    before = model.transform(probe)
    for value in arrays.values():
        if value.dtype.kind in "fi" and value.size:
            value[...] = 0
    np.testing.assert_array_equal(model.transform(probe), before)
    arrays, _ = model.get_state()
    snapshot = {name: value.copy() for name, value in arrays.items()}
    for s in range(3, 7):
        model.step(_mixture(s, 120, k=3))
    for name, value in arrays.items():
        np.testing.assert_array_equal(value, snapshot[name], err_msg=name)
