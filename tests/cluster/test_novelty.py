"""Novelty, outliers and assignment confidence in MiniBatchKernelKMeans: the score and the
flag in step reports, the exclude / learn policies, -1 labels, second-nearest clusters and
margins, float32, parameters, the state round trip, drift and the River adapter."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans, ParameterError
from streamkm.cluster._novelty import MIN_MEMBERS, NEIGHBOURS, SCALE_ROWS, NoveltyBuffers

pytestmark = pytest.mark.unit

MEANS = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 6.0, 0.0]])


def _inliers(n, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return (MEANS[rng.integers(3, size=n)] + rng.normal(size=(n, 3))).astype(dtype)


def _warm(model, n_batches=4, seed=0, dtype=np.float64):
    for i in range(n_batches):
        model.step(_inliers(600, seed=seed + i, dtype=dtype))
    return model


def _with_far_rows(seed=10, n_far=6, dtype=np.float64):
    x = _inliers(600, seed=seed, dtype=dtype)
    x[:n_far] = np.array([30.0, 30.0, 30.0]) + np.arange(n_far)[:, None]
    return x


def _support_scores_reference(model, x, m=NEIGHBOURS):
    """Base score of each row of x by plain numpy (rbf): the mean squared feature distance
    2 - 2 exp(-gamma |x - s|^2) to its m nearest support rows of its two nearest centers."""
    centers = model._centers
    gamma = float(model._kernel_spec.gamma)
    kernel = np.exp(-gamma * ((x[:, None, :] - centers.rows[None, :, :]) ** 2).sum(-1))
    feature = np.maximum(2.0 - 2.0 * kernel, 0.0)
    order = np.argsort(model.transform(x), axis=1, kind="stable")
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        cols = np.concatenate([np.arange(centers.offsets[j], centers.offsets[j + 1])
                               for j in order[i, :2]])
        out[i] = np.sort(feature[i, cols])[:m].mean()
    return out


def _pool(buffers):
    return np.concatenate([buffers.ordered[j, :buffers.sizes[j]]
                           for j in range(buffers.sizes.shape[0])])


def _exact_where_unambiguous(novelty, pool, scores):
    """``novelty`` and the conformal p-values of the reference ``scores`` against ``pool``,
    on the rows whose score is not within rounding of a pool value (there the engine's
    and numpy's last bits decide the count)."""
    pool = np.sort(pool)
    rank = np.searchsorted(pool, scores, side="left")
    near = np.zeros(scores.shape[0], dtype=bool)
    for shift in (-1, 0):
        at = np.clip(rank + shift, 0, pool.shape[0] - 1)
        near |= np.isclose(pool[at], scores, rtol=1e-9, atol=0.0)
    assert near.mean() < 0.05
    expected = (1 + pool.shape[0] - rank) / (pool.shape[0] + 1)
    return novelty[~near], expected[~near]


def test_novelty_is_a_conformal_pvalue_of_the_support_score_against_the_pooled_buffers():
    # outliers="learn": the far rows are flagged yet learnt as every other row
    model = _warm(MiniBatchKernelKMeans(3, random_state=0, novelty_window=64,
                                        outlier_alpha=0.02, outliers="learn"))
    pool = _pool(model._novelty_scores)
    x = _with_far_rows()
    scores = _support_scores_reference(model, x)
    report = model.step(x)
    assert report.novelty.dtype == np.float64 and report.novelty.shape == (600,)
    for j in range(3):  # each cluster's buffer holds its newest 64 scores of the batch
        mine = scores[report.labels == j][-64:]
        held = model._novelty_scores.ordered[j, :64]
        np.testing.assert_allclose(held, np.sort(mine), rtol=1e-9)
    np.testing.assert_array_equal(*_exact_where_unambiguous(report.novelty, pool, scores))
    assert (report.novelty[:6] == 1 / (3 * 64 + 1)).all()  # beyond every recent score
    assert report.outliers[:6].all()
    assert model._novelty.sizes.tolist() == [64, 64, 64]  # the batch entered both sets
    assert model._novelty_scores.sizes.tolist() == [64, 64, 64]


def test_score_samples_matches_the_numpy_reference_and_learns_nothing():
    model = _warm(MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=0.01))
    x = _with_far_rows(seed=12)
    pool = np.sort(_pool(model._novelty_scores))
    state = model.get_state()[0]
    novelty = model.score_samples(x)
    scores = _support_scores_reference(model, x)
    np.testing.assert_array_equal(*_exact_where_unambiguous(novelty, pool, scores))
    assert (novelty[:6] == 1 / (pool.shape[0] + 1)).all()
    for key, value in model.get_state()[0].items():
        np.testing.assert_array_equal(value, state[key])


