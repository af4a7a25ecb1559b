"""Novelty of each record, the outlier flag and the confidence of an assignment.

A record's base score is its mean squared kernel distance to its :data:`NEIGHBOURS`
nearest support rows, over every cluster's support (the rows the centers are made of, the
model's recent sample of the stream): ``K(x, x) + K(s, s) - 2 K(x, s)``, from the block
``K(batch, supports)`` the step computes for the center distances anyway. The score is
computed before the record's batch joins the supports (prequential).

Each cluster keeps a bounded buffer of its recent members' base scores (the
``novelty_window`` newest, every assigned row, flagged or not). A record's novelty is the
conformal p-value of its base score against all clusters' buffers pooled as they were
before the record's batch: ``(1 + #{pool >= s}) / (n + 1)``, the share of the model's recent
records at least as unusual, in (0, 1]; small means unusual. While the pool holds fewer
than :data:`MIN_MEMBERS` values every record is 1.0.

A model without support rows (explicit centers: the linear kernel, and the graph kernels'
feature maps) scores a record by its squared distance to its assigned center, against that
cluster's own buffer of recent members' distances (against the pool while the cluster holds
fewer than :data:`MIN_MEMBERS`): pooled, one cluster's moving center shifts every other
cluster's calibration too. Those members' distances are measured to the center as the
step's update left it, the one the next batch is scored against.

A second set of buffers, of the members' squared distances to their centers, serves
drift handling (births compare a group of flagged rows with their cluster's members).
Buffers are keyed by stable cluster id. When a cluster's center is rebuilt rather than
moved (both halves of a drift split, the result of a merge) its buffers start empty and
warm up again. A re-sketch rescales every buffer by how much the support rows' typical
distance and base score changed (outliers already seen keep their place in the pool); a
kernel refit, a new feature space, refills them from the reservoir's recent rows. Either
way the batch after it is scored against a calibrated pool. See docs/novelty.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._numba import novelty as _nn
from streamkm.cluster._centers import SupportCenters
from streamkm.cluster._step_rules import sq_norms
from streamkm.exceptions import StateError

__all__ = ["MIN_MEMBERS", "NEIGHBOURS", "NoveltyBuffers", "NoveltyScreen", "NoveltyMixin",
           "confidence_fields", "support_scores"]

#: Values a cluster's buffer must hold before its records are scored against it (before:
#: against the pool of all clusters' buffers, or 1.0 while the pool holds fewer).
MIN_MEMBERS = 20
#: Support rows whose mean squared kernel distance to a record is its base score (the
#: neighbourhood size of scikit-learn's LocalOutlierFactor default).
NEIGHBOURS = 20
_PREFIX = "novelty_"
#: State prefix of the buffers of base scores.
SCORE_PREFIX = "novelty_score_"
#: Support rows (the newest of each center, ``novelty_window`` at most per center) whose
#: medians measure how a re-sketch rescaled the buffers: a median of 256 values is within a
#: few percent of the whole store's, at a cost that does not grow with ``tau``.
SCALE_ROWS = 256
#: Units in the last place within which :meth:`NoveltyMixin.score_samples` takes a buffered
#: distance for a row's own (the error of a kernel distance from its three terms).
ROUNDING_ULPS = 64
#: Rows of a kernel block computed at once by :func:`support_scores`, times the supports.
_BLOCK_ELEMENTS = 1 << 22


class NoveltyBuffers:
    """Per-cluster ring buffers of recent members' squared kernel distances (float64;
    slots not yet written hold +inf, so a row sorted whole lists its values first).

    Row ``j`` of the arrays belongs to the cluster with stable id ``ids[j]``;
    :meth:`align` reorders them to the model's clusters before each use.
    """

    def __init__(self, window: int, ids: np.ndarray, ring: np.ndarray, heads: np.ndarray,
                 sizes: np.ndarray, prefix: str = _PREFIX) -> None:
        self.prefix = prefix
        self.window = int(window)
        self.ids = np.array(ids, dtype=np.int64)
        self.ring = np.ascontiguousarray(ring, dtype=np.float64)
        self.heads = np.asarray(heads, dtype=np.int64)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.ordered = np.sort(self.ring, axis=1)

    @classmethod
    def empty(cls, window: int, ids: np.ndarray, prefix: str = _PREFIX) -> NoveltyBuffers:
        """Empty buffers for the clusters ``ids`` (``prefix``: of their state arrays)."""
        k = len(ids)
        return cls(window, ids, np.full((k, int(window)), np.inf), np.zeros(k, np.int64),
                   np.zeros(k, np.int64), prefix)

    def align(self, ids: np.ndarray) -> None:
        """Reorder the buffers to the clusters ``ids`` (position j holds cluster ids[j]):
        a new id gets an empty buffer, an id no longer present is dropped."""
        if np.array_equal(ids, self.ids):
            return
        ids = np.array(ids, dtype=np.int64)
        where = {int(c): j for j, c in enumerate(self.ids)}
        k = ids.shape[0]
        ring = np.full((k, self.window), np.inf)
        ordered = np.full((k, self.window), np.inf)
        heads = np.zeros(k, np.int64)
        sizes = np.zeros(k, np.int64)
        for j, c in enumerate(ids):
            old = where.get(int(c))
            if old is not None:
                ring[j], ordered[j] = self.ring[old], self.ordered[old]
                heads[j], sizes[j] = self.heads[old], self.sizes[old]
        self.ids, self.ring, self.ordered, self.heads, self.sizes = ids, ring, ordered, heads, sizes

    def pvalues(self, labels: np.ndarray, sq_distances: np.ndarray) -> np.ndarray:
        """Novelty (float64 in (0, 1]) of rows at ``sq_distances`` from their clusters'
        centers (positions ``labels``), against the buffers as they are.

        A row of a cluster still warming up (fewer than :data:`MIN_MEMBERS` values) is
        scored against the pool of every cluster's values; 1.0 while the pool itself holds
        fewer than :data:`MIN_MEMBERS`.
        """
        out = np.empty(labels.shape[0])
        if not _nn.conformal_pvalues(labels, sq_distances, self.ordered, self.sizes,
                                     MIN_MEMBERS, out):
            return out  # every row's cluster is calibrated
        young = self.sizes < MIN_MEMBERS
        held = int(self.sizes.sum())
        if not young.any() or held < MIN_MEMBERS:
            return out
        warming = young[labels]
        if warming.any():
            pool = np.sort(self.ordered, axis=None)[:held]
            out[warming] = pooled_pvalues(pool, sq_distances[warming])
        return out

    def pooled_pvalues(self, scores: np.ndarray) -> np.ndarray:
        """Novelty (float64 in (0, 1]) of rows with base ``scores`` against every cluster's
        values pooled; 1.0 while the pool holds fewer than :data:`MIN_MEMBERS`."""
        held = int(self.sizes.sum())
        if held < MIN_MEMBERS:
            return np.ones(np.shape(scores)[0])
        return pooled_pvalues(np.sort(self.ordered, axis=None)[:held], scores)

    def push(self, labels: np.ndarray, sq_distances: np.ndarray) -> None:
        """Add every row's distance to its cluster's buffer (in row order)."""
        _nn.push_members(labels, sq_distances, self.ring, self.ordered, self.heads, self.sizes)

    def scale(self, factor: float) -> None:
        """Multiply every value held by ``factor`` > 0 (the order is kept)."""
        written = self._written()
        self.ring[written] *= factor
        self.ordered[written] *= factor

    def forget(self, ids: Any) -> None:
        """Empty the buffers of the clusters ``ids`` (they warm up again)."""
        rows = np.isin(self.ids, np.asarray(list(ids), dtype=np.int64))
        self.heads[rows] = self.sizes[rows] = 0
        self.ring[rows] = self.ordered[rows] = np.inf

    def forget_rebuilt(self, events: Any) -> None:
        """Empty the buffers of the clusters a split or a merge among ``events`` rebuilt,
        and all of them after a kernel refit."""
        for event in events:
            kind = event.get("event")
            if kind == "split":
                self.forget(event["into"])
            elif kind == "merge":
                self.forget([event["into"]])
            elif kind == "kernel_refreshed":
                self.forget(self.ids)

    def _written(self) -> np.ndarray:
        """Mask of the ring slots that hold a value (the first ``sizes[j]`` of row j)."""
        return np.arange(self.window)[None, :] < self.sizes[:, None]

    def to_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Plain arrays and metadata (see :meth:`from_state`); slots not yet written are
        stored as 0, so every value in the state is finite."""
        ring = np.where(self._written(), self.ring, 0.0)
        p = self.prefix
        arrays = {p + "ids": self.ids, p + "ring": ring, p + "heads": self.heads,
                  p + "sizes": self.sizes}
        return arrays, {"window": self.window}

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                   prefix: str = _PREFIX) -> NoveltyBuffers:
        """Rebuild buffers from :meth:`to_state` output, bit for bit."""
        window = int(meta["window"])
        ring = arrays[prefix + "ring"]
        ids = arrays[prefix + "ids"]
        sizes = arrays[prefix + "sizes"]
        heads = arrays[prefix + "heads"]
        k = ids.shape[0]
        if (ring.shape != (k, window) or sizes.shape != (k,) or heads.shape != (k,)
                or np.any(sizes < 0) or np.any(sizes > window) or np.any(heads < 0)
                or np.any(heads >= max(window, 1))):
            raise StateError(
                f"novelty buffers of shape {ring.shape!r} with sizes {sizes.tolist()!r} and "
                f"heads {heads.tolist()!r} do not fit {k} clusters of window {window}"
            )
        written = np.arange(window)[None, :] < sizes[:, None]
        return cls(window, ids.copy(), np.where(written, ring, np.inf), heads.copy(),
                   sizes.copy(), prefix)


