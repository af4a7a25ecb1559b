"""ApproxSVD and the Lemma 4 range finder."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm.sketch import ApproxSVD, approximate_right_singular_vectors
from streamkm.sketch.svd import range_finder_width

pytestmark = pytest.mark.unit


def _low_rank_plus_noise(seed: int, m: int = 300, n: int = 500, rank: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scales = np.linspace(10.0, 4.0, rank)
    return (rng.standard_normal((m, rank)) * scales) @ rng.standard_normal((rank, n)) / 5 + (
        0.3 * rng.standard_normal((m, n))
    )


def test_range_finder_width() -> None:
    assert range_finder_width(5, 0.5) == 5 + 10 + 1
    assert range_finder_width(4, 0.3) == 4 + 14 + 1


def test_components_are_orthonormal_rows() -> None:
    a = _low_rank_plus_noise(0)
    s = ApproxSVD(5, random_state=0).fit(a)
    assert s.components_.shape == (5, 500) and s.n_components_ == 5
    assert np.allclose(s.components_ @ s.components_.T, np.eye(5), atol=1e-10)
    assert np.allclose(s.transform(a), a @ s.components_.T)


@pytest.mark.parametrize("eps", [0.2, 0.5, 1.0])
def test_residual_within_one_plus_eps_of_best_rank_k(eps: float) -> None:
    a = _low_rank_plus_noise(1, m=150, n=250)
    k = 5
    sv = np.linalg.svd(a, compute_uv=False)
    best = float(np.sum(sv[k:] ** 2))
    for seed in range(4):
        z = approximate_right_singular_vectors(a, k, eps, np.random.default_rng(seed))
        residual = float(np.linalg.norm(a - a @ z @ z.T) ** 2)
        # power iterations reach the best rank-k residual up to rounding
        assert best * (1 - 1e-12) <= residual <= (1 + eps) * best


def test_sign_convention_is_deterministic() -> None:
    a = _low_rank_plus_noise(2)
    z = ApproxSVD(4, random_state=3).fit(a).components_
    largest = z[np.arange(4), np.argmax(np.abs(z), axis=1)]
    assert np.all(largest > 0)
    z_again = ApproxSVD(4, random_state=3).fit(a).components_
    assert np.array_equal(z, z_again)


def test_float32_stays_float32() -> None:
    a = _low_rank_plus_noise(3).astype(np.float32)
    s = ApproxSVD(4, random_state=0)
    out = s.fit_transform(a)
    assert out.dtype == np.float32 and s.components_.dtype == np.float32
    z64 = ApproxSVD(4, random_state=0).fit(a.astype(np.float64)).components_
    assert np.allclose(s.components_, z64, atol=1e-3)


def test_fewer_rows_than_range_finder_width() -> None:
    a = _low_rank_plus_noise(4, m=8, n=50, rank=3)
    s = ApproxSVD(3, eps=0.2, random_state=0).fit(a)  # width 3 + 15 + 1 = 19 > 8 rows
    assert np.allclose(s.components_ @ s.components_.T, np.eye(3), atol=1e-10)
