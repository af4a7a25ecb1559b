"""Exact 1-D k-means against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkm.batch import kmeans_1d
from streamkm.exceptions import ParameterError, ValidationError

pytestmark = pytest.mark.unit


def _partition_cost(values: np.ndarray, labels: np.ndarray) -> float:
    return float(sum(np.sum((values[labels == j] - values[labels == j].mean()) ** 2)
                     for j in np.unique(labels)))


def _brute_force_any_partition(values: np.ndarray, k: int) -> float:
    """Minimum over every assignment of the n values to k non-empty clusters."""
    n = values.size
    labelings = np.array(list(itertools.product(range(k), repeat=n)))
    labelings = labelings[np.array([np.unique(lab).size == k for lab in labelings])]
    return min(_partition_cost(values, lab) for lab in labelings)


def _brute_force_contiguous(values: np.ndarray, k: int) -> float:
    """Minimum over every split of the sorted values into k contiguous runs."""
    s = np.sort(values)
    n = s.size
    best = np.inf
    for cuts in itertools.combinations(range(1, n), k - 1):
        edges = (0, *cuts, n)
        runs = zip(edges[:-1], edges[1:])
        best = min(best, sum(np.sum((s[a:b] - s[a:b].mean()) ** 2) for a, b in runs))
    return float(best)


def _check_solution(values, k, labels, centers, cost, boundaries):
    n = values.size
    assert labels.shape == (n,) and centers.shape == (k,) and boundaries.shape == (k + 1,)
    assert boundaries[0] == 0 and boundaries[-1] == n and np.all(np.diff(boundaries) >= 1)
    assert np.all(np.diff(centers) >= 0)
    assert np.array_equal(np.unique(labels), np.arange(k))
    s = np.sort(values, kind="stable")
    for j in range(k):
        run = s[boundaries[j] : boundaries[j + 1]]
        np.testing.assert_allclose(np.sort(values[labels == j]), run)
        assert centers[j] == pytest.approx(run.mean(), rel=1e-12, abs=1e-12)
    assert cost == pytest.approx(_partition_cost(values, labels), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force_over_all_partitions(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=6) * 3
    for k in range(1, 7):
        out = kmeans_1d(values, k)
        _check_solution(values, k, *out)
        assert out[2] == pytest.approx(_brute_force_any_partition(values, k), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_matches_brute_force_over_contiguous_splits_for_every_k(seed):
    rng = np.random.default_rng(100 + seed)
    values = np.concatenate([rng.normal(0, 1, 5), rng.normal(8, 2, 4), rng.integers(-3, 3, 4)])
    for k in range(1, values.size + 1):
        out = kmeans_1d(values, k)
        _check_solution(values, k, *out)
        assert out[2] == pytest.approx(_brute_force_contiguous(values, k), rel=1e-10, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=10),
    st.integers(1, 10),
)
def test_property_optimal_for_every_k(values, k):
    arr = np.array(values)
    k = min(k, arr.size)
    out = kmeans_1d(arr, k)
    _check_solution(arr, k, *out)
    assert out[2] <= _brute_force_contiguous(arr, k) * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("value", [683.6420273877136, 0.1, -1e-300, 3e7 + 0.3])
def test_equal_values_split_in_two_keep_the_value_as_both_centers(value):
    values = np.full(4, value)
    _, centers, cost, _ = kmeans_1d(values, 2)
    assert centers.tolist() == [value, value] and cost == 0.0


def test_dtype_column_input_and_large_n():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(c, 0.1, 2000) for c in (-5, 0, 5)]).astype(np.float32)
    labels, centers, cost, _ = kmeans_1d(x[:, None], 3)
    assert centers.dtype == np.float32
    np.testing.assert_allclose(centers, [-5, 0, 5], atol=0.02)
    assert np.array_equal(labels, np.repeat([0, 1, 2], 2000))


def test_errors_name_the_bad_value():
    with pytest.raises(ParameterError, match="n_clusters=4"):
        kmeans_1d([1.0, 2.0, 3.0], 4)
    with pytest.raises(ParameterError, match="n_clusters.*0"):
        kmeans_1d([1.0, 2.0], 0)
    with pytest.raises(ValidationError, match=r"\(3, 2\)"):
        kmeans_1d(np.zeros((3, 2)), 1)
    with pytest.raises(ValidationError, match="inf"):
        kmeans_1d([1.0, np.inf], 1)
