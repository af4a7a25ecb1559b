"""The drift controller: monitors clusters, re-bisects drifting ones, merges by Ward cost.

After every engine step the controller

1. updates each cluster's spread monitor (:class:`~streamkm.drift.monitor.SpreadMonitor`)
   and window of recent rows (:class:`~streamkm.drift.reservoir.RecentRows`);
2. for up to ``max_splits_per_step`` alarmed clusters with enough recent rows: computes
   the window's kernel matrix once, runs kernel 2-means from ``n_pairs`` RTMM pairs
   (:func:`~streamkm.drift.bisect.kernel_bisect`) and keeps the lowest-SSE split. The split
   is accepted when it removes at least ``min_sse_reduction`` of the window's SSE and each
   half holds at least ``min_side_fraction`` of the rows: the center store replaces the
   cluster by the mean of one half and appends the mean of the other; the old stable id
   stays with the first half, the second gets a new id. A rejected split cools the
   cluster down for ``cooldown_batches`` (its window refreshes) and is retried while the
   alarm holds; ``max_rejections`` rejections in a row make the cluster's current spread
   its new reference level;
3. while there are more than ``k_max`` clusters, merges the pair of smallest Ward cost
   (sizes: the clusters' recent rows per batch); every ``merge_every`` steps, if
   ``merge_below`` is set, also merges the smallest-Ward pair while it is redundant
   (keeping it apart saves less than ``merge_below`` of its merged SSE) and there are
   more than ``k_min`` clusters. The merged cluster
   keeps the stable id of the larger of the two (the lower id on ties).

4. with ``outliers`` given (the estimator's flagged rows), holds them in the outlier pool
   (:class:`~streamkm.drift.birth.OutlierPool`) and, when a group of at least
   ``birth_rows`` of them passes :func:`~streamkm.drift.birth.birth_test` and the gap
   test (:func:`~streamkm.drift.birth.gap_test`), appends a new cluster at their mean
   (event ``born``; at ``k_max`` a ``birth_blocked`` event once instead); the rows of a
   group the gap test refuses (its cluster's own tail) leave the pool and join that
   cluster's novelty buffer;
5. with ``retire_after`` set, removes clusters that got no rows for that many steps in a
   row, most idle first, while more than ``k_min`` clusters remain (event ``retired``).

A step that tried a bisection, split or merged is *active*: the estimator then wakes a
converged model, because a drifting cluster needs its centers to learn again.

Stable ids start at 0 .. k-1 and each new cluster takes the next unused id: ids are
never reused. Every split and merge returns a lifecycle event (a JSON-able dict).
The whole state (statistics, windows, ids, counters, random generator) is arrays plus
JSON-able metadata, saved inside the estimator's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from streamkm._core.raw_rows import RawRows, stack_rows
from streamkm._core.rng_state import rng_from_json_state, rng_state_to_json
from streamkm.drift.bisect import kernel_bisect
from streamkm.drift.birth import (
    AxisGap,
    OutlierPool,
    birth_test,
    chance_flags,
    gap_test,
    largest_group,
    line_positions,
    rows_in,
)
from streamkm.drift.merge import MergeChoice, most_redundant_pair, smallest_ward_pair
from streamkm.drift.monitor import SpreadMonitor
from streamkm.drift.policy import DriftPolicy
from streamkm.drift.principal_split import principal_split
from streamkm.drift.reservoir import RecentRows
from streamkm.kernels import KernelSpec

__all__ = ["DriftController", "SplitProposal"]

_PREFIX = "drift_"

#: Smallest SSE reduction of a split in a graph kernel's feature space. There a connected
#: cluster's leading coordinate is a cosine of the position along it (arcsine distributed),
#: whose best bisection already removes 8 / pi^2 = 0.81 of its SSE, while a cluster whose
#: rows fall into two pieces of the graph removes nearly all of it: the threshold is halfway.
GRAPH_MIN_SSE_REDUCTION = (1.0 + 8.0 / np.pi**2) / 2.0


@dataclass(frozen=True)
class SplitProposal:
    """The best bisection found for one cluster's window of recent rows.

    Attributes
    ----------
    position : int
        The cluster's position in the center store.
    side : ndarray of int64, shape (n,)
        0 or 1 per window row.
    sse_reduction : float
        1 - SSE of the split / SSE of the window as one cluster.
    accepted : bool
        Whether the split passed ``min_sse_reduction`` and ``min_side_fraction``.
    n_pairs : int
        RTMM initial pairs tried.
    """

    position: int
    side: np.ndarray
    sse_reduction: float
    accepted: bool
    n_pairs: int


class DriftController:
    """Drift detection, re-bisection and Ward merges for one estimator.

    Parameters
    ----------
    policy : DriftPolicy
        The parameters.
    n_clusters : int
        Clusters at the start (stable ids 0 .. n_clusters - 1).
    k_max : int
        Resolved largest number of clusters.
    n_features : int
        Width of the engine's rows.
    dtype : numpy dtype
        dtype of the engine's rows.
    keeps_raw : bool
        Whether the estimator keeps raw rows (they are windowed too).
    rng : numpy.random.Generator
        The controller's own generator (window subsampling, RTMM draws).
    """

    def __init__(self, policy: DriftPolicy, n_clusters: int, k_max: int, n_features: int,
                 dtype: Any, *, keeps_raw: bool, rng: np.random.Generator) -> None:
        self.policy = policy
        self.k_max = int(k_max)
        self.rng = rng
        self.cluster_ids = np.arange(int(n_clusters), dtype=np.int64)
        self.next_id = int(n_clusters)
        self.monitor = SpreadMonitor(
            n_clusters, smoothing=policy.smoothing, warmup_batches=policy.warmup_batches,
            delta=policy.delta, threshold=policy.threshold,
            min_batch_rows=policy.min_batch_rows, cooldown_batches=policy.cooldown_batches,
            max_rejections=policy.max_rejections,
        )
        self.recent = RecentRows(n_clusters, n_features, dtype, policy.reservoir_size,
                                 keeps_raw=keeps_raw)
        self.n_alarms = 0
        self.n_splits = 0
        self.n_rejected = 0
        self.n_merges = 0
        self.n_observed_steps = 0
        self.pool = OutlierPool(n_features, dtype, policy.reservoir_size, keeps_raw=keeps_raw)
        self.idle = np.zeros(int(n_clusters), dtype=np.int64)  # steps in a row without rows
        self.n_births = 0
        self.n_retired = 0
        self.n_births_blocked = 0
        self.n_births_refused = 0  # groups refused by the gap test (a cluster's own tail)
        self.birth_blocked = False  # a birth_blocked event was sent since the last birth
        self.active = False  # the last step tried a bisection, split or merged

    # ------------------------------------------------------------------ one step

    def after_step(self, *, step: int, labels: np.ndarray, sq_distances: np.ndarray,
                   x: np.ndarray, raw: RawRows | None, centers: Any, counts: np.ndarray,
                   kernel: KernelSpec, outliers: np.ndarray | None = None,
                   buffers: Any = None, alpha: float | None = None,
                   learn_tail: Callable[[int, np.ndarray], None] | None = None
                   ) -> tuple[list[dict[str, Any]], np.ndarray]:
        """Observe one assigned batch, then split, give birth, merge and retire; return
        (events, new counts).

        ``centers`` is the estimator's center store (it is split and merged in place);
        ``counts`` the records seen per cluster (split proportionally, summed on merge);
        ``outliers`` the batch's flagged rows, which the caller left out of the novelty
        ``buffers`` (:class:`~streamkm.cluster._novelty.NoveltyBuffers`, aligned to the
        positions before this step) at level ``alpha``: they are pooled.
        ``learn_tail(position, rows)``, when given, is called with a group of pooled rows the
        gap test found to be the cluster's own tail (the buffers' position of the cluster),
        as those rows' distances join its buffer: the caller adds what else it keeps of
        recent members (their novelty base scores).
        """
        k = self.monitor.n_clusters
        batch_counts = np.bincount(labels, minlength=k)
        sq_sums = np.bincount(labels, weights=sq_distances.astype(np.float64), minlength=k)
        alarmed = self.monitor.observe(batch_counts, sq_sums)
        self.idle = np.where(batch_counts > 0, 0, self.idle + 1).astype(np.int64)
        pooling = outliers is not None and buffers is not None and alpha is not None
        if pooling:
            self._quarantine(step, x, raw, outliers)
        self.recent.add(labels, x, raw, self.rng)
        self.n_observed_steps += 1
        self.n_alarms += int(alarmed.shape[0])
        events: list[dict[str, Any]] = []
        tried = 0
        for j in alarmed:
            if tried >= self.policy.max_splits_per_step:
                break
            proposal = self.propose_split(int(j), kernel)
            if proposal is None:
                continue
            tried += 1
            if not proposal.accepted:
                self.n_rejected += 1
                self.monitor.reject(int(j))
                continue
            event, counts = self._split(proposal, step, centers, counts)
            events.append(event)
        if pooling:
            counts = self._birth(step, centers, counts, kernel, buffers, float(alpha), events,
                                 learn_tail)
        self.active = tried > 0 or bool(events)
        while centers.n_clusters > self.k_max:
            choice = smallest_ward_pair(centers.center_inner_products(), self._sizes())
            event, counts = self._merge(choice, step, centers, counts, reason="k_max")
            events.append(event)
        if (self.policy.merge_below is not None
                and self.n_observed_steps % self.policy.merge_every == 0):
            while centers.n_clusters > self.policy.k_min:
                choice = self._most_redundant(centers)
                if choice is None:
                    break
                event, counts = self._merge(choice, step, centers, counts, reason="redundant")
                events.append(event)
                self.active = True
        if self.policy.retire_after is not None:
            counts = self._retire(step, centers, counts, events)
        return events, counts

    # ------------------------------------------------------------------ births, retirements

    def _quarantine(self, step: int, x: np.ndarray, raw: RawRows | None,
                    outliers: np.ndarray) -> None:
        """Pool the batch's flagged rows and let the oldest go."""
        flagged = np.flatnonzero(outliers)
        self.pool.add(step, x[flagged], None if raw is None else raw[flagged])
        self.pool.release(step, self.policy.quarantine_batches)

    def _birth(self, step: int, centers: Any, counts: np.ndarray, kernel: KernelSpec,
               buffers: Any, alpha: float, events: list[dict[str, Any]],
               learn_tail: Callable[[int, np.ndarray], None] | None = None) -> np.ndarray:
        """Test the pool's largest group and append it as a new cluster if it passes."""
        if self.pool.size < self.policy.birth_rows:
            return counts
        distances = self._pool_distances(centers, kernel)
        j, positions = largest_group(np.argmin(distances, axis=1))
        near = int(self.cluster_ids[j])
        member = np.flatnonzero(buffers.ids == near)  # a cluster split this step has none
        if not member.shape[0]:
            return counts
        b = int(member[0])
        arrived = self.pool.steps[positions]
        cluster_rows = np.nan_to_num(self.monitor.recent_size[j]) * (
            int(arrived.max()) - int(arrived.min()) + 1)
        test = birth_test(self.pool.rows, distances.min(axis=1), positions,
                          buffers.ring[b, :int(buffers.sizes[b])], kernel,
                          self.split_threshold(kernel), self.policy.birth_rows,
                          float(chance_flags(alpha, cluster_rows, rate=2.0 * alpha)), j)
        if not test.passed:
            return counts
        positions = test.rows
        gap = self._gap(j, positions, centers, kernel, distances[:, j], alpha)
        if not gap.passed:  # the cluster's own tail: its buffer learns it
            self.n_births_refused += 1
            if learn_tail is not None:
                learn_tail(b, self.pool.rows[positions])
            self.pool.take(positions)
            buffers.push(np.full(positions.shape[0], b, dtype=np.int64), distances[positions, j])
            return counts
        figures = {"near": near, "sse_reduction": round(test.sse_reduction, 6),
                   "spread": round(test.spread, 6), "member_spread": round(test.member_spread, 6),
                   "chance_rows": float(test.chance_rows), "bridge_rows": gap.bridge_rows,
                   "side_rows": gap.side_rows, "gap_pvalue": float(f"{gap.pvalue:.6g}")}
        if centers.n_clusters >= self.k_max:
            self.n_births_blocked += 1
            if not self.birth_blocked:
                self.birth_blocked = True
                events.append({"event": "birth_blocked", "step": int(step), "reason": "k_max",
                               "k_max": self.k_max, "rows": int(positions.shape[0]), **figures})
            return counts
        n_steps = np.unique(self.pool.steps[positions]).shape[0]
        rows, raw = self.pool.take(positions)
        centers.append(rows, raw=raw)
        adopted = (np.flatnonzero(np.argmin(self._pool_distances(centers, kernel), axis=1)
                                  == centers.n_clusters - 1) if self.pool.size else [])
        more, more_raw = self.pool.take(np.asarray(adopted, dtype=np.int64))
        parts = [p for p in (raw, more_raw) if p is not None and p.shape[0]]
        self.recent.append(np.concatenate([rows, more]), stack_rows(parts) if parts else None)
        self.monitor.append(rows.shape[0] / n_steps)
        self.idle = np.append(self.idle, 0)
        new_id = self.next_id
        self.cluster_ids = np.append(self.cluster_ids, new_id)
        self.next_id += 1
        self.n_births += 1
        self.birth_blocked = False
        events.append({"event": "born", "step": int(step), "cluster_id": new_id,
                       "rows": int(rows.shape[0]), "adopted": int(more.shape[0]),
                       "reason": "compact_outliers", **figures})
        return np.append(counts, rows.shape[0] + more.shape[0]).astype(np.int64)

    def _gap(self, j: int, positions: np.ndarray, centers: Any, kernel: KernelSpec,
             to_center: np.ndarray, alpha: float) -> AxisGap:
        """:func:`~streamkm.drift.birth.gap_test` of the pooled rows ``positions`` and the
        recent rows of cluster ``j`` on the line from its center to the group's mean
        (``to_center``: every pooled row's squared distance to that center)."""
        group = self.pool.rows[positions]
        members = self.recent.rows[j]
        members = members[~rows_in(members, group)]
        rows = np.concatenate([group, members]) if members.shape[0] else group
        sq = np.einsum("ij,ij->i", rows, rows)
        diag = kernel.diagonal(rows)
        n = group.shape[0]
        cross = np.asarray(kernel.block(rows, group, x_sq=sq, y_sq=sq[:n]), np.float64)
        to_mean = np.maximum(diag - 2.0 * cross.mean(axis=1) + cross[:n].mean(), 0.0)
        to_c = to_center[positions]
        if members.shape[0]:
            to_c = np.concatenate([to_c, centers.sq_distances(members, sq[n:], diag[n:])[:, j]])
        offset = float(to_c[:n].mean() - to_mean[:n].mean())  # |mean - center|^2
        if not offset > 0.0:
            return gap_test(np.empty(0), alpha)
        return gap_test(line_positions(to_c, to_mean, offset), alpha)

    def _pool_distances(self, centers: Any, kernel: KernelSpec) -> np.ndarray:
        """Squared kernel distances of the pooled rows to every center, shape (n, k)."""
        rows = self.pool.rows
        return centers.sq_distances(rows, np.einsum("ij,ij->i", rows, rows),
                                    kernel.diagonal(rows))

    def _retire(self, step: int, centers: Any, counts: np.ndarray,
                events: list[dict[str, Any]]) -> np.ndarray:
        """Remove the clusters idle for ``retire_after`` steps, most idle first, while more
        than ``k_min`` (at least 1) remain."""
        while centers.n_clusters > max(1, self.policy.k_min):
            j = int(np.argmax(self.idle))
            idle = int(self.idle[j])
            if idle < int(self.policy.retire_after):
                break
            retired_id = int(self.cluster_ids[j])
            centers.remove(j)
            counts = np.delete(counts, j)
            self.recent.remove(j)
            self.monitor.remove(j)
            self.idle = np.delete(self.idle, j)
            self.cluster_ids = np.delete(self.cluster_ids, j)
            self.n_retired += 1
            self.birth_blocked = False
            events.append({"event": "retired", "step": int(step), "cluster_id": retired_id,
                           "idle_batches": idle, "reason": "no_records"})
        return counts

    def _sizes(self) -> np.ndarray:
        return np.nan_to_num(self.monitor.recent_size, nan=0.0)

    def _most_redundant(self, centers: Any) -> Any:
        """The pair whose separation saves the smallest share of its merged SSE (per batch),
        if that share is below ``merge_below``; else None."""
        sizes = self._sizes()
        found = most_redundant_pair(centers.center_inner_products(), sizes,
                                    sizes * self.monitor.ewma)
        if found is None or found[1] >= float(self.policy.merge_below):
            return None
        return found[0]

    def propose_split(self, j: int, kernel: KernelSpec) -> SplitProposal | None:
        """Bisect cluster j's window; None when it holds fewer than ``min_reservoir`` rows."""
        rows = self.recent.rows[j]
        n = rows.shape[0]
        if n < self.policy.min_reservoir:
            return None
        result = kernel_bisect(rows, kernel=kernel, n_pairs=self.policy.n_pairs,
                               max_iter=self.policy.max_iter, seeding=self.policy.seeding,
                               random_state=self.rng)
        side = result.labels
        smaller = min(int(side.sum()), n - int(side.sum()))
        accepted = (result.sse_reduction >= self.split_threshold(kernel)
                    and smaller >= self.policy.min_side_fraction * n and smaller > 0)
        return SplitProposal(position=j, side=side, sse_reduction=float(result.sse_reduction),
                             accepted=bool(accepted), n_pairs=result.n_pairs_tried)

    def input_split(self, rows: np.ndarray, labels: np.ndarray) -> int | None:
        """The first cluster whose rows of this batch fall into two groups in the input space,
        or None: the policy's split test (``min_sse_reduction``, ``min_side_fraction``) on a
        bisection (:func:`~streamkm.drift.principal_split.principal_split`, at most
        ``max_iter`` Lloyd iterations) of its newest ``reservoir_size`` input ``rows`` (those
        whose ``labels`` is its position), when at least ``min_reservoir`` of them.

        A graph kernel maps each piece of its graph to nearly one point of its feature
        space, so a cluster pulling apart inside one piece does not widen there and the
        spread monitor cannot see it; the rows it is fitted on can (the estimator then
        refits the kernel, :mod:`streamkm.cluster._kernel_refresh`).
        """
        policy = self.policy
        for j in range(int(labels.max(initial=-1)) + 1):
            mine = rows[np.flatnonzero(labels == j)[-policy.reservoir_size:]]
            n = mine.shape[0]
            if n < policy.min_reservoir:
                continue
            side, reduction = principal_split(mine, policy.max_iter)
            smaller = min(int(side.sum()), n - int(side.sum()))
            if (reduction >= policy.min_sse_reduction
                    and smaller >= policy.min_side_fraction * n and smaller > 0):
                return j
        return None

    def split_threshold(self, kernel: KernelSpec) -> float:
        """The SSE reduction a split must reach: ``min_sse_reduction``, at least
        ``GRAPH_MIN_SSE_REDUCTION`` for a graph (fitted) kernel."""
        if kernel.kind.fitted:
            return max(float(self.policy.min_sse_reduction), GRAPH_MIN_SSE_REDUCTION)
        return float(self.policy.min_sse_reduction)

    def review(self, step: int, centers: Any, counts: np.ndarray, kernel: KernelSpec
               ) -> tuple[list[dict[str, Any]], np.ndarray]:
        """Bisect every cluster's window once (a new feature space may show that one holds
        two groups) and apply the best accepted split(s), at most ``max_splits_per_step``;
        then merge down to ``k_max``. Returns (events, new counts)."""
        proposals = [p for p in (self.propose_split(j, kernel)
                                 for j in range(centers.n_clusters)) if p is not None]
        accepted = sorted((p for p in proposals if p.accepted),
                          key=lambda p: -p.sse_reduction)[:self.policy.max_splits_per_step]
        events: list[dict[str, Any]] = []
        # splits append new clusters at the end, so positions of the others stay valid
        for proposal in accepted:
            event, counts = self._split(proposal, step, centers, counts)
            events.append({**event, "cause": "kernel_refreshed"})
        while centers.n_clusters > self.k_max:
            choice = smallest_ward_pair(centers.center_inner_products(), self._sizes())
            event, counts = self._merge(choice, step, centers, counts, reason="k_max")
            events.append(event)
        self.active = self.active or bool(events)
        return events, counts

    def _split(self, proposal: SplitProposal, step: int, centers: Any, counts: np.ndarray
               ) -> tuple[dict[str, Any], np.ndarray]:
        j = proposal.position
        mask = proposal.side.astype(bool)
        rows = self.recent.rows[j]
        raw = self.recent.raw[j]
        keep, move = np.flatnonzero(~mask), np.flatnonzero(mask)
        centers.split(
            j, rows[keep], rows[move],
            raw_a=None if raw is None else raw[keep], raw_b=None if raw is None else raw[move],
        )
        fraction = keep.shape[0] / rows.shape[0]
        kept_count = int(round(int(counts[j]) * fraction))
        counts = np.append(counts, int(counts[j]) - kept_count).astype(np.int64)
        counts[j] = kept_count
        self.recent.split(j, proposal.side)
        self.monitor.split(j, fraction)
        self.idle = np.append(self.idle, 0)
        self.idle[j] = 0
        old_id, new_id = int(self.cluster_ids[j]), self.next_id
        self.cluster_ids = np.append(self.cluster_ids, new_id)
        self.next_id += 1
        self.n_splits += 1
        event = {"event": "split", "step": int(step), "cluster": old_id,
                 "into": [old_id, new_id], "sizes": [int(keep.shape[0]), int(move.shape[0])],
                 "sse_reduction": round(proposal.sse_reduction, 6),
                 "n_pairs": int(proposal.n_pairs)}
        return event, counts

    def _merge(self, choice: MergeChoice, step: int, centers: Any, counts: np.ndarray, *,
               reason: str) -> tuple[dict[str, Any], np.ndarray]:
        a, b = choice.a, choice.b
        sizes = self._sizes()
        a_first = (counts[a], -self.cluster_ids[a]) >= (counts[b], -self.cluster_ids[b])
        keep, drop = (a, b) if a_first else (b, a)
        keep_id, drop_id = int(self.cluster_ids[keep]), int(self.cluster_ids[drop])
        centers.merge(keep, drop, float(sizes[keep]), float(sizes[drop]))
        counts = counts.copy()
        counts[keep] += counts[drop]
        counts = np.delete(counts, drop)
        self.recent.merge(keep, drop, self.rng)
        self.monitor.merge(keep, drop)
        self.idle[keep] = min(self.idle[keep], self.idle[drop])
        self.idle = np.delete(self.idle, drop)
        self.cluster_ids = np.delete(self.cluster_ids, drop)
        self.n_merges += 1
        event = {"event": "merge", "step": int(step), "clusters": [keep_id, drop_id],
                 "into": keep_id, "ward_cost": float(choice.cost), "reason": reason}
        return event, counts

    # ------------------------------------------------------------------ re-sketching

    def window_spreads(self, centers: Any, kernel: KernelSpec) -> np.ndarray:
        """Mean squared kernel distance of each window's rows to its own center (NaN for
        an empty window)."""
        sizes = self.recent.sizes()
        out = np.full(sizes.shape[0], np.nan)
        if not sizes.sum():
            return out
        rows = np.ascontiguousarray(np.concatenate(self.recent.rows))
        owner = np.repeat(np.arange(sizes.shape[0]), sizes)
        dist = centers.sq_distances(rows, np.einsum("ij,ij->i", rows, rows),
                                    kernel.diagonal(rows))[np.arange(rows.shape[0]), owner]
        sums = np.bincount(owner, weights=dist.astype(np.float64), minlength=sizes.shape[0])
        np.divide(sums, sizes, out=out, where=sizes > 0)
        return out

    def reproject(self, transform: Callable[[RawRows], np.ndarray], n_features: int,
                  centers: Any, kernel: KernelSpec, spreads_before: np.ndarray) -> None:
        """Follow a new sketch: re-project the windows' raw rows with ``transform`` and
        rescale every cluster's spread statistics by how much the new feature space changed
        its window's spread (``spreads_before``: :meth:`window_spreads` in the old space;
        ``centers``: the store, already re-projected). A cluster whose ratio is unknown
        (empty window, zero spread) restarts its warm-up instead.
        """
        self.recent.reproject(transform, n_features)
        self.pool = OutlierPool(n_features, self.pool.rows.dtype, self.pool.capacity,
                                keeps_raw=self.pool.keeps_raw)
        ratio = self.window_spreads(centers, kernel) / spreads_before
        self.monitor.rescale(ratio)

    def follow_kernel(self, labels: np.ndarray, old_rows: np.ndarray, new_rows: np.ndarray,
                      raw: RawRows | None, old_centers: Any, old_kernel: KernelSpec,
                      new_centers: Any, new_kernel: KernelSpec) -> None:
        """Follow a refitted kernel: refill the windows with the estimator's recent rows
        (``labels``: their clusters; ``old_rows`` / ``new_rows``: prepared by the old / new
        kernel) and rescale every cluster's spread statistics by how much the new feature
        space changed its window's spread (a cluster whose ratio is unknown restarts its
        warm-up)."""
        self.pool.clear(new_rows.shape[1])
        self.recent.rebuild(labels, old_rows, raw)
        before = self.window_spreads(old_centers, old_kernel)
        self.recent.rebuild(labels, new_rows, raw)
        self.monitor.rescale(self.window_spreads(new_centers, new_kernel) / before)

    # ------------------------------------------------------------------ state

    def to_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays (names start with ``drift_``) and JSON-able metadata."""
        arrays = {**self.monitor.to_arrays(_PREFIX + "monitor_"),
                  **self.recent.to_arrays(_PREFIX + "recent_"),
                  **self.pool.to_arrays(_PREFIX + "pool_"),
                  _PREFIX + "idle": self.idle.copy(),
                  _PREFIX + "cluster_ids": self.cluster_ids.copy()}
        meta = {"policy": self.policy.to_dict(), "k_max": self.k_max, "next_id": self.next_id,
                "n_alarms": self.n_alarms, "n_splits": self.n_splits,
                "n_rejected": self.n_rejected, "n_merges": self.n_merges,
                "n_observed_steps": self.n_observed_steps, "n_births": self.n_births,
                "n_retired": self.n_retired, "n_births_blocked": self.n_births_blocked,
                "n_births_refused": self.n_births_refused,
                "birth_blocked": self.birth_blocked,
                "n_features": self.recent.n_features, "keeps_raw": self.recent.keeps_raw,
                "rng": rng_state_to_json(self.rng)}
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict[str, Any], meta: dict[str, Any], dtype: Any
                   ) -> DriftController:
        """Rebuild a controller from :meth:`to_state` output (raises KeyError/ValueError)."""
        policy = DriftPolicy(**meta["policy"])
        ids = np.asarray(arrays[_PREFIX + "cluster_ids"], dtype=np.int64)
        ctrl = cls(policy, ids.shape[0], int(meta["k_max"]), int(meta["n_features"]), dtype,
                   keeps_raw=bool(meta["keeps_raw"]), rng=rng_from_json_state(meta["rng"]))
        ctrl.cluster_ids = ids.copy()
        ctrl.next_id = int(meta["next_id"])
        ctrl.monitor.load_arrays(arrays, _PREFIX + "monitor_")
        ctrl.recent = RecentRows.from_arrays(
            arrays, _PREFIX + "recent_", n_features=int(meta["n_features"]), dtype=dtype,
            capacity=policy.reservoir_size, keeps_raw=bool(meta["keeps_raw"]))
        for name in ("n_alarms", "n_splits", "n_rejected", "n_merges", "n_observed_steps"):
            setattr(ctrl, name, int(meta[name]))
        for name in ("n_births", "n_retired", "n_births_blocked", "n_births_refused"):
            setattr(ctrl, name, int(meta.get(name, 0)))
        ctrl.birth_blocked = bool(meta.get("birth_blocked", False))
        ctrl.pool.load_arrays(arrays, _PREFIX + "pool_")
        ctrl.idle = np.asarray(arrays.get(_PREFIX + "idle", np.zeros(ids.shape[0])),
                               dtype=np.int64).copy()
        sizes = {ids.shape[0], ctrl.monitor.n_clusters, ctrl.recent.n_clusters,
                 ctrl.idle.shape[0]}
        if len(sizes) != 1:
            raise ValueError(f"drift state disagrees on the number of clusters: {sorted(sizes)!r}")
        return ctrl
