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
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from streamkm._numba import knn_graph as _nkg
from streamkm.exceptions import ParameterError

__all__ = ["LandmarkGraph", "PLACE_ROWS", "distinct_rows", "row_blocks"]


def distinct_rows(x: np.ndarray) -> np.ndarray:
    """The rows of x without repeats, in order of first occurrence (x itself if none).

    Rows are compared as floats (0.0 equals -0.0): each row's bytes after adding 0.0 (which
    turns -0.0 into 0.0) are its key, sorted as one opaque value, several times faster than
    ``np.unique(x, axis=0)`` compares them column by column.
    """
    if x.shape[0] < 2 or x.ndim != 2 or x.shape[1] == 0:
        return x
    key = np.ascontiguousarray(x + 0.0)
    key = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
    _, first = np.unique(key, return_index=True)
    if first.shape[0] == x.shape[0]:
        return x
    return np.ascontiguousarray(x[np.sort(first)])


#: rows placed in the graph at a time where only a per-row result is kept (their
#: adjacency, about (k + 1) to 2 (k + 1) entries per row, is not built for all of X at once)
PLACE_ROWS = 8192


def row_blocks(n_rows: int) -> list[slice]:
    """Consecutive slices of at most ``PLACE_ROWS`` rows covering ``n_rows``."""
    return [slice(lo, min(n_rows, lo + PLACE_ROWS)) for lo in range(0, n_rows, PLACE_ROWS)]


def _kth(n_neighbors: int, n_landmarks: int) -> int:
    """Index of the radius among a row's sorted landmark distances (itself included)."""
    return min(n_neighbors, n_landmarks - 1)


def _single(landmarks: np.ndarray) -> bool:
    """Whether radii are rounded up to float32 (float32 landmarks): the radius test is then
    the same whether r2 is read from float64 state or from a float32 prepared row."""
    return landmarks.dtype == np.float32


def _symmetric_knn(landmarks: np.ndarray, landmarks_t: np.ndarray, n_neighbors: int,
                   r2_out: np.ndarray) -> sp.csr_matrix:
    """The landmarks' 0/1 adjacency from one pass over the pairs (writes their radii).

    Landmarks i, j are joined when d(i, j) <= max(r2(i), r2(j)), i.e. when j is within i's
    radius or i within j's: the union of each landmark's within-radius set and its transpose
    (d(i, j) and d(j, i) are the same float: (a - b)^2 == (b - a)^2).
    """
    m = landmarks.shape[0]
    indptr, indices = _nkg.join_rows(landmarks, landmarks_t, np.zeros(m),
                                     _kth(n_neighbors, m), _single(landmarks), r2_out)
    within = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(m, m))
    adjacency = within.maximum(within.T).tocsr()
    adjacency.sort_indices()
    return adjacency


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
        m = landmarks.shape[0]
        if m < 2:
            raise ParameterError(
                f"a k-nn graph kernel needs at least 2 distinct landmark rows, got {m}"
            )
        r2 = np.empty(m)
        landmarks_t = np.ascontiguousarray(landmarks.T)
        adjacency = _symmetric_knn(landmarks, landmarks_t, n_neighbors, r2)
        graph = cls(landmarks, r2, np.diff(adjacency.indptr).astype(np.float64),
                    int(n_neighbors))
        # what the fit computed comes with it: the transposed landmarks (every later join)
        # and their own adjacency (heat's spectrum, auto's cuts)
        graph.__dict__["landmarks_t"] = landmarks_t
        graph.__dict__["landmark_adjacency"] = adjacency
        return graph

    @property
    def kth(self) -> int:
        return _kth(self.n_neighbors, self.landmarks.shape[0])

    @property
    def single(self) -> bool:
        return _single(self.landmarks)

    @cached_property
    def landmarks_t(self) -> np.ndarray:
        return np.ascontiguousarray(self.landmarks.T)

    @cached_property
    def landmark_adjacency(self) -> sp.csr_matrix:
        """0/1 adjacency of the landmarks to each other, sparse (m, m)."""
        m = self.landmarks.shape[0]
        return _symmetric_knn(self.landmarks, self.landmarks_t, self.n_neighbors, np.empty(m))

    def join(self, x: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix]:
        """Squared radius (float64) of each row of x and its 0/1 adjacency to the
        landmarks (sparse (n, m)): one pass over the landmarks per row."""
        x = np.ascontiguousarray(x, dtype=self.landmarks.dtype)
        r2 = np.empty(x.shape[0])
        indptr, indices = _nkg.join_rows(x, self.landmarks_t, self.r2, self.kth, self.single, r2)
        adjacency = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr),
                                  shape=(x.shape[0], self.landmarks.shape[0]))
        return r2, adjacency

    def place(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Squared radius and degree (float64) of each row of x in the graph."""
        r2, deg = np.empty(x.shape[0]), np.empty(x.shape[0])
        for rows in row_blocks(x.shape[0]):
            r2[rows], adjacency = self.join(x[rows])
            deg[rows] = np.diff(adjacency.indptr)
        return r2, deg

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}landmarks": self.landmarks, f"{prefix}r2": self.r2,
                f"{prefix}degrees": self.degrees}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str,
                    n_neighbors: int) -> LandmarkGraph:
        return cls(np.ascontiguousarray(arrays[f"{prefix}landmarks"]),
                   arrays[f"{prefix}r2"].astype(np.float64),
                   arrays[f"{prefix}degrees"].astype(np.float64), int(n_neighbors))
