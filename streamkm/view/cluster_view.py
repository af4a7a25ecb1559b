"""What the live cluster view shows, kept up to date by the service.

The service calls :meth:`ClusterView.observe_batch` once per processed batch (bounded cost:
a few hundred rows copied into :class:`~streamkm.view.sample.RecentSample`, one history
point) and :meth:`ClusterView.observe_event` for every lifecycle event. The HTTP thread
calls :meth:`ClusterView.to_dict`, which does the expensive part (projection of the sample
to a plane, per-cluster summaries) off the service's hot path and caches it until the next
batch.

The JSON document (``GET /api/clusters``)::

    {"step": 120, "converged": false, "n_clusters": 4, "updated_at": 1764570000.0,
     "kernel": "auto -> heat", "axes": ["x0", "x1"], "projection": "raw",
     "points": {"x": [...], "y": [...], "cluster": [...],       # one per sampled record
                "outlier": [false, ...]},
     "clusters": [{"id": 0, "sample_size": 512, "medoid": [x, y]}, ...],
     "objective": [{"step": 1, "time": ..., "objective": 0.12, "converged": false}, ...],
     "events": [{"event": "split", "step": 57, "time": ..., ...}, ...]}

``points.outlier`` is each record's outlier flag (``model.outlier_alpha``; all false while
it is unset). ``clusters[*].sample_size`` sums to the number of points; ``id`` is the model's stable
cluster id (the id written to the assignment sink). ``medoid`` is the sampled record of
that cluster closest to its center in kernel space (kernel centers have no coordinates).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import numpy as np

from streamkm.view.projection import project_to_plane
from streamkm.view.sample import RecentSample

__all__ = ["ClusterView"]


class ClusterView:
    """Recent sample, objective history and lifecycle events of a running model.

    Parameters
    ----------
    sample_size : int, default=2000
        Records kept in the sample.
    history : int, default=600
        Objective points kept (one per batch).
    max_events : int, default=50
        Lifecycle events kept.
    random_state : int, default=0
        Seed of the sampling.

    Examples
    --------
    >>> import numpy as np
    >>> view = ClusterView(sample_size=100)
    >>> x = np.random.default_rng(0).normal(size=(50, 2))
    >>> view.observe_batch(x, np.repeat([3, 7], 25), np.ones(50), step=1, objective=1.0,
    ...                    converged=False, n_clusters=2)
    >>> doc = view.to_dict()
    >>> sorted(c["id"] for c in doc["clusters"]), len(doc["points"]["x"])
    ([3, 7], 12)
    """

    def __init__(self, sample_size: int = 2000, *, history: int = 600, max_events: int = 50,
                 random_state: int = 0) -> None:
        self.sample = RecentSample(sample_size, random_state=random_state)
        self._lock = threading.Lock()
        self._history: deque[dict[str, Any]] = deque(maxlen=history)
        self._events: deque[dict[str, Any]] = deque(maxlen=max_events)
        self._state: dict[str, Any] = {"step": 0, "converged": False, "n_clusters": 0,
                                       "updated_at": None}
        self._cache: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._n_events = 0
        #: The kernel label of the page header (``"auto -> heat"``), ``None`` until known.
        self.kernel: str | None = None

    def observe_batch(self, rows: Any, cluster_ids: np.ndarray, sq_distances: np.ndarray, *,
                      step: int, objective: float, converged: bool, n_clusters: int,
                      outliers: np.ndarray | None = None) -> None:
        """Record one processed batch: its rows, assignments and outlier flags (none when
        ``outliers`` is None), and the model's state."""
        self.sample.add(rows, cluster_ids, sq_distances, step=step, outliers=outliers)
        now = time.time()
        with self._lock:
            self._history.append({"step": int(step), "time": now,
                                  "objective": float(objective), "converged": bool(converged)})
            self._state = {"step": int(step), "converged": bool(converged),
                           "n_clusters": int(n_clusters), "updated_at": now}

    def observe_event(self, event: dict[str, Any]) -> None:
        """Record a lifecycle event (``split``, ``merge``, ``born``, ``retired``,
        ``converged``, ``woke``, ``resketched``...); a ``time`` field is added when
        missing."""
        entry = dict(event)
        entry.setdefault("time", time.time())
        with self._lock:
            self._events.append(entry)
            self._n_events += 1

    def to_dict(self) -> dict[str, Any]:
        """The view as a JSON-able dict (see the module docstring); thread-safe."""
        snap = self.sample.snapshot()
        with self._lock:
            key = (snap.version, self._n_events, self.kernel)
            if self._cache is not None and self._cache[0] == key:
                return self._cache[1]
            state = dict(self._state)
            history = list(self._history)
            events = list(self._events)
        plane = project_to_plane(snap.rows,
                                 prefix="random projection, " if snap.projected else "")
        clusters = []
        for cid in np.unique(snap.cluster_ids):
            members = np.flatnonzero(snap.cluster_ids == cid)
            central = members[np.argmin(snap.sq_distances[members])]
            clusters.append({"id": int(cid), "sample_size": int(members.size),
                             "medoid": [float(v) for v in plane.coords[central]]})
        doc = {
            **state,
            "kernel": self.kernel,
            "axes": list(plane.axes),
            "projection": plane.method,
            "points": {"x": np.round(plane.coords[:, 0], 5).tolist(),
                       "y": np.round(plane.coords[:, 1], 5).tolist(),
                       "cluster": snap.cluster_ids.tolist(),
                       "outlier": snap.outliers.tolist()},
            "clusters": clusters,
            "objective": history,
            "events": events,
        }
        with self._lock:
            self._cache = (key, doc)
        return doc
