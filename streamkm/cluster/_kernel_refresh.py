"""Graph kernels that follow the stream: a reservoir of recent input rows and the refresh.

A fitted (graph) kernel (``anchor``, ``heat``, ``level_set``, ``knn``) is defined by its
landmark rows. In streaming the model keeps the most recent ``RESERVOIR_ROWS`` input rows it
stepped on (:class:`RowReservoir`; with their raw rows when the model keeps raw rows for
re-sketching) and refits the kernel on them (:func:`refresh_kernel`):

* ``"turnover"``: when ``RESERVOIR_ROWS`` rows have arrived since the kernel was last
  fitted (the reservoir holds none of the rows the kernel was fitted on any more);
* ``"drift"``: after a step in which drift handling split or merged a cluster;
* ``"alarm"``: after a step in which drift handling rejected a split it was alarmed into
  (a cluster's spread grew, but its bisection in the current feature space did not pay):
  a kernel fitted on the recent rows may show the two groups the current one joins;
* ``"input_split"``: after a step in which some cluster's batch rows fall into two groups in
  the input space (:meth:`streamkm.drift.controller.DriftController.input_split`, drift
  handling's split test on a linear bisection): a graph kernel maps each piece of its graph
  to nearly one point, so a cluster pulling apart inside one piece does not widen in its
  feature space and drift handling cannot see it. The refit fits the kernel for one more
  cluster (the split it expects) and compares its candidates with that cluster split
  (:func:`split_partition`: at k clusters a kernel that separates the two groups has to give
  a shape's rows to another cluster, and the cut would keep the current kernel). After
  drift handling's ``max_rejections`` such refits in a row that split nothing
  (``RowReservoir.unsplit_refits``) the test pauses until the next turnover;
* ``"resketch"``: at every re-sketch (the landmarks must live in the new sketch's space).

A refresh moves the model into the new feature space without forgetting what it learned:
each reservoir row is assigned with the old kernel and centers; the new center of cluster j
is the mean of the new features of its reservoir rows (a cluster no reservoir row belongs
to takes the new features of the reservoir row nearest to it in the old space), and a few
Lloyd iterations on the reservoir's new features settle them (k-means on the recent rows,
started from the carried centers, so each cluster keeps its position and id). Counts,
stable cluster ids, the convergence monitor and the random generator carry over.

A refit is a proposal, not an obligation. In the same feature space (not at a re-sketch)
the model weighs four candidates, each with the partition of the reservoir it would
continue from:

* ``"carried"``: the current kernel and centers (the partition the model has now);
* ``"fresh"``: the kernel refitted on the reservoir, centers carried over as above;
* ``"recent"``: the kernel refitted on the newest half of the reservoir (a shape that moves
  blurs half as much over it), centers carried over the same way;
* ``"kept"``: the runner-up of the previous refit (the best candidate it did not adopt),
  centers carried over the same way;

and adopts the one whose partition has the lowest normalised cut of the reservoir's mutual
``AUTO_NEIGHBORS``-nearest-neighbour graph (:func:`streamkm.kernels._auto.mutual_knn_graph`,
one graph for every candidate: the criterion of ``gamma="auto"``). The fresh refit (fitted
on the rows the model sees now) is adopted unless another candidate cuts less by more than
the cut's resolution, one row's share (k / n, :func:`streamkm.kernels._decision.decide`): a
refit that cuts a shape the current kernel follows is not adopted. The runner-up is kept
(fitted, in the model state) for the next refit, unless the refit's review splits a
cluster (it was weighed for the partition before the split). With drift handling every
refit but a ``"drift"`` one ends with drift handling's review of every cluster in the
adopted space (the cut at k clusters does not see two groups one cluster holds). Its cost is two fits of
the kernel (on the reservoir and on its newest half), the graph, and preparing the
reservoir rows once per candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._core.raw_rows import RawRows, raw_from_arrays, raw_to_arrays, stack_rows
from streamkm.cluster._centers import ExplicitCenters, sq_norms
from streamkm.drift.principal_split import principal_split
from streamkm.exceptions import NoLevelSetError
from streamkm.kernels import KernelSpec
from streamkm.kernels._auto import mutual_knn_graph, normalized_cut
from streamkm.kernels._decision import decide

__all__ = ["CANDIDATES", "RESERVOIR_ROWS", "RefreshOutcome", "RowReservoir", "choose_refit",
           "refit_rows", "refresh_kernel", "refresh_model_kernel", "refresh_reason",
           "unsplit_refits"]

#: input rows kept for refitting a graph kernel (the refresh's landmarks)
RESERVOIR_ROWS = 4096
_PREFIX = "kernel_reservoir_"
#: Lloyd iterations on the reservoir in the new feature space, started from the carried
#: centers (fewer when the assignment stops changing)
REFINE_ITERATIONS = 20
#: the candidates of a refit; ties go to the fresh refit, then in this order
CANDIDATES = ("carried", "fresh", "kept", "recent")
_KEPT = _PREFIX + "kept_"


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
        Refits adopted so far.
    n_kept : int
        Refits not adopted so far (the carried kernel cut least).
    kept : KernelSpec or None
        The runner-up kernel of the last refit (fitted), a candidate of the next one.
    rejected_seen : int
        Splits drift handling had rejected when the reservoir last looked (``"alarm"``).
    unsplit_refits : int
        ``"input_split"`` refits in a row that led to no split (the test on the input rows
        pauses at drift handling's ``max_rejections`` until the next turnover).
    """

    def __init__(self, capacity: int, rows: np.ndarray, raw: RawRows | None = None, *,
                 rows_since_fit: int = 0, n_refreshes: int = 0, n_kept: int = 0,
                 kept: KernelSpec | None = None, rejected_seen: int = 0,
                 unsplit_refits: int = 0) -> None:
        self.capacity = int(capacity)
        self.rows = np.ascontiguousarray(_tail(rows, self.capacity))
        self.raw = None if raw is None else _tail(raw, self.capacity)
        self.rows_since_fit = int(rows_since_fit)
        self.n_refreshes = int(n_refreshes)
        self.n_kept = int(n_kept)
        self.kept = kept
        self.rejected_seen = int(rejected_seen)
        self.unsplit_refits = int(unsplit_refits)

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
                "n_refreshes": self.n_refreshes, "n_kept": self.n_kept,
                "rejected_seen": self.rejected_seen, "unsplit_refits": self.unsplit_refits,
                "keeps_raw": self.raw is not None,
                "kept": None}
        if self.kept is not None:
            kept_arrays, kept_fitted = self.kept.to_arrays()
            arrays.update({_KEPT + name: value for name, value in kept_arrays.items()})
            meta["kept"] = {"spec": self.kept.to_dict(), "fitted": kept_fitted}
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
        kept = None
        if meta.get("kept") is not None:
            kept_arrays = {name[len(_KEPT):]: value for name, value in arrays.items()
                           if name.startswith(_KEPT)}
            kept = KernelSpec.from_dict(meta["kept"]["spec"], kept_arrays,
                                        meta["kept"]["fitted"])
            if not kept.kind.fitted or kept.fitted is None:
                raise ValueError(f"the kept kernel {kept.name!r} of the kernel reservoir "
                                 "is not a fitted graph kernel")
        return cls(int(meta["capacity"]), rows, raw, rows_since_fit=int(meta["rows_since_fit"]),
                   n_refreshes=int(meta["n_refreshes"]), n_kept=int(meta.get("n_kept", 0)),
                   kept=kept, rejected_seen=int(meta.get("rejected_seen", 0)),
                   unsplit_refits=int(meta.get("unsplit_refits", 0)))


