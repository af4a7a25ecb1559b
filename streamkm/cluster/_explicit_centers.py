"""Explicit centroid vectors: the center store of the linear kernel (the fast path of
the mini-batch engine, same update rule as :class:`~streamkm.cluster._centers.SupportCenters`)."""

from __future__ import annotations

import numpy as np

from streamkm._core.raw_rows import RawRows, cluster_means
from streamkm._numba import centers as _nc
from streamkm._numba.lloyd import cluster_sums
from streamkm.cluster._step_rules import (
    Screen,
    StepOutcome,
    _assign,
    _check_split_raw,
    _kept_rows,
    _raw_mean,
    _weighted_counts,
    _weighted_mean,
    learning_rates,
    sq_norms,
)
from streamkm.exceptions import ValidationError

__all__ = ["ExplicitCenters"]


class ExplicitCenters:
    """Explicit centroid vectors for the linear kernel (no support sets)."""

    def __init__(self, centers: np.ndarray, raw: np.ndarray | None = None) -> None:
        self.centers = np.ascontiguousarray(centers)
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)
        self.raw = raw  # (k, D) float64 raw-space centroids, updated by the same rule

    @classmethod
    def from_seeds(cls, x: np.ndarray, idx: np.ndarray) -> ExplicitCenters:
        return cls(x[idx].copy())

    @classmethod
    def from_sample_weights(cls, sample: np.ndarray, weights: np.ndarray,
                            raw_sample: RawRows | None = None) -> ExplicitCenters:
        """Centers given as convex weights (k, n) over the sample rows."""
        raw = None if raw_sample is None else np.asarray(raw_sample.T @ weights.T).T
        return cls((weights @ sample).astype(sample.dtype), raw)

    @property
    def n_clusters(self) -> int:
        return self.centers.shape[0]

    @property
    def dtype(self) -> np.dtype:
        return self.centers.dtype

    def support_sizes(self) -> np.ndarray:
        return np.ones(self.n_clusters, dtype=np.int64)

    def sq_distances(self, x: np.ndarray, x_sq: np.ndarray, diag: np.ndarray) -> np.ndarray:
        inner = x @ self.centers.T
        return _nc.sq_distances_from_inner(diag, inner, self.center_sq_norms, inner)

    def own_sq_distances(self, x: np.ndarray, diag: np.ndarray, labels: np.ndarray
                         ) -> np.ndarray:
        """Squared distance of each row of ``x`` to its own center ``labels`` only: the
        entries of :meth:`sq_distances` at the labels, clipped at 0 the same way."""
        own = (diag - 2.0 * np.einsum("ij,ij->i", x, self.centers[labels])
               + self.center_sq_norms[labels])
        return np.maximum(own, 0.0).astype(x.dtype, copy=False)

    def step(
        self, x: np.ndarray, x_sq: np.ndarray, diag: np.ndarray, *, learning_rate: str,
        counts: np.ndarray, update: bool, raw: RawRows | None = None,
        sample_weight: np.ndarray | None = None, rng: np.random.Generator | None = None,
        screen: Screen | None = None,
    ) -> StepOutcome:
        """Assign the batch; if ``update``, move the centroids toward its cluster means
        (weighted means with ``sample_weight``, rows a ``screen`` excludes left out, see
        :meth:`SupportCenters.step`; ``rng`` is unused: explicit centroids keep no support
        rows to subsample)."""
        b = x.shape[0]
        k = self.n_clusters
        labels, mind, before, second, second_d = _assign(diag, x @ self.centers.T,
                                                         self.center_sq_norms, x.dtype)
        kept = _kept_rows(None if screen is None else screen(labels, mind, None))
        if sample_weight is not None or kept is not None:
            batch_counts, before, after = self._weighted_step(
                x, diag, labels, mind, learning_rate=learning_rate, counts=counts,
                update=update, sample_weight=sample_weight, raw=raw, kept=kept, before=before)
            return StepOutcome(labels, mind, batch_counts, before, after, second, second_d)
        sums = np.empty((k, x.shape[1]), dtype=np.float64)
        batch_counts = np.empty(k, dtype=np.int64)
        if not update:
            return StepOutcome(labels, mind, np.bincount(labels, minlength=k).astype(np.int64),
                               before, None, second, second_d)
        cluster_sums(x, labels, sums, batch_counts)
        alpha = learning_rates(learning_rate, batch_counts, b, counts)
        moved = batch_counts > 0
        means = sums[moved] / batch_counts[moved, None]
        a = alpha[moved, None]
        self.centers[moved] = ((1.0 - a) * self.centers[moved] + a * means).astype(x.dtype)
        if self.raw is not None:
            raw_means = cluster_means(raw, labels, batch_counts)
            self.raw[moved] = (1.0 - a) * self.raw[moved] + a * raw_means[moved]
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)
        after = _assign(diag, x @ self.centers.T, self.center_sq_norms, x.dtype)[2]
        return StepOutcome(labels, mind, batch_counts, before, after, second, second_d)

    def _weighted_step(self, x: np.ndarray, diag: np.ndarray, labels: np.ndarray,
                       mind: np.ndarray, *, learning_rate: str, counts: np.ndarray,
                       update: bool, sample_weight: np.ndarray | None,
                       raw: RawRows | None, kept: np.ndarray | None, before: float
                       ) -> tuple[np.ndarray, float, float | None]:
        """Batch counts and the objectives before and after a step whose rows carry
        weights (1 without ``sample_weight``) and whose update sees the ``kept`` rows only
        (all when None)."""
        k = self.n_clusters
        weights = np.ones(x.shape[0]) if sample_weight is None else sample_weight
        batch_counts = _weighted_counts(labels, k, weights)
        if sample_weight is not None:
            before = _weighted_mean(mind, sample_weight)
        if not update:
            return batch_counts, before, None
        update_weights = weights
        if kept is not None:
            update_weights = np.zeros_like(weights)
            update_weights[kept] = weights[kept]
        update_counts = _weighted_counts(labels, k, update_weights)
        membership = np.zeros((k, x.shape[0]))
        membership[labels, np.arange(x.shape[0])] = update_weights
        sums = membership @ x.astype(np.float64)
        alpha = learning_rates(learning_rate, update_counts, max(int(update_counts.sum()), 1),
                               counts)
        moved = update_counts > 0
        means = sums[moved] / update_counts[moved, None]
        a = alpha[moved, None]
        self.centers[moved] = ((1.0 - a) * self.centers[moved] + a * means).astype(x.dtype)
        if self.raw is not None:
            raw_means = cluster_means(raw, labels, update_counts, update_weights)
            self.raw[moved] = (1.0 - a) * self.raw[moved] + a * raw_means[moved]
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)
        _, mind_after, after, _, _ = _assign(diag, x @ self.centers.T, self.center_sq_norms,
                                             x.dtype)
        if sample_weight is not None:
            after = _weighted_mean(mind_after, sample_weight)
        return batch_counts, before, after

    def split(self, j: int, rows_a: np.ndarray, rows_b: np.ndarray, *,
              raw_a: RawRows | None = None, raw_b: RawRows | None = None) -> None:
        """Replace center j by the mean of ``rows_a`` and append the mean of ``rows_b``
        (raw centroids from ``raw_a`` / ``raw_b`` when the store keeps them)."""
        _check_split_raw(self.raw is not None, raw_a, raw_b)
        if rows_a.shape[0] == 0 or rows_b.shape[0] == 0:
            raise ValidationError(
                f"a split half must hold at least one row, got {rows_a.shape[0]} and "
                f"{rows_b.shape[0]}"
            )
        means = [np.asarray(r, dtype=np.float64).mean(axis=0) for r in (rows_a, rows_b)]
        self.centers[j] = means[0].astype(self.dtype)
        self.centers = np.ascontiguousarray(
            np.vstack([self.centers, means[1].astype(self.dtype)[None, :]]))
        if self.raw is not None:
            self.raw[j] = _raw_mean(raw_a)
            self.raw = np.vstack([self.raw, _raw_mean(raw_b)[None, :]])
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)

    def append(self, rows: np.ndarray, *, raw: RawRows | None = None) -> None:
        """Append a new last center, the mean of ``rows`` (raw centroid from ``raw`` when
        the store keeps them)."""
        _check_split_raw(self.raw is not None, raw, raw)
        if rows.shape[0] == 0:
            raise ValidationError("a new center needs at least one row, got 0")
        mean = np.asarray(rows, dtype=np.float64).mean(axis=0).astype(self.dtype)
        self.centers = np.ascontiguousarray(np.vstack([self.centers, mean[None, :]]))
        if self.raw is not None:
            self.raw = np.vstack([self.raw, _raw_mean(raw)[None, :]])
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)

    def remove(self, j: int) -> None:
        """Remove center j (later centers move down one position)."""
        self.centers = np.ascontiguousarray(np.delete(self.centers, j, axis=0))
        if self.raw is not None:
            self.raw = np.delete(self.raw, j, axis=0)
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)

    def merge(self, keep: int, drop: int, size_keep: float, size_drop: float) -> int:
        """Merge center ``drop`` into ``keep`` (size-weighted mean, halves when both sizes
        are 0); ``drop`` is removed. Returns the merged center's new position."""
        if keep == drop:
            raise ValidationError(f"cannot merge center {keep!r} with itself")
        total = float(size_keep) + float(size_drop)
        share = float(size_keep) / total if total > 0 else 0.5
        merged = (share * self.centers[keep].astype(np.float64)
                  + (1.0 - share) * self.centers[drop].astype(np.float64))
        self.centers[keep] = merged.astype(self.dtype)
        self.centers = np.ascontiguousarray(np.delete(self.centers, drop, axis=0))
        if self.raw is not None:
            self.raw[keep] = share * self.raw[keep] + (1.0 - share) * self.raw[drop]
            self.raw = np.delete(self.raw, drop, axis=0)
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)
        return keep - int(keep > drop)

    def center_inner_products(self) -> np.ndarray:
        """<C_a, C_b> for every pair of centers, shape (k, k), float64."""
        c = self.centers.astype(np.float64)
        out = c @ c.T
        out[np.diag_indices(self.n_clusters)] = self.center_sq_norms
        return out

    def reproject(self, centers: np.ndarray) -> None:
        """Replace the centers by the new features of their raw centroids (a new sketch)."""
        self.centers = np.ascontiguousarray(centers)
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)

    def to_arrays(self) -> dict[str, np.ndarray]:
        raw = {} if self.raw is None else {"raw_centers": self.raw}
        return {"centers": self.centers, "center_sq_norms": self.center_sq_norms, **raw}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> ExplicitCenters:
        raw = arrays.get("raw_centers")
        store = cls(arrays["centers"].copy(), None if raw is None else raw.copy())
        store.center_sq_norms = arrays["center_sq_norms"].astype(np.float64)
        return store
