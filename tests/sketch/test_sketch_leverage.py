"""LeverageScoreSelector: probabilities, exact rescaling, the selection itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamkm.sketch import (
    ApproxSVD,
    LeverageScoreSelector,
    feature_selection_dimension,
    leverage_probabilities,
)

pytestmark = pytest.mark.unit


def _signal_in_first_features(seed: int, m: int = 400, n: int = 300, informative: int = 10):
    rng = np.random.default_rng(seed)
    x = 0.05 * rng.standard_normal((m, n))
    x[:, :informative] += 5.0 * rng.standard_normal((m, 3)) @ rng.standard_normal((3, informative))
    return x


def test_probabilities_sum_to_one_and_match_z_row_norms() -> None:
    x = _signal_in_first_features(0)
    sel = LeverageScoreSelector(50, n_clusters=3, random_state=11).fit(x)
    p = sel.probabilities_
    assert p.shape == (300,) and np.all(p >= 0)
    assert math.isclose(p.sum(), 1.0, abs_tol=1e-12)
    # the selector's Z is the one ApproxSVD draws first from the same seed
    z = ApproxSVD(3, eps=0.5, random_state=11).fit(x).components_.T
    assert np.allclose(p, np.sum(z**2, axis=1) / 3, rtol=1e-10, atol=1e-15)
    assert np.allclose(leverage_probabilities(z), p)


def test_rescaling_is_exactly_one_over_sqrt_r_p() -> None:
    x = _signal_in_first_features(1)
    sel = LeverageScoreSelector(40, n_clusters=3, random_state=0).fit(x)
    r, p, idx = sel.n_components_, sel.probabilities_, sel.selected_features_
    assert r == 40 and idx.shape == (40,) and idx.dtype == np.int64
    assert np.array_equal(sel.scales_, 1.0 / np.sqrt(r * p[idx]))
    assert np.array_equal(sel.transform(x), x[:, idx] * sel.scales_)


def test_high_leverage_features_are_selected() -> None:
    x = _signal_in_first_features(2)
    sel = LeverageScoreSelector(60, n_clusters=3, random_state=1).fit(x)
    assert sel.probabilities_[:10].sum() > 0.95
    assert np.mean(sel.selected_features_ < 10) > 0.9


def test_sketch_norms_unbiased() -> None:
    # E||C||_F^2 over the draws is sum_i ||A^(i)||^2 = ||A||_F^2 (importance sampling).
    x = _signal_in_first_features(3, m=100, n=200)
    ratios = [
        float(np.sum(LeverageScoreSelector(30, n_clusters=3, random_state=s).fit_transform(x) ** 2))
        / float(np.sum(x**2))
        for s in range(40)
    ]
    assert abs(np.mean(ratios) - 1.0) < 0.1


def test_auto_uses_k_log_k_over_eps_squared() -> None:
    assert feature_selection_dimension(5, 0.5, 2000) == math.ceil(5 * math.log(5) / 0.25)
    assert feature_selection_dimension(2, 0.5, 2000) == 8
    assert feature_selection_dimension(50, 0.1, 300) == 300
    x = _signal_in_first_features(4)
    sel = LeverageScoreSelector(n_clusters=5, random_state=0).fit(x)
    assert sel.n_components_ == feature_selection_dimension(5, 0.5, 300)


def test_float32_stays_float32() -> None:
    x = _signal_in_first_features(5).astype(np.float32)
    out = LeverageScoreSelector(20, n_clusters=3, random_state=0).fit_transform(x)
    assert out.dtype == np.float32