def test_with_the_linear_kernel_the_score_is_the_distance_against_the_clusters_own_members():
    model = _warm(MiniBatchKernelKMeans(3, kernel="linear", random_state=0))
    buffers = model._novelty_buffers()
    held = [np.sort(buffers.ring[j, :buffers.sizes[j]]) for j in range(3)]
    assert min(h.shape[0] for h in held) >= MIN_MEMBERS
    report = model.step(_with_far_rows())
    reference = np.array([(1 + (held[j] >= float(d)).sum()) / (held[j].shape[0] + 1)
                          for j, d in zip(report.labels, report.sq_distances)])
    np.testing.assert_array_equal(report.novelty, reference)


def test_a_new_model_gives_one_until_its_clusters_have_enough_members():
    model = MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=0.2)
    report = model.step(_inliers(3 * MIN_MEMBERS - 3))
    assert (report.novelty == 1.0).all() and not report.outliers.any()
    assert (model.score_samples(_inliers(50, seed=1)) <= 1.0).all()


def test_flagged_rows_do_not_move_centers_with_exclude_and_do_with_learn():
    base = _warm(MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=0.01))
    arrays, meta = base.get_state()
    exclude = MiniBatchKernelKMeans.from_state(arrays, meta)
    learn = MiniBatchKernelKMeans.from_state(arrays, meta).set_params(outliers="learn")
    x = _with_far_rows()
    report = exclude.step(x)
    assert report.outliers[:6].all()
    flagged = report.outliers
    np.testing.assert_array_equal(learn.step(x).outliers, flagged)
    # the excluded model moved exactly as if the flagged rows had not been in the batch
    without = MiniBatchKernelKMeans.from_state(arrays, meta)
    without.step(x[~flagged])
    probe = _inliers(300, seed=99)
    np.testing.assert_allclose(exclude.transform(probe), without.transform(probe), rtol=1e-9)
    assert not np.allclose(learn.transform(probe), exclude.transform(probe))
    support = exclude._centers.rows
    assert not (support[:, None, :] == x[flagged][None, :, :]).all(axis=2).any()
    # every assigned row is counted and enters its cluster's buffer, flagged or not
    assert exclude.counts_.sum() == learn.counts_.sum() == base.counts_.sum() + 600
    assert exclude._novelty.ordered.max() == pytest.approx(report.sq_distances.max())


def test_exclude_with_explicit_centers_leaves_flagged_rows_out_of_the_means():
    base = _warm(MiniBatchKernelKMeans(3, kernel="linear", random_state=0, outlier_alpha=0.01))
    arrays, meta = base.get_state()
    exclude = MiniBatchKernelKMeans.from_state(arrays, meta)
    x = _with_far_rows()
    flagged = exclude.step(x).outliers
    assert flagged[:6].all()
    without = MiniBatchKernelKMeans.from_state(arrays, meta)
    without.step(x[~flagged])
    np.testing.assert_allclose(exclude.cluster_centers_, without.cluster_centers_, rtol=1e-12)


