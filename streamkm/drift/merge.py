"""Choosing which two clusters to merge: the pair of smallest Ward cost (Foundations of Data Science).

Merging clusters a and b raises the k-means cost by
n_a n_b / (n_a + n_b) ||C_a - C_b||^2 (:func:`streamkm.batch.ward.ward_cost`), where the
squared distance between the centers is taken in the kernel's feature space from their
inner products: ||C_a - C_b||^2 = <C_a, C_a> + <C_b, C_b> - 2 <C_a, C_b>.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamkm.batch.ward import ward_cost
from streamkm.exceptions import ValidationError

__all__ = ["MergeChoice", "most_redundant_pair", "redundancy_matrix", "ward_cost_matrix",
           "smallest_ward_pair"]


@dataclass(frozen=True)
class MergeChoice:
    """The pair of cluster positions (a < b) to merge and its Ward cost."""

    a: int
    b: int
    cost: float


def ward_cost_matrix(center_inner: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Ward cost of merging every pair of clusters, shape (k, k), +inf on the diagonal.

    Parameters
    ----------
    center_inner : ndarray of shape (k, k)
        Inner products <C_a, C_b> of the centers in feature space.
    sizes : ndarray of shape (k,)
        Non-negative cluster sizes (weights); a pair of two empty clusters costs 0.
    """
    g = np.asarray(center_inner, dtype=np.float64)
    n = np.asarray(sizes, dtype=np.float64)
    k = n.shape[0]
    if g.shape != (k, k):
        raise ValidationError(
            f"center_inner must have shape ({k}, {k}) to match sizes, got {g.shape!r}"
        )
    if (n < 0).any() or not np.isfinite(n).all():
        raise ValidationError(f"sizes must be finite and >= 0, got {n!r}")
    diag = np.diagonal(g)
    sq = np.maximum(diag[:, None] + diag[None, :] - 2.0 * g, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cost = np.asarray(ward_cost(n[:, None], n[None, :], sq))
    cost = np.where(np.isnan(cost), 0.0, cost)
    np.fill_diagonal(cost, np.inf)
    return cost


def smallest_ward_pair(center_inner: np.ndarray, sizes: np.ndarray) -> MergeChoice:
    """The pair (a, b), a < b, of smallest Ward cost (the first in row order on ties)."""
    cost = ward_cost_matrix(center_inner, sizes)
    a, b = _smallest_pair(cost)
    return MergeChoice(a=a, b=b, cost=float(cost[a, b]))


def _smallest_pair(matrix: np.ndarray) -> tuple[int, int]:
    """(a, b), a < b, of the smallest entry above the diagonal (the first in row order)."""
    k = matrix.shape[0]
    if k < 2:
        raise ValidationError(f"need at least 2 clusters to merge, got {k}")
    upper = np.where(np.triu(np.ones((k, k), dtype=bool), 1), matrix, np.inf)
    a, b = divmod(int(np.argmin(upper)), k)
    return int(a), int(b)


def redundancy_matrix(center_inner: np.ndarray, sizes: np.ndarray,
                      sse: np.ndarray) -> np.ndarray:
    """Share of each pair's merged SSE that keeping the two apart saves, shape (k, k).

    cost / (cost + SSE_a + SSE_b), ``cost`` the pair's Ward cost: 0 for two clusters with
    the same center, near 1 for two tight clusters far apart. +inf on the diagonal and for
    a pair whose SSE is unknown (NaN) or whose merged SSE is 0.
    """
    return _share_of_merged_sse(ward_cost_matrix(center_inner, sizes), sse)


def _share_of_merged_sse(cost: np.ndarray, sse: np.ndarray) -> np.ndarray:
    """:func:`redundancy_matrix` from the pairs' Ward costs."""
    e = np.asarray(sse, dtype=np.float64)
    if e.shape != cost.shape[:1]:
        raise ValidationError(f"sse must have shape ({cost.shape[0]},) to match sizes, "
                              f"got {e.shape!r}")
    total = cost + e[:, None] + e[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = cost / total
    share = np.where(np.isfinite(share) & (total > 0), share, np.inf)
    np.fill_diagonal(share, np.inf)
    return share


def most_redundant_pair(center_inner: np.ndarray, sizes: np.ndarray,
                        sse: np.ndarray) -> tuple[MergeChoice, float] | None:
    """The pair (a, b), a < b, whose separation saves the smallest share of its merged SSE
    (:func:`redundancy_matrix`; the first in row order on ties) and that share; None when
    no pair has a known share."""
    cost = ward_cost_matrix(center_inner, sizes)
    share = _share_of_merged_sse(cost, sse)
    a, b = _smallest_pair(share)
    if not np.isfinite(share[a, b]):
        return None
    return MergeChoice(a=a, b=b, cost=float(cost[a, b])), float(share[a, b])