def refresh_reason(reservoir: RowReservoir, drift_events: list[dict[str, Any]],
                   drift: Any = None, rows: np.ndarray | None = None,
                   labels: np.ndarray | None = None) -> str | None:
    """Why the kernel is refitted after this step (module docstring), or None; ``drift``:
    the model's drift controller (its count of rejected splits, its split test), None
    without one; ``rows`` / ``labels``: the step's input rows and their cluster positions
    (``"input_split"`` is tested only with them and a controller)."""
    alarmed = drift is not None and drift.n_rejected > reservoir.rejected_seen
    if drift is not None:
        reservoir.rejected_seen = int(drift.n_rejected)
    if any(e.get("event") in ("split", "merge") for e in drift_events):
        return "drift"
    if alarmed and reservoir.rows_since_fit > 0:
        return "alarm"
    if (drift is not None and rows is not None and labels is not None
            and reservoir.rows_since_fit > 0
            and reservoir.unsplit_refits < drift.policy.max_rejections
            and drift.input_split(rows, labels) is not None):
        return "input_split"
    if reservoir.turned_over:
        return "turnover"
    return None


@dataclass(frozen=True)
class RefreshOutcome:
    """The candidate a refit adopted, with the model's partition of the reservoir in its
    feature space.

    Attributes
    ----------
    outcome : str
        The adopted candidate, one of ``CANDIDATES`` (``"carried"``: nothing changes).
    kernel : KernelSpec
        Its kernel (the current one when carried).
    centers : ndarray (k, m)
        Its centers (one per current cluster, same order; the current ones when carried).
    labels : ndarray (n,), int64
        Its cluster of each reservoir row.
    old_features / new_features : ndarray (n, m_old) / (n, m)
        The reservoir rows prepared by the current and by the adopted kernel.
    cuts : dict
        Candidate -> normalised cut of its partition (empty at a re-sketch, where only the
        fresh refit lives in the new space).
    runner_up : KernelSpec or None
        The kernel of the candidate with the next lowest cut (the next refit's ``kept``).
    """

    outcome: str
    kernel: KernelSpec
    centers: np.ndarray
    labels: np.ndarray
    old_features: np.ndarray
    new_features: np.ndarray
    cuts: dict[str, float]
    runner_up: KernelSpec | None


