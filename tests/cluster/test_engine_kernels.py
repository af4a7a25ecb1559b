"""Each numba kernel of the engine against a plain-numpy reference, float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm._numba import centers as nc
from streamkm._numba import kernels as nk
from streamkm._numba.fastexp import exp_nonpositive
from streamkm.kernels import KernelSpec, median_heuristic_gamma, pairwise_kernel

pytestmark = pytest.mark.unit

DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 2e-5, np.float64: 1e-12}


def _data(dtype, n=37, m=23, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(dtype), rng.normal(size=(m, d)).astype(dtype)


def _sqdist(x, y):
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)


# The bounds stated in streamkm/_numba/fastexp.py: maximum relative error against numpy's
# float64 exp of the same (float32 or float64) argument, and the smallest result produced.
EXP_MAX_REL_ERROR = {np.float32: 3e-7, np.float64: 4e-16}
EXP_SMALLEST = {np.float32: 1.7e-38, np.float64: 3.4e-308}


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_nonpositive_matches_numpy(dtype):
    rng = np.random.default_rng(1)
    values = np.concatenate([-rng.exponential(5.0, 200_000), -rng.uniform(0, 750, 200_000),
                             -rng.uniform(0, 1e-6, 1000), -np.arange(0, 90, 0.5 ** 6),
                             [0.0, -1e-300, -86.9, -87.0, -700.0, -745.0, -1e4]])
    values = values.astype(dtype)
    expected = np.exp(values.astype(np.float64))
    got = exp_nonpositive(values.copy())
    assert got.dtype == dtype
    big = expected > EXP_SMALLEST[dtype]
    rel = np.abs(got[big].astype(np.float64) - expected[big]) / expected[big]
    assert rel.max() <= EXP_MAX_REL_ERROR[dtype], rel.max()
    assert np.all(got[~big] >= 0)
    assert np.all(got[~big].astype(np.float64) <= EXP_SMALLEST[dtype])
    assert got[values == 0][0] == 1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_rbf_from_inner(dtype):
    x, y = _data(dtype)
    inner = x @ y.T
    got = nk.rbf_from_inner(inner, (x * x).sum(1), (y * y).sum(1), 0.3)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np.exp(-0.3 * _sqdist(x, y)), rtol=RTOL[dtype] * 10,
                               atol=1e-6 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
def test_polynomial_from_inner(dtype):
    x, y = _data(dtype)
    got = nk.polynomial_from_inner(x @ y.T, 0.5, 1.0, 3)
    ref = (0.5 * (x.astype(np.float64) @ y.T.astype(np.float64)) + 1.0) ** 3
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=RTOL[dtype] * 10, atol=1e-4 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cosine_from_inner_with_zero_row(dtype):
    x, y = _data(dtype)
    x[3] = 0.0
    xn = np.linalg.norm(x.astype(np.float64), axis=1)
    yn = np.linalg.norm(y.astype(np.float64), axis=1)
    xinv = np.where(xn > 0, 1.0 / np.where(xn > 0, xn, 1.0), 0.0).astype(dtype)
    got = nk.cosine_from_inner(x @ y.T, xinv, (1.0 / yn).astype(dtype))
    ref = (x.astype(np.float64) @ y.T.astype(np.float64)) * xinv[:, None] / yn[None, :]
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=RTOL[dtype] * 10, atol=1e-6)
    assert np.all(got[3] == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_laplacian_block(dtype):
    x, y = _data(dtype)
    out = np.empty((x.shape[0], y.shape[0]), dtype=dtype)
    nk.laplacian_block(x, y, 0.2, out)
    l1 = np.abs(x.astype(np.float64)[:, None, :] - y.astype(np.float64)[None, :, :]).sum(-1)
    np.testing.assert_allclose(out, np.exp(-0.2 * l1), rtol=RTOL[dtype] * 10)


@pytest.mark.parametrize("name", ["rbf", "laplacian", "polynomial", "cosine", "linear"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_spec_matches_scikit_learn(name, dtype):
    from sklearn.metrics.pairwise import pairwise_kernels

    x, y = _data(dtype)
    params = {"rbf": {"gamma": 0.3}, "laplacian": {"gamma": 0.2},
              "polynomial": {"gamma": 0.5, "degree": 2, "coef0": 1.0}, "cosine": {}, "linear": {}}[name]
    got = pairwise_kernel(x, y, name, **params)
    ref = pairwise_kernels(x.astype(np.float64), y.astype(np.float64), metric=name, **params)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref, rtol=RTOL[dtype] * 20, atol=1e-5 if dtype == np.float32 else 1e-12)
    diag = KernelSpec(name, params.get("gamma"), params.get("degree", 3), params.get("coef0", 1.0)).diagonal(x)
    ref_diag = np.diag(pairwise_kernels(x.astype(np.float64), metric=name, **params))
    np.testing.assert_allclose(diag, ref_diag, rtol=RTOL[dtype] * 20)


@pytest.mark.parametrize("dtype", DTYPES)
def test_segment_inner_products(dtype):
    rng = np.random.default_rng(2)
    kblock = rng.random((11, 30)).astype(dtype)
    weights = rng.random(30)
    lo = np.array([0, 4, 4, 17], dtype=np.int64)
    hi = np.array([4, 4, 17, 30], dtype=np.int64)
    out = np.full((11, 4), 0.5)
    nc.segment_inner_products(kblock, lo, hi, weights, out)
    ref = 0.5 + np.stack([(kblock[:, a:b] * weights[a:b]).sum(1) for a, b in zip(lo, hi)], 1)
    np.testing.assert_allclose(out, ref, rtol=1e-12 if dtype == np.float64 else 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_distances_and_nearest_center(dtype):
    rng = np.random.default_rng(3)
    diag = rng.random(20).astype(dtype) + 1
    inner = rng.random((20, 4)).astype(dtype)
    cc = rng.random(4)
    ref = np.maximum(diag[:, None].astype(np.float64) - 2 * inner + cc[None, :], 0.0)
    out = np.empty_like(inner)
    nc.sq_distances_from_inner(diag, inner, cc, out)
    np.testing.assert_allclose(out, ref, rtol=RTOL[dtype] * 10, atol=1e-6)
    labels = np.empty(20, dtype=np.int64)
    mind = np.empty(20, dtype=dtype)
    total = nc.nearest_center(diag, inner, cc, labels, mind)
    np.testing.assert_array_equal(labels, np.argmin(diag[:, None].astype(np.float64) - 2 * inner + cc, 1))
    np.testing.assert_allclose(mind, ref.min(1), rtol=RTOL[dtype] * 10, atol=1e-6)
    assert total == pytest.approx(float(mind.astype(np.float64).sum()), rel=1e-6)


def test_median_heuristic_gamma():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(200, 4))
    d = _sqdist(x, x)[np.triu_indices(200, 1)]
    assert median_heuristic_gamma(x, "rbf", rng) == pytest.approx(1.0 / np.median(d))
    assert median_heuristic_gamma(x, "polynomial", rng) == pytest.approx(0.25)
    assert median_heuristic_gamma(np.ones((5, 2)), "rbf", rng) == 1.0
