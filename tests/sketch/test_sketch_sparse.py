"""CSR input: same sketch as the dense equivalent, never densified."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkm.sketch import ApproxSVD, LeverageScoreSelector, RandomProjection
from streamkm.sketch._base import BaseSketcher

pytestmark = pytest.mark.unit

SKETCHERS: dict[str, Callable[[], BaseSketcher]] = {
    "gaussian": lambda: RandomProjection(12, kind="gaussian", random_state=0),
    "sign": lambda: RandomProjection(12, kind="sign", random_state=0),
    "sparse": lambda: RandomProjection(12, kind="sparse", random_state=0),
    "svd": lambda: ApproxSVD(3, random_state=0),
    "leverage": lambda: LeverageScoreSelector(15, n_clusters=3, random_state=0),
}


def _tfidf_like(seed: int, m: int = 200, n: int = 1500, density: float = 0.01) -> sp.csr_matrix:
    return sp.random(m, n, density=density, format="csr", random_state=seed,
                     data_rvs=np.random.default_rng(seed).random)


@pytest.mark.parametrize("name", sorted(SKETCHERS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_and_dense_input_give_the_same_sketch(name: str, dtype: type) -> None:
    x_sparse = _tfidf_like(1).astype(dtype)
    x_dense = x_sparse.toarray()
    fitted_sparse = SKETCHERS[name]().fit(x_sparse)
    fitted_dense = SKETCHERS[name]().fit(x_dense)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    outs = [
        fitted_sparse.transform(x_sparse),
        fitted_sparse.transform(x_dense),
        fitted_dense.transform(x_sparse),
        fitted_dense.transform(x_dense),
    ]
    for out in outs:
        assert isinstance(out, np.ndarray) and out.dtype == dtype
        assert out.shape == (200, fitted_dense.n_components_)
        assert np.allclose(out, outs[0], rtol=tol, atol=tol)
    if name == "leverage":
        assert np.array_equal(fitted_sparse.selected_features_, fitted_dense.selected_features_)


@pytest.mark.parametrize("fmt", ["csc", "coo", "csr_array"])
def test_other_sparse_formats_are_accepted(fmt: str) -> None:
    x = _tfidf_like(2)
    other = sp.csr_array(x) if fmt == "csr_array" else x.asformat(fmt)
    for name in ("gaussian", "sparse", "leverage"):
        expected = SKETCHERS[name]().fit_transform(x)
        assert np.allclose(SKETCHERS[name]().fit_transform(other), expected, rtol=1e-10, atol=1e-12)


def test_integer_sparse_input_becomes_float64() -> None:
    x = (_tfidf_like(3) * 10).astype(np.int64)
    out = ApproxSVD(2, random_state=0).fit_transform(x)
    assert out.dtype == np.float64
    assert np.allclose(out, ApproxSVD(2, random_state=0).fit_transform(x.toarray().astype(float)))


@pytest.fixture(scope="module")
def large_sparse() -> sp.csr_matrix:
    """3000 x 40000 with about 60k stored values (sp.random is slow at this size)."""
    rng = np.random.default_rng(4)
    m, n, nnz = 3000, 40_000, 60_000
    coo = sp.coo_matrix((rng.random(nnz), (rng.integers(0, m, nnz), rng.integers(0, n, nnz))),
                        shape=(m, n))
    return coo.tocsr()


@pytest.mark.parametrize("name", sorted(SKETCHERS))
def test_large_sparse_input_is_never_densified(name: str, large_sparse: sp.csr_matrix) -> None:
    # 3000 x 40000 float64 would be 960 MB dense; allow only a small fraction of that.
    x = large_sparse
    dense_bytes = x.shape[0] * x.shape[1] * 8
    sketcher = SKETCHERS[name]()
    tracemalloc.start()
    try:
        out = sketcher.fit_transform(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.shape == (3000, sketcher.n_components_)
    assert peak < dense_bytes / 20, f"peak {peak} bytes for a {dense_bytes}-byte dense input"


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(4, 30),
    n=st.integers(4, 60),
    density=st.floats(0.02, 0.6),
    seed=st.integers(0, 2**16),
    name=st.sampled_from(sorted(SKETCHERS)),
)
def test_property_sparse_equals_dense(m: int, n: int, density: float, seed: int, name: str) -> None:
    x = sp.random(m, n, density=density, format="csr", random_state=seed)
    if name == "svd" and min(m, n) < 3:
        return
    sketcher = SKETCHERS[name]().fit(x.toarray())
    assert np.allclose(sketcher.transform(x), sketcher.transform(x.toarray()), rtol=1e-10, atol=1e-12)