@dataclass(frozen=True)
class _Candidate:
    kernel: KernelSpec
    centers: np.ndarray  # float64
    labels: np.ndarray
    features: np.ndarray


def _carry_into(fitted: KernelSpec, rows: np.ndarray, labels: np.ndarray, fallback: np.ndarray,
                k: int, dtype: Any) -> _Candidate:
    """The partition ``labels`` of ``rows`` carried into ``fitted``'s feature space: cluster
    means of the new features, then at most ``REFINE_ITERATIONS`` Lloyd iterations."""
    features = fitted.prepare(np.ascontiguousarray(rows, dtype=dtype))
    feats = features.astype(np.float64)
    centers = _cluster_means(feats, labels, k, fallback=fallback)
    for _ in range(REFINE_ITERATIONS):
        assigned = _nearest(feats, centers)
        if np.array_equal(assigned, labels):
            break
        labels = assigned
        centers = _cluster_means(feats, labels, k, fallback=None, keep=centers)
    return _Candidate(fitted, centers, labels, features)


def refresh_kernel(kernel: KernelSpec, centers: ExplicitCenters, old_rows: np.ndarray,
                   new_rows: np.ndarray | None = None, kept: KernelSpec | None = None,
                   fit_clusters: int | None = None, split_cluster: int | None = None
                   ) -> RefreshOutcome:
    """Refit ``kernel`` on the reservoir and adopt the candidate that cuts least (module
    docstring).

    ``old_rows`` are the reservoir's input rows in the space the kernel was fitted in;
    ``new_rows`` the same rows in the space the new kernel is fitted in (a new sketch's
    features: then the fresh refit is adopted, the only candidate in that space);
    ``kept`` the previous refit's runner-up (fitted in the space of ``old_rows``);
    ``split_cluster`` the position of a cluster whose input rows fall into two groups (a
    refit for more clusters than the model has, ``fit_clusters`` > k): the candidates are
    then compared with that cluster split (:func:`split_partition`).
    """
    dtype = centers.dtype
    old_features = kernel.prepare(old_rows)
    sq = centers.sq_distances(old_features, sq_norms(old_features),
                              kernel.diagonal(old_features))
    labels = np.argmin(sq, axis=1).astype(np.int64)
    fallback = np.argmin(sq, axis=0)
    unfitted = KernelSpec(kernel.name, kernel.gamma, kernel.degree, kernel.coef0,
                          dict(kernel.options))
    k = centers.n_clusters
    fit_k = k if fit_clusters is None else int(fit_clusters)
    if new_rows is not None:
        fresh = _carry_into(unfitted.fit(new_rows, fit_k), new_rows, labels, fallback, k, dtype)
        return RefreshOutcome("fresh", fresh.kernel, np.ascontiguousarray(fresh.centers, dtype=dtype),
                              fresh.labels, old_features, fresh.features, {}, None)
    carried = _Candidate(kernel, centers.centers, labels, old_features)
    split = None
    if fit_k > k and split_cluster is not None:
        split = split_partition(old_rows, labels, fallback, split_cluster)
    # the candidates' partitions start from the model's, with the cluster of two groups
    # split when there is one (then each has k + 1 clusters)
    start, start_fallback = (labels, fallback) if split is None else split[:2]
    n_parts = start_fallback.shape[0]
    candidates = {"carried": carried if split is None else
                  _Candidate(kernel, centers.centers, start, old_features)}
    if kept is not None:
        candidates["kept"] = _carry_into(kept, old_rows, start, start_fallback, n_parts, dtype)
    for name, rows in refit_rows(old_rows, fit_k).items():
        candidates[name] = _carry_into(unfitted.fit(rows, fit_k), old_rows, start,
                                       start_fallback, n_parts, dtype)
    graph = mutual_knn_graph(np.ascontiguousarray(old_rows, dtype=np.float64))
    cuts = {name: normalized_cut(graph, c.labels, n_parts) for name, c in candidates.items()}
    # the cut's resolution: one row moved across it changes it by about k / n
    chosen, runner_up = choose_refit(cuts, n_parts / old_rows.shape[0])
    adopted = carried if chosen == "carried" else candidates[chosen]
    if split is not None and chosen != "carried":
        adopted = _rejoin(adopted, split[2], k)
    return RefreshOutcome(chosen, adopted.kernel, np.ascontiguousarray(adopted.centers, dtype=dtype),
                          adopted.labels, old_features, adopted.features, cuts,
                          None if runner_up is None else candidates[runner_up].kernel)