class NoveltyScreen:
    """Called by a center store between assignment and update: scores the batch's rows
    (their base scores against the pooled ``scores`` buffers), flags those at most
    ``alpha`` (none when ``alpha`` is None) and, with ``exclude``, returns the flags as the
    rows to leave out of the update. ``neighbours`` tells the store how many nearest
    support rows make a base score: none while ``alpha`` is None (nothing is flagged, and
    the calibrated distance to the center costs the step nothing extra)."""

    def __init__(self, buffers: NoveltyBuffers, scores: NoveltyBuffers, alpha: float | None,
                 exclude: bool) -> None:
        self.neighbours = 0 if alpha is None else NEIGHBOURS
        self.buffers = buffers
        self.score_buffers = scores
        self.alpha = alpha
        self.exclude = exclude
        self.scores: np.ndarray | None = None
        self.novelty: np.ndarray | None = None
        self.outliers: np.ndarray | None = None

    def __call__(self, labels: np.ndarray, sq_distances: np.ndarray,
                 support: np.ndarray | None = None) -> np.ndarray | None:
        self.scores = np.asarray(sq_distances if support is None else support,
                                 dtype=np.float64)
        if support is None:  # no support rows: the distance, against the cluster's own
            self.novelty = self.buffers.pvalues(labels, self.scores)
        else:
            self.novelty = self.score_buffers.pooled_pvalues(self.scores)
        self.outliers = flag_outliers(self.novelty, self.alpha)
        if self.exclude and self.outliers.any():
            return self.outliers
        return None


