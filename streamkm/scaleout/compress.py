"""Bounded update messages: a uniform subsample of each cluster's rows with multiplicities."""

from __future__ import annotations

import numpy as np

from streamkm.exceptions import ParameterError

__all__ = ["subsample_per_cluster"]


def subsample_per_cluster(labels: np.ndarray, n_clusters: int, cap: int,
                          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pick at most ``cap`` rows per cluster, uniformly, with integer multiplicities.

    For a cluster with b_j rows: all of them (multiplicity 1) when b_j <= cap; otherwise
    ``cap`` rows drawn without replacement, each with multiplicity floor(b_j / cap), and
    b_j mod cap of them (drawn uniformly) one more, so the multiplicities sum to b_j exactly.

    Parameters
    ----------
    labels : ndarray of shape (n,), int
        Cluster of each row, in [0, n_clusters).
    n_clusters : int
        Number of clusters.
    cap : int
        Most rows kept per cluster (the model's ``tau``), >= 1.
    rng : numpy Generator
        Source of the draws.

    Returns
    -------
    rows : ndarray of int64
        Indices of the kept rows (ascending within each cluster, clusters in order).
    multiplicities : ndarray of int64
        Records each kept row stands for; ``multiplicities.sum() == len(labels)``.
    """
    if cap < 1:
        raise ParameterError(f"cap must be >= 1, got {cap!r}")
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= n_clusters):
        raise ParameterError(f"labels must lie in [0, {n_clusters}), got range "
                             f"[{labels.min()}, {labels.max()}]")
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=n_clusters)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    rows: list[np.ndarray] = []
    mults: list[np.ndarray] = []
    for j in range(n_clusters):
        members = order[bounds[j]:bounds[j + 1]]
        b = members.shape[0]
        if b == 0:
            continue
        if b <= cap:
            rows.append(members)
            mults.append(np.ones(b, dtype=np.int64))
            continue
        chosen = np.sort(rng.choice(members, size=cap, replace=False))
        mult = np.full(cap, b // cap, dtype=np.int64)
        extra = b % cap
        if extra:
            mult[rng.choice(cap, size=extra, replace=False)] += 1
        rows.append(chosen)
        mults.append(mult)
    if not rows:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(rows).astype(np.int64), np.concatenate(mults)
