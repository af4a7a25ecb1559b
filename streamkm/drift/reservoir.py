"""Per-cluster bounded windows of recent rows: what a drifting cluster is bisected on.

Each cluster keeps at most ``capacity`` of its most recently assigned rows (the engine's
features, plus the raw rows when the model keeps raw rows for re-sketching). A batch's
rows join the end of their cluster's window and the oldest rows fall off the front; a
batch bringing more than ``capacity`` rows to one cluster contributes a uniform random
subset of ``capacity`` of them (in batch order), so the window is not biased by the order
of the batch.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from streamkm._core.raw_rows import (
    RawRows,
    raw_from_arrays,
    raw_to_arrays,
    stack_rows,
)
from streamkm._core.sparse import is_sparse

__all__ = ["RecentRows"]


def _tail(rows: Any, capacity: int) -> Any:
    n = rows.shape[0]
    return rows[n - capacity:] if n > capacity else rows


class RecentRows:
    """Sliding windows of recent rows, one per cluster position.

    Parameters
    ----------
    n_clusters : int
        Number of (initially empty) windows.
    n_features : int
        Width of the engine's rows.
    dtype : numpy dtype
        dtype of the engine's rows.
    capacity : int
        Most rows per window.
    keeps_raw : bool
        Whether raw rows are kept beside the engine's rows.
    """

    def __init__(self, n_clusters: int, n_features: int, dtype: Any, capacity: int, *,
                 keeps_raw: bool) -> None:
        self.n_features = int(n_features)
        self.dtype = np.dtype(dtype)
        self.capacity = int(capacity)
        self.keeps_raw = bool(keeps_raw)
        self.rows: list[np.ndarray] = [self._empty() for _ in range(int(n_clusters))]
        self.raw: list[RawRows | None] = [None] * int(n_clusters)

    def _empty(self) -> np.ndarray:
        return np.empty((0, self.n_features), dtype=self.dtype)

    @property
    def n_clusters(self) -> int:
        return len(self.rows)

    def sizes(self) -> np.ndarray:
        """Rows held per cluster."""
        return np.array([r.shape[0] for r in self.rows], dtype=np.int64)

    def add(self, labels: np.ndarray, x: np.ndarray, raw: RawRows | None,
            rng: np.random.Generator) -> None:
        """Append each row of the batch ``x`` to the window of its cluster ``labels[i]``."""
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(self.n_clusters + 1))
        for j in range(self.n_clusters):
            idx = order[bounds[j]:bounds[j + 1]]
            if idx.shape[0] == 0:
                continue
            if idx.shape[0] > self.capacity:
                idx = np.sort(rng.choice(idx, size=self.capacity, replace=False))
            self.rows[j] = _tail(np.concatenate([self.rows[j], x[idx]]), self.capacity)
            if self.keeps_raw:
                parts = [p for p in (self.raw[j], raw[idx]) if p is not None]
                self.raw[j] = _tail(stack_rows(parts), self.capacity)

    def split(self, j: int, side: np.ndarray) -> None:
        """Window j is split by ``side`` (0/1 per row): side 0 stays at j, side 1 becomes a
        new last window."""
        mask = np.asarray(side).astype(bool)
        rows = self.rows[j]
        self.rows[j], new_rows = rows[~mask], rows[mask]
        self.rows.append(new_rows)
        raw = self.raw[j]
        if raw is None:
            self.raw.append(None)
        else:
            keep, move = np.flatnonzero(~mask), np.flatnonzero(mask)
            self.raw[j] = raw[keep] if keep.shape[0] else None
            self.raw.append(raw[move] if move.shape[0] else None)

    def merge(self, keep: int, drop: int, rng: np.random.Generator) -> None:
        """Window ``drop`` joins ``keep`` (a uniform subset of ``capacity`` rows if too many);
        ``drop`` is removed and later positions shift down."""
        rows = np.concatenate([self.rows[keep], self.rows[drop]])
        parts = [p for p in (self.raw[keep], self.raw[drop]) if p is not None]
        raw = stack_rows(parts) if parts else None
        if rows.shape[0] > self.capacity:
            idx = np.sort(rng.choice(rows.shape[0], size=self.capacity, replace=False))
            rows = rows[idx]
            raw = None if raw is None else raw[idx]
        self.rows[keep], self.raw[keep] = rows, raw
        del self.rows[drop]
        del self.raw[drop]

    def append(self, rows: np.ndarray, raw: RawRows | None) -> None:
        """A new last window holding the newest ``capacity`` of ``rows``."""
        self.rows.append(np.ascontiguousarray(_tail(rows, self.capacity), dtype=self.dtype))
        self.raw.append(None if raw is None or not self.keeps_raw else _tail(raw, self.capacity))

    def remove(self, j: int) -> None:
        """Drop window j (later positions shift down)."""
        del self.rows[j]
        del self.raw[j]

    def clear(self) -> None:
        """Empty every window."""
        self.rows = [self._empty() for _ in self.rows]
        self.raw = [None] * len(self.rows)

    def rebuild(self, labels: np.ndarray, rows: np.ndarray, raw: RawRows | None) -> None:
        """Replace every window by the newest ``capacity`` of ``rows`` (oldest first) whose
        ``labels`` is its cluster (a new feature space: the windows are refilled from the
        estimator's reservoir of recent rows)."""
        self.n_features = int(rows.shape[1])
        for j in range(self.n_clusters):
            idx = np.flatnonzero(labels == j)[-self.capacity:]
            self.rows[j] = np.ascontiguousarray(rows[idx], dtype=self.dtype)
            self.raw[j] = raw[idx] if self.keeps_raw and raw is not None and idx.size else None

    def reproject(self, transform: Callable[[RawRows], np.ndarray], n_features: int) -> None:
        """Replace every window's rows by ``transform`` of its raw rows (a new sketch)."""
        self.n_features = int(n_features)
        self.rows = [
            self._empty() if raw is None
            else np.ascontiguousarray(np.asarray(transform(raw)), dtype=self.dtype)
            for raw in self.raw
        ]

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """All windows as one row array plus offsets (and the raw rows, if kept)."""
        sizes = self.sizes()
        out = {
            prefix + "rows": np.concatenate(self.rows) if self.rows else self._empty(),
            prefix + "offsets": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        }
        raw_parts = [r for r in self.raw if r is not None]
        if raw_parts:
            out.update(raw_to_arrays(stack_rows(raw_parts), prefix + "raw"))
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, Any], prefix: str, *, n_features: int, dtype: Any,
                    capacity: int, keeps_raw: bool) -> RecentRows:
        """Rebuild the windows written by :meth:`to_arrays`."""
        offsets = np.asarray(arrays[prefix + "offsets"], dtype=np.int64)
        rows = np.asarray(arrays[prefix + "rows"])
        if offsets.ndim != 1 or offsets.shape[0] < 1 or int(offsets[-1]) != rows.shape[0]:
            raise ValueError(
                f"drift reservoir offsets end at {int(offsets[-1]) if offsets.size else None!r}"
                f" but there are {rows.shape[0]} rows"
            )
        store = cls(offsets.shape[0] - 1, n_features, dtype, capacity, keeps_raw=keeps_raw)
        store.rows = [np.ascontiguousarray(rows[a:b], dtype=store.dtype)
                      for a, b in zip(offsets[:-1], offsets[1:])]
        raw = raw_from_arrays(arrays, prefix + "raw")
        if raw is not None:
            if raw.shape[0] != rows.shape[0]:
                raise ValueError(
                    f"drift reservoir has {rows.shape[0]} rows but {raw.shape[0]} raw rows"
                )
            store.raw = [raw[a:b] if b > a else None for a, b in zip(offsets[:-1], offsets[1:])]
            if not is_sparse(raw):
                store.raw = [None if r is None else np.ascontiguousarray(r) for r in store.raw]
        return store
