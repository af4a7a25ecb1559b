"""Graph kernels that follow the stream: a reservoir of recent input rows and the refresh.

A fitted (graph) kernel (``anchor``, ``heat``, ``level_set``, ``knn``) is defined by its
landmark rows. In streaming the model keeps the most recent ``RESERVOIR_ROWS`` input rows it
stepped on (:class:`RowReservoir`; with their raw rows when the model keeps raw rows for
re-sketching) and refits the kernel on them (:func:`refresh_kernel`):

* ``"turnover"``: when ``RESERVOIR_ROWS`` rows have arrived since the kernel was last
  fitted (the reservoir holds none of the rows the kernel was fitted on any more);
* ``"drift"``: after a step in which drift handling split or merged a cluster;
* ``"resketch"``: at every re-sketch (the landmarks must live in the new sketch's space).

A refresh moves the model into the new feature space without forgetting what it learned:
each reservoir row is assigned with the old kernel and centers; the new center of cluster j
is the mean of the new features of its reservoir rows (a cluster no reservoir row belongs
to takes the new features of the reservoir row nearest to it in the old space), and a few
Lloyd iterations on the reservoir's new features settle them (k-means on the recent rows,
started from the carried centers, so each cluster keeps its position and id). Counts,
stable cluster ids, the convergence monitor and the random generator carry over. Its cost
is one fit of the kernel on the reservoir plus preparing the reservoir rows twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._core.raw_rows import RawRows, raw_from_arrays, raw_to_arrays, stack_rows
from streamkm.cluster._centers import ExplicitCenters, sq_norms
from streamkm.exceptions import NoLevelSetError
from streamkm.kernels import KernelSpec

__all__ = ["RESERVOIR_ROWS", "RefreshOutcome", "RowReservoir", "refresh_kernel", "refresh_model_kernel",
           "refresh_reason"]

#: input rows kept for refitting a graph kernel (the refresh's landmarks)
RESERVOIR_ROWS = 4096
_PREFIX = "kernel_reservoir_"
#: Lloyd iterations on the reservoir in the new feature space, started from the carried
#: centers (fewer when the assignment stops changing)
REFINE_ITERATIONS = 20


def _tail(rows: RawRows, n: int) -> RawRows:
    return rows if rows.shape[0] <= n else rows[rows.shape[0] - n:]


class RowReservoir:
    """The most recent ``capacity`` input rows (oldest first), with their raw rows if kept.

    Parameters
    ----------
    capacity : int
        Rows kept.
    rows : ndarray (n, d)
        Initial rows (n <= capacity after the tail is taken).
    raw : RawRows or None
        Their raw rows (when the model keeps raw rows).
    rows_since_fit : int
        Rows added since the kernel was last fitted (negative while the rows it was fitted
        on are still to be added).
    n_refreshes : int
        Refreshes so far.
    """

    def __init__(self, capacity: int, rows: np.ndarray, raw: RawRows | None = None, *,
                 rows_since_fit: int = 0, n_refreshes: int = 0) -> None:
        self.capacity = int(capacity)
        self.rows = np.ascontiguousarray(_tail(rows, self.capacity))
        self.raw = None if raw is None else _tail(raw, self.capacity)
        self.rows_since_fit = int(rows_since_fit)
        self.n_refreshes = int(n_refreshes)

    def add(self, rows: np.ndarray, raw: RawRows | None) -> None:
        """Append a batch's input rows (and raw rows), dropping the oldest beyond capacity."""
        self.rows = np.ascontiguousarray(_tail(np.concatenate([self.rows, rows]),
                                               self.capacity))
        if self.raw is not None and raw is not None:
            self.raw = _tail(stack_rows([self.raw, raw]), self.capacity)
        self.rows_since_fit += int(rows.shape[0])

    @property
    def turned_over(self) -> bool:
        """Whether ``capacity`` rows have arrived since the kernel was last fitted."""
        return self.rows_since_fit >= self.capacity

    def to_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays (names start with ``kernel_reservoir_``) and JSON-able metadata."""
        arrays = {_PREFIX + "rows": self.rows}
        if self.raw is not None:
            arrays.update(raw_to_arrays(self.raw, _PREFIX + "raw"))
        meta = {"capacity": self.capacity, "rows_since_fit": self.rows_since_fit,
                "n_refreshes": self.n_refreshes, "keeps_raw": self.raw is not None}
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                   dtype: Any) -> RowReservoir:
        """Inverse of :meth:`to_state` (raises KeyError / ValueError on a malformed state)."""
        rows = np.ascontiguousarray(arrays[_PREFIX + "rows"], dtype=dtype)
        raw = raw_from_arrays(arrays, _PREFIX + "raw") if meta["keeps_raw"] else None
        if raw is not None and raw.shape[0] != rows.shape[0]:
            raise ValueError(f"kernel reservoir has {rows.shape[0]} rows but "
                             f"{raw.shape[0]} raw rows")
        return cls(int(meta["capacity"]), rows, raw, rows_since_fit=int(meta["rows_since_fit"]),
                   n_refreshes=int(meta["n_refreshes"]))


def refresh_reason(reservoir: RowReservoir, drift_events: list[dict[str, Any]]) -> str | None:
    """Why the kernel is refitted after this step (module docstring), or None."""
    if any(e.get("event") in ("split", "merge") for e in drift_events):
        return "drift"
    if reservoir.turned_over:
        return "turnover"
    return None


@dataclass(frozen=True)
class RefreshOutcome:
    """A refitted kernel and the model's centers and reservoir rows in its feature space.

    Attributes
    ----------
    kernel : KernelSpec
        The kernel fitted on the reservoir rows.
    centers : ndarray (k, m)
        New centers (one per current cluster, same order).
    labels : ndarray (n,), int64
        Cluster of each reservoir row under the old kernel and centers.
    old_features / new_features : ndarray (n, m_old) / (n, m)
        The reservoir rows prepared by the old and by the new kernel.
    """

    kernel: KernelSpec
    centers: np.ndarray
    labels: np.ndarray
    old_features: np.ndarray
    new_features: np.ndarray


def refresh_kernel(kernel: KernelSpec, centers: ExplicitCenters, old_rows: np.ndarray,
                   new_rows: np.ndarray | None = None) -> RefreshOutcome:
    """Refit ``kernel`` on the reservoir and carry the centers over (module docstring).

    ``old_rows`` are the reservoir's input rows in the space the kernel was fitted in;
    ``new_rows`` the same rows in the space the new kernel is fitted in (a new sketch's
    features; default: ``old_rows``).
    """
    new_rows = old_rows if new_rows is None else new_rows
    dtype = centers.dtype
    old_features = kernel.prepare(old_rows)
    sq = centers.sq_distances(old_features, sq_norms(old_features),
                              kernel.diagonal(old_features))
    labels = np.argmin(sq, axis=1).astype(np.int64)
    unfitted = KernelSpec(kernel.name, kernel.gamma, kernel.degree, kernel.coef0,
                          dict(kernel.options))
    k = centers.n_clusters
    fitted = unfitted.fit(new_rows, k)
    new_features = fitted.prepare(np.ascontiguousarray(new_rows, dtype=dtype))
    feats = new_features.astype(np.float64)
    centers_new = _cluster_means(feats, labels, k, fallback=np.argmin(sq, axis=0))
    for _ in range(REFINE_ITERATIONS):
        assigned = _nearest(feats, centers_new)
        if np.array_equal(assigned, labels):
            break
        labels = assigned
        centers_new = _cluster_means(feats, labels, k, fallback=None, keep=centers_new)
    return RefreshOutcome(fitted, np.ascontiguousarray(centers_new, dtype=dtype), labels,
                          old_features, new_features)


def _nearest(features: np.ndarray, centers: np.ndarray) -> np.ndarray:
    sq = (centers * centers).sum(axis=1)[None, :] - 2.0 * features @ centers.T
    return np.argmin(sq, axis=1).astype(np.int64)


def _cluster_means(features: np.ndarray, labels: np.ndarray, k: int, *,
                   fallback: np.ndarray | None, keep: np.ndarray | None = None) -> np.ndarray:
    """Mean of each cluster's rows; an empty cluster takes the row ``fallback[j]`` (or keeps
    its center in ``keep``)."""
    counts = np.bincount(labels, minlength=k)
    sums = np.zeros((k, features.shape[1]))
    np.add.at(sums, labels, features)
    out = np.empty_like(sums)
    held = counts > 0
    out[held] = sums[held] / counts[held, None]
    for j in np.flatnonzero(~held):
        out[j] = features[int(fallback[j])] if keep is None else keep[j]
    return out


def refresh_model_kernel(model: Any, reason: str, new_rows: np.ndarray | None = None
                         ) -> list[dict[str, Any]]:
    """Refit ``model``'s graph kernel on its reservoir (or on ``new_rows``, the reservoir's rows
    in a new sketch) and move the centers and the drift windows into the new feature space,
    where drift handling reviews every cluster once; the ``kernel_refreshed`` event and the
    splits it led to (``kernel_refresh_failed`` when the reservoir has no level set)."""
    reservoir = model._reservoir
    old_kernel = model._kernel_spec
    old_centers = ExplicitCenters(model._centers.centers.copy())
    event: dict[str, Any] = {"event": "kernel_refreshed", "step": int(model.n_steps_),
                             "reason": reason, "kernel": old_kernel.name,
                             "n_rows": int(reservoir.rows.shape[0])}
    reservoir.rows_since_fit = 0
    try:
        outcome = refresh_kernel(old_kernel, model._centers, reservoir.rows, new_rows)
    except NoLevelSetError as exc:
        if new_rows is not None:
            raise
        return [{**event, "event": "kernel_refresh_failed", "error": str(exc)}]
    model._centers.reproject(outcome.centers)
    model._kernel_spec = outcome.kernel
    if new_rows is not None:
        reservoir.rows = np.ascontiguousarray(new_rows, dtype=model._dtype)
    reservoir.n_refreshes += 1
    events = [{**event, "n_features": int(outcome.centers.shape[1])}]
    drift = model.__dict__.get("_drift")
    if drift is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            drift.follow_kernel(outcome.labels, outcome.old_features, outcome.new_features,
                                reservoir.raw, old_centers, old_kernel, model._centers,
                                outcome.kernel)
        if reason != "drift":  # a drift refresh follows a split or merge already
            splits, model.counts_ = drift.review(int(model.n_steps_), model._centers,
                                                model.counts_, outcome.kernel)
            events += splits
    return events
