"""RTMM pair sampling, the serial <-> pair mapping and the RSCD baseline."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from streamkm.drift import (
    pair_count,
    pair_to_serial,
    pairs_to_serials,
    rscd_pairs,
    rtmm_pairs,
    serial_to_pair,
    serials_to_pairs,
)
from streamkm.drift.rtmm import _random_below, _sample_distinct_large
from streamkm.exceptions import ParameterError

pytestmark = pytest.mark.unit

SIGNIFICANCE = 1e-3
VECTOR_MAX_SERIAL = pair_count(2**32) - 1


def _pair_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return {(int(i), int(j)) for i, j in pairs}


def _assert_valid(pairs: np.ndarray, n: int) -> None:
    assert pairs.dtype == np.int64 and pairs.ndim == 2 and pairs.shape[1] == 2
    assert np.all(pairs[:, 0] >= 0)
    assert np.all(pairs[:, 0] < pairs[:, 1])
    assert np.all(pairs[:, 1] < n)


def test_paper_example_n4() -> None:
    # paper, 1-based: e = 1..6 -> (1,2) (1,3) (2,3) (1,4) (2,4) (3,4)
    expected = [(1, 2), (1, 3), (2, 3), (1, 4), (2, 4), (3, 4)]
    for e, (i1, j1) in enumerate(expected, start=1):
        assert serial_to_pair(e - 1) == (i1 - 1, j1 - 1)
        assert pair_to_serial(i1 - 1, j1 - 1) == e - 1
    got = serials_to_pairs(np.arange(6))
    np.testing.assert_array_equal(got, np.array(expected) - 1)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 17, 64, 200])
def test_all_pairs_exactly_once(n: int) -> None:
    total = n * (n - 1) // 2
    pairs = rtmm_pairs(n, total, random_state=n)
    _assert_valid(pairs, n)
    assert len(_pair_set(pairs)) == total
    assert _pair_set(pairs) == set(itertools.combinations(range(n), 2))
    np.testing.assert_array_equal(np.sort(pairs_to_serials(pairs)), np.arange(total))


@pytest.mark.parametrize("n", [2, 9, 200])
def test_mapping_is_the_colex_bijection(n: int) -> None:
    total = n * (n - 1) // 2
    colex = sorted(itertools.combinations(range(n), 2), key=lambda p: (p[1], p[0]))
    np.testing.assert_array_equal(serials_to_pairs(np.arange(total)), np.array(colex))


@pytest.mark.parametrize(("n", "m"), [(300, 44850 - 1), (300, 44000), (1000, 499500 - 3), (150, 11175)])
def test_distinct_when_m_close_to_total(n: int, m: int) -> None:
    pairs = rtmm_pairs(n, m, random_state=7)
    _assert_valid(pairs, n)
    assert np.unique(pairs_to_serials(pairs)).size == m


def test_zero_pairs() -> None:
    pairs = rtmm_pairs(10, 0, random_state=0)
    assert pairs.shape == (0, 2) and pairs.dtype == np.int64


def test_same_seed_same_pairs_and_generator_advances() -> None:
    np.testing.assert_array_equal(
        rtmm_pairs(1000, 50, random_state=3), rtmm_pairs(1000, 50, random_state=3)
    )
    rng = np.random.default_rng(3)
    first, second = rtmm_pairs(1000, 50, random_state=rng), rtmm_pairs(1000, 50, random_state=rng)
    assert _pair_set(first) != _pair_set(second)


def _chi_square_p(counts: Counter, n_cells: int, n_draws: int) -> float:
    observed = np.array(list(counts.values()) + [0] * (n_cells - len(counts)), dtype=float)
    return float(stats.chisquare(observed, np.full(n_cells, n_draws / n_cells)).pvalue)


def test_subsets_uniform() -> None:
    n, m, n_draws = 6, 3, 20_000
    n_cells = math.comb(pair_count(n), m)  # 455 sets of 3 pairs
    rng = np.random.default_rng(12345)
    counts = Counter(
        tuple(sorted(_pair_set(rtmm_pairs(n, m, random_state=rng)))) for _ in range(n_draws)
    )
    assert len(counts) == n_cells
    assert _chi_square_p(counts, n_cells, n_draws) > SIGNIFICANCE


def test_order_uniform() -> None:
    n, m, n_draws = 4, 2, 6_000
    rng = np.random.default_rng(2024)
    counts = Counter(tuple(map(tuple, rtmm_pairs(n, m, random_state=rng).tolist())) for _ in range(n_draws))
    assert _chi_square_p(counts, 6 * 5, n_draws) > SIGNIFICANCE


def test_large_population_sampler_uniform() -> None:
    total, m, n_draws = 10, 3, 12_000
    rng = np.random.default_rng(99)
    draws = [_sample_distinct_large(total, m, rng) for _ in range(n_draws)]
    assert all(len(set(d)) == m and all(0 <= v < total for v in d) for d in draws)
    counts = Counter(tuple(sorted(d)) for d in draws)
    assert _chi_square_p(counts, math.comb(total, m), n_draws) > SIGNIFICANCE
    orders = Counter(tuple(np.argsort(d)) for d in draws)
    assert _chi_square_p(orders, 6, n_draws) > SIGNIFICANCE


def test_random_below_uniform_and_in_range() -> None:
    rng = np.random.default_rng(5)
    values = [_random_below(6, rng) for _ in range(6_000)]
    assert set(values) == set(range(6))
    assert _chi_square_p(Counter(values), 6, len(values)) > SIGNIFICANCE
    big = 3 * 2**100 + 1
    assert all(0 <= _random_below(big, rng) < big for _ in range(200))


def _serials_near_float_failure(n: int) -> list[int]:
    # float sqrt starts to misplace the row boundaries T(j) for j around 3e8
    serials = [0, 1, pair_count(n) - 1, pair_count(n) - 2]
    for j in [3 * 10**8, 3 * 10**8 + 1, 10**9 + 7, 2**31 - 1, 2**31, n - 2, n - 1]:
        row_start = pair_to_serial(0, j)
        serials += [row_start - 1, row_start, row_start + 1, row_start + j - 1]
    return serials


def test_extreme_serials_at_three_billion() -> None:
    n = 3 * 10**9
    serials = _serials_near_float_failure(n)
    pairs = serials_to_pairs(np.array(serials, dtype=np.int64))
    _assert_valid(pairs, n)
    assert [serial_to_pair(s) for s in serials] == [tuple(p) for p in pairs.tolist()]
    np.testing.assert_array_equal(pairs_to_serials(pairs), serials)
    assert tuple(pairs[0]) == (0, 1)
    assert tuple(pairs[2]) == (n - 2, n - 1)
    assert tuple(pairs[3]) == (n - 3, n - 1)


def test_every_row_boundary_exact_for_large_j() -> None:
    j = np.concatenate([
        np.arange(3 * 10**8, 3 * 10**8 + 20_000, dtype=np.int64),
        np.arange(2**32 - 20_000, 2**32, dtype=np.int64),
    ])
    first_in_row = np.stack([np.zeros_like(j), j], axis=1)
    row_start = pairs_to_serials(first_in_row)
    np.testing.assert_array_equal(serials_to_pairs(row_start), first_in_row)
    last_of_previous_row = serials_to_pairs(row_start - 1)
    np.testing.assert_array_equal(last_of_previous_row, np.stack([j - 2, j - 1], axis=1))


def test_vectorised_mapping_matches_exact_scalar_in_bulk() -> None:
    rng = np.random.default_rng(31)
    j = np.unique(np.exp(rng.uniform(0, np.log(2**32 - 1), 30_000)).astype(np.int64) + 1)
    row_start = pairs_to_serials(np.stack([np.zeros_like(j), j], axis=1))
    serials = np.concatenate([
        rng.integers(0, VECTOR_MAX_SERIAL, 30_000, endpoint=True),
        row_start, row_start - 1, row_start + j - 1,
    ])
    pairs = serials_to_pairs(serials)
    exact = np.array([serial_to_pair(int(v)) for v in serials], dtype=np.int64)
    np.testing.assert_array_equal(pairs, exact)


def test_float_sqrt_formula_fails_on_these_row_boundaries() -> None:
    # the boundaries checked above are ones where the float formula gives invalid pairs
    j = np.arange(3 * 10**8, 3 * 10**8 + 1000, dtype=np.int64)
    e = pairs_to_serials(np.stack([np.zeros_like(j), j], axis=1))  # 1-based serial of (j-2, j-1)
    x = ((np.sqrt(8.0 * e - 7.0) - 1.0) // 2 + 1).astype(np.int64)
    i_one_based, j_one_based = e - x * (x - 1) // 2, x + 1
    assert np.all((i_one_based < 1) | (i_one_based >= j_one_based) | (j_one_based != j))


@pytest.mark.parametrize("n", [3 * 10**9, 2**32, 2**32 + 1, 2**40, 2**63])
def test_huge_n_draws_valid_distinct_pairs(n: int) -> None:
    pairs = rtmm_pairs(n, 200, random_state=1)
    _assert_valid(pairs, n)
    assert len(_pair_set(pairs)) == 200


def test_huge_serial_numbers_beyond_int64() -> None:
    n = 2**63
    serials = np.array([pair_count(n) - 1, pair_count(2**40) + 5, 2**100], dtype=object)
    pairs = serials_to_pairs(serials)
    _assert_valid(pairs, n)
    assert tuple(pairs[0]) == (n - 2, n - 1)
    assert [pair_to_serial(*map(int, p)) for p in pairs] == list(serials)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=VECTOR_MAX_SERIAL))
def test_serial_round_trip_int64(serial: int) -> None:
    i, j = serial_to_pair(serial)
    assert 0 <= i < j
    assert pair_to_serial(i, j) == serial
    vector_pair = serials_to_pairs(np.array([serial], dtype=np.int64))
    assert tuple(vector_pair[0].tolist()) == (i, j)
    assert int(pairs_to_serials(vector_pair)[0]) == serial


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**126))
def test_serial_round_trip_python_ints(serial: int) -> None:
    i, j = serial_to_pair(serial)
    assert 0 <= i < j
    assert pair_to_serial(i, j) == serial


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=2**32 - 1).flatmap(
    lambda j: st.tuples(st.integers(min_value=0, max_value=j - 1), st.just(j))
))
def test_pair_round_trip(pair: tuple[int, int]) -> None:
    serial = pair_to_serial(*pair)
    assert serial_to_pair(serial) == pair
    assert tuple(serials_to_pairs(pairs_to_serials(np.array([pair])))[0].tolist()) == pair


@pytest.mark.parametrize(
    ("n", "m", "quoted"),
    [
        (1, 0, "n=1"),
        (0, 0, "n=0"),
        (-5, 1, "n=-5"),
        (10, -1, "m=-1"),
        (10, 46, "m=46"),
        (4, 7, "m=7"),
        (2.5, 1, "2.5"),
        (10, 3.0, "3.0"),
        ("10", 1, "'10'"),
        (True, 1, "True"),
        (10, None, "None"),
        (2**63 + 1, 1, str(2**63 + 1)),
    ],
)
def test_bad_n_or_m(n: object, m: object, quoted: str) -> None:
    for draw in (rtmm_pairs, rscd_pairs):
        with pytest.raises(ParameterError, match=quoted) as info:
            draw(n, m, random_state=0)
        assert isinstance(info.value, ValueError)


def test_m_above_total_names_total() -> None:
    with pytest.raises(ParameterError, match="45"):
        rtmm_pairs(10, 46)


def test_mapping_errors() -> None:
    with pytest.raises(ParameterError, match="-1"):
        serial_to_pair(-1)
    with pytest.raises(ParameterError, match=r"\(3, 3\)"):
        pair_to_serial(3, 3)
    with pytest.raises(ParameterError, match=r"\(4, 2\)"):
        pairs_to_serials(np.array([[0, 1], [4, 2]]))
    with pytest.raises(ParameterError, match="-3"):
        serials_to_pairs(np.array([2, -3]))
    with pytest.raises(ParameterError, match="float"):
        serials_to_pairs(np.array([1.0]))


def test_numpy_integer_arguments_accepted() -> None:
    pairs = rtmm_pairs(np.int64(50), np.int32(10), random_state=np.uint8(4))
    _assert_valid(pairs, 50)


@pytest.mark.parametrize(("n", "m"), [(2, 1), (30, 435), (600, 1000), (600, 179_000)])
def test_rscd_valid_distinct(n: int, m: int) -> None:
    pairs = rscd_pairs(n, m, random_state=11)
    _assert_valid(pairs, n)
    assert len(_pair_set(pairs)) == m


def test_rscd_uniform_subsets() -> None:
    n, m, n_draws = 5, 2, 9_000
    rng = np.random.default_rng(77)
    counts = Counter(tuple(sorted(_pair_set(rscd_pairs(n, m, random_state=rng)))) for _ in range(n_draws))
    assert _chi_square_p(counts, math.comb(10, 2), n_draws) > SIGNIFICANCE
