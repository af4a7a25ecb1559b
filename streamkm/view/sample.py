"""A bounded sample of recently accepted records, for looking at the clusters.

The service adds every processed batch; the cluster view reads the sample from another
thread. Cost per batch is bounded whatever the batch size: at most ``per_batch`` rows are
chosen uniformly from the batch and copied into a ring buffer of ``capacity`` rows, so the
sample covers roughly the last ``capacity / per_batch`` batches (recent data, as the
clusters are now, not a uniform sample of the whole history).

Rows are kept as float32. Rows wider than ``max_dim`` (and sparse rows) are reduced on the
way in by a fixed Gaussian random projection to ``max_dim`` dimensions, applied to the
chosen rows only, so a 100,000-feature sparse stream costs ``per_batch`` sparse
row-vector products per batch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkm.exceptions import ParameterError, ValidationError

__all__ = ["RecentSample", "SampleSnapshot"]


@dataclass(frozen=True)
class SampleSnapshot:
    """A consistent copy of the sample.

    Attributes
    ----------
    rows : ndarray of shape (n, d), float32
        The sampled rows (reduced by random projection when ``projected``).
    cluster_ids : ndarray of shape (n,), int64
        Stable cluster id each row was assigned to when it was processed.
    sq_distances : ndarray of shape (n,), float64
        Squared kernel distance of each row to its center when it was processed.
    steps : ndarray of shape (n,), int64
        Model step of the batch each row came from.
    outliers : ndarray of shape (n,), bool
        Whether each row was flagged as an outlier when it was processed.
    projected : bool
        Whether ``rows`` are a random projection of the records (sparse or wide input).
    version : int
        Increases with every added batch (lets readers cache what they derive).
    """

    rows: np.ndarray
    cluster_ids: np.ndarray
    sq_distances: np.ndarray
    steps: np.ndarray
    projected: bool
    version: int
    outliers: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def n_rows(self) -> int:
        """Number of rows in the snapshot."""
        return int(self.rows.shape[0])


class RecentSample:
    """Ring buffer of rows chosen uniformly from each processed batch.

    Parameters
    ----------
    capacity : int, default=2000
        Rows kept at most.
    per_batch : int or None, default=None
        Rows taken from one batch at most; None means ``max(1, capacity // 8)``.
    max_dim : int, default=64
        Dense rows with more features, and all sparse rows, are randomly projected to
        this many dimensions before they are stored.
    random_state : int, default=0
        Seed of the row choice and of the projection.

    Examples
    --------
    >>> import numpy as np
    >>> sample = RecentSample(capacity=4, per_batch=2, random_state=0)
    >>> sample.add(np.arange(12.0).reshape(6, 2), np.array([0, 0, 1, 1, 2, 2]),
    ...            np.zeros(6), step=1)
    >>> snap = sample.snapshot()
    >>> snap.n_rows, snap.rows.shape[1], snap.projected
    (2, 2, False)
    """

    def __init__(self, capacity: int = 2000, *, per_batch: int | None = None,
                 max_dim: int = 64, random_state: int = 0) -> None:
        for name, value in (("capacity", capacity), ("max_dim", max_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(f"{name} must be a positive int, got {value!r}")
        if per_batch is None:
            per_batch = max(1, capacity // 8)
        if isinstance(per_batch, bool) or not isinstance(per_batch, int) or per_batch < 1:
            raise ParameterError(f"per_batch must be a positive int or None, got {per_batch!r}")
        self.capacity = capacity
        self.per_batch = min(per_batch, capacity)
        self.max_dim = max_dim
        self._rng = np.random.default_rng(random_state)
        self._seed = random_state
        self._lock = threading.Lock()
        self._rows: np.ndarray | None = None
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._dist = np.zeros(capacity, dtype=np.float64)
        self._steps = np.zeros(capacity, dtype=np.int64)
        self._outliers = np.zeros(capacity, dtype=bool)
        self._n_features: int | None = None
        self._projected = False
        self._projection: np.ndarray | None = None
        self._filled = 0
        self._next = 0
        self._version = 0

    def add(self, rows: Any, cluster_ids: np.ndarray, sq_distances: np.ndarray, *,
            step: int, outliers: np.ndarray | None = None) -> None:
        """Add a processed batch (dense ndarray or scipy CSR matrix) with its assignments
        (and its rows' outlier flags, none flagged when ``outliers`` is None).

        A batch whose feature count differs from the previous ones (a new dimension after
        a re-configured stream) starts a new sample.
        """
        n = int(rows.shape[0])
        if n == 0:
            return
        if outliers is None:
            outliers = np.zeros(n, dtype=bool)
        if len(cluster_ids) != n or len(sq_distances) != n or len(outliers) != n:
            raise ValidationError(
                f"rows, cluster_ids, sq_distances and outliers must have one entry per "
                f"record, got {n}, {len(cluster_ids)}, {len(sq_distances)} and "
                f"{len(outliers)}")
        m = min(n, self.per_batch)
        chosen = np.sort(self._rng.choice(n, size=m, replace=False)) if m < n else np.arange(n)
        reduced, projected = self._reduce(rows, chosen)
        with self._lock:
            if self._rows is None or self._n_features != int(rows.shape[1]) or (
                    self._projected != projected):
                self._start(int(rows.shape[1]), reduced.shape[1], projected)
            assert self._rows is not None
            slots = (self._next + np.arange(m)) % self.capacity
            self._rows[slots] = reduced
            self._ids[slots] = np.asarray(cluster_ids)[chosen]
            self._dist[slots] = np.asarray(sq_distances, dtype=np.float64)[chosen]
            self._steps[slots] = step
            self._outliers[slots] = np.asarray(outliers, dtype=bool)[chosen]
            self._next = int((self._next + m) % self.capacity)
            self._filled = min(self.capacity, self._filled + m)
            self._version += 1

    def snapshot(self) -> SampleSnapshot:
        """Copy the sample (thread-safe; oldest row first)."""
        with self._lock:
            if self._rows is None or self._filled == 0:
                empty = np.zeros((0, 0), dtype=np.float32)
                return SampleSnapshot(empty, np.zeros(0, np.int64), np.zeros(0),
                                      np.zeros(0, np.int64), False, self._version,
                                      np.zeros(0, dtype=bool))
            if self._filled < self.capacity:
                order = np.arange(self._filled)
            else:
                order = (self._next + np.arange(self.capacity)) % self.capacity
            return SampleSnapshot(self._rows[order].copy(), self._ids[order].copy(),
                                  self._dist[order].copy(), self._steps[order].copy(),
                                  self._projected, self._version,
                                  self._outliers[order].copy())

    def _start(self, n_features: int, width: int, projected: bool) -> None:
        self._rows = np.zeros((self.capacity, width), dtype=np.float32)
        self._n_features = n_features
        self._projected = projected
        self._filled = 0
        self._next = 0

    def _reduce(self, rows: Any, chosen: np.ndarray) -> tuple[np.ndarray, bool]:
        d = int(rows.shape[1])
        if isinstance(rows, np.ndarray) and d <= self.max_dim:
            return np.asarray(rows[chosen], dtype=np.float32), False
        if self._projection is None or self._projection.shape[0] != d:
            rng = np.random.default_rng([self._seed, d])
            self._projection = (rng.standard_normal((d, self.max_dim))
                                / np.sqrt(self.max_dim)).astype(np.float32)
        picked = rows[chosen]
        return np.asarray(picked @ self._projection, dtype=np.float32), True