def split_partition(rows: np.ndarray, labels: np.ndarray, fallback: np.ndarray,
                    cluster: int | None) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The partition ``labels`` (k clusters) of the reservoir ``rows`` with ``cluster``'s
    rows split in two by :func:`~streamkm.drift.principal_split.principal_split` of their
    input rows (the second group becomes cluster k), the row each of the k + 1 clusters
    starts from when it holds none (``fallback`` extended), and ``cluster``; None when there
    is no such cluster or its rows do not split."""
    if cluster is None:
        return None
    k = fallback.shape[0]
    mine = np.flatnonzero(labels == cluster)
    if mine.shape[0] < 2:
        return None
    side, _ = principal_split(rows[mine], REFINE_ITERATIONS)
    if side.min() == side.max():
        return None
    out = labels.copy()
    out[mine[side == 1]] = k
    return out, np.append(fallback, mine[side == 1][0]), int(cluster)


def _rejoin(candidate: _Candidate, split_cluster: int, k: int) -> _Candidate:
    """A candidate compared with one cluster split (k + 1 clusters) as the model's k: the
    second group's rows back in ``split_cluster``, each center the mean of its rows' features
    (a cluster that holds none keeps its center). Drift handling's review then decides the
    split in the adopted feature space."""
    labels = np.where(candidate.labels == k, split_cluster, candidate.labels).astype(np.int64)
    centers = _cluster_means(candidate.features.astype(np.float64), labels, k, fallback=None,
                             keep=candidate.centers[:k])
    return _Candidate(candidate.kernel, centers, labels, candidate.features)


def refit_rows(rows: np.ndarray, n_clusters: int) -> dict[str, np.ndarray]:
    """The reservoir rows each refitted candidate is fitted on: ``"fresh"`` all of them,
    ``"recent"`` the newest half (when it holds more than ``n_clusters`` rows)."""
    out = {"fresh": rows}
    newest = rows[rows.shape[0] // 2:]
    if newest.shape[0] > n_clusters:
        out["recent"] = newest
    return out


def choose_refit(cuts: dict[str, float], resolution: float) -> tuple[str, str | None]:
    """The candidate a refit adopts and the runner-up it keeps, from the candidates' cuts
    (``"fresh"`` among them): the fresh refit unless another cuts less by more than
    ``resolution`` (then the lowest; ties in ``CANDIDATES`` order); the runner-up is the
    lowest cut of the others (None when the fresh refit is the only candidate)."""
    if "fresh" not in cuts:
        raise ValueError(f"a refit's candidates include 'fresh', got {sorted(cuts)}")
    scores = {name: cuts[name] for name in CANDIDATES if name in cuts}
    chosen = decide(scores, "fresh", resolution).chosen
    others = sorted((name for name in scores if name != chosen), key=lambda n: scores[n])
    return chosen, (others[0] if others else None)


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


def _fit_clusters(reason: str, n_clusters: int) -> int:
    """The clusters a refit fits the kernel for: one more after ``"input_split"`` (the
    cluster of two groups is about to be split), else the model's."""
    return n_clusters + 1 if reason == "input_split" else n_clusters


