"""k-means++ and farthest traversal over a squared-distance callback, in every space the
engine seeds in (rows, a kernel's feature space from rows, a kernel matrix or its factor)."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm._core.kernel_lloyd import FactoredGram
from streamkm._core.seeding import (
    d2_sampling,
    euclidean_sq_dist_to,
    farthest_first,
    gram_sq_dist_to,
    kernel_sq_dist_to,
)
from streamkm.kernels import build_kernel

pytestmark = pytest.mark.unit


def _rows(n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 6, (4, 3))
    return centers[rng.integers(4, size=n)] + rng.normal(size=(n, 3))


def _callbacks(x: np.ndarray) -> dict:
    linear = build_kernel("linear", None, sample=x, rng=np.random.default_rng(0), n_clusters=4)
    gram = x @ x.T
    diag = np.einsum("ij,ij->i", x, x)
    return {"rows": euclidean_sq_dist_to(x), "kernel": kernel_sq_dist_to(linear, x),
            "matrix": gram_sq_dist_to(gram, diag),
            "factor": gram_sq_dist_to(FactoredGram(np.ascontiguousarray(x)), diag)}


def test_every_callback_gives_the_squared_distances_to_the_asked_rows() -> None:
    x = _rows(50)
    indices = np.array([3, 0, 41], dtype=np.int64)
    expected = ((x[:, None, :] - x[indices][None, :, :]) ** 2).sum(axis=2)
    for name, sq_dist_to in _callbacks(x).items():
        got = sq_dist_to(indices)
        assert got.shape == (50, 3) and got.dtype == np.float64, name
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("trials", [1, 3])
def test_the_same_space_given_four_ways_gets_the_same_seeds(trials: int) -> None:
    x = _rows()
    seeds = {name: d2_sampling(300, 6, cb, np.random.default_rng(7), n_local_trials=trials)
             for name, cb in _callbacks(x).items()}
    for name, chosen in seeds.items():
        np.testing.assert_array_equal(chosen, seeds["rows"], err_msg=name)
    first = {name: farthest_first(300, 6, cb, np.random.default_rng(7))[0]
             for name, cb in _callbacks(x).items()}
    for name, chosen in first.items():
        np.testing.assert_array_equal(chosen, first["rows"], err_msg=name)


def test_each_next_seed_is_drawn_in_proportion_to_its_squared_distance() -> None:
    # points at 0, 1 and 3 on a line: after the point at 0, P(1) = 1/10 and P(3) = 9/10
    x = np.array([[0.0], [1.0], [3.0]])
    second = {1: 0, 2: 0}
    for seed in range(6000):
        chosen = d2_sampling(3, 2, euclidean_sq_dist_to(x), np.random.default_rng(seed))
        if chosen[0] == 0:
            second[int(chosen[1])] += 1
    share = second[2] / (second[1] + second[2])
    assert 0.87 < share < 0.93, second


def test_local_trials_keep_the_candidate_that_lowers_the_potential_most() -> None:
    # from the point at 0, the point at 3 removes 9 of the potential, the point at 1 only 1
    # (and leaves 4): with many trials the draw almost surely contains the point at 3
    x = np.array([[0.0], [1.0], [3.0]])
    for seed in range(200):
        chosen = d2_sampling(3, 2, euclidean_sq_dist_to(x), np.random.default_rng(seed),
                             n_local_trials=30)
        if chosen[0] == 0:
            assert chosen[1] == 2


@pytest.mark.parametrize("trials", [1, 4])
def test_fewer_distinct_rows_than_seeds_still_gives_distinct_indices(trials: int) -> None:
    x = np.repeat(np.array([[0.0, 0.0], [5.0, 5.0]]), 10, axis=0)
    for seed in range(20):
        chosen = d2_sampling(20, 5, euclidean_sq_dist_to(x), np.random.default_rng(seed),
                             n_local_trials=trials)
        assert len(set(chosen.tolist())) == 5
        assert {int(i) // 10 for i in chosen} == {0, 1}  # both distinct rows are among them
