"""Per-cluster spread monitor: EWMA of the mean squared kernel distance + Page-Hinkley alarm.

For every cluster j and every batch that gives it at least ``min_batch_rows`` rows, the
monitor takes x_t = mean squared kernel distance of those rows to the center (measured
before the update, so it costs nothing extra) and updates

* e_t = e_{t-1} + s (x_t - e_{t-1})               (EWMA, ``smoothing`` s; e_1 = x_1)
* r   = mean of x_t over the first ``warmup_batches`` observations   (reference level)
* g_t = max(0, g_{t-1} + e_t / r - 1 - delta)       (one-sided Page-Hinkley / CUSUM)

and raises an alarm when g_t > ``threshold`` outside a cool-down. An alarm stays raised
until the cluster is split or, after ``max_rejections`` rejected bisections in a row, its
current spread e_t becomes its new reference level r (and g is reset). Working on the relative
rise e_t / r - 1 makes the parameters independent of the kernel's scale. The monitor also
keeps an EWMA of the number of rows per batch of each cluster (its *recent size*, the
weight of the cluster in Ward merges).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SpreadMonitor"]

_ARRAY_NAMES = ("ewma", "reference", "reference_sum", "statistic", "recent_size")
_INT_ARRAY_NAMES = ("n_observed", "cooldown", "rejections")
_REFERENCE_FLOOR = 1e-12


class SpreadMonitor:
    """Drift statistics of k clusters, held as arrays indexed by cluster position.

    Parameters
    ----------
    n_clusters : int
        Number of clusters to start with.
    smoothing, warmup_batches, delta, threshold, min_batch_rows, cooldown_batches, max_rejections
        See :class:`streamkm.drift.DriftPolicy`.
    """

    def __init__(self, n_clusters: int, *, smoothing: float, warmup_batches: int,
                 delta: float, threshold: float, min_batch_rows: int,
                 cooldown_batches: int, max_rejections: int) -> None:
        self.smoothing = float(smoothing)
        self.warmup_batches = int(warmup_batches)
        self.delta = float(delta)
        self.threshold = float(threshold)
        self.min_batch_rows = int(min_batch_rows)
        self.cooldown_batches = int(cooldown_batches)
        self.max_rejections = int(max_rejections)
        k = int(n_clusters)
        self.ewma = np.full(k, np.nan)
        self.reference = np.full(k, np.nan)
        self.reference_sum = np.zeros(k)
        self.statistic = np.zeros(k)
        self.recent_size = np.full(k, np.nan)
        self.n_observed = np.zeros(k, dtype=np.int64)
        self.cooldown = np.zeros(k, dtype=np.int64)
        self.rejections = np.zeros(k, dtype=np.int64)

    @property
    def n_clusters(self) -> int:
        return int(self.ewma.shape[0])

    def observe(self, batch_counts: np.ndarray, sq_distance_sums: np.ndarray) -> np.ndarray:
        """Record one batch; return the alarmed cluster positions, most alarmed first.

        Parameters
        ----------
        batch_counts : ndarray of int, shape (k,)
            Rows of the batch assigned to each cluster.
        sq_distance_sums : ndarray of float, shape (k,)
            Sum of the squared kernel distances of those rows to their center.
        """
        counts = batch_counts.astype(np.float64)
        s = self.smoothing
        fresh = np.isnan(self.recent_size)
        self.recent_size = np.where(
            fresh, counts, self.recent_size + s * (counts - self.recent_size))
        self.cooldown = np.maximum(self.cooldown - 1, 0)
        seen = batch_counts >= self.min_batch_rows
        x = np.divide(sq_distance_sums, counts, out=np.zeros_like(counts), where=counts > 0)
        first = seen & np.isnan(self.ewma)
        self.ewma = np.where(first, x, self.ewma)
        later = seen & ~first
        self.ewma[later] += s * (x[later] - self.ewma[later])
        self.n_observed[seen] += 1
        warming = seen & (self.n_observed <= self.warmup_batches)
        self.reference_sum[warming] += x[warming]
        done = warming & (self.n_observed == self.warmup_batches)
        self.reference[done] = self.reference_sum[done] / self.warmup_batches
        testing = seen & (self.n_observed > self.warmup_batches)
        rise = self.ewma[testing] / np.maximum(self.reference[testing], _REFERENCE_FLOOR) - 1.0
        self.statistic[testing] = np.maximum(0.0, self.statistic[testing] + rise - self.delta)
        alarmed = np.flatnonzero(
            (self.statistic > self.threshold) & (self.cooldown == 0) & ~np.isnan(self.reference)
        )
        return alarmed[np.argsort(-self.statistic[alarmed], kind="stable")]

    def reject(self, j: int) -> bool:
        """A bisection of cluster j was rejected: cool down; after ``max_rejections`` in a
        row accept its current spread as the new normal. Returns True if it rebaselined."""
        self.cooldown[j] = self.cooldown_batches
        self.rejections[j] += 1
        if self.rejections[j] < self.max_rejections:
            return False
        if not np.isnan(self.ewma[j]):
            self.reference[j] = self.ewma[j]
        self.statistic[j] = 0.0
        self.rejections[j] = 0
        return True

    def restart(self, j: int) -> None:
        """Forget cluster j's spread history: a new warm-up sets its reference again."""
        self.ewma[j] = np.nan
        self.reference[j] = np.nan
        self.reference_sum[j] = 0.0
        self.statistic[j] = 0.0
        self.n_observed[j] = 0
        self.cooldown[j] = self.cooldown_batches
        self.rejections[j] = 0

    def rescale(self, factors: np.ndarray) -> None:
        """Multiply each cluster's spread levels by ``factors`` (the spread's change of scale
        under a new sketch); clusters with a non-finite or non-positive factor restart."""
        good = np.isfinite(factors) & (factors > 0)
        f = np.where(good, factors, 1.0)
        self.ewma *= f
        self.reference *= f
        self.reference_sum *= f
        for j in np.flatnonzero(~good):
            self.restart(int(j))

    def split(self, j: int, fraction_kept: float) -> None:
        """Cluster j became two: j keeps ``fraction_kept`` of its recent size, a new last
        cluster gets the rest; both warm up again."""
        size = self.recent_size[j]
        for name in _ARRAY_NAMES + _INT_ARRAY_NAMES:
            arr = getattr(self, name)
            setattr(self, name, np.append(arr, arr[j]))
        self.recent_size[j] = size * fraction_kept
        self.recent_size[-1] = size * (1.0 - fraction_kept)
        self.restart(j)
        self.restart(self.n_clusters - 1)

    def merge(self, keep: int, drop: int) -> None:
        """Cluster ``drop`` joined ``keep``: sizes add up, ``drop`` is removed (later positions
        shift down) and the merged cluster warms up again."""
        self.recent_size[keep] = np.nansum([self.recent_size[keep], self.recent_size[drop]])
        for name in _ARRAY_NAMES + _INT_ARRAY_NAMES:
            setattr(self, name, np.delete(getattr(self, name), drop))
        self.restart(keep - int(keep > drop))

    def append(self, size: float) -> None:
        """A new last cluster of recent size ``size``, warming up."""
        for name in _ARRAY_NAMES + _INT_ARRAY_NAMES:
            arr = getattr(self, name)
            setattr(self, name, np.append(arr, 0))
        self.recent_size[-1] = float(size)
        self.restart(self.n_clusters - 1)

    def remove(self, j: int) -> None:
        """Forget cluster j (later positions shift down)."""
        for name in _ARRAY_NAMES + _INT_ARRAY_NAMES:
            setattr(self, name, np.delete(getattr(self, name), j))

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The statistics as arrays named ``<prefix><name>``."""
        return {prefix + name: getattr(self, name).copy()
                for name in _ARRAY_NAMES + _INT_ARRAY_NAMES}

    def load_arrays(self, arrays: dict[str, Any], prefix: str) -> None:
        """Restore the statistics written by :meth:`to_arrays`."""
        for name in _ARRAY_NAMES:
            setattr(self, name, np.asarray(arrays[prefix + name], dtype=np.float64).copy())
        for name in _INT_ARRAY_NAMES:
            setattr(self, name, np.asarray(arrays[prefix + name], dtype=np.int64).copy())
        sizes = {getattr(self, name).shape for name in _ARRAY_NAMES + _INT_ARRAY_NAMES}
        if len(sizes) != 1:
            raise ValueError(f"drift monitor arrays disagree in shape: {sorted(sizes)!r}")