def test_a_batch_of_only_flagged_rows_leaves_the_centers_as_they_were():
    model = _warm(MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=0.05))
    probe = _inliers(200, seed=5)
    before = model.transform(probe)
    far = np.array([40.0, 40.0, 40.0]) + np.random.default_rng(0).normal(size=(30, 3))
    report = model.step(far)
    assert report.outliers.all() and report.updated
    np.testing.assert_allclose(model.transform(probe), before, rtol=1e-12)


def test_without_outlier_alpha_and_with_learn_the_model_learns_identically():
    plain = _warm(MiniBatchKernelKMeans(3, random_state=0), n_batches=6)
    learn = _warm(MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=0.05,
                                        outliers="learn"), n_batches=6)
    a1, _ = plain.get_state()
    a2, _ = learn.get_state()
    for key in a1:  # the base scores of support rows are kept only with outlier_alpha
        if not key.startswith("novelty_score_"):
            np.testing.assert_array_equal(a1[key], a2[key])


def test_without_outlier_alpha_novelty_is_the_distance_against_the_clusters_own_members():
    model = _warm(MiniBatchKernelKMeans(3, random_state=0, novelty_window=64))
    buffers = model._novelty
    x = _with_far_rows()
    distances = model.transform(x)
    labels = distances.argmin(axis=1)
    nearest = distances[np.arange(x.shape[0]), labels]
    expected = np.array([(1 + (buffers.ordered[j, :buffers.sizes[j]] >= d).sum())
                         / (buffers.sizes[j] + 1) for j, d in zip(labels, nearest)])
    np.testing.assert_allclose(model.score_samples(x), expected, rtol=0, atol=1e-12)
    report = model.step(x)
    assert not report.outliers.any()  # outlier_alpha=None flags nothing
    assert (report.novelty[:6] == 1 / 65).all()  # farther than each cluster's 64 members
    assert model._novelty_scores.sizes.sum() == 0


def test_label_outliers_gives_minus_one_for_flagged_rows_only_when_asked():
    model = _warm(MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=0.01,
                                        label_outliers=True))
    x = _with_far_rows()
    expected_flags = model.score_samples(x) <= 0.01
    assert expected_flags[:6].all()
    labels = model.predict(x)
    assert (labels[expected_flags] == -1).all() and (labels[~expected_flags] >= 0).all()
    model.partial_fit(x)
    assert (model.labels_[:6] == -1).all()
    model.set_params(label_outliers=False)
    assert (model.predict(x) >= 0).all()
    model.set_params(label_outliers=True, outlier_alpha=None)
    assert (model.predict(x) >= 0).all()


def test_partial_fit_labels_mark_the_step_reports_outliers():
    model = _warm(MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=0.01,
                                        label_outliers=True))
    twin = MiniBatchKernelKMeans.from_state(*model.get_state())
    x = _with_far_rows()
    report = twin.step(x)
    model.partial_fit(x)
    np.testing.assert_array_equal(model.labels_, np.where(report.outliers, -1, report.labels))
    assert report.labels.min() >= 0  # the report keeps every row's cluster


def test_fit_labels_mark_outliers_when_asked():
    x = np.vstack([_inliers(3000), [[50.0, 50.0, 50.0]]])
    model = MiniBatchKernelKMeans(3, random_state=0, batch_size=512, outlier_alpha=0.005,
                                  label_outliers=True).fit(x)
    assert model.labels_[-1] == -1 and (model.labels_ == -1).mean() < 0.02


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_second_labels_and_margins_match_brute_force(kernel, dtype):
    model = _warm(MiniBatchKernelKMeans(3, kernel=kernel, random_state=0), dtype=dtype)
    x = _inliers(400, seed=20, dtype=dtype)
    distances = model.transform(x).astype(np.float64)
    report = model.step(x)
    order = np.argsort(distances, axis=1, kind="stable")
    np.testing.assert_array_equal(report.labels, order[:, 0])
    np.testing.assert_array_equal(report.second_labels, order[:, 1])
    np.testing.assert_array_equal(report.second_cluster_ids, order[:, 1])
    rows = np.arange(400)
    expected = distances[rows, order[:, 1]] - distances[rows, order[:, 0]]
    tol = 1e-3 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(report.margins, expected, rtol=tol, atol=tol)
    assert (report.margins >= 0).all()
    assert report.margins.dtype == dtype and report.sq_distances.dtype == dtype
    assert report.novelty.dtype == np.float64
    assert model.score_samples(x).dtype == np.float64


