"""Property tests (hypothesis) of the engine's invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from streamkm import MiniBatchKernelKMeans

pytestmark = pytest.mark.unit

KERNELS = st.sampled_from(["rbf", "laplacian", "polynomial", "cosine", "linear"])
finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def streams(draw):
    d = draw(st.integers(1, 4))
    k = draw(st.integers(1, 4))
    batches = draw(st.lists(
        arrays(np.float64, st.tuples(st.integers(k, 40), st.just(d)), elements=finite),
        min_size=1, max_size=5,
    ))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return k, [b.astype(dtype) for b in batches]


SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(streams(), KERNELS, st.sampled_from(["sqrt", "count"]), st.integers(1, 30))
def test_no_nan_in_state_and_predict_is_argmin_transform(stream, kernel, rate, tau):
    k, batches = stream
    model = MiniBatchKernelKMeans(k, kernel=kernel, learning_rate=rate, tau=tau, n_init=2,
                                  tol=0.0, random_state=0)
    for b in batches:
        report = model.step(b)
        assert np.all(np.isfinite(report.sq_distances))
    arrays_, meta = model.get_state()
    for name, arr in arrays_.items():
        if arr.dtype.kind == "f":
            assert np.all(np.isfinite(arr)), name
    probe = np.concatenate(batches)
    dist = model.transform(probe)
    assert np.all(np.isfinite(dist)) and np.all(dist >= 0)
    np.testing.assert_array_equal(model.predict(probe), np.argmin(dist, axis=1))
    assert model.counts_.sum() == sum(len(b) for b in batches)


@SETTINGS
@given(streams(), KERNELS, st.integers(0, 2**31 - 1))
def test_same_seed_same_result_and_state_round_trip(stream, kernel, seed):
    k, batches = stream
    first, rest = batches[0], batches[1:]
    a = MiniBatchKernelKMeans(k, kernel=kernel, n_init=2, tol=0.0, random_state=seed)
    b = MiniBatchKernelKMeans(k, kernel=kernel, n_init=2, tol=0.0, random_state=seed)
    a.partial_fit(first)
    b.partial_fit(first)
    restored = MiniBatchKernelKMeans.from_state(*a.get_state())
    for batch in rest:
        ra, rb, rr = a.step(batch), b.step(batch), restored.step(batch)
        np.testing.assert_array_equal(ra.labels, rb.labels)
        np.testing.assert_array_equal(ra.labels, rr.labels)
        np.testing.assert_array_equal(ra.sq_distances, rr.sq_distances)
    probe = np.concatenate(batches)
    np.testing.assert_array_equal(a.transform(probe), b.transform(probe))
    np.testing.assert_array_equal(a.transform(probe), restored.transform(probe))
