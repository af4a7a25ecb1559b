"""Per-cluster record counts over the last few batches, as a labelled gauge.

``streamkm_cluster_records{cluster="<stable id>"}`` holds the records assigned to each
current cluster over the last ``window`` processed batches. A cluster that disappears (merged
away, or split and renamed) has its series removed, so the family never holds more series
than the model has clusters (at most ``k_max`` with drift handling).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable

import numpy as np

from streamkm.exceptions import ParameterError

__all__ = ["RecentClusterSizes"]


class RecentClusterSizes:
    """Sliding per-cluster counts exported through a gauge labelled ``cluster``.

    Parameters
    ----------
    gauge : prometheus_client.Gauge
        A gauge with the single label ``cluster``.
    window : int, default=10
        Batches counted.
    """

    def __init__(self, gauge: Any, *, window: int = 10) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ParameterError(f"window must be a positive int, got {window!r}")
        self._gauge = gauge
        self._batches: deque[dict[int, int]] = deque(maxlen=window)
        self._exported: set[int] = set()

    def observe(self, cluster_ids: np.ndarray, current_ids: Iterable[int] | None = None
                ) -> dict[int, int]:
        """Count one batch's assignments; return the window's count per current cluster.

        ``current_ids``: the model's clusters now; None means the clusters assigned to in
        the window (a cluster that vanished then leaves the family within ``window``
        batches).
        """
        ids, counts = np.unique(np.asarray(cluster_ids, dtype=np.int64), return_counts=True)
        self._batches.append(dict(zip(ids.tolist(), counts.tolist())))
        current = ({int(c) for c in current_ids} if current_ids is not None
                   else set().union(*self._batches))
        totals = {cid: sum(batch.get(cid, 0) for batch in self._batches) for cid in current}
        for cid, total in totals.items():
            self._gauge.labels(cluster=str(cid)).set(total)
        for gone in self._exported - current:
            self._gauge.remove(str(gone))
        self._exported = current
        return totals