def test_one_cluster_has_no_second():
    model = MiniBatchKernelKMeans(1, random_state=0)
    report = model.step(_inliers(100))
    assert (report.second_labels == -1).all() and (report.second_cluster_ids == -1).all()
    assert np.isinf(report.margins).all()


@pytest.mark.parametrize("params, shown", [
    ({"outlier_alpha": 1.5}, "1.5"), ({"outlier_alpha": 0.0}, "0.0"),
    ({"outlier_alpha": "low"}, "'low'"), ({"outliers": "drop"}, "'drop'"),
    ({"novelty_window": 0}, "0"), ({"label_outliers": "yes"}, "'yes'"),
])
def test_bad_novelty_parameters_are_refused_naming_the_value(params, shown):
    (name,) = params
    with pytest.raises(ParameterError, match=f"'{name}'.*Got {shown} instead"):
        MiniBatchKernelKMeans(3, **params).partial_fit(_inliers(100))


def test_novelty_window_cannot_change_while_the_model_learns():
    model = _warm(MiniBatchKernelKMeans(3, random_state=0), n_batches=1)
    model.set_params(novelty_window=32)
    with pytest.raises(ParameterError, match="novelty_window"):
        model.step(_inliers(100))


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_state_round_trip_keeps_the_buffers_bit_identically(tmp_path, kernel):
    model = _warm(MiniBatchKernelKMeans(3, kernel=kernel, random_state=0, outlier_alpha=0.02))
    path = tmp_path / "model.npz"
    model.save(path)
    restored = MiniBatchKernelKMeans.load(path)
    for seed in (30, 31, 32):
        x = _with_far_rows(seed=seed)
        r1, r2 = model.step(x), restored.step(x)
        for field in ("labels", "sq_distances", "novelty", "outliers", "second_labels",
                      "second_cluster_ids", "margins"):
            np.testing.assert_array_equal(getattr(r1, field), getattr(r2, field))
    a1, m1 = model.get_state()
    a2, m2 = restored.get_state()
    assert m1 == m2 and a1.keys() == a2.keys()
    for key in a1:
        np.testing.assert_array_equal(a1[key], a2[key])


def test_a_state_written_without_buffers_loads_with_empty_ones():
    model = _warm(MiniBatchKernelKMeans(3, random_state=0))
    arrays, meta = model.get_state()
    arrays = {k: v for k, v in arrays.items() if not k.startswith("novelty_")}
    meta = {k: v for k, v in meta.items() if not k.startswith("novelty")}
    meta["params"] = {k: v for k, v in meta["params"].items()
                      if k not in ("outlier_alpha", "outliers", "novelty_window",
                                   "label_outliers")}
    restored = MiniBatchKernelKMeans.from_state(arrays, meta)
    x = _inliers(300, seed=40)
    assert (restored.score_samples(x) == 1.0).all()
    np.testing.assert_array_equal(restored.predict(x), model.predict(x))
    restored.step(x)
    assert restored._novelty.sizes.sum() == 300
    assert restored._novelty_scores.sizes.sum() == 0  # base scores only with outlier_alpha


def _pooled_reference(pool, distances):
    """Conformal p-value of each distance against the 1-D pool, counted plainly."""
    pool = np.asarray(pool, dtype=np.float64)
    return np.array([(1 + (pool >= float(d)).sum()) / (pool.shape[0] + 1) for d in distances])


