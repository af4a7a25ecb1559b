"""The outlier pool: flagged rows held in quarantine until they form a new cluster or leave.

With drift handling on and ``outlier_alpha`` set, every flagged row of a step enters the
pool with the step it arrived in. It stays there for at most ``quarantine_batches`` steps
(and the pool keeps at most ``capacity`` rows, the oldest leave first).

Flagged rows still join their cluster's novelty buffer, so the flag rate stays calibrated,
but only as many as chance explains keep their distance (:func:`capped_distances`): in a
cluster given n rows, the count of flags that chance exceeds with probability ``alpha``
(``poisson.ppf(1 - alpha, alpha * n)``), the nearest of them. The rest join capped at the
farthest member the buffer already holds. On an inlier stream the flags of a batch rarely
exceed that count, so the buffers are as they would be; a new mode flagged by the dozen
cannot pull its cluster's buffer out to itself, and its rows stay flagged until they are
born as a cluster.

Birth criterion (:func:`birth_test`): the *seed* is the pool's rows whose nearest center
(now) is the center nearest to most of the pool (the first on ties); the *group* is the
pool's rows nearer the seed's mean than to their nearest center (so the cluster's own tail
rows drop out and rows of the same mode nearest another center join). It becomes a new
cluster when it holds at least ``birth_rows`` rows and

1. it arrives *faster than chance*: it holds more rows than the flags chance exceeds with
   probability ``alpha`` among the cluster's m rows of the steps the group arrived in,
   were they flagged at the calibrated score's highest rate, ``2 alpha`` (the band
   [alpha / 2, 2 alpha] docs/novelty.md measures): ``poisson.ppf(1 - alpha, 2 alpha m)``;
2. it is *separate* from that cluster: giving it its own center lowers the group's SSE by
   at least the fraction a drift split must reach,
   ``1 - SSE(group around its mean) / SSE(group around the cluster's center)
   >= split threshold``; and
3. it is *compact*: the median squared kernel distance of its rows to their own mean is at
   most the median of that cluster's recent members' distances (its novelty buffer).

A group that passes all three must also be *apart* from that cluster (:func:`gap_test`):
placed on the line from the cluster's center (position 0) to the group's mean (position 1),
the cluster's recent rows and the group's must leave a gap, the middle third [1/3, 2/3)
holding significantly fewer rows than the emptier of the outer thirds [0, 1/3) and
[2/3, inf) (one-sided binomial test at level ``alpha`` of the middle third's share of the
two, against 1/2). A density that only falls along the line (the edge of a Gaussian
cluster) or only rises (the pile-up at the end of a graph kernel's leading coordinate, a
cosine of the position along a connected cluster) puts the middle third's mass between
those of the outer two, so a cluster's own tail is refused; a new mode is a second hump
beyond a gap. The rows of a refused group leave the pool and join the cluster's novelty
buffer at their distance, so the buffer learns the tail and flags it at the calibrated
rate again.

A cluster's own tail rows fail (1) (they are flagged at the rate ``alpha`` promises) and
mostly (2) (their mean is near the center) or the gap test, scattered noise fails
(3) (spread wider than a cluster), a new mode at least as tight as its nearest cluster
passes them all. Pooled rows nearest to a newborn cluster join it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binomtest, poisson

from streamkm._core.raw_rows import RawRows, raw_from_arrays, raw_to_arrays, stack_rows
from streamkm.kernels import KernelSpec

__all__ = ["AxisGap", "BirthTest", "OutlierPool", "birth_test", "capped_distances",
           "gap_test", "chance_flags", "largest_group", "line_positions", "rows_in"]


@dataclass(frozen=True)
class BirthTest:
    """The figures of one birth test on a group of pooled rows.

    Attributes
    ----------
    near : int
        Position of the center nearest to the group's rows.
    rows : ndarray of int64
        Positions of the group's rows in the pool.
    sse_reduction : float
        1 - SSE around the group's mean / SSE around the cluster's center.
    spread : float
        Median squared kernel distance of the group's rows to their mean.
    member_spread : float
        Median squared kernel distance of the cluster's recent members to its center.
    chance_rows : float
        Most group rows chance explains (``poisson.ppf(1 - alpha, 2 alpha m)``).
    passed : bool
        Both conditions hold.
    """

    near: int
    rows: np.ndarray
    sse_reduction: float
    spread: float
    member_spread: float
    chance_rows: float
    passed: bool


@dataclass(frozen=True)
class AxisGap:
    """The gap test of a group that passed :func:`birth_test`.

    Attributes
    ----------
    bridge_rows : int
        Rows in the middle third [1/3, 2/3) of the line from the cluster's center to the
        group's mean.
    side_rows : int
        Rows in the emptier of the outer thirds, [0, 1/3) and [2/3, inf).
    pvalue : float
        One-sided binomial p-value of ``bridge_rows`` among ``bridge_rows + side_rows``
        against 1/2 (1.0 when both are 0).
    passed : bool
        ``pvalue <= alpha``: the middle third is significantly emptier, a gap.
    """

    bridge_rows: int
    side_rows: int
    pvalue: float
    passed: bool


class OutlierPool:
    """Bounded quarantine of flagged rows (engine features, optional raw rows).

    Parameters
    ----------
    n_features : int
        Width of the engine's rows.
    dtype : numpy dtype
        dtype of the engine's rows.
    capacity : int
        Most rows held.
    keeps_raw : bool
        Whether raw rows are kept beside the engine's rows.
    """

    def __init__(self, n_features: int, dtype: Any, capacity: int, *, keeps_raw: bool
                 ) -> None:
        self.capacity = int(capacity)
        self.keeps_raw = bool(keeps_raw)
        self.rows = np.empty((0, int(n_features)), dtype=np.dtype(dtype))
        self.raw: RawRows | None = None
        self.steps = np.empty(0, dtype=np.int64)

    @property
    def size(self) -> int:
        return int(self.rows.shape[0])

    def add(self, step: int, x: np.ndarray, raw: RawRows | None) -> None:
        """Admit rows ``x`` (flagged in ``step``) and let go of rows that arrived
        ``quarantine_batches`` or more steps before and of the oldest beyond ``capacity``."""
        if x.shape[0] == 0:
            return
        self.rows = np.ascontiguousarray(np.concatenate([self.rows, x.astype(self.rows.dtype)]))
        if self.keeps_raw and raw is not None:
            self.raw = raw if self.raw is None else stack_rows([self.raw, raw])
        self.steps = np.concatenate([self.steps, np.full(x.shape[0], int(step), np.int64)])

    def release(self, step: int, quarantine_batches: int) -> None:
        """Let go of rows that arrived ``quarantine_batches`` or more steps before ``step``
        and of the oldest rows beyond ``capacity``."""
        leave = self.steps <= int(step) - int(quarantine_batches)
        excess = self.size - self.capacity
        if excess > 0:
            leave[:excess] = True  # rows are kept in arrival order
        self.take(np.flatnonzero(leave))

    def take(self, positions: np.ndarray) -> tuple[np.ndarray, RawRows | None]:
        """Remove the rows at ``positions``; returns their (rows, raw rows)."""
        mask = np.zeros(self.size, dtype=bool)
        mask[positions] = True
        rows = self.rows[mask]
        raw = None if self.raw is None else self.raw[np.flatnonzero(mask)]
        keep = np.flatnonzero(~mask)
        self.rows = np.ascontiguousarray(self.rows[keep])
        if self.raw is not None:
            self.raw = self.raw[keep] if keep.shape[0] else None
        self.steps = self.steps[keep]
        return rows, raw

    def clear(self, n_features: int | None = None) -> None:
        """Drop every row (the feature space changed; ``n_features``: its new width, if it
        changed too: a graph kernel's features have as many columns as its fit chose)."""
        self.take(np.arange(self.size))
        if n_features is not None:
            self.rows = np.empty((0, int(n_features)), dtype=self.rows.dtype)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The pool as arrays named ``<prefix><name>``."""
        out = {prefix + "rows": self.rows.copy(), prefix + "steps": self.steps.copy()}
        if self.raw is not None:
            out.update(raw_to_arrays(self.raw, prefix + "raw"))
        return out

    def load_arrays(self, arrays: dict[str, Any], prefix: str) -> None:
        """Restore the rows written by :meth:`to_arrays` (an absent pool stays empty)."""
        if prefix + "rows" not in arrays:
            return
        self.rows = np.ascontiguousarray(arrays[prefix + "rows"], dtype=self.rows.dtype)
        self.steps = np.asarray(arrays[prefix + "steps"], dtype=np.int64).copy()
        self.raw = raw_from_arrays(arrays, prefix + "raw")
        sizes = {self.rows.shape[0], self.steps.shape[0]} | ({self.raw.shape[0]} if self.raw is not None else set())
        if len(sizes) != 1:
            raise ValueError(f"outlier pool arrays disagree in length: {sorted(sizes)!r}")


def capped_distances(labels: np.ndarray, sq_distances: np.ndarray, outliers: np.ndarray,
                     buffers: Any, alpha: float) -> np.ndarray:
    """``sq_distances`` with the flagged rows beyond chance capped (see the module text).

    In each cluster with n rows in the batch, up to ``poisson.ppf(1 - alpha, alpha * n)``
    flagged rows (the count chance exceeds with probability ``alpha``), the nearest ones,
    keep their distance; the others are capped at the largest value the cluster's novelty
    buffer holds (``buffers``: the :class:`~streamkm.cluster._novelty.NoveltyBuffers` the
    rows were scored against)."""
    flagged = np.flatnonzero(outliers)
    if not flagged.shape[0]:
        return sq_distances
    out = sq_distances.copy()
    rows = np.bincount(labels, minlength=buffers.sizes.shape[0])
    allowed = chance_flags(alpha, rows)
    order = flagged[np.lexsort((sq_distances[flagged], labels[flagged]))]
    rank = np.arange(order.shape[0]) - np.searchsorted(labels[order], labels[order])
    excess = order[rank >= allowed[labels[order]]]
    j = labels[excess]
    farthest = buffers.ordered[j, np.maximum(buffers.sizes[j] - 1, 0)]
    out[excess] = np.minimum(out[excess], farthest.astype(out.dtype))
    return out


def largest_group(nearest: np.ndarray) -> tuple[int, np.ndarray]:
    """The value most of ``nearest`` hold (the lowest on ties) and where it is."""
    values, counts = np.unique(nearest, return_counts=True)
    near = int(values[int(np.argmax(counts))])
    return near, np.flatnonzero(nearest == near)


def _own_distances(gram: np.ndarray) -> np.ndarray:
    """Squared kernel distance of each row to the mean of all rows, from their Gram matrix."""
    return np.maximum(np.diagonal(gram) - 2.0 * gram.mean(axis=1) + gram.mean(), 0.0)


def birth_test(rows: np.ndarray, nearest_sq_distances: np.ndarray, seed: np.ndarray,
               member_distances: np.ndarray, kernel: KernelSpec, split_threshold: float,
               birth_rows: int, chance_rows: float, near: int) -> BirthTest:
    """Test whether the pooled rows around the group ``seed`` form a new cluster.

    The group is the pool's rows nearer the mean of the ``seed`` rows (those nearest the
    center ``near``) than to their nearest center: the seed less the cluster's own tail
    rows, plus rows of the same new mode that are nearest another center. It is tested
    when it holds at least ``birth_rows`` rows.

    Parameters
    ----------
    rows : ndarray of shape (n, d)
        The pool's engine rows.
    nearest_sq_distances : ndarray of shape (n,)
        Their squared kernel distances to their nearest centers.
    seed : ndarray of int64
        Positions of the rows nearest the center ``near``.
    member_distances : ndarray
        Squared kernel distances of that cluster's recent members to its center.
    kernel : KernelSpec
        The model's kernel.
    split_threshold : float
        SSE reduction a drift split must reach.
    birth_rows : int
        Fewest rows of a group that can be born.
    chance_rows : float
        Most rows of the group that chance explains (:func:`chance_flags`).
    near : int
        The center's position (kept in the result).
    """
    sq = np.einsum("ij,ij->i", rows, rows)
    gram = np.asarray(kernel.block(rows, rows, x_sq=sq, y_sq=sq), dtype=np.float64)
    to_seed_mean = np.maximum(np.diagonal(gram) - 2.0 * gram[:, seed].mean(axis=1)
                              + gram[np.ix_(seed, seed)].mean(), 0.0)
    keep = np.flatnonzero(to_seed_mean < nearest_sq_distances)
    if keep.shape[0] < birth_rows:
        return BirthTest(near=near, rows=keep, sse_reduction=float("nan"),
                         spread=float("nan"), member_spread=float("nan"),
                         chance_rows=chance_rows, passed=False)
    own = _own_distances(gram[np.ix_(keep, keep)])
    sse_near = float(np.sum(nearest_sq_distances[keep], dtype=np.float64))
    reduction = 1.0 - float(own.sum()) / sse_near if sse_near > 0 else 0.0
    spread = float(np.median(own))
    member_spread = float(np.median(member_distances)) if member_distances.size else np.nan
    passed = bool(keep.shape[0] > chance_rows and reduction >= split_threshold
                  and member_distances.size > 0 and spread <= member_spread)
    return BirthTest(near=near, rows=keep, sse_reduction=reduction, spread=spread,
                     member_spread=member_spread, chance_rows=chance_rows, passed=passed)


def chance_flags(alpha: float, n_rows: Any, rate: float | None = None) -> Any:
    """The number of flags among ``n_rows`` rows that chance exceeds with probability
    ``alpha`` when each row is flagged with probability ``rate`` (default ``alpha``)."""
    rate = float(alpha) if rate is None else float(rate)
    return poisson.ppf(1.0 - float(alpha), rate * np.asarray(n_rows, dtype=np.float64))


def rows_in(rows: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Mask of the rows of ``rows`` that occur, bit for bit, among the rows of ``among``."""
    if rows.shape[0] == 0 or among.shape[0] == 0:
        return np.zeros(rows.shape[0], dtype=bool)
    kind = np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))
    a = np.ascontiguousarray(rows).view(kind).ravel()
    b = np.ascontiguousarray(among.astype(rows.dtype, copy=False)).view(kind).ravel()
    return np.isin(a, b)


