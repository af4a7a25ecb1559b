"""K(x, x) of the rbf kernel from one triangle: the same values as the general block, the
kernel matrix exactly symmetric, float32 and float64 kept."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm._numba import kernels as nk
from streamkm.kernels import KernelSpec
from streamkm.kernels._common import row_sq_norms, same_rows, upper_self_inner

pytestmark = pytest.mark.unit

DTYPES = [np.float32, np.float64]
# sizes around the mirror's 64-row tiles, and one row
SHAPES = [(1, 5), (63, 3), (64, 5), (65, 2), (200, 7), (130, 40)]


def _rows(n: int, d: int, dtype: type) -> np.ndarray:
    return np.random.default_rng(n * 100 + d).normal(size=(n, d)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_upper_self_inner_holds_the_inner_products_above_the_diagonal(shape, dtype):
    x = _rows(*shape, dtype)
    upper = upper_self_inner(x)
    assert upper.dtype == dtype and upper.shape == (shape[0],) * 2
    assert upper.flags.c_contiguous
    ref = x.astype(np.float64) @ x.astype(np.float64).T
    rows, cols = np.triu_indices(shape[0])
    np.testing.assert_allclose(upper[rows, cols], ref[rows, cols],
                               rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rbf_symmetric_from_upper_matches_numpy_and_the_general_kernel(shape, dtype):
    x = _rows(*shape, dtype)
    sq = row_sq_norms(x)
    upper = upper_self_inner(x)
    full = np.triu(upper) + np.triu(upper, 1).T  # the same inner products on both sides
    general = nk.rbf_from_inner(full.copy(), sq, sq, 0.4)
    got = nk.rbf_symmetric_from_upper(upper, sq, 0.4)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, general)  # bit for bit, each side
    np.testing.assert_array_equal(got, got.T)
    x64 = x.astype(np.float64)
    sqdist = ((x64[:, None, :] - x64[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(got, np.exp(-0.4 * sqdist),
                               rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_spec_block_of_rows_with_themselves_is_symmetric_and_exact(dtype):
    x = _rows(300, 5, dtype)
    spec = KernelSpec("rbf", 0.3)
    got = spec.block(x, x)
    other = spec.block(x, x.copy())  # distinct arrays: the general path
    assert got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, got.T)
    np.testing.assert_allclose(got, other, rtol=1e-5 if dtype == np.float32 else 1e-13)
    np.testing.assert_allclose(np.diagonal(got), 1.0, rtol=1e-5 if dtype == np.float32 else 1e-13)
    # norms passed by the caller are used when both sides get the same ones
    np.testing.assert_array_equal(spec.block(x, x, x_sq=row_sq_norms(x), y_sq=row_sq_norms(x)),
                                  got)


def test_same_rows_tells_one_buffer_from_a_copy():
    x = _rows(10, 3, np.float64)
    assert same_rows(x, x)
    assert same_rows(x, x[:])
    assert not same_rows(x, x.copy())
    assert not same_rows(x, x[1:])
    assert not same_rows(x, x[:, :2])
