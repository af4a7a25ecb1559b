"""Drift handling's split test on a cluster's input rows: what a graph kernel's feature space
cannot show (a cluster pulling apart inside one piece of its graph) the input rows can."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm.drift import DriftPolicy
from streamkm.drift.controller import DriftController
from streamkm.drift.principal_split import principal_split

pytestmark = pytest.mark.unit


def _controller(**policy: float) -> DriftController:
    return DriftController(DriftPolicy(**policy), 3, 6, 2, np.float64, keeps_raw=False,
                           rng=np.random.default_rng(0))


def _blob(rng: np.random.Generator, n: int, center: tuple[float, float]) -> np.ndarray:
    return rng.normal(0.0, 0.25, (n, 2)) + center


def test_a_cluster_of_two_groups_is_found_and_a_round_one_is_not() -> None:
    rng = np.random.default_rng(1)
    rows = np.concatenate([_blob(rng, 100, (0.0, 0.0)),  # cluster 0: one round blob
                           _blob(rng, 60, (5.0, 1.0)), _blob(rng, 60, (5.0, -1.0))])  # 1
    labels = np.repeat([0, 1], [100, 120])
    assert _controller().input_split(rows, labels) == 1
    assert _controller().input_split(rows[:100], labels[:100]) is None


def test_two_groups_closer_than_the_policy_split_test_allows_are_one() -> None:
    # two modes at distance D with per-axis deviation s in d dimensions pass the test
    # (min_sse_reduction 0.8) when D >= 4 s sqrt(d): here 4 * 0.25 * sqrt(2) = 1.41
    rng = np.random.default_rng(2)
    near = np.concatenate([_blob(rng, 100, (0.0, 0.5)), _blob(rng, 100, (0.0, -0.5))])
    far = np.concatenate([_blob(rng, 100, (0.0, 1.0)), _blob(rng, 100, (0.0, -1.0))])
    labels = np.zeros(200, dtype=np.int64)
    assert _controller().input_split(near, labels) is None
    assert _controller().input_split(far, labels) == 0


def test_a_cluster_with_fewer_rows_than_min_reservoir_is_not_tested() -> None:
    rng = np.random.default_rng(3)
    rows = np.concatenate([_blob(rng, 40, (0.0, 2.0)), _blob(rng, 40, (0.0, -2.0))])
    labels = np.zeros(80, dtype=np.int64)
    assert _controller(min_reservoir=64).input_split(rows, labels) == 0
    assert _controller(min_reservoir=96, reservoir_size=256).input_split(rows, labels) is None


def test_a_side_smaller_than_min_side_fraction_is_no_split() -> None:
    rng = np.random.default_rng(4)
    rows = np.concatenate([_blob(rng, 190, (0.0, 0.0)), _blob(rng, 10, (6.0, 0.0))])
    labels = np.zeros(200, dtype=np.int64)
    assert _controller(min_side_fraction=0.1).input_split(rows, labels) is None
    assert _controller(min_side_fraction=0.04).input_split(rows, labels) == 0


def test_only_the_newest_reservoir_size_rows_of_a_cluster_count() -> None:
    rng = np.random.default_rng(5)
    two = np.concatenate([_blob(rng, 100, (0.0, 2.0)), _blob(rng, 100, (0.0, -2.0))])
    two = two[rng.permutation(200)]
    one = _blob(rng, 100, (8.0, 0.0))
    labels = np.zeros(300, dtype=np.int64)
    # two groups, then a round blob: the newest 100 rows are the round blob
    assert _controller(reservoir_size=100).input_split(np.concatenate([two, one]),
                                                       labels) is None
    # a round blob, then two groups: the newest 200 rows are the two groups
    assert _controller(reservoir_size=200).input_split(np.concatenate([one, two]), labels) == 0


def _reference_reduction(rows: np.ndarray, side: np.ndarray) -> float:
    """1 - SSE of the sides / SSE of the rows, by plain sums."""
    def sse(part: np.ndarray) -> float:
        return float(((part - part.mean(axis=0)) ** 2).sum()) if len(part) else 0.0
    return 1.0 - (sse(rows[side == 0]) + sse(rows[side == 1])) / sse(rows)


def test_the_principal_split_separates_two_groups_and_reports_its_sse_reduction() -> None:
    rng = np.random.default_rng(6)
    rows = np.concatenate([_blob(rng, 80, (0.0, 3.0)), _blob(rng, 120, (0.0, -3.0))])
    side, reduction = principal_split(rows, 50)
    truth = np.repeat([0, 1], [80, 120])
    assert abs(np.corrcoef(side, truth)[0, 1]) == pytest.approx(1.0)
    assert reduction == pytest.approx(_reference_reduction(rows, side))
    assert reduction > 0.95


def test_the_principal_split_settles_by_lloyd_iterations() -> None:
    # an elongated group and a small far one: the principal axis's split at the mean cuts
    # the long group; Lloyd iterations move its far end back
    rng = np.random.default_rng(7)
    long = np.c_[rng.uniform(-4.0, 4.0, 300), rng.normal(0.0, 0.1, 300)]
    far = _blob(rng, 60, (12.0, 0.0))
    rows = np.concatenate([long, far])
    side, reduction = principal_split(rows, 50)
    first, _ = principal_split(rows, 0)
    assert reduction == pytest.approx(_reference_reduction(rows, side))
    assert reduction >= _reference_reduction(rows, first) - 1e-12
    assert len(set(side[:300])) == 1 and len(set(side[300:])) == 1 and side[0] != side[-1]


@pytest.mark.parametrize("rows", [np.ones((5, 2)), np.zeros((1, 3))])
def test_rows_that_do_not_spread_are_not_split(rows: np.ndarray) -> None:
    side, reduction = principal_split(rows, 50)
    assert reduction == 0.0 and not side.any()
