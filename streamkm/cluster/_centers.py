"""Center stores of the mini-batch engine.

``SupportCenters`` represents each center as a truncated convex combination of stored rows
in the kernel's feature space; ``ExplicitCenters`` keeps explicit centroid
vectors for the linear kernel (the fast path). Both apply the same update rule
C_j <- (1 - alpha_j) C_j + alpha_j cm(B_j) and report the batch objective before and after.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamkm._numba import centers as _nc
from streamkm.cluster._raw_rows import (
    RawRows,
    cluster_means,
    raw_from_arrays,
    raw_to_arrays,
    stack_rows,
)
from streamkm.exceptions import ValidationError
from streamkm.kernels import KernelSpec

__all__ = ["StepOutcome", "SupportCenters", "ExplicitCenters", "learning_rates", "sq_norms"]

_CROSS_BLOCK_ELEMENTS = 1 << 22  # kernel-block entries per chunk in center_inner_products


def _check_split_raw(keeps_raw: bool, raw_a: RawRows | None, raw_b: RawRows | None) -> None:
    if keeps_raw and (raw_a is None or raw_b is None):
        raise ValidationError("this store keeps raw rows: split needs raw_a and raw_b")
    if not keeps_raw and (raw_a is not None or raw_b is not None):
        raise ValidationError("this store keeps no raw rows: raw_a / raw_b are not accepted")


def _raw_mean(raw: RawRows) -> np.ndarray:
    """Dense float64 mean of raw rows (dense or CSR)."""
    return np.asarray(raw.mean(axis=0), dtype=np.float64).ravel()


@dataclass
class _Segment:
    """One center's slice of a :class:`SupportCenters` store."""

    rows: np.ndarray
    sq_norms: np.ndarray
    weights: np.ndarray
    tags: np.ndarray
    gram: np.ndarray
    raw: RawRows | None


