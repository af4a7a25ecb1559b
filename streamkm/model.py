"""What the runtime needs from a model: the :class:`StreamModel` protocol and its
:class:`StepReport`.

Implemented by :class:`streamkm.MiniBatchKernelKMeans` (the engine) and
:class:`streamkm.SketchedKernelKMeans` (the engine behind a feature sketch), so the service
steps, counts and checkpoints either without probing which one it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["StepReport", "StreamModel"]


@dataclass(frozen=True)
class StepReport:
    """The outcome of one mini-batch step (``step`` of a :class:`StreamModel`).

    Attributes
    ----------
    labels : ndarray of shape (n,), int64
        Cluster of each row, assigned with the centers before the update.
    sq_distances : ndarray of shape (n,)
        Squared kernel distance of each row to its cluster's center before the update.
    objective : float
        Batch objective f_B(C_i): mean of ``sq_distances``.
    improvement : float or None
        f_B(C_i) - f_B(C_{i+1}) on the same batch; None when the centers did not move.
    updated : bool
        Whether the centers moved (False while converged: assign only).
    step : int
        ``n_steps_`` after this batch.
    cluster_ids : ndarray of shape (n,), int64
        Stable id of each row's cluster (``cluster_ids_[labels]`` as it was when the batch
        was assigned). Unlike ``labels`` (positions, which shift when clusters are split or
        merged) stable ids never change meaning and are never reused: this is what to
        write downstream. Without drift handling the ids equal the labels.
    events : tuple of dict
        Lifecycle events of this step, in order: the monitor transition (``converged`` or
        ``woke``), then drift events (``split``, ``merge``). Each is a JSON-able dict with
        at least ``"event"`` and ``"step"`` (see ``docs/drift.md`` for the fields).
    novelty : ndarray of shape (n,), float64
        How typical each row is, in (0, 1]: the share of the model's recent records (every
        cluster's novelty buffer, pooled, as it was before this batch) whose base score is
        at least the row's, ``(1 + #{pool >= s}) / (n_pool + 1)``; small is unusual. The
        base score is the row's mean squared kernel distance to its 20 nearest support rows
        of its two nearest clusters; 1.0 while the pool holds fewer than 20 values. Without
        support rows (explicit centers: the linear kernel, graph kernels), the share of the
        row's cluster's recent members at least as far from the center (``docs/novelty.md``).
    outliers : ndarray of shape (n,), bool
        Rows whose novelty is at most the model's ``outlier_alpha`` (all False when it is
        None). With ``outliers="exclude"`` they did not move the centers.
    second_labels : ndarray of shape (n,), int64
        Position of each row's second-nearest cluster (-1 when the model has one cluster).
    second_cluster_ids : ndarray of shape (n,), int64
        Stable id of that cluster (-1 when there is none).
    margins : ndarray of shape (n,)
        Squared kernel distance to the second-nearest center minus that to the nearest
        (>= 0; small means the assignment was nearly a tie; +inf with one cluster).
    """

    labels: np.ndarray
    sq_distances: np.ndarray
    objective: float
    improvement: float | None
    updated: bool
    step: int
    cluster_ids: np.ndarray | None = None
    events: tuple[dict[str, Any], ...] = ()
    novelty: np.ndarray | None = None
    outliers: np.ndarray | None = None
    second_labels: np.ndarray | None = None
    second_cluster_ids: np.ndarray | None = None
    margins: np.ndarray | None = None


class StreamModel(Protocol):
    """A model stepped one mini-batch at a time.

    Counts (``n_steps_``, ``n_clusters_``, ``converged_``, ``batch_objective_``) are read
    only once :meth:`is_fitted` is true.
    """

    @property
    def n_steps_(self) -> int:
        """Mini-batch steps taken (the model's version)."""
        ...

    @property
    def n_clusters_(self) -> int:
        """Clusters in the model now."""
        ...

    @property
    def converged_(self) -> bool:
        """Whether the model is converged (assign only)."""
        ...

    @property
    def batch_objective_(self) -> float:
        """The objective of the latest batch."""
        ...

    def is_fitted(self) -> bool:
        """Whether a first batch initialised the model."""
        ...

    def step(self, X: Any) -> StepReport:
        """Assign the batch ``X`` with the current centers, then update them."""
        ...

    def transform(self, X: Any) -> np.ndarray:
        """Squared kernel distance of every row of ``X`` to every center."""
        ...

    def state_parts(self) -> dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]]:
        """``(arrays, JSON-able meta)`` by checkpoint namespace (``"model"``, and
        ``"sketch"`` for a sketched model); no pickle."""
        ...
