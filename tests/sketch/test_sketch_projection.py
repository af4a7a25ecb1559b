"""RandomProjection: entry scales, very sparse density, the auto dimension, dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamkm.sketch import RandomProjection, kmeans_sketch_dimension
from streamkm.sketch.projection import very_sparse_density

pytestmark = pytest.mark.unit


def _dense_components(sketcher: RandomProjection) -> np.ndarray:
    c = sketcher.components_
    return c.toarray() if hasattr(c, "toarray") else np.asarray(c)


@pytest.mark.parametrize("kind", ["gaussian", "sign", "sparse"])
def test_squared_norm_is_preserved_in_expectation(kind: str) -> None:
    # E||R x||^2 = ||x||^2: mean over 300 independent R of ||R x||^2 / ||x||^2. Its standard
    # error is about sqrt(2 / (r * 300)) ~ 0.01 (r = 64); the tolerance is 5 of them.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 400))
    ratios = [
        float(np.sum(RandomProjection(64, kind=kind, random_state=s).fit_transform(x) ** 2))
        / float(np.sum(x**2))
        for s in range(300)
    ]
    assert abs(np.mean(ratios) - 1.0) < 0.05


def test_gaussian_entries_have_variance_one_over_r() -> None:
    r, n = 50, 4000
    c = RandomProjection(r, random_state=0).fit(np.zeros((1, n))).components_
    assert c.shape == (r, n)
    # 200k entries: the sample variance of N(0, 1/r) is within 1% (> 4 standard errors).
    assert abs(np.var(c) * r - 1.0) < 0.015
    assert abs(np.mean(c) * math.sqrt(r)) < 0.01


def test_sign_entries_are_plus_minus_one_over_sqrt_r() -> None:
    r, n = 40, 3000
    c = RandomProjection(r, kind="sign", random_state=1).fit(np.zeros((2, n))).components_
    assert np.array_equal(np.abs(c), np.full((r, n), 1.0 / math.sqrt(r)))
    assert abs(np.mean(c > 0) - 0.5) < 0.01


def test_sparse_density_and_values() -> None:
    r, n = 60, 10_000
    sketcher = RandomProjection(r, kind="sparse", random_state=2).fit(np.zeros((1, n)))
    c = sketcher.components_
    density = 1.0 / math.sqrt(n)
    assert sketcher.density_ == pytest.approx(density) == very_sparse_density(n)
    # nnz ~ Binomial(r n, d) = 6000 +- 77: within 5%.
    assert abs(c.nnz / (r * n) - density) < 0.05 * density
    assert np.allclose(np.abs(c.data), math.sqrt(1.0 / (density * r)))
    assert abs(np.mean(c.data > 0) - 0.5) < 0.05
    # E[entry^2] = 1/r exactly by construction, so the sample mean is close to it.
    assert abs(c.power(2).sum() / (r * n) * r - 1.0) < 0.05
    # no duplicate column index within a row
    for row in range(r):
        idx = c.indices[c.indptr[row]:c.indptr[row + 1]]
        assert np.all(np.diff(idx) > 0)


def test_auto_dimension_is_k_over_eps_squared_capped() -> None:
    assert kmeans_sketch_dimension(5, 0.5, 2000) == 20
    assert kmeans_sketch_dimension(10, 0.3, 10_000) == math.ceil(10 / 0.09)
    assert kmeans_sketch_dimension(10, 0.1, 300) == 300
    assert kmeans_sketch_dimension(3, 1.0) == 3
    x = np.ones((3, 2000))
    assert RandomProjection(n_clusters=5, eps=0.5, random_state=0).fit(x).n_components_ == 20
    assert RandomProjection(n_clusters=5, eps=0.1, random_state=0).fit(x[:, :100]).n_components_ == 100


@pytest.mark.parametrize("kind", ["gaussian", "sign", "sparse"])
def test_float32_stays_float32(kind: str) -> None:
    x = np.random.default_rng(0).standard_normal((20, 300))
    s32 = RandomProjection(16, kind=kind, random_state=3)
    out32 = s32.fit_transform(x.astype(np.float32))
    assert out32.dtype == np.float32 and s32.components_.dtype == np.float32
    s64 = RandomProjection(16, kind=kind, random_state=3)
    out64 = s64.fit_transform(x)
    assert out64.dtype == np.float64
    # same random draws whatever the dtype
    assert np.allclose(out32, out64, rtol=1e-4, atol=1e-4)
    assert s64.transform(x.astype(np.float32)).dtype == np.float32
    assert s32.transform(x).dtype == np.float64


def test_transform_is_linear_map_by_components() -> None:
    x = np.random.default_rng(4).standard_normal((30, 200))
    s = RandomProjection(12, random_state=0).fit(x)
    assert np.allclose(s.transform(x), x @ s.components_.T)
    assert np.array_equal(s.transform(x), RandomProjection(12, random_state=0).fit_transform(x))


def test_fit_ignores_data_values() -> None:
    rng = np.random.default_rng(5)
    a = RandomProjection(8, kind="sparse", random_state=9).fit(rng.standard_normal((5, 100)))
    b = RandomProjection(8, kind="sparse", random_state=9).fit(np.zeros((1, 100)))
    assert (a.components_ != b.components_).nnz == 0