def sq_norms(x: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of each row, in x's dtype."""
    return np.einsum("ij,ij->i", x, x)


def learning_rates(
    kind: str, batch_counts: np.ndarray, batch_size: int, counts: np.ndarray
) -> np.ndarray:
    """alpha_j: ``"sqrt"`` -> sqrt(b_j / b); ``"count"`` -> b_j / (v_j + b_j) (0 where b_j = 0)."""
    bc = batch_counts.astype(np.float64)
    if kind == "sqrt":
        return np.sqrt(bc / float(batch_size))
    denom = counts.astype(np.float64) + bc
    return np.divide(bc, denom, out=np.zeros_like(bc), where=denom > 0)


@dataclass(frozen=True)
class StepOutcome:
    """What one pass of a batch through a center store found and did."""

    labels: np.ndarray
    min_sq_distances: np.ndarray
    batch_counts: np.ndarray
    objective_before: float
    objective_after: float | None


def _assign(diag: np.ndarray, inner: np.ndarray, cc: np.ndarray, dtype: np.dtype
            ) -> tuple[np.ndarray, np.ndarray, float]:
    n = inner.shape[0]
    labels = np.empty(n, dtype=np.int64)
    mind = np.empty(n, dtype=dtype)
    total = _nc.nearest_center(diag, inner, cc, labels, mind)
    return labels, mind, float(total) / n


def _weighted_mean(values: np.ndarray, sample_weight: np.ndarray) -> float:
    """sum_i w_i v_i / sum_i w_i in float64 (the weighted batch objective)."""
    return float(np.dot(sample_weight, values.astype(np.float64)) / sample_weight.sum())


def _weighted_counts(labels: np.ndarray, k: int, sample_weight: np.ndarray) -> np.ndarray:
    """Per-cluster sums of integer multiplicities, exact as int64."""
    return np.rint(np.bincount(labels, weights=sample_weight, minlength=k)).astype(np.int64)


class SupportCenters:
    """Centers C_j = sum_{s in S_j} w_s phi(s) over truncated sliding windows of rows.

    Support rows are stored grouped by center (segment j is ``offsets[j]:offsets[j+1]``) and,
    inside a segment, oldest batch first. Per center the Gram matrix G_j = K(S_j, S_j) is
    cached, so CC_j = <C_j, C_j> = w^T G_j w costs no kernel evaluation.

    Truncation keeps, per center, the newest batches whose row counts sum to at most ``tau``
    (the newest batch always stays) and renormalises the weights to sum 1.
    """

    def __init__(
        self, kernel: KernelSpec, tau: int, *, rows: np.ndarray, row_sq_norms: np.ndarray,
        weights: np.ndarray, tags: np.ndarray, offsets: np.ndarray, grams: list[np.ndarray],
        next_tag: int, raw: RawRows | None = None,
    ) -> None:
        self.kernel = kernel
        self.raw = raw
        self.tau = int(tau)
        self.rows = rows
        self.row_sq_norms = row_sq_norms
        self.weights = weights
        self.tags = tags
        self.offsets = offsets
        self.grams = grams
        self.next_tag = int(next_tag)
        self.center_sq_norms = np.array(
            [float(w @ (g @ w)) for w, g in zip(self._segments(weights), grams)]
        )

    @classmethod
    def from_seeds(cls, kernel: KernelSpec, tau: int, x: np.ndarray, idx: np.ndarray
                   ) -> SupportCenters:
        """One center per seed row phi(x[idx[j]]), each with weight 1."""
        rows = np.ascontiguousarray(x[idx])
        k = len(idx)
        diag = kernel.diagonal(rows)
        return cls(
            kernel, tau, rows=rows, row_sq_norms=sq_norms(rows),
            weights=np.ones(k), tags=np.zeros(k, dtype=np.int64),
            offsets=np.arange(k + 1, dtype=np.int64),
            grams=[diag[j:j + 1].reshape(1, 1).copy() for j in range(k)], next_tag=1,
        )

    @classmethod
    def from_sample_weights(
        cls, kernel: KernelSpec, tau: int, sample: np.ndarray, kmat: np.ndarray,
        weights: np.ndarray, raw_sample: RawRows | None = None,
    ) -> SupportCenters:
        """Centers given as convex weights (k, n) over the sample rows with Gram ``kmat``."""
        supports = [np.flatnonzero(w > 0) for w in weights]
        idx = np.concatenate(supports)
        sizes = np.array([s.shape[0] for s in supports], dtype=np.int64)
        rows = np.ascontiguousarray(sample[idx])
        return cls(
            kernel, tau, rows=rows, row_sq_norms=sq_norms(rows),
            weights=np.concatenate([w[s] for w, s in zip(weights, supports)]),
            tags=np.zeros(idx.shape[0], dtype=np.int64),
            offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            grams=[np.ascontiguousarray(kmat[np.ix_(s, s)]) for s in supports], next_tag=1,
            raw=None if raw_sample is None else raw_sample[idx],
        )

    @property
    def n_clusters(self) -> int:
        return self.offsets.shape[0] - 1

    @property
    def dtype(self) -> np.dtype:
        return self.rows.dtype

    def _segments(self, arr: np.ndarray) -> list[np.ndarray]:
        return [arr[self.offsets[j]:self.offsets[j + 1]] for j in range(self.n_clusters)]

    def support_sizes(self) -> np.ndarray:
        """Number of support rows per center."""
        return np.diff(self.offsets)

    def inner_products(self, x: np.ndarray, x_sq: np.ndarray) -> np.ndarray:
        """<phi(x_i), C_j> for every row and center, shape (n, k)."""
        kblock = self.kernel.block(x, self.rows, x_sq=x_sq, y_sq=self.row_sq_norms)
        out = np.zeros((x.shape[0], self.n_clusters), dtype=x.dtype)
        return _nc.segment_inner_products(
            kblock, self.offsets[:-1], self.offsets[1:], self.weights, out
        )

    def sq_distances(self, x: np.ndarray, x_sq: np.ndarray, diag: np.ndarray) -> np.ndarray:
        """||phi(x_i) - C_j||^2, shape (n, k), clipped at 0."""
        inner = self.inner_products(x, x_sq)
        return _nc.sq_distances_from_inner(diag, inner, self.center_sq_norms, inner)

    def step(
        self, x: np.ndarray, x_sq: np.ndarray, diag: np.ndarray, *, learning_rate: str,
        counts: np.ndarray, update: bool, raw: RawRows | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> StepOutcome:
        """Assign the batch; if ``update``, move the centers toward its cluster means.

        ``raw`` holds the batch's raw rows when the store keeps raw support rows.
        ``sample_weight`` (float64 holding positive integers): each row stands for that many
        records. Learning rates use the weighted b_j and b, a center's batch part is the
        weighted mean of its rows (row weight alpha_j w_i / b_j), truncation counts rows,
        and ``batch_counts`` are the weighted (exact integer) counts.
        Kernel work: K(B, S) against the current supports, and when updating K(B, B) with
        the batch's columns ordered by cluster, so every center's new support is a
        contiguous range of columns in one of the two blocks.
        """
        b = x.shape[0]
        k = self.n_clusters
        k_old = self.kernel.block(x, self.rows, x_sq=x_sq, y_sq=self.row_sq_norms)
        lo, hi = self.offsets[:-1], self.offsets[1:]
        # Partial sums per batch group (a run of one tag inside a segment): the centers
        # before the update and their truncated old parts after it are sums of groups.
        starts_group = np.zeros(self.rows.shape[0], dtype=bool)
        starts_group[lo] = True
        starts_group[1:] |= self.tags[1:] != self.tags[:-1]
        group_lo = np.flatnonzero(starts_group).astype(np.int64)
        group_hi = np.concatenate([group_lo[1:], [self.rows.shape[0]]]).astype(np.int64)
        group_owner = np.searchsorted(hi, group_lo, side="right")
        group_sums = np.zeros((b, group_lo.shape[0]))
        _nc.segment_inner_products(k_old, group_lo, group_hi, self.weights, group_sums)
        membership = np.zeros((group_lo.shape[0], k))
        membership[np.arange(group_lo.shape[0]), group_owner] = 1.0
        inner = group_sums @ membership
        labels, mind, before = _assign(diag, inner, self.center_sq_norms, x.dtype)
        row_counts = np.bincount(labels, minlength=k).astype(np.int64)
        batch_counts = row_counts
        weighted_b = b
        if sample_weight is not None:
            batch_counts = _weighted_counts(labels, k, sample_weight)
            weighted_b = int(batch_counts.sum())
            before = _weighted_mean(mind, sample_weight)
        if not update:
            return StepOutcome(labels, mind, batch_counts, before, None)

        order = np.argsort(labels, kind="stable")
        x_sorted = x[order]
        k_new = self.kernel.block(x, x_sorted, x_sq=x_sq, y_sq=x_sq[order])
        starts = np.concatenate([[0], np.cumsum(row_counts)]).astype(np.int64)
        alpha = learning_rates(learning_rate, batch_counts, weighted_b, counts)
        keep_from = lo.copy()
        old_weights = self.weights.copy()  # indexed by column of k_old
        old_scale = np.ones(k)
        new_weights = np.zeros(b)  # indexed by column of k_new
        tag = self.next_tag
        grams = list(self.grams)
        rows, row_sq, tags, weights, raws = [], [], [], [], []
        for j in range(k):
            bj = int(row_counts[j])
            if bj:
                keep_from[j] = lo[j] + self._truncation_start(self.tags[lo[j]:hi[j]], bj)
                kept = slice(keep_from[j], hi[j])
                new = slice(starts[j], starts[j + 1])
                total = (1.0 - alpha[j]) * self.weights[kept].sum() + alpha[j]
                old_scale[j] = (1.0 - alpha[j]) / total
                old_weights[kept] *= old_scale[j]
                members = order[new]
                if sample_weight is None:
                    new_weights[new] = alpha[j] / bj / total
                else:
                    new_weights[new] = (alpha[j] / float(batch_counts[j]) / total
                                        * sample_weight[members])
                k_new_old = k_old[members, kept]
                g_old = self.grams[j][keep_from[j] - lo[j]:, keep_from[j] - lo[j]:]
                grams[j] = np.ascontiguousarray(
                    np.block([[g_old, k_new_old.T], [k_new_old, k_new[members, new]]])
                )
                rows += [self.rows[kept], x_sorted[new]]
                row_sq += [self.row_sq_norms[kept], x_sq[members]]
                tags += [self.tags[kept], np.full(bj, tag, dtype=np.int64)]
                weights += [old_weights[kept], new_weights[new]]
                if self.raw is not None:
                    raws += [self.raw[kept], raw[members]]
            else:
                rows.append(self.rows[lo[j]:hi[j]])
                row_sq.append(self.row_sq_norms[lo[j]:hi[j]])
                tags.append(self.tags[lo[j]:hi[j]])
                weights.append(self.weights[lo[j]:hi[j]])
                if self.raw is not None:
                    raws.append(self.raw[lo[j]:hi[j]])

        # Old part of each center after the update: its kept groups, rescaled.
        kept_groups = np.flatnonzero(group_lo >= keep_from[group_owner])
        coeff = np.zeros((group_lo.shape[0], k))
        coeff[kept_groups, group_owner[kept_groups]] = old_scale[group_owner[kept_groups]]
        inner = group_sums @ coeff
        _nc.segment_inner_products(k_new, starts[:-1], starts[1:], new_weights, inner)
        self.rows = np.ascontiguousarray(np.concatenate(rows))
        self.row_sq_norms = np.concatenate(row_sq)
        self.tags = np.concatenate(tags)
        self.weights = np.concatenate(weights)
        if self.raw is not None:
            self.raw = stack_rows(raws)
        sizes = (hi - keep_from) + row_counts
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.grams = grams
        self.center_sq_norms = np.array(
            [float(w @ (g @ w)) for w, g in zip(self._segments(self.weights), grams)]
        )
        self.next_tag = tag + 1
        _, mind_after, after = _assign(diag, inner, self.center_sq_norms, x.dtype)
        if sample_weight is not None:
            after = _weighted_mean(mind_after, sample_weight)
        return StepOutcome(labels, mind, batch_counts, before, after)

    def _truncation_start(self, tags: np.ndarray, n_new: int) -> int:
        """Index of the first old row to keep so that old kept rows + n_new <= tau."""
        budget = self.tau - n_new
        if budget <= 0 or tags.shape[0] == 0:
            return tags.shape[0]
        # Rows are oldest batch first: walk batches from the newest while they fit.
        boundaries = np.flatnonzero(np.diff(tags)) + 1
        starts = np.concatenate([[0], boundaries])
        sizes_from_end = tags.shape[0] - starts  # rows kept if we start at each batch start
        fitting = starts[sizes_from_end <= budget]
        return int(fitting[0]) if fitting.shape[0] else tags.shape[0]

    # ------------------------------------------------------------------ structure (drift)
    def _segment(self, j: int) -> _Segment:
        a, b = int(self.offsets[j]), int(self.offsets[j + 1])
        return _Segment(self.rows[a:b], self.row_sq_norms[a:b], self.weights[a:b],
                        self.tags[a:b], self.grams[j], None if self.raw is None else self.raw[a:b])

    def _mean_segment(self, rows: np.ndarray, raw: RawRows | None, tag: int) -> _Segment:
        rows = np.ascontiguousarray(rows, dtype=self.dtype)
        n = rows.shape[0]
        if n == 0:
            raise ValidationError("a split half must hold at least one row, got 0")
        sq = sq_norms(rows)
        gram = np.ascontiguousarray(self.kernel.block(rows, rows, x_sq=sq, y_sq=sq))
        return _Segment(rows, sq, np.full(n, 1.0 / n), np.full(n, tag, dtype=np.int64), gram,
                        raw)

    def _assemble(self, segments: list[_Segment]) -> None:
        self.rows = np.ascontiguousarray(np.concatenate([s.rows for s in segments]))
        self.row_sq_norms = np.concatenate([s.sq_norms for s in segments])
        self.weights = np.concatenate([s.weights for s in segments]).astype(np.float64)
        self.tags = np.concatenate([s.tags for s in segments]).astype(np.int64)
        if self.raw is not None:
            self.raw = stack_rows([s.raw for s in segments])
        sizes = np.array([s.rows.shape[0] for s in segments], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.grams = [s.gram for s in segments]
        self.center_sq_norms = np.array(
            [float(w @ (g @ w)) for w, g in zip(self._segments(self.weights), self.grams)]
        )

    def split(self, j: int, rows_a: np.ndarray, rows_b: np.ndarray, *,
              raw_a: RawRows | None = None, raw_b: RawRows | None = None) -> None:
        """Replace center j by the mean of ``rows_a`` and append the mean of ``rows_b``.

        Each new center is supported by its rows with equal weights, as one new batch tag
        (so the next updates truncate it like any batch); its Gram matrix is computed.
        ``raw_a`` / ``raw_b`` are the rows' raw versions, required when the store keeps raw
        rows. Other centers are unchanged; the new center is the last one.
        """
        _check_split_raw(self.raw is not None, raw_a, raw_b)
        segments = [self._segment(i) for i in range(self.n_clusters)]
        tag = self.next_tag
        segments[j] = self._mean_segment(rows_a, raw_a, tag)
        segments.append(self._mean_segment(rows_b, raw_b, tag))
        self.next_tag = tag + 1
        self._assemble(segments)

    def merge(self, keep: int, drop: int, size_keep: float, size_drop: float) -> int:
        """Merge center ``drop`` into ``keep``: (n_k C_keep + n_d C_drop) / (n_k + n_d).

        The merged support is the union of both supports, ordered by batch tag (oldest
        first, so truncation still drops the oldest batches), with the weights scaled by
        n_k / (n_k + n_d) and n_d / (n_k + n_d) (halves when both sizes are 0); its Gram
        matrix needs the cross block K(S_keep, S_drop). Center ``drop`` is removed (later
        centers move down one position). Returns the merged center's new position.
        """
        if keep == drop:
            raise ValidationError(f"cannot merge center {keep!r} with itself")
        segments = [self._segment(i) for i in range(self.n_clusters)]
        a, b = segments[keep], segments[drop]
        total = float(size_keep) + float(size_drop)
        share = float(size_keep) / total if total > 0 else 0.5
        cross = self.kernel.block(a.rows, b.rows, x_sq=a.sq_norms, y_sq=b.sq_norms)
        order = np.argsort(np.concatenate([a.tags, b.tags]), kind="stable")
        gram = np.block([[a.gram, cross], [cross.T, b.gram]])[np.ix_(order, order)]
        raw = None if a.raw is None else stack_rows([a.raw, b.raw])[order]
        segments[keep] = _Segment(
            np.concatenate([a.rows, b.rows])[order],
            np.concatenate([a.sq_norms, b.sq_norms])[order],
            np.concatenate([a.weights * share, b.weights * (1.0 - share)])[order],
            np.concatenate([a.tags, b.tags])[order], np.ascontiguousarray(gram), raw,
        )
        del segments[drop]
        self._assemble(segments)
        return keep - int(keep > drop)

    def center_inner_products(self) -> np.ndarray:
        """<C_a, C_b> for every pair of centers, shape (k, k), float64.

        One pass of kernel blocks over the supports in row chunks:
        <C_a, C_b> = sum_{s in S_a} w_s <phi(s), C_b>; the diagonal is <C_j, C_j>.
        """
        n = self.rows.shape[0]
        k = self.n_clusters
        chunk = max(1, _CROSS_BLOCK_ELEMENTS // max(n, 1))
        out = np.zeros((k, k))
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            per_row = self.inner_products(self.rows[lo:hi], self.row_sq_norms[lo:hi])
            owner = np.searchsorted(self.offsets[1:], np.arange(lo, hi), side="right")
            np.add.at(out, owner, per_row.astype(np.float64) * self.weights[lo:hi, None])
        out = 0.5 * (out + out.T)
        out[np.diag_indices(k)] = self.center_sq_norms
        return out

    def reproject(self, rows: np.ndarray) -> None:
        """Replace the support rows by new features of the same rows (a new sketch).

        Weights and batch tags stay; norms, Gram matrices and <C_j, C_j> are recomputed.
        """
        self.rows = np.ascontiguousarray(rows)
        self.row_sq_norms = sq_norms(self.rows)
        self.grams = [
            np.ascontiguousarray(self.kernel.block(self.rows[a:b], self.rows[a:b]))
            for a, b in zip(self.offsets[:-1], self.offsets[1:])
        ]
        self.center_sq_norms = np.array(
            [float(w @ (g @ w)) for w, g in zip(self._segments(self.weights), self.grams)]
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The store's state as plain arrays (see :meth:`from_arrays`)."""
        sizes = self.support_sizes()
        raw = {} if self.raw is None else raw_to_arrays(self.raw, "support_raw")
        return {
            **raw,
            "support_rows": self.rows,
            "support_sq_norms": self.row_sq_norms,
            "support_weights": self.weights,
            "support_tags": self.tags,
            "support_offsets": self.offsets,
            "support_grams": (np.concatenate([g.ravel() for g in self.grams])
                              if sizes.sum() else np.empty(0, self.dtype)),
            "center_sq_norms": self.center_sq_norms,
        }

    @classmethod
    def from_arrays(cls, kernel: KernelSpec, tau: int, arrays: dict[str, np.ndarray],
                    next_tag: int) -> SupportCenters:
        """Rebuild a store from :meth:`to_arrays` output, bit for bit."""
        offsets = arrays["support_offsets"].astype(np.int64)
        sizes = np.diff(offsets)
        flat = arrays["support_grams"]
        if flat.shape[0] != int((sizes ** 2).sum()):
            raise ValueError(
                f"support_grams has {flat.shape[0]} values, expected {int((sizes ** 2).sum())}"
            )
        bounds = np.concatenate([[0], np.cumsum(sizes ** 2)])
        grams = [flat[bounds[j]:bounds[j + 1]].reshape(sizes[j], sizes[j]).copy()
                 for j in range(sizes.shape[0])]
        store = cls(
            kernel, tau, rows=np.ascontiguousarray(arrays["support_rows"]),
            row_sq_norms=arrays["support_sq_norms"].copy(),
            weights=arrays["support_weights"].astype(np.float64),
            tags=arrays["support_tags"].astype(np.int64), offsets=offsets, grams=grams,
            next_tag=next_tag, raw=raw_from_arrays(arrays, "support_raw"),
        )
        store.center_sq_norms = arrays["center_sq_norms"].astype(np.float64)
        return store


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

    def step(
        self, x: np.ndarray, x_sq: np.ndarray, diag: np.ndarray, *, learning_rate: str,
        counts: np.ndarray, update: bool, raw: RawRows | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> StepOutcome:
        """Assign the batch; if ``update``, move the centroids toward its cluster means
        (weighted means with ``sample_weight``, see :meth:`SupportCenters.step`)."""
        b = x.shape[0]
        k = self.n_clusters
        labels, mind, before = _assign(diag, x @ self.centers.T, self.center_sq_norms, x.dtype)
        if sample_weight is not None:
            return self._weighted_step(x, diag, labels, mind, learning_rate=learning_rate,
                                       counts=counts, update=update,
                                       sample_weight=sample_weight)
        sums = np.empty((k, x.shape[1]), dtype=np.float64)
        batch_counts = np.empty(k, dtype=np.int64)
        if not update:
            return StepOutcome(labels, mind, np.bincount(labels, minlength=k).astype(np.int64),
                               before, None)
        _nc.cluster_sums(x, labels, k, sums, batch_counts)
        alpha = learning_rates(learning_rate, batch_counts, b, counts)
        moved = batch_counts > 0
        means = sums[moved] / batch_counts[moved, None]
        a = alpha[moved, None]
        self.centers[moved] = ((1.0 - a) * self.centers[moved] + a * means).astype(x.dtype)
        if self.raw is not None:
            raw_means = cluster_means(raw, labels, batch_counts)
            self.raw[moved] = (1.0 - a) * self.raw[moved] + a * raw_means[moved]
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)
        _, _, after = _assign(diag, x @ self.centers.T, self.center_sq_norms, x.dtype)
        return StepOutcome(labels, mind, batch_counts, before, after)

    def _weighted_step(self, x: np.ndarray, diag: np.ndarray, labels: np.ndarray,
                       mind: np.ndarray, *, learning_rate: str, counts: np.ndarray,
                       update: bool, sample_weight: np.ndarray) -> StepOutcome:
        k = self.n_clusters
        batch_counts = _weighted_counts(labels, k, sample_weight)
        before = _weighted_mean(mind, sample_weight)
        if not update:
            return StepOutcome(labels, mind, batch_counts, before, None)
        membership = np.zeros((k, x.shape[0]))
        membership[labels, np.arange(x.shape[0])] = sample_weight
        sums = membership @ x.astype(np.float64)
        alpha = learning_rates(learning_rate, batch_counts, int(batch_counts.sum()), counts)
        moved = batch_counts > 0
        means = sums[moved] / batch_counts[moved, None]
        a = alpha[moved, None]
        self.centers[moved] = ((1.0 - a) * self.centers[moved] + a * means).astype(x.dtype)
        self.center_sq_norms = sq_norms(self.centers).astype(np.float64)
        _, mind_after, _ = _assign(diag, x @ self.centers.T, self.center_sq_norms, x.dtype)
        return StepOutcome(labels, mind, batch_counts, before,
                           _weighted_mean(mind_after, sample_weight))

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
