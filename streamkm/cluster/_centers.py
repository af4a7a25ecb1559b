"""Center stores of the mini-batch engine.

``SupportCenters`` represents each center as a truncated convex combination of stored rows
in the kernel's feature space; ``ExplicitCenters`` (:mod:`streamkm.cluster._explicit_centers`)
keeps explicit centroid vectors for the linear kernel (the fast path). Both apply the same
update rule C_j <- (1 - alpha_j) C_j + alpha_j cm(B_j) and report the batch objective before
and after.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamkm._core.raw_rows import RawRows, raw_from_arrays, raw_to_arrays, stack_rows
from streamkm._core.threads import block_threads, row_chunks, run_row_chunks, step_threads
from streamkm._numba import centers as _nc
from streamkm._numba import kernels as _nk
from streamkm._numba import novelty as _nn
from streamkm.cluster._explicit_centers import ExplicitCenters
from streamkm.cluster._step_rules import (
    Screen,
    StepOutcome,
    _check_split_raw,
    _kept_rows,
    _weighted_counts,
    _weighted_mean,
    learning_rates,
    sq_norms,
)
from streamkm.exceptions import ValidationError
from streamkm.kernels import KernelSpec

__all__ = ["StepOutcome", "SupportCenters", "ExplicitCenters", "learning_rates", "sq_norms"]

_CROSS_BLOCK_ELEMENTS = 1 << 22  # kernel-block entries per chunk in center_inner_products


@dataclass
class _Segment:
    """One center's slice of a :class:`SupportCenters` store."""

    rows: np.ndarray
    sq_norms: np.ndarray
    weights: np.ndarray
    tags: np.ndarray
    gram: np.ndarray
    raw: RawRows | None


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of range(starts[j], ends[j]) over j, as int64."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    before = np.cumsum(lengths) - lengths
    return (np.arange(total, dtype=np.int64)
            + np.repeat(np.asarray(starts, dtype=np.int64) - before, lengths))


def _block_segment_sums(kernel: KernelSpec, x: np.ndarray, x_sq: np.ndarray, y: np.ndarray,
                        y_sq: np.ndarray, lo: np.ndarray, hi: np.ndarray, weights: np.ndarray,
                        out: np.ndarray) -> np.ndarray:
    """The kernel block K(x, y), adding its weighted segment sums to ``out`` (see
    :func:`streamkm._numba.centers.segment_inner_products`).

    rbf (the default kernel) sums while each row is still in cache; other kernels sum over
    the finished block.
    """
    if kernel.name == "rbf" and x.shape[0] and y.shape[0]:
        block = x @ y.T
        _nk.rbf_segment_sums(block, x_sq, y_sq, float(kernel.gamma), lo, hi, weights, out)
        return block
    block = kernel.block(x, y, x_sq=x_sq, y_sq=y_sq)
    _nc.segment_inner_products(block, lo, hi, weights, out)
    return block