def support_scores(centers: Any, x: np.ndarray, labels: np.ndarray, second: np.ndarray,
                   m: int = NEIGHBOURS) -> np.ndarray | None:
    """Base score of each prepared row of ``x``: the mean squared kernel distance to its
    ``m`` nearest support rows among those of its nearest and second-nearest centers
    ``labels`` and ``second`` (-1: none) in ``centers``; None for a store without support
    rows. A block of rows at a time."""
    if not isinstance(centers, SupportCenters):
        return None
    rows = centers.rows
    kernel = centers.kernel
    out = np.empty(x.shape[0])
    s_diag = kernel.diagonal(rows)
    x_sq = sq_norms(x)
    lo, hi = centers.offsets[:-1], centers.offsets[1:]
    step = max(1, _BLOCK_ELEMENTS // max(rows.shape[0], 1))
    for a in range(0, x.shape[0], step):
        e = min(a + step, x.shape[0])
        block = np.ascontiguousarray(kernel.block(x[a:e], rows, x_sq=x_sq[a:e],
                                                  y_sq=centers.row_sq_norms))
        _nn.nearest_support_means(block, labels[a:e], second[a:e], lo, hi,
                                  kernel.diagonal(x[a:e]), s_diag, int(m), out[a:e])
    return out


def newest_support_rows(centers: SupportCenters, window: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The newest ``window`` support rows of each center of ``centers`` (all of a smaller
    one) and the position of the center each belongs to."""
    ends = np.asarray(centers.offsets[1:], dtype=np.int64)
    starts = np.maximum(np.asarray(centers.offsets[:-1], dtype=np.int64), ends - window)
    picked = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)]
                            or [np.zeros(0, dtype=np.int64)])
    owners = np.repeat(np.arange(ends.shape[0], dtype=np.int64), ends - starts)
    return centers.rows[picked], owners


def leave_one_out_support_scores(centers: SupportCenters, rows: np.ndarray,
                                 owners: np.ndarray, second: np.ndarray,
                                 m: int = NEIGHBOURS) -> tuple[np.ndarray, np.ndarray]:
    """Base scores of support ``rows`` of ``centers`` (each among the supports of its owner,
    position ``owners``) without the row itself among its neighbours, and the mask of rows
    that have a neighbour besides themselves.

    The mean over the ``m + 1`` nearest supports counts the row's own distance, 0; the mean
    over the other ``size - 1`` is that mean times ``size / (size - 1)``."""
    sizes = np.diff(np.asarray(centers.offsets, dtype=np.int64))
    held = sizes[owners] + np.where(second >= 0, sizes[np.maximum(second, 0)], 0)
    size = np.minimum(m + 1, held).astype(np.float64)
    scored = size > 1
    scores = support_scores(centers, rows, owners, second, m + 1)
    assert scores is not None  # support rows
    out = np.zeros(rows.shape[0])
    out[scored] = scores[scored] * size[scored] / (size[scored] - 1.0)
    return out, scored


def two_nearest(distances: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                  np.ndarray]:
    """Nearest and second-nearest center of each row of ``distances`` (n, k) and their
    distances (second -1 and +inf with one center)."""
    n, k = distances.shape
    rows = np.arange(n)
    labels = np.argmin(distances, axis=1).astype(np.int64)
    nearest = distances[rows, labels]
    if k > 1:
        rest = distances.copy()
        rest[rows, labels] = np.inf
        second = np.argmin(rest, axis=1).astype(np.int64)
        second_sq = rest[rows, second]
    else:
        second, second_sq = np.full(n, -1, dtype=np.int64), np.full(n, np.inf)
    return labels, nearest, second, second_sq


def pooled_pvalues(pool: np.ndarray, sq_distances: np.ndarray) -> np.ndarray:
    """``(1 + #{v in pool : v >= d}) / (n + 1)`` for each distance ``d`` against the sorted
    1-D ``pool`` of ``n`` values."""
    n = pool.shape[0]
    first_at_least = np.searchsorted(pool, np.asarray(sq_distances, dtype=np.float64),
                                     side="left")
    return (1.0 + (n - first_at_least)) / (n + 1.0)


def flag_outliers(novelty: np.ndarray, alpha: float | None) -> np.ndarray:
    """Rows whose novelty is at most ``alpha`` (none when ``alpha`` is None)."""
    if alpha is None:
        return np.zeros(novelty.shape[0], dtype=bool)
    return novelty <= float(alpha)


def confidence_fields(second_labels: np.ndarray, second_sq_distances: np.ndarray,
                      sq_distances: np.ndarray, ids: np.ndarray) -> dict[str, np.ndarray]:
    """``second_labels``, ``second_cluster_ids`` (-1 without a second cluster) and
    ``margins`` (second minus nearest squared distance; +inf without a second cluster)."""
    has_second = second_labels >= 0
    second_ids = np.full(second_labels.shape[0], -1, dtype=np.int64)
    second_ids[has_second] = ids[second_labels[has_second]]
    return {"second_labels": second_labels, "second_cluster_ids": second_ids,
            "margins": second_sq_distances - sq_distances}


class NoveltyMixin:
    """The novelty side of :class:`~streamkm.cluster.MiniBatchKernelKMeans`: the buffers,
    the step's screen, ``score_samples`` and labels that mark outliers -1."""

    outlier_alpha: float | None
    outliers: str
    novelty_window: int
    label_outliers: bool

    def _position_ids(self) -> np.ndarray:
        """Stable id of the cluster at each position now."""
        drift = self.__dict__.get("_drift")
        if drift is None:
            return np.arange(self._centers.n_clusters, dtype=np.int64)  # type: ignore[attr-defined]
        return drift.cluster_ids

    def _novelty_buffers(self) -> NoveltyBuffers:
        """The buffers of members' center distances, aligned to the clusters' positions
        (empty when the state had none)."""
        buffers = self.__dict__.get("_novelty")
        ids = self._position_ids()
        if buffers is None:
            buffers = self._novelty = NoveltyBuffers.empty(int(self.novelty_window), ids)
        buffers.align(ids)
        return buffers

    def _novelty_score_buffers(self) -> NoveltyBuffers:
        """The buffers of members' base scores, aligned to the clusters' positions (empty
        when the state had none)."""
        buffers = self.__dict__.get("_novelty_scores")
        ids = self._position_ids()
        if buffers is None:
            buffers = self._novelty_scores = NoveltyBuffers.empty(
                int(self.novelty_window), ids, SCORE_PREFIX)
        buffers.align(ids)
        return buffers

    def _forget_rebuilt(self, events: Any) -> None:
        """Empty both buffer sets of the clusters the ``events`` rebuilt; after a kernel
        refit, refill them all from the model's own rows (:meth:`_refill_novelty`)."""
        self._novelty_buffers().forget_rebuilt(events)
        self._novelty_score_buffers().forget_rebuilt(events)
        if any(event.get("event") == "kernel_refreshed" for event in events):
            self._refill_novelty()

    def _novelty_scale(self) -> tuple[float, float]:
        """Typical values of the two buffer sets' quantities in the current feature space:
        the median distance of the newest support rows (:data:`SCALE_ROWS` in all at most)
        to their own center and their median leave-one-out base score (NaN without
        ``outlier_alpha``); for explicit centers, the mean squared distance between centers,
        for both. NaN where there is nothing to measure."""
        centers = self._centers  # type: ignore[attr-defined]
        if not isinstance(centers, SupportCenters):
            c = np.asarray(centers.centers, dtype=np.float64)
            if c.shape[0] < 2:
                return np.nan, np.nan
            gaps = ((c[:, None, :] - c[None, :, :]) ** 2).sum(-1)[np.triu_indices(c.shape[0], 1)]
            return float(gaps.mean()), float(gaps.mean())
        per_center = max(1, min(int(self.novelty_window), SCALE_ROWS // centers.n_clusters))
        rows, owners = newest_support_rows(centers, per_center)
        if not rows.shape[0]:
            return np.nan, np.nan
        distances = self._chunked_distances(centers, rows)  # type: ignore[attr-defined]
        at = np.arange(rows.shape[0])
        center = float(np.median(distances[at, owners]))
        if self.outlier_alpha is None or centers.n_clusters < 2:
            return center, np.nan
        rest = distances.copy()
        rest[at, owners] = np.inf
        second = np.argmin(rest, axis=1).astype(np.int64)
        scores, scored = leave_one_out_support_scores(centers, rows, owners, second)
        return center, float(np.median(scores[scored])) if scored.any() else np.nan

    def _rescale_novelty(self, before: tuple[float, float]) -> None:
        """After a re-sketch (the support rows or centroids already re-projected): scale each
        buffer set by how much its typical value changed from ``before``
        (:meth:`_novelty_scale`), so the records already seen, outliers among them, keep
        their place in the pool and the next batch is scored against it; a set whose
        change cannot be measured is emptied and warms up again."""
        after = self._novelty_scale()
        for buffers, old, new in ((self._novelty_buffers(), before[0], after[0]),
                                  (self._novelty_score_buffers(), before[1], after[1])):
            if np.isfinite(old) and np.isfinite(new) and old > 0 and new > 0:
                buffers.scale(new / old)
            else:
                buffers.forget(buffers.ids)

    def _refill_novelty(self) -> None:
        """After a kernel refit (a new feature space, not a rescaled one): fill the buffers,
        just emptied, with the distances of the reservoir's recent rows (every row, outliers
        among them) to their nearest center, so the next batch is scored against a
        calibrated pool instead of none (the refitted graph kernels have explicit centers:
        no base scores). Without a reservoir the buffers warm up from the next batches."""
        centers = self._centers  # type: ignore[attr-defined]
        window = int(self.novelty_window)
        reservoir = self.__dict__.get("_reservoir")
        if reservoir is None or not reservoir.rows.shape[0]:
            return
        recent = reservoir.rows[-window * centers.n_clusters:]
        x = self._kernel_spec.prepare(recent)  # type: ignore[attr-defined]
        labels, nearest, _, _ = two_nearest(self._chunked_distances(centers, x))  # type: ignore[attr-defined]
        self._novelty_buffers().push(labels, nearest.astype(np.float64))

    def _members_distances(self, x: np.ndarray, diag: np.ndarray, outcome: Any) -> np.ndarray:
        """The distances of the step's rows that enter their clusters' novelty buffers.

        Explicit centers: each row's distance to its own center as the update left it, the
        center the next batch is scored against (a center's move between steps shifts all
        its members' distances together: measured at the old center, a move that lifts them
        would flag the next batch by the dozen). Support rows: the distance before the update
        (a row that just joined a center's support would be measured in-sample)."""
        store = self._centers  # type: ignore[attr-defined]
        if isinstance(store, SupportCenters) or outcome.objective_after is None:
            return outcome.min_sq_distances
        return store.own_sq_distances(x, diag, outcome.labels).astype(
            outcome.min_sq_distances.dtype, copy=False)

    def _novelty_screen(self) -> NoveltyScreen:
        return NoveltyScreen(self._novelty_buffers(), self._novelty_score_buffers(),
                             self.outlier_alpha, self.outliers == "exclude")

    def _labels_with_outliers(self, labels: np.ndarray, outliers: np.ndarray) -> np.ndarray:
        """``labels`` with -1 for flagged rows when ``label_outliers`` is set."""
        if not self.label_outliers or not outliers.any():
            return labels
        return np.where(outliers, -1, labels).astype(np.int64)

    def _novelty_of(self, x: np.ndarray, distances: np.ndarray) -> np.ndarray:
        """Novelty of prepared rows ``x`` at squared kernel ``distances`` (n, k) from the
        centers, against the current supports and buffers."""
        labels, nearest, second, _ = two_nearest(distances)
        base = (None if self.outlier_alpha is None
                else support_scores(self._centers, x, labels, second))  # type: ignore[attr-defined]
        if base is None:
            return self._novelty_buffers().pvalues(labels, self._within_rounding(x, labels, nearest))
        return self._novelty_score_buffers().pooled_pvalues(base)

    def _within_rounding(self, x: np.ndarray, labels: np.ndarray, nearest: np.ndarray
                         ) -> np.ndarray:
        """``nearest`` lowered by the rounding error of a squared distance computed as
        ``K(x, x) - 2 <phi(x), C> + <C, C>`` (:data:`ROUNDING_ULPS` units in the last place
        of the larger terms), so that a buffered value equal to a row's distance up to
        rounding counts as at least as far. A row of the model's last batch meets its own
        distance in its cluster's buffer, and the same distance computed in batches of other
        shapes differs in its last bits: without this its novelty would depend on which
        other rows it was scored with."""
        scale = (np.abs(self._kernel_spec.diagonal(x)).astype(np.float64)  # type: ignore[attr-defined]
                 + np.abs(self._centers.center_sq_norms[labels]))  # type: ignore[attr-defined]
        eps = float(np.finfo(np.asarray(nearest).dtype).eps)
        return np.asarray(nearest, dtype=np.float64) - ROUNDING_ULPS * eps * scale

    def _prepared(self, X: Any) -> np.ndarray:
        self._check_fitted()  # type: ignore[attr-defined]
        return self._kernel_spec.prepare(self._check_input(X))  # type: ignore[attr-defined]

    def _tail_learner(self, scores: NoveltyBuffers) -> Any:
        """``learn_tail`` for drift handling: a group of flagged rows found to be a
        cluster's own tail joins that cluster's buffer of base scores (as its center
        distances join the other buffer), scored against the centers as they are."""
        def learn_tail(position: int, rows: np.ndarray) -> None:
            distances = self._chunked_distances(self._centers, rows)  # type: ignore[attr-defined]
            labels, nearest, second, _ = two_nearest(distances)
            base = support_scores(self._centers, rows, labels, second)  # type: ignore[attr-defined]
            scores.push(np.full(rows.shape[0], position, dtype=np.int64),
                        nearest if base is None else base)
        return learn_tail

    def _flagged(self, x: np.ndarray, distances: np.ndarray) -> np.ndarray:
        """Prepared rows ``x`` at squared kernel ``distances`` (n, k) from the centers
        whose novelty is at most ``outlier_alpha`` (none when it is None)."""
        if self.outlier_alpha is None:
            return np.zeros(distances.shape[0], dtype=bool)
        return flag_outliers(self._novelty_of(x, distances), self.outlier_alpha)

    def _nearest_with_novelty(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Nearest center of each row of X and the row's novelty."""
        x = self._prepared(X)
        distances = self._chunked_distances(self._centers, x)  # type: ignore[attr-defined]
        return np.argmin(distances, axis=1).astype(np.int64), self._novelty_of(x, distances)

    def score_samples(self, X: Any) -> np.ndarray:
        """Novelty of each row of X: the share of the model's recent records whose base
        score (mean squared kernel distance to the 20 nearest support rows) is at least the
        row's; without support rows (explicit centers), the share of its cluster's recent
        members at least as far from the center (float64 in (0, 1]; higher is more
        typical, the convention of scikit-learn's outlier detectors). 1.0 while the model holds fewer than 20 recent scores. A row that is
        itself a support row counts itself among its neighbours. Learns nothing
        (docs/novelty.md)."""
        return self._nearest_with_novelty(X)[1]

    def novelty_fields(self, distances: np.ndarray, X: Any) -> dict[str, np.ndarray]:
        """The assignment and novelty fields of the rows of ``X`` given their squared
        distances to every center (``transform(X)``), against the current supports and
        buffers; learns nothing.

        Returns ``labels``, ``sq_distances`` (to the nearest center), ``novelty``,
        ``outliers`` (at ``outlier_alpha``), ``second_labels``, ``second_cluster_ids`` and
        ``margins``, with the meaning of the :class:`~streamkm.model.StepReport` fields.
        """
        distances = np.asarray(distances)
        labels, nearest, second, second_sq = two_nearest(distances)
        novelty = self._novelty_of(self._prepared(X), distances)
        return {"labels": labels, "sq_distances": nearest, "novelty": novelty,
                "outliers": flag_outliers(novelty, self.outlier_alpha),
                **confidence_fields(second, second_sq, nearest, self._position_ids())}

    def predict(self, X: Any) -> np.ndarray:
        """Index of the nearest center of each row (int64); -1 for rows whose novelty is at
        most ``outlier_alpha`` when ``label_outliers`` is set."""
        if not self.label_outliers or self.outlier_alpha is None:
            return np.argmin(self._sq_distances(X), axis=1).astype(np.int64)  # type: ignore[attr-defined]
        labels, novelty = self._nearest_with_novelty(X)
        return self._labels_with_outliers(labels, flag_outliers(novelty, self.outlier_alpha))