def _buffers_with_a_warming_cluster(window=64, seed=0):
    """Clusters 0 and 1 calibrated (window and 30 values), cluster 2 warming up (5)."""
    rng = np.random.default_rng(seed)
    buffers = NoveltyBuffers.empty(window, np.array([0, 1, 2]))
    labels = np.repeat([0, 1, 2], [window + 10, 30, 5])
    scale = np.array([1.0, 4.0, 2.0])[labels]
    buffers.push(labels, scale * rng.chisquare(3, size=labels.shape[0]))
    return buffers


def test_a_warming_cluster_scores_against_the_pooled_buffers_of_all_clusters():
    buffers = _buffers_with_a_warming_cluster()
    assert buffers.sizes.tolist() == [64, 30, 5]
    pool = np.concatenate([buffers.ordered[j, :buffers.sizes[j]] for j in range(3)])
    labels = np.array([2, 2, 2, 2, 0, 1, 2])
    d = np.array([0.0, 3.0, 11.5, 1e6, 3.0, 3.0, float(pool[7])])
    novelty = buffers.pvalues(labels, d)
    warming = labels == 2
    np.testing.assert_array_equal(novelty[warming], _pooled_reference(pool, d[warming]))
    assert novelty[3] == 1 / (pool.shape[0] + 1)  # farther than every member of every cluster
    for i in (4, 5):  # calibrated clusters keep their own buffers
        own = buffers.ordered[labels[i], :buffers.sizes[labels[i]]]
        assert novelty[i] == _pooled_reference(own, d[i:i + 1])[0]


def test_every_record_scores_one_while_the_whole_model_holds_too_few_members():
    buffers = NoveltyBuffers.empty(64, np.array([0, 1, 2]))
    buffers.push(np.repeat([0, 1, 2], [8, 6, MIN_MEMBERS - 15]), np.arange(MIN_MEMBERS - 1.0))
    d = np.array([0.0, 5.0, 1e6])
    assert (buffers.pvalues(np.array([0, 1, 2]), d) == 1.0).all()
    buffers.push(np.array([1]), np.array([2.5]))  # the pool reaches MIN_MEMBERS
    assert buffers.pvalues(np.array([2]), d[2:]) == 1 / (MIN_MEMBERS + 1)


def test_pooled_scores_survive_a_state_round_trip_bit_identically():
    buffers = _buffers_with_a_warming_cluster(seed=3)
    arrays, meta = buffers.to_state()
    restored = NoveltyBuffers.from_state(arrays, meta)
    labels = np.array([0, 1, 2, 2, 2])
    d = np.array([0.5, 2.0, 4.0, 9.0, 40.0])
    assert buffers.pvalues(labels, d).tobytes() == restored.pvalues(labels, d).tobytes()
    again, meta_again = restored.to_state()
    assert meta_again == meta
    for key in arrays:
        assert arrays[key].tobytes() == again[key].tobytes()


