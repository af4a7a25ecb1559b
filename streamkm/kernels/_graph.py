"""The landmark k-nn graph shared by the graph kernels (``knn``, ``heat``).

Fitted on landmark rows L (``fit(X)``: X itself, the paper's exact setting; streaming: the
initialisation sample): r2(z) is the squared distance from z to its (k+1)-th nearest
landmark (a landmark counts itself), and rows x, y are joined when
||x - y||^2 <= max(r2(x), r2(y)). On L this is the symmetrised k-nn graph with self loops;
the same rule places any new row in the graph (its neighbours among the landmarks and its
degree), which is the out-of-sample extension. The graph is kept sparse (CSR): never an
n x n dense matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from streamkm._numba import knn_graph as _nkg
from streamkm.exceptions import ParameterError

__all__ = ["LandmarkGraph", "check_n_neighbors", "distinct_rows"]


def distinct_rows(x: np.ndarray) -> np.ndarray:
    """The rows of x without repeats, in order of first occurrence (x itself if none)."""
    _, first = np.unique(x, axis=0, return_index=True)
    if first.shape[0] == x.shape[0]:
        return x
    return np.ascontiguousarray(x[np.sort(first)])


def check_n_neighbors(value: object) -> int:
    """A positive integer number of neighbours, else a clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"n_neighbors must be an integer >= 1, got {value!r}")
    return int(value)


def _radii_like(x: np.ndarray, landmarks: np.ndarray, n_neighbors: int) -> np.ndarray:
    """Squared (k+1)-th neighbour distances, rounded up to x's dtype and returned as float64.

    Rounding up before any comparison keeps the radius test identical whether r2 is read
    from float64 state or from a float32 prepared row.
    """
    kth = min(n_neighbors, landmarks.shape[0] - 1)
    r2 = np.empty(x.shape[0])
    if x.shape[0]:
        _nkg.radii(x, landmarks, kth, r2)
    stored = r2.astype(x.dtype)
    low = stored.astype(np.float64) < r2
    stored[low] = np.nextafter(stored[low], np.inf, dtype=x.dtype)
    return stored.astype(np.float64)


@dataclass(frozen=True)
class LandmarkGraph:
    """A k-nn graph over landmark rows, extendable to new rows.

    Attributes
    ----------
    landmarks : ndarray (m, d)
    r2 : ndarray (m,), float64
        Squared neighbourhood radius of each landmark.
    degrees : ndarray (m,), float64
        Degree of each landmark (self loop included).
    n_neighbors : int
    """

    landmarks: np.ndarray
    r2: np.ndarray
    degrees: np.ndarray
    n_neighbors: int

    @classmethod
    def fit(cls, landmarks: np.ndarray, n_neighbors: int) -> LandmarkGraph:
        """Build the graph on the distinct rows of ``landmarks`` (needs at least 2).

        Repeated rows are kept once: a row with more than ``n_neighbors`` copies would have
        only its copies as neighbours (radius 0) and form a piece of its own.
        """
        landmarks = distinct_rows(np.ascontiguousarray(landmarks))
        if landmarks.shape[0] < 2:
            raise ParameterError(
                "a k-nn graph kernel needs at least 2 distinct landmark rows, got "
                f"{landmarks.shape[0]}"
            )
        r2 = _radii_like(landmarks, landmarks, n_neighbors)
        deg = np.empty(landmarks.shape[0], dtype=np.int64)
        _nkg.degrees(landmarks, r2, landmarks, r2, deg)
        return cls(landmarks, r2, deg.astype(np.float64), int(n_neighbors))

    def place(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Squared radius and degree (float64) of each row of x in the graph."""
        x = np.ascontiguousarray(x, dtype=self.landmarks.dtype)
        r2 = _radii_like(x, self.landmarks, self.n_neighbors)
        deg = np.empty(x.shape[0], dtype=np.int64)
        if x.shape[0]:
            _nkg.degrees(x, r2, self.landmarks, self.r2, deg)
        return r2, deg.astype(np.float64)

    def adjacency(self, x: np.ndarray, r2: np.ndarray, deg: np.ndarray) -> sp.csr_matrix:
        """0/1 adjacency of the rows of x to the landmarks, sparse (n, m)."""
        x = np.ascontiguousarray(x, dtype=self.landmarks.dtype)
        indptr = np.concatenate([[0], np.cumsum(deg.astype(np.int64))])
        indices = np.empty(indptr[-1], dtype=np.int64)
        if x.shape[0]:
            _nkg.neighbours(x, r2, self.landmarks, self.r2, indptr, indices)
        data = np.ones(indices.shape[0])
        return sp.csr_matrix((data, indices, indptr), shape=(x.shape[0], self.landmarks.shape[0]))

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}landmarks": self.landmarks, f"{prefix}r2": self.r2,
                f"{prefix}degrees": self.degrees}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str,
                    n_neighbors: int) -> LandmarkGraph:
        return cls(np.ascontiguousarray(arrays[f"{prefix}landmarks"]),
                   arrays[f"{prefix}r2"].astype(np.float64),
                   arrays[f"{prefix}degrees"].astype(np.float64), int(n_neighbors))
