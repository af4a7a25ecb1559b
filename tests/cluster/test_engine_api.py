"""The estimator contract of MiniBatchKernelKMeans: parameters, validation, inference, state."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm import (
    MiniBatchKernelKMeans,
    NotFittedError,
    ParameterError,
    StateError,
    StreamkmError,
    ValidationError,
)

pytestmark = pytest.mark.unit


def _blobs(n=600, d=3, k=3, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    means = np.array([[0, 0, 0], [6, 0, 0], [0, 6, 0]], dtype=float)[:k, :d]
    lab = rng.integers(k, size=n)
    return (means[lab] + rng.normal(size=(n, d))).astype(dtype), lab


@pytest.mark.parametrize(
    "params, name",
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"kernel": "sigmoid"}, "kernel"),
        ({"gamma": -1.0}, "gamma"),
        ({"batch_size": 0}, "batch_size"),
        ({"tau": 0}, "tau"),
        ({"learning_rate": "fast"}, "learning_rate"),
        ({"tol": -0.1}, "tol"),
        ({"patience": 0}, "patience"),
        ({"init": "random"}, "init"),
        ({"n_init": 0}, "n_init"),
        ({"smoothing": 0.0}, "smoothing"),
        ({"random_state": "seven"}, "random_state"),
    ],
)
def test_bad_parameters_name_the_parameter_and_value(params, name):
    x, _ = _blobs()
    kwargs = {"n_clusters": 3, **params}
    with pytest.raises(ParameterError) as info:
        MiniBatchKernelKMeans(**kwargs).fit(x)
    assert name in str(info.value)
    assert repr(params[name]) in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, StreamkmError)


def test_bad_input_is_rejected_with_the_value():
    x, _ = _blobs()
    bad = x.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValidationError, match=r"nan.*row 5, column 1"):
        MiniBatchKernelKMeans(3).partial_fit(bad)
    bad[5, 1] = np.inf
    with pytest.raises(ValidationError, match="inf"):
        MiniBatchKernelKMeans(3).fit(bad)
    with pytest.raises(ValidationError, match=r"2-D"):
        MiniBatchKernelKMeans(3).fit(x[:, 0])
    with pytest.raises(ValidationError, match=r"n_samples=2 should be >= n_clusters=3"):
        MiniBatchKernelKMeans(3).partial_fit(x[:2])
    with pytest.raises(ValidationError, match="could not convert string to float: 'a'"):
        MiniBatchKernelKMeans(3).fit([["a", "b"], ["c", "d"]])
    model = MiniBatchKernelKMeans(3, random_state=0).partial_fit(x)
    with pytest.raises(ValidationError,
                       match="X has 2 features, but MiniBatchKernelKMeans is expecting 3"):
        model.partial_fit(x[:, :2])
    with pytest.raises(ValidationError, match="has 4 features"):
        model.predict(np.hstack([x, x[:, :1]]))


def test_use_before_fit_raises_not_fitted():
    model = MiniBatchKernelKMeans(3)
    for call in (lambda: model.predict([[0.0, 1.0]]), lambda: model.transform([[0.0, 1.0]]),
                 lambda: model.get_state(), lambda: model.converged_):
        with pytest.raises(NotFittedError):
            call()
    assert not hasattr(model, "counts_")


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "polynomial", "cosine", "linear"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inference_contract(kernel, dtype):
    x, y = _blobs(dtype=dtype)
    # the median width keeps rbf and laplacian themselves ("auto" may choose a graph kernel)
    gamma = "median" if kernel in ("rbf", "laplacian") else "auto"
    model = MiniBatchKernelKMeans(3, kernel=kernel, gamma=gamma, batch_size=200, random_state=0)
    labels = model.fit_predict(x)
    dist = model.transform(x)
    assert dist.shape == (len(x), 3) and dist.dtype == dtype
    assert np.all(dist >= 0)
    np.testing.assert_array_equal(labels, np.argmin(dist, axis=1))
    assert labels.dtype == np.int64
    assert model.score(x) == pytest.approx(-dist.min(1).astype(np.float64).mean(), rel=1e-6)
    assert model.n_features_in_ == 3
    assert model.counts_.sum() == model.n_steps_ * 200
    assert model.gamma_ is None if kernel in ("cosine", "linear") else model.gamma_ > 0
    if kernel == "linear":
        assert model.cluster_centers_.shape == (3, 3)
        assert model.cluster_centers_.dtype == dtype
    else:
        with pytest.raises(AttributeError, match="only for kernels with explicit features"):
            model.cluster_centers_
    # float64 input to a float32 model is cast, not refused.
    assert model.predict(x.astype(np.float64)).shape == (len(x),)


def test_blobs_are_recovered_by_every_kernel():
    from sklearn.metrics import adjusted_rand_score

    x, y = _blobs(n=900)
    for kernel in ["rbf", "laplacian", "linear"]:
        model = MiniBatchKernelKMeans(3, kernel=kernel, batch_size=300, random_state=1).fit(x)
        assert adjusted_rand_score(y, model.predict(x)) > 0.9, kernel


def test_partial_fit_counts_every_row_exactly_once():
    x, _ = _blobs(n=1000)
    model = MiniBatchKernelKMeans(3, random_state=0)
    for chunk in np.array_split(x, 7):
        report = model.step(chunk)
        assert report.step == model.n_steps_
        assert report.labels.shape == (len(chunk),)
        assert report.sq_distances.shape == (len(chunk),)
    assert model.counts_.sum() == 1000
    assert model.n_steps_ == 7


def test_same_random_state_gives_identical_results():
    x, _ = _blobs()
    a = MiniBatchKernelKMeans(3, batch_size=100, random_state=7).fit(x)
    b = MiniBatchKernelKMeans(3, batch_size=100, random_state=7).fit(x)
    np.testing.assert_array_equal(a.transform(x), b.transform(x))
    assert a.n_steps_ == b.n_steps_


def test_get_params_and_set_params_follow_the_estimator_contract():
    model = MiniBatchKernelKMeans(4, kernel="laplacian", tau=50)
    params = model.get_params()
    assert params["n_clusters"] == 4 and params["tau"] == 50 and params["kernel"] == "laplacian"
    clone = MiniBatchKernelKMeans(**params)
    assert clone.get_params() == params
    model.set_params(tau=80)
    assert model.tau == 80
    with pytest.raises(ParameterError, match="'taux'"):
        model.set_params(taux=1)
    assert "tau=80" in repr(model)


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_state_round_trip_predicts_and_trains_bit_identically(tmp_path, kernel, dtype):
    x, _ = _blobs(n=1200, dtype=dtype)
    model = MiniBatchKernelKMeans(3, kernel=kernel, tau=60, tol=0.0, max_iter=20, random_state=3)
    for chunk in np.array_split(x[:600], 4):
        model.partial_fit(chunk)
    path = tmp_path / "model.npz"
    model.save(path)
    restored = MiniBatchKernelKMeans.load(path)
    np.testing.assert_array_equal(restored.transform(x), model.transform(x))
    for chunk in np.array_split(x[600:], 4):
        r1 = model.step(chunk)
        r2 = restored.step(chunk)
        np.testing.assert_array_equal(r1.labels, r2.labels)
        np.testing.assert_array_equal(r1.sq_distances, r2.sq_distances)
        assert r1.objective == r2.objective and r1.improvement == r2.improvement
    a1, m1 = model.get_state()
    a2, m2 = restored.get_state()
    assert m1 == m2
    assert a1.keys() == a2.keys()
    for key in a1:
        np.testing.assert_array_equal(a1[key], a2[key])
    # Refitting draws from the saved generator state: identical too.
    np.testing.assert_array_equal(restored.fit(x).transform(x), model.fit(x).transform(x))


def test_corrupt_state_file_is_refused(tmp_path):
    x, _ = _blobs()
    model = MiniBatchKernelKMeans(3, random_state=0).partial_fit(x)
    path = tmp_path / "m.npz"
    model.save(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(StateError):
        MiniBatchKernelKMeans.load(path)
    arrays, meta = model.get_state()
    with pytest.raises(StateError, match="format_version=99"):
        MiniBatchKernelKMeans.from_state(arrays, {**meta, "format_version": 99})
    with pytest.raises(StateError, match="counts"):
        MiniBatchKernelKMeans.from_state({**arrays, "counts": np.zeros(5, np.int64)}, meta)


def test_monitor_converges_then_wakes_when_the_stream_changes():
    rng = np.random.default_rng(0)
    means = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    model = MiniBatchKernelKMeans(3, kernel="linear", tol=0.05, patience=3, wake_margin=0.2,
                                  random_state=0)
    events = []
    for _ in range(30):
        lab = rng.integers(3, size=300)
        events += [e["event"] for e in model.step(means[lab] + rng.normal(size=(300, 2))).events]
    assert model.converged_ and "converged" in events
    frozen = model.cluster_centers_.copy()
    step = model.step(means[rng.integers(3, size=300)] + rng.normal(size=(300, 2)))
    assert not step.updated and step.improvement is None
    np.testing.assert_array_equal(model.cluster_centers_, frozen)
    # The stream moves: one mode jumps far away; the objective rises and the model wakes.
    shifted = means + np.array([[0.0, 0.0], [0.0, 0.0], [30.0, 30.0]])
    woke_at = None
    for i in range(20):
        lab = rng.integers(3, size=300)
        report = model.step(shifted[lab] + rng.normal(size=(300, 2)))
        if any(e["event"] == "woke" for e in report.events):
            woke_at = i
            break
    assert woke_at is not None and woke_at < 10
    assert not model.converged_ and model.n_woke_ == 1 and model.n_converged_ >= 1
    model.step(shifted[rng.integers(3, size=300)] + rng.normal(size=(300, 2)))
    assert not np.array_equal(model.cluster_centers_, frozen)


def test_fit_stops_early_when_converged():
    x, _ = _blobs(n=3000)
    model = MiniBatchKernelKMeans(3, batch_size=256, tol=0.05, patience=2, max_iter=500,
                                  random_state=0).fit(x)
    assert model.converged_ and model.n_steps_ < 500
    capped = MiniBatchKernelKMeans(3, batch_size=256, tol=0.0, max_iter=7, random_state=0).fit(x)
    assert not capped.converged_ and capped.n_steps_ == 7


def test_farthest_traversal_init_picks_far_rows_and_recovers_blobs():
    from sklearn.metrics import adjusted_rand_score

    from streamkm.cluster._seeding import kernel_farthest_traversal
    from streamkm.kernels import KernelSpec

    line = np.array([[0.0], [1.0], [2.0], [10.0], [11.0]])
    seeds = kernel_farthest_traversal(line, 2, KernelSpec("linear"), np.random.default_rng(0))
    # Whatever the first seed, the second is the farthest row from it: an end of the line.
    assert {int(seeds[1])} <= {0, 4} and seeds[0] != seeds[1]
    x, y = _blobs(n=900)
    model = MiniBatchKernelKMeans(3, init="farthest", batch_size=300, random_state=2).fit(x)
    assert adjusted_rand_score(y, model.predict(x)) > 0.9