def test_buffers_follow_stable_ids_and_rebuilt_clusters_start_empty():
    buffers = NoveltyBuffers.empty(8, np.array([0, 1, 2]))
    buffers.push(np.array([0, 0, 1, 2, 2, 2]), np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
    buffers.align(np.array([2, 0, 5]))  # cluster 1 merged away, new cluster 5
    assert buffers.sizes.tolist() == [3, 2, 0]
    np.testing.assert_array_equal(buffers.ordered[0, :3], [4.0, 5.0, 6.0])
    buffers.forget_rebuilt([{"event": "split", "into": [2, 7]}, {"event": "converged"}])
    assert buffers.sizes.tolist() == [0, 2, 0]
    buffers.forget_rebuilt([{"event": "kernel_refreshed"}])
    assert buffers.sizes.tolist() == [0, 0, 0]


def test_a_drift_split_empties_both_halves_buffers_and_keeps_the_others():
    from tests.drift.test_drift_engine import CHANGE, drifting_batches

    # without outlier_alpha: with it, the cluster's new mode is born as a cluster of its
    # own instead (tests/drift/test_birth.py)
    model = MiniBatchKernelKMeans(3, random_state=0, drift=True)
    for x, _ in drifting_batches(0, CHANGE + 20):
        report = model.step(x)
        split = [e for e in report.events if e["event"] == "split"]
        if split:
            break
    else:
        pytest.fail("the drifting stream was not split")
    ids = model.cluster_ids_
    sizes = dict(zip(model._novelty.ids.tolist(), model._novelty.sizes.tolist()))
    assert sizes[split[0]["into"][0]] == 0
    assert sizes.get(split[0]["into"][1], 0) == 0
    others = [c for c in ids.tolist() if c not in split[0]["into"]]
    assert others and all(sizes[c] > 0 for c in others)
    report = model.step(drifting_batches(1, CHANGE + 1)[-1][0])
    new_rows = np.isin(report.cluster_ids, split[0]["into"])
    assert new_rows.any() and (report.novelty[new_rows] < 1.0).any()  # the pool scores them


def test_a_kernel_refit_refills_every_buffer_from_the_reservoir_in_the_new_space():
    model = MiniBatchKernelKMeans(3, kernel="anchor", random_state=0, outlier_alpha=0.01)
    for seed in range(8):
        report = model.step(_inliers(1024, seed=seed))
        if any(e["event"] == "kernel_refreshed" for e in report.events):
            break
    else:
        pytest.fail("the anchor kernel was never refitted")
    recent = model._reservoir.rows[-256 * 3:]
    distances = model.transform(recent)
    labels = np.argmin(distances, axis=1)
    for j in range(3):  # each cluster's buffer: its newest reservoir members' distances now
        members = distances[labels == j, j]
        held = model._novelty.ordered[j, :model._novelty.sizes[j]]
        np.testing.assert_allclose(np.sort(held), np.sort(members[-256:]), rtol=1e-6, atol=1e-9)
    after = model.step(_inliers(1024, seed=20))
    assert (after.novelty < 1.0).mean() > 0.9  # scored against the refilled buffers at once


def _rotation(theta):
    c, s_ = np.cos(theta), np.sin(theta)
    return np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]])