def refresh_model_kernel(model: Any, reason: str, new_rows: np.ndarray | None = None,
                         split_cluster: int | None = None) -> list[dict[str, Any]]:
    """Refit ``model``'s graph kernel on its reservoir (or on ``new_rows``, the reservoir's rows
    in a new sketch) and adopt the candidate that cuts least (module docstring). When a new
    kernel is adopted the centers and the drift windows move into its feature space, where
    drift handling reviews every cluster once: the ``kernel_refreshed`` event and the splits
    it led to. When the carried kernel stays, a ``kernel_kept`` event (and the review's
    splits); both carry ``outcome`` and ``cuts`` (``kernel_refresh_failed`` when the
    reservoir has no level set)."""
    reservoir = model._reservoir
    old_kernel = model._kernel_spec
    old_centers = ExplicitCenters(model._centers.centers.copy())
    event: dict[str, Any] = {"event": "kernel_refreshed", "step": int(model.n_steps_),
                             "reason": reason, "kernel": old_kernel.name,
                             "n_rows": int(reservoir.rows.shape[0])}
    reservoir.rows_since_fit = 0
    try:
        outcome = refresh_kernel(old_kernel, model._centers, reservoir.rows, new_rows,
                                 None if new_rows is not None else reservoir.kept,
                                 _fit_clusters(reason, model._centers.n_clusters),
                                 split_cluster if reason == "input_split" else None)
    except NoLevelSetError as exc:
        if new_rows is not None:
            raise
        failed = [{**event, "event": "kernel_refresh_failed", "error": str(exc)}]
        reservoir.unsplit_refits = unsplit_refits(reservoir.unsplit_refits, reason, failed)
        return failed
    reservoir.kept = outcome.runner_up
    event.update(outcome=outcome.outcome, cuts=outcome.cuts)
    drift = model.__dict__.get("_drift")
    if outcome.outcome == "carried":
        reservoir.n_kept += 1
        events = [{**event, "event": "kernel_kept"}]
    else:
        model._centers.reproject(outcome.centers)
        model._kernel_spec = outcome.kernel
        if new_rows is not None:
            reservoir.rows = np.ascontiguousarray(new_rows, dtype=model._dtype)
        reservoir.n_refreshes += 1
        events = [{**event, "n_features": int(outcome.centers.shape[1])}]
        if drift is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                drift.follow_kernel(outcome.labels, outcome.old_features, outcome.new_features,
                                    reservoir.raw, old_centers, old_kernel, model._centers,
                                    outcome.kernel)
    # the cut does not see two groups one cluster holds: drift handling reviews every
    # cluster at each refit (a drift refit follows a split or merge already)
    if drift is not None and reason != "drift":
        splits, model.counts_ = drift.review(int(model.n_steps_), model._centers,
                                            model.counts_, model._kernel_spec)
        events += splits
        if splits:  # the runner-up was weighed for the partition before the split
            reservoir.kept = None
    reservoir.unsplit_refits = unsplit_refits(reservoir.unsplit_refits, reason, events)
    return events


def unsplit_refits(count: int, reason: str, events: list[dict[str, Any]]) -> int:
    """``"input_split"`` refits in a row that led to no split, after a refit for ``reason``
    that sent ``events``: one more after an input-split refit that split nothing, none after
    one that split, after a turnover and after drift handling split or merged; unchanged
    after the others."""
    if reason == "input_split":
        return 0 if any(e.get("event") == "split" for e in events) else count + 1
    return 0 if reason in ("turnover", "drift") else count