def line_positions(to_center: np.ndarray, to_mean: np.ndarray, offset: float) -> np.ndarray:
    """Position of rows on the line from a center (0) to a group's mean (1) in the kernel's
    feature space: the projection ``<x - c, m - c> / |m - c|^2``, from the rows' squared
    distances to the center and to the mean and ``offset = |m - c|^2``."""
    return (np.asarray(to_center, np.float64) - np.asarray(to_mean, np.float64)
            + offset) / (2.0 * offset)


def gap_test(positions: np.ndarray, alpha: float) -> AxisGap:
    """Is there a gap between a cluster and a group on the line from its center (0) to the
    group's mean (1)?

    Parameters
    ----------
    positions : ndarray
        :func:`line_positions` of the cluster's recent rows and the group's rows (rows at
        negative positions, on the far side of the center, are not counted).
    alpha : float
        Level of the one-sided binomial test (the model's ``outlier_alpha``).

    Returns
    -------
    AxisGap
        The middle third's count, the emptier outer third's count, the p-value and whether
        the middle third is significantly emptier than both outer thirds.
    """
    t = np.asarray(positions, dtype=np.float64)
    t = t[np.isfinite(t) & (t >= 0.0)]
    near = int(np.count_nonzero(t < 1.0 / 3.0))
    far = int(np.count_nonzero(t >= 2.0 / 3.0))
    bridge = t.shape[0] - near - far
    side = min(near, far)
    if bridge + side == 0:
        return AxisGap(bridge_rows=0, side_rows=0, pvalue=1.0, passed=False)
    pvalue = float(binomtest(bridge, bridge + side, 0.5, alternative="less").pvalue)
    return AxisGap(bridge_rows=bridge, side_rows=side, pvalue=pvalue,
                   passed=pvalue <= float(alpha))