def _leave_one_out_reference(model):
    """Plain numpy (rbf): the base score of each support row among the newest
    ``SCALE_ROWS / k`` of its center, against the supports of its own and its next-nearest
    center but itself."""
    centers = model._centers
    gamma = float(model._kernel_spec.gamma)
    feature = np.maximum(2.0 - 2.0 * np.exp(-gamma * (
        (centers.rows[:, None, :] - centers.rows[None, :, :]) ** 2).sum(-1)), 0.0)
    d = model.transform(centers.rows)
    k = centers.n_clusters
    per_center = min(256, SCALE_ROWS // k)
    out = []
    for j in range(k):
        for i in range(max(centers.offsets[j], centers.offsets[j + 1] - per_center),
                       centers.offsets[j + 1]):
            second = min((c for c in range(k) if c != j), key=lambda c: d[i, c])
            cols = [t for c in (j, second)
                    for t in range(centers.offsets[c], centers.offsets[c + 1]) if t != i]
            out.append(np.sort(feature[i, cols])[:NEIGHBOURS].mean())
    return np.array(out)


@pytest.mark.parametrize("policy", ["exclude", "learn"])
@pytest.mark.parametrize("sketch", ["rotated_and_stretched", "random_linear"])
def test_a_resketch_keeps_the_flag_rate_calibrated_from_the_next_batch_on(policy, sketch):
    """The pool is rescaled by the change of the supports' typical base score: records
    already seen, outliers among them, keep their place in it, and the batch right after the
    re-sketch is flagged at about ``outlier_alpha`` (not at 0, as against an empty pool, nor
    at twice it, as against the supports alone, which ``exclude`` keeps free of outliers)."""
    alpha = 0.1
    maps = {"rotated_and_stretched": _rotation(0.7) * 1.5,
            "random_linear": np.random.default_rng(5).normal(size=(3, 3)) / np.sqrt(3)}
    m = maps[sketch]
    model = MiniBatchKernelKMeans(3, random_state=0, outlier_alpha=alpha, tau=100,
                                  outliers=policy)
    for i in range(12):
        x = _inliers(300, seed=i)
        model.step(x, raw=x)
    pool_before, old = _pool(model._novelty_scores), np.median(_leave_one_out_reference(model))
    model.resketch(lambda raw: np.asarray(raw) @ m.T)
    factor = np.median(_leave_one_out_reference(model)) / old
    np.testing.assert_allclose(_pool(model._novelty_scores), pool_before * factor, rtol=1e-6)
    flagged = [model.step(_inliers(300, seed=i) @ m.T, raw=_inliers(300, seed=i)).outliers.mean()
               for i in range(12, 20)]
    assert alpha / 2 <= flagged[0] <= 2 * alpha, flagged
    assert alpha / 2 <= np.mean(flagged) <= 2 * alpha, flagged


def test_a_resketch_of_explicit_centers_scales_their_buffers_with_the_centers_gaps():
    """The linear kernel keeps no support rows: its buffers of center distances scale as the
    mean squared distance between centers does (a stretch by 1.5 multiplies both by 2.25),
    and the batch after the re-sketch is flagged at about ``outlier_alpha``."""
    alpha = 0.1
    model = MiniBatchKernelKMeans(3, kernel="linear", random_state=0, outlier_alpha=alpha)
    for i in range(12):
        x = _inliers(300, seed=i)
        model.step(x, raw=x)
    before = _pool(model._novelty)
    stretch = _rotation(0.7) * 1.5
    model.resketch(lambda raw: np.asarray(raw) @ stretch.T)
    np.testing.assert_allclose(_pool(model._novelty), before * 2.25, rtol=1e-9)
    flagged = [model.step(_inliers(300, seed=i) @ stretch.T,
                          raw=_inliers(300, seed=i)).outliers.mean() for i in range(12, 20)]
    assert alpha / 2 <= flagged[0] <= 2 * alpha, flagged
    assert alpha / 2 <= np.mean(flagged) <= 2 * alpha, flagged


@pytest.mark.parametrize("kernel", ["linear", "anchor"])
def test_explicit_centers_keep_their_members_distances_to_the_centers_as_updated(kernel):
    """With explicit centers a cluster's buffer holds its newest members' distances to the
    center the next batch is scored against (as the step's update left it), so a center's
    move between steps does not shift the whole batch against its buffer."""
    model = MiniBatchKernelKMeans(3, kernel=kernel, random_state=0, tol=0.0)
    for i in range(3):
        model.step(_inliers(600, seed=i))
    x = _inliers(600, seed=3)
    report = model.step(x)
    assert report.updated
    now = model.transform(x)[np.arange(600), report.labels]
    for j in range(3):
        members = now[report.labels == j][-256:]
        held = model._novelty.ordered[j, :model._novelty.sizes[j]]
        gaps = np.abs(members[:, None] - held[None, :]).min(axis=1)
        assert gaps.max() <= 1e-6 * max(1.0, float(members.max())), gaps.max()
    assert not np.allclose(now, report.sq_distances)  # the centers moved in this step


def test_an_outlier_level_no_record_could_reach_is_refused_naming_both_values():
    """The smallest novelty against a buffer of ``novelty_window`` distances is
    1 / (novelty_window + 1): a lower ``outlier_alpha`` would silently flag nothing."""
    X = np.random.default_rng(0).normal(size=(200, 2))
    with pytest.raises(ParameterError, match=r"outlier_alpha=0\.001 .*novelty_window=256.*at least 999"):
        MiniBatchKernelKMeans(2, outlier_alpha=0.001).fit(X)
    MiniBatchKernelKMeans(2, outlier_alpha=1 / 1000, novelty_window=999, random_state=0).fit(X)
    MiniBatchKernelKMeans(2, outlier_alpha=1 / 257, random_state=0).fit(X)