class SupportCenters:
    """Centers C_j = sum_{s in S_j} w_s phi(s) over truncated sliding windows of rows.

    Support rows are stored grouped by center (segment j is ``offsets[j]:offsets[j+1]``) and,
    inside a segment, oldest batch first. Per center the Gram matrix G_j = K(S_j, S_j) is
    cached, so CC_j = <C_j, C_j> = w^T G_j w costs no kernel evaluation.

    Truncation keeps, per center, the newest batches whose row counts sum to at most ``tau``
    and renormalises the weights to sum 1. The newest batch always stays, subsampled to
    ``tau`` rows when larger (:meth:`_newest_rows`), so a center updated at least once holds
    at most ``tau`` rows: the store holds at most k * tau rows (d values each, plus the raw
    row when kept) and k * tau^2 Gram values; a step's transient workspace is bounded in
    docs/engine.md ("Memory bound").
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

    def _groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Batch groups (runs of one tag inside a segment): first rows, ends, owning
        center, and each center's first group (k + 1 entries)."""
        n = self.rows.shape[0]
        starts = np.zeros(n, dtype=bool)
        starts[self.offsets[:-1]] = True
        starts[1:] |= self.tags[1:] != self.tags[:-1]
        group_lo = np.flatnonzero(starts)
        group_hi = np.append(group_lo[1:], n)
        owner = np.searchsorted(self.offsets[1:], group_lo, side="right")
        center_groups = np.searchsorted(group_lo, self.offsets)
        return group_lo, group_hi, owner, center_groups

    def _recycled(self, key: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A buffer for the next ``key`` array ("rows", "grams"): the one this store filled
        two steps ago when it is large enough, else a new one.

        Large fresh allocations come from the OS page by page (every page zeroed on first
        touch); alternating between two buffers this store allocated itself avoids that.
        Arrays handed out (``to_arrays``) are copies, so no caller sees a buffer reused.
        """
        spares = self.__dict__.setdefault("_spares", {})
        owned = self.__dict__.setdefault("_owned", {})
        spare = spares.pop(key, None)
        if (spare is None or spare.dtype != dtype or spare.shape[1:] != shape[1:]
                or spare.shape[0] < shape[0]):
            spare = np.empty((shape[0] + shape[0] // 8,) + tuple(shape[1:]), dtype=dtype)
        if key in owned:
            spares[key] = owned[key]
        owned[key] = spare
        return spare[:shape[0]]

    def _release_buffers(self) -> None:
        """Forget the recycled buffers (the arrays now come from elsewhere)."""
        self.__dict__.pop("_spares", None)
        self.__dict__.pop("_owned", None)

    def _gram_buffer(self) -> tuple[np.ndarray, np.ndarray]:
        """All Gram matrices as one row-major buffer and each one's start (k + 1 entries).

        ``grams`` are views into this buffer after a step; when one was replaced (split,
        merge, restore) the buffer is rebuilt.
        """
        flat = getattr(self, "_gram_flat", None)
        owner = None if flat is None else (flat if flat.base is None else flat.base)
        if flat is None or len(self.grams) != self.n_clusters or any(
                g.base is not owner for g in self.grams):
            sizes = np.array([g.shape[0] for g in self.grams], dtype=np.int64)
            self._gram_start = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
            flat = np.empty(int(self._gram_start[-1]), dtype=self.dtype)
            for g, a in zip(self.grams, self._gram_start[:-1]):
                flat[a:a + g.size] = g.ravel()
            self._set_grams(flat, self._gram_start, sizes)
        return self._gram_flat, self._gram_start

    def _set_grams(self, flat: np.ndarray, start: np.ndarray, sizes: np.ndarray) -> None:
        self._gram_flat = flat
        self._gram_start = start
        self.grams = [flat[a:a + n * n].reshape(n, n) for a, n in zip(start[:-1], sizes)]

    def _newest_rows(self, labels: np.ndarray, row_counts: np.ndarray,
                     sample_weight: np.ndarray | None, rng: np.random.Generator | None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The batch rows each center keeps as its newest support, and their shares.

        Returns ``members`` (batch row indices grouped by center, batch order inside),
        ``new_start`` (k + 1 offsets into ``members``) and ``share`` (per member, summing
        to 1 per center: the member's part of the center's batch mean cm(B_j)).

        A center given at most ``tau`` rows keeps them all, share w_i / W_j (w_i the row's
        weight, 1 without ``sample_weight``; W_j their sum): the exact batch mean. A center
        given more keeps a subsample drawn by systematic sampling on a random order of its
        rows: ``tau`` points spaced W_j / tau apart with a uniform random start over the
        cumulated weights; row i is hit h_i times, E[h_i] = tau w_i / W_j, and gets share
        h_i / tau. So the kept part is an unbiased estimate of cm(B_j) with at most ``tau``
        rows (without weights: a uniform sample of exactly ``tau`` rows without
        replacement, share 1 / tau each).
        """
        b = labels.shape[0]
        k = row_counts.shape[0]
        w = np.ones(b) if sample_weight is None else sample_weight
        order = np.argsort(labels, kind="stable")
        totals = np.bincount(labels, weights=w, minlength=k)
        share = w / totals[labels]
        over = row_counts > self.tau
        if not over.any():
            return order, np.concatenate([[0], np.cumsum(row_counts)]), share[order]
        gen = rng if rng is not None else np.random.default_rng(self.next_tag)
        shuffled = np.lexsort((gen.random(b), labels))
        lab = labels[shuffled]
        cum = np.cumsum(w[shuffled])
        first = np.concatenate([[0], np.cumsum(row_counts)])[:-1]
        before_cluster = np.where(first > 0, cum[np.maximum(first - 1, 0)], 0.0)
        end = cum - before_cluster[lab]
        begin = end - w[shuffled]
        start = gen.random(k)[lab]
        scale = self.tau / totals[lab]
        hits = (np.clip(np.ceil(end * scale - start), 0, self.tau)
                - np.clip(np.ceil(begin * scale - start), 0, self.tau))
        hit_totals = np.bincount(lab, weights=hits, minlength=k)
        sampled = over[lab]
        share[shuffled[sampled]] = hits[sampled] / hit_totals[lab[sampled]]
        keep = np.ones(b, dtype=bool)
        keep[shuffled[sampled]] = hits[sampled] > 0
        members = order[keep[order]]
        new_counts = np.bincount(labels[members], minlength=k)
        return members, np.concatenate([[0], np.cumsum(new_counts)]), share[members]

    def step(
        self, x: np.ndarray, x_sq: np.ndarray, diag: np.ndarray, *, learning_rate: str,
        counts: np.ndarray, update: bool, raw: RawRows | None = None,
        sample_weight: np.ndarray | None = None, rng: np.random.Generator | None = None,
        screen: Screen | None = None,
    ) -> StepOutcome:
        """Assign the batch; if ``update``, move the centers toward its cluster means.

        ``raw`` holds the batch's raw rows when the store keeps raw support rows.
        ``sample_weight`` (float64 holding positive integers): each row stands for that many
        records. Learning rates use the weighted b_j and b, a center's batch part is the
        weighted mean of its rows (row weight alpha_j w_i / b_j), truncation counts rows,
        and ``batch_counts`` are the weighted (exact integer) counts.

        A center given more than ``tau`` rows keeps an unbiased subsample of at most ``tau``
        of them as its newest support (see :meth:`_newest_rows`, drawn with ``rng``; by
        default a generator seeded with the batch tag); the learning rate, the counts and
        both objectives still use every row. So supports never exceed ``tau`` rows per
        center once updated, and a step's kernel work is K(B, S) plus K(B, N) for the kept
        new rows N (at most min(b, k tau)): linear in b.

        The batch is processed in row chunks (:mod:`streamkm._core.threads`): each chunk's
        kernel block is reduced to per-batch partial sums and to the row's values against
        its own center right away, so no (b x support) block outlives its chunk.

        ``screen`` (see :data:`Screen`) sees the assignment before the update; the rows it
        excludes are assigned, counted and in both objectives, but neither move a center
        nor enter its support (learning rates use the kept rows only).
        """
        b = x.shape[0]
        k = self.n_clusters
        lo, hi = self.offsets[:-1], self.offsets[1:]
        group_lo, group_hi, owner, center_groups = self._groups()
        group_sums = np.zeros((b, group_lo.shape[0]))
        inner = np.empty((b, k))
        labels = np.empty(b, dtype=np.int64)
        mind = np.empty(b, dtype=x.dtype)
        second = np.empty(b, dtype=np.int64)
        second_d = np.empty(b, dtype=x.dtype)
        own_old = np.empty((b, int((hi - lo).max())), dtype=x.dtype) if update else None
        neighbours = int(getattr(screen, "neighbours", 0) or 0)
        support_scores = np.empty(b) if neighbours else None
        support_diag = self.kernel.diagonal(self.rows) if neighbours else None
        with step_threads():
            threads = block_threads(b, self.rows.shape[0])
            chunks = row_chunks(b, self.rows.shape[0])
            totals = np.zeros(len(chunks))
            ones = np.ones(group_lo.shape[0])

            def assign(index: int, a: int, e: int) -> None:
                kb = _block_segment_sums(self.kernel, x[a:e], x_sq[a:e], self.rows,
                                         self.row_sq_norms, group_lo, group_hi, self.weights,
                                         group_sums[a:e])
                _nc.sum_groups_per_center(group_sums[a:e], ones, center_groups, inner[a:e])
                totals[index] = _nc.nearest_two_centers(
                    diag[a:e], inner[a:e], self.center_sq_norms, labels[a:e], mind[a:e],
                    second[a:e], second_d[a:e])
                if own_old is not None:
                    _nc.copy_own_segment(kb, labels[a:e], lo, hi, own_old[a:e])
                if support_scores is not None:
                    _nn.nearest_support_means(kb, labels[a:e], second[a:e], lo, hi, diag[a:e],
                                              support_diag, neighbours, support_scores[a:e])

            run_row_chunks(assign, chunks, threads)
            before = float(totals.sum()) / b
            row_counts = np.bincount(labels, minlength=k).astype(np.int64)
            batch_counts = row_counts
            weighted_b = b
            if sample_weight is not None:
                batch_counts = _weighted_counts(labels, k, sample_weight)
                weighted_b = int(batch_counts.sum())
                before = _weighted_mean(mind, sample_weight)
            kept = _kept_rows(None if screen is None else screen(labels, mind, support_scores))
            if not update:
                return StepOutcome(labels, mind, batch_counts, before, None, second, second_d)
            update_counts = batch_counts
            if kept is not None:
                update_counts = np.bincount(labels[kept], minlength=k).astype(np.int64)
                if sample_weight is not None:
                    update_counts = _weighted_counts(labels[kept], k, sample_weight[kept])
                weighted_b = max(int(update_counts.sum()), 1)
            after = self._update(x, x_sq, diag, raw, labels, row_counts,
                                 learning_rates(learning_rate, update_counts, weighted_b, counts),
                                 sample_weight, rng, group_lo, group_sums, owner, center_groups,
                                 own_old, kept)
            return StepOutcome(labels, mind, batch_counts, before, after, second, second_d)

    def _update(self, x: np.ndarray, x_sq: np.ndarray, diag: np.ndarray, raw: RawRows | None,
                labels: np.ndarray, row_counts: np.ndarray, alpha: np.ndarray,
                sample_weight: np.ndarray | None, rng: np.random.Generator | None,
                group_lo: np.ndarray, group_sums: np.ndarray, owner: np.ndarray,
                center_groups: np.ndarray, own_old: np.ndarray, kept: np.ndarray | None
                ) -> float:
        """Second half of :meth:`step`: move the centers (toward the ``kept`` rows only,
        when given), truncate, rebuild the Gram matrices; returns the batch objective
        under the new centers."""
        b = x.shape[0]
        k = self.n_clusters
        lo, hi = self.offsets[:-1], self.offsets[1:]
        if kept is None:
            members, new_start, share = self._newest_rows(labels, row_counts, sample_weight,
                                                          rng)
        else:
            members, new_start, share = self._newest_rows(
                labels[kept], np.bincount(labels[kept], minlength=k).astype(np.int64),
                None if sample_weight is None else sample_weight[kept], rng)
            members = kept[members]
        n_new = np.diff(new_start)
        keep_from = _nc.truncation_starts(group_lo, center_groups, lo, hi, n_new, self.tau)
        cum_w = np.concatenate([[0.0], np.cumsum(self.weights)])
        moved = n_new > 0
        total = (1.0 - alpha) * (cum_w[hi] - cum_w[keep_from]) + alpha
        old_scale = np.where(moved, (1.0 - alpha) / np.where(moved, total, 1.0), 1.0)
        member_labels = labels[members]
        new_weights = (alpha / np.where(moved, total, 1.0))[member_labels] * share
        group_scale = np.where(group_lo >= keep_from[owner], old_scale[owner], 0.0)

        x_new = np.ascontiguousarray(x[members])
        new_sq = x_sq[members]
        new_lo, new_hi = new_start[:-1], new_start[1:]
        inner = np.zeros((b, k))
        own_new = np.empty((b, max(int(n_new.max()), 1)), dtype=x.dtype)

        def evaluate(index: int, a: int, e: int) -> None:
            _nc.sum_groups_per_center(group_sums[a:e], group_scale, center_groups, inner[a:e])
            kn = _block_segment_sums(self.kernel, x[a:e], x_sq[a:e], x_new, new_sq, new_lo,
                                     new_hi, new_weights, inner[a:e])
            _nc.copy_own_segment(kn, labels[a:e], new_lo, new_hi, own_new[a:e])

        threads = block_threads(b, members.shape[0])
        run_row_chunks(evaluate, row_chunks(b, members.shape[0]), threads)

        kept = hi - keep_from
        sizes = kept + n_new
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        src_old = _ranges(keep_from, hi)
        dst_old = _ranges(offsets[:-1], offsets[:-1] + kept)
        dst_new = _ranges(offsets[:-1] + kept, offsets[1:])
        n_rows = int(offsets[-1])
        weights = np.empty(n_rows)
        weights[dst_old] = self.weights[src_old] * np.repeat(old_scale, kept)
        weights[dst_new] = new_weights
        gram_start = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
        old_flat, old_start = self._gram_buffer()
        gram_flat = self._recycled("grams", (int(gram_start[-1]),), self.dtype)
        cc = self.center_sq_norms.copy()
        _nc.assemble_grams(old_flat, old_start, lo, hi, keep_from, new_start, members,
                           own_old, own_new, weights, gram_start, gram_flat, cc)

        source = np.empty(n_rows, dtype=np.int64)  # into old rows, then new rows
        source[dst_old] = src_old
        source[dst_new] = self.rows.shape[0] + np.arange(members.shape[0])
        rows = _nc.combine_rows(self.rows, x_new, source,
                                self._recycled("rows", (n_rows, x.shape[1]), x.dtype))
        row_sq = np.concatenate([self.row_sq_norms, new_sq])[source]
        tags = np.full(n_rows, self.next_tag, dtype=np.int64)
        tags[dst_old] = self.tags[src_old]
        if self.raw is not None:
            self.raw = stack_rows([self.raw, raw[members]])[source]
        self.rows, self.row_sq_norms, self.tags, self.weights = rows, row_sq, tags, weights
        self.offsets = offsets
        self._set_grams(gram_flat, gram_start, sizes)
        self.center_sq_norms = cc
        self.next_tag += 1
        mind_after = np.empty(b, dtype=x.dtype)
        after = float(_nc.nearest_center(diag, inner, cc, np.empty(b, dtype=np.int64),
                                         mind_after)) / b
        if sample_weight is not None:
            after = _weighted_mean(mind_after, sample_weight)
        return after

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
        self._release_buffers()
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

    def append(self, rows: np.ndarray, *, raw: RawRows | None = None) -> None:
        """Append a new last center, the mean of ``rows`` (one new batch tag, equal weights;
        ``raw`` required when the store keeps raw rows)."""
        _check_split_raw(self.raw is not None, raw, raw)
        segments = [self._segment(i) for i in range(self.n_clusters)]
        segments.append(self._mean_segment(rows, raw, self.next_tag))
        self.next_tag += 1
        self._assemble(segments)

    def remove(self, j: int) -> None:
        """Remove center j (later centers move down one position)."""
        segments = [self._segment(i) for i in range(self.n_clusters)]
        del segments[j]
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
        self._release_buffers()
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
            "support_rows": self.rows,  # get_state copies every array it hands out
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
