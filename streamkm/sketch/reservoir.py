"""A bounded, seeded uniform sample of the raw rows seen so far (reservoir sampling).

Data-dependent sketches (:class:`~streamkm.sketch.ApproxSVD`,
:class:`~streamkm.sketch.LeverageScoreSelector`) are refit on this sample when the stream is
re-sketched. Rows are kept as they came in: dense rows in one array, sparse (CSR) rows as
their column indices and values, so a reservoir of TF-IDF rows never densifies them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm._core.rng_state import rng_from_json_state, rng_state_to_json
from streamkm._core.sparse import is_sparse
from streamkm._core.validation import check_int
from streamkm.exceptions import StateError, ValidationError

__all__ = ["RowReservoir", "RESERVOIR_FORMAT"]

RESERVOIR_FORMAT = "streamkm.RowReservoir"
_FORMAT_VERSION = 1


def _rng_from_seed(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


class RowReservoir:
    """Uniform sample of at most ``capacity`` rows of a stream (Vitter's algorithm R).

    After ``n_seen`` rows, every row seen is in the reservoir with probability
    ``min(1, capacity / n_seen)``. The choice depends only on ``seed`` and the number of
    rows, so a restored reservoir continues exactly as an uninterrupted one.

    Parameters
    ----------
    capacity : int
        Largest number of rows kept.
    seed : int
        Seed of the sampling decisions.

    Attributes
    ----------
    n_seen : int
        Rows offered so far.
    sparse : bool or None
        Whether rows are kept as sparse rows (None until the first rows arrive).
    """

    def __init__(self, capacity: int, seed: int) -> None:
        self.capacity = check_int(capacity, "capacity", low=1)
        self.seed = check_int(seed, "seed", low=0)
        self._rng = _rng_from_seed(self.seed)
        self.n_seen = 0
        self.sparse: bool | None = None
        self.n_features: int | None = None
        self.dtype: np.dtype | None = None
        self._dense: np.ndarray | None = None
        self._indices: list[np.ndarray] = []
        self._values: list[np.ndarray] = []

    def __len__(self) -> int:
        return min(self.n_seen, self.capacity)

    def _start(self, rows: Any) -> None:
        self.sparse = is_sparse(rows)
        self.n_features = int(rows.shape[1])
        self.dtype = np.dtype(rows.dtype)
        if not self.sparse:
            self._dense = np.empty((0, self.n_features), dtype=self.dtype)

    def add(self, rows: Any) -> None:
        """Offer a batch of rows (dense array or CSR matrix, already validated).

        Raises
        ------
        ValidationError
            The rows have another number of features than the first batch.
        """
        n = int(rows.shape[0])
        if n == 0:
            return
        if self.sparse is None:
            self._start(rows)
        if int(rows.shape[1]) != self.n_features:
            raise ValidationError(
                f"rows have {rows.shape[1]} features, the reservoir holds rows of "
                f"{self.n_features}"
            )
        positions = np.arange(self.n_seen, self.n_seen + n, dtype=np.int64)
        slots = positions.copy()
        filling = positions < self.capacity
        later = ~filling
        if later.any():
            slots[later] = self._rng.integers(0, positions[later] + 1)
        keep = slots < self.capacity
        # A slot chosen twice in this batch ends with the later row, as in the sequential rule.
        rows_by_slot: dict[int, int] = {}
        for i in np.flatnonzero(keep):
            rows_by_slot[int(slots[i])] = int(i)
        self._store(rows, rows_by_slot)
        self.n_seen += n

    def _store(self, rows: Any, rows_by_slot: dict[int, int]) -> None:
        size = len(self)
        new_size = max([size, *(s + 1 for s in rows_by_slot)])
        if not self.sparse:
            dense = np.asarray(rows, dtype=self.dtype)
            if new_size > self._dense.shape[0]:
                grown = np.empty((new_size, self.n_features), dtype=self.dtype)
                grown[: self._dense.shape[0]] = self._dense
                self._dense = grown
            slots = np.fromiter(rows_by_slot.keys(), dtype=np.int64, count=len(rows_by_slot))
            picks = np.fromiter(rows_by_slot.values(), dtype=np.int64, count=len(rows_by_slot))
            self._dense[slots] = dense[picks]
            return
        csr = rows.tocsr()
        empty = np.empty(0, dtype=np.int64)
        while len(self._indices) < new_size:
            self._indices.append(empty)
            self._values.append(np.empty(0, dtype=self.dtype))
        for slot, i in rows_by_slot.items():
            lo, hi = csr.indptr[i], csr.indptr[i + 1]
            self._indices[slot] = np.array(csr.indices[lo:hi], dtype=np.int64)
            self._values[slot] = np.array(csr.data[lo:hi], dtype=self.dtype)

    def rows(self) -> Any:
        """The kept rows: a dense array or a CSR matrix (slot order), None if empty."""
        if self.sparse is None or len(self) == 0:
            return None
        if not self.sparse:
            return self._dense[: len(self)].copy()
        import scipy.sparse as sp

        lengths = np.fromiter((a.size for a in self._indices), dtype=np.int64,
                              count=len(self._indices))
        indptr = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        indices = np.concatenate(self._indices) if self._indices else np.empty(0, np.int64)
        values = np.concatenate(self._values) if self._values else np.empty(0, self.dtype)
        return sp.csr_matrix((values.astype(self.dtype, copy=False), indices, indptr),
                             shape=(lengths.size, self.n_features))

    # ------------------------------------------------------------------ state
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The reservoir as plain arrays and JSON-able metadata (no pickle)."""
        meta: dict[str, Any] = {
            "format": RESERVOIR_FORMAT, "format_version": _FORMAT_VERSION,
            "capacity": self.capacity, "seed": self.seed, "n_seen": self.n_seen,
            "sparse": self.sparse, "n_features": self.n_features,
            "dtype": None if self.dtype is None else self.dtype.name,
            "rng": rng_state_to_json(self._rng),
        }
        arrays: dict[str, np.ndarray] = {}
        rows = self.rows()
        if rows is not None and self.sparse:
            arrays = {"data": rows.data, "indices": rows.indices.astype(np.int64),
                      "indptr": rows.indptr.astype(np.int64)}
        elif rows is not None:
            arrays = {"rows": rows}
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> RowReservoir:
        """Rebuild a reservoir saved by :meth:`get_state`.

        Raises
        ------
        StateError
            Not a reservoir state, or its arrays disagree with its metadata.
        """
        if not isinstance(meta, dict) or meta.get("format") != RESERVOIR_FORMAT:
            raise StateError(f"not a {RESERVOIR_FORMAT} state: {meta!r:.200}")
        if meta.get("format_version") != _FORMAT_VERSION:
            raise StateError(
                f"unsupported reservoir format_version {meta.get('format_version')!r}")
        try:
            res = cls(int(meta["capacity"]), int(meta["seed"]))
            res._rng = rng_from_json_state(meta["rng"])
            res.n_seen = int(meta["n_seen"])
            res.sparse = meta["sparse"]
            if res.sparse is None:
                return res
            res.n_features = int(meta["n_features"])
            res.dtype = np.dtype(meta["dtype"])
            size = len(res)
            if not res.sparse:
                rows = np.asarray(arrays["rows"])
                if rows.shape != (size, res.n_features):
                    raise StateError(
                        f"reservoir rows have shape {rows.shape!r}, expected "
                        f"{(size, res.n_features)!r}")
                res._dense = np.array(rows, dtype=res.dtype)
                return res
            indptr = np.asarray(arrays["indptr"], dtype=np.int64)
            indices = np.asarray(arrays["indices"], dtype=np.int64)
            data = np.asarray(arrays["data"], dtype=res.dtype)
            if (indptr.shape != (size + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0)
                    or indptr[-1] != indices.size or indices.size != data.size
                    or (indices.size and (indices.min() < 0
                                          or indices.max() >= res.n_features))):
                raise StateError("reservoir state has an inconsistent sparse row matrix")
            res._indices = [indices[a:b].copy() for a, b in zip(indptr[:-1], indptr[1:])]
            res._values = [data[a:b].copy() for a, b in zip(indptr[:-1], indptr[1:])]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"malformed reservoir state: {exc!r}") from exc
        return res
