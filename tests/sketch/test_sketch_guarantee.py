"""The seed-000 guarantees, measured: k-means on the sketch vs k-means on the input.

Synthetic data: k = 5 Gaussian clusters, 2000 features, 1000 points. Over 10 seeds, the
original-space k-means objective of the partition found on the sketch must be at most
(2 + eps) times that of the partition found on the input for random projection and the
approximate SVD (Theorems 12, 13), and at most (3 + eps) times for leverage-score
selection (Theorem 11). scikit-learn's KMeans is the clusterer on both sides.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from streamkm.sketch import ApproxSVD, LeverageScoreSelector, RandomProjection
from streamkm.sketch._base import BaseSketcher

pytestmark = pytest.mark.unit

K, N_FEATURES, N_POINTS, EPS = 5, 2000, 1000, 0.5
SEEDS = range(10)


def separated_clusters(seed: int, spread: float = 2.0) -> np.ndarray:
    """Centers N(0, spread^2 I), points = center + N(0, I), cluster sizes uniform at random."""
    rng = np.random.default_rng(10_000 + seed)  # independent of the sketchers' seeds
    centers = spread * rng.standard_normal((K, N_FEATURES))
    labels = rng.integers(0, K, N_POINTS)
    return centers[labels] + rng.standard_normal((N_POINTS, N_FEATURES))


def kmeans_objective(x: np.ndarray, labels: np.ndarray) -> float:
    """Sum of squared distances of the rows of ``x`` to their cluster's mean."""
    total = 0.0
    for j in np.unique(labels):
        members = x[labels == j]
        total += float(np.sum((members - members.mean(axis=0)) ** 2))
    return total


def kmeans_labels(x: np.ndarray, seed: int) -> np.ndarray:
    return KMeans(K, n_init=3, random_state=seed).fit(x).labels_


SKETCHERS: dict[str, tuple[Callable[[int], BaseSketcher], float]] = {
    "gaussian": (lambda s: RandomProjection(n_clusters=K, eps=EPS, random_state=s), 2 + EPS),
    "sign": (lambda s: RandomProjection(n_clusters=K, eps=EPS, kind="sign", random_state=s), 2 + EPS),
    "sparse": (lambda s: RandomProjection(n_clusters=K, eps=EPS, kind="sparse", random_state=s), 2 + EPS),
    "svd": (lambda s: ApproxSVD(K, eps=EPS, random_state=s), 2 + EPS),
    "leverage": (lambda s: LeverageScoreSelector(n_clusters=K, eps=EPS, random_state=s), 3 + EPS),
}


@pytest.fixture(scope="module", autouse=True)
def single_threaded_blas():
    """On the shared 2-core machine, BLAS/OpenMP threads only spin against each other."""
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def problems() -> list[tuple[np.ndarray, float]]:
    """(data, objective of the unsketched partition) per seed."""
    out = []
    for seed in SEEDS:
        x = separated_clusters(seed)
        out.append((x, kmeans_objective(x, kmeans_labels(x, seed))))
    return out


def test_bound_is_not_vacuous(problems: list[tuple[np.ndarray, float]]) -> None:
    # A partition ignoring the data is far above (3 + eps) x optimal, so the bounds bite.
    x, best = problems[0]
    random_labels = np.random.default_rng(0).integers(0, K, N_POINTS)
    assert kmeans_objective(x, random_labels) > (3 + EPS) * best


@pytest.mark.parametrize("name", sorted(SKETCHERS))
def test_sketched_partition_within_bound(name: str, problems: list[tuple[np.ndarray, float]]) -> None:
    make, bound = SKETCHERS[name]
    ratios = []
    for seed, (x, best) in zip(SEEDS, problems):
        sketch = make(seed).fit_transform(x)
        ratios.append(kmeans_objective(x, kmeans_labels(sketch, seed)) / best)
    assert max(ratios) <= bound, f"{name}: ratios {np.round(ratios, 4).tolist()}"
