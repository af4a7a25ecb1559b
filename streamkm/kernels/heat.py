"""Heat kernel K = exp(-t L) on the landmark k-nn graph (seed 002's "heat" kernel).

L = I - D^-1/2 A D^-1/2 is the normalised Laplacian of the symmetrised k-nn graph over the
landmark rows (:mod:`streamkm.kernels._graph`). With N = D^-1/2 A D^-1/2 = U diag(lam) U^T,
K = U diag(exp(-t (1 - lam))) U^T, so the kernel has explicit features
f(x) = U_x exp(-t (1 - lam) / 2) and the engine keeps explicit centers over them.

- Landmarks: with at most ``dense_limit`` landmarks the eigenpairs come from a dense
  (partial) eigendecomposition, above it the ``n_components`` largest from sparse Lanczos.
  Either way, eigenpairs whose weight exp(-t (1 - lam)) is below 1e-6 of the leading one's
  are dropped (the dense path does not compute them); the dropped part of K is at most
  exp(-t (1 - lam_m)) per entry (lam_m the smallest kept), ``spec.fitted.truncation``.
- Edge weights (option ``weights``): ``"binary"`` (default, seed 002's kernel: A is the 0/1
  k-nn adjacency) or ``"density"``: A(x, y) = exp(-max(r2(x), r2(y)) / h2) on the same
  edges, r2 the squared k-nn radius (so max(r2(x), r2(y), ||x - y||^2) is the mutual
  reachability distance of HDBSCAN, squared) and h2 the median positive landmark r2. Edges through
  sparse regions (noise between clusters) weigh little, so the diffusion stays inside
  dense shapes: ``gamma="auto"`` uses it (docs/kernels.md has the measurements).
- Rows equal to a landmark get its features U_l exp(-t (1 - lam) / 2) (exact).
- New rows (out of sample, Nystroem): U_x = N(x, :) U / lam with N(x, l) =
  A(x, l) / sqrt(d_x d_l), which gives back U_l exactly for a landmark; eigenpairs with
  |lam| <= 0.1 are left out of new rows (their weight is at most exp(-0.9 t)).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from streamkm.exceptions import ParameterError
from streamkm.kernels._common import (InnerProductKernel, check_diffusion_time,
                                     check_positive_int)
from streamkm.kernels._graph import LandmarkGraph, row_blocks
from streamkm.kernels._builtin import OPTION_DEFAULTS
from streamkm.kernels._registry import register
from streamkm.kernels._spectral import (MIN_EIGENVALUE, auto_diffusion_time,
                                        dense_eigenpairs, leading_eigenpairs,
                                        significant_eigenpairs, weight_cutoff)

__all__ = ["Heat", "HeatState"]

_SMALLEST_WEIGHT = float(np.finfo(np.float64).tiny)


@dataclass(frozen=True)
class HeatState:
    """Fitted heat kernel: the graph and the spectral feature map."""

    graph: LandmarkGraph
    eigenvalues: np.ndarray  # (m,), float64
    eigenvectors: np.ndarray  # (n_landmarks, m), float64
    t: float
    weights: str = "binary"
    bandwidth2: float = 1.0
    #: (weighted) degree of each landmark in the graph the spectrum was computed on
    landmark_degrees: np.ndarray | None = None

    def affinity(self, x: np.ndarray) -> sp.csr_matrix:
        """Sparse (n, m) affinity of the rows of x to the landmarks."""
        r2, adjacency = self.graph.join(x)
        return edge_weights(adjacency, r2, self.graph.r2, self.weights, self.bandwidth2)

    @cached_property
    def landmark_affinity(self) -> sp.csr_matrix:
        """Sparse (m, m) affinity of the landmarks to each other (the graph's edges)."""
        return landmark_affinity(self.graph, self.weights, self.bandwidth2)

    @cached_property
    def landmark_features(self) -> np.ndarray:
        """The landmarks' own (exact) features, in landmark order."""
        return self.eigenvectors * self.scales[None, :]

    @property
    def scales(self) -> np.ndarray:
        return np.exp(-self.t * (1.0 - self.eigenvalues) / 2.0)

    @cached_property
    def landmark_index(self) -> dict[bytes, int]:
        """Row bytes -> landmark position, to give landmarks their exact features."""
        return {row.tobytes(): i for i, row in enumerate(self.graph.landmarks)}

    @property
    def degrees(self) -> np.ndarray:
        return self.graph.degrees if self.landmark_degrees is None else self.landmark_degrees

    @property
    def truncation(self) -> float:
        """Bound on the kernel weight of any dropped eigenpair: the smallest kept weight
        exp(-t (1 - lam_m)) (0 when the spectrum is complete)."""
        if self.eigenvectors.shape[1] >= self.eigenvectors.shape[0]:
            return 0.0
        return float(np.exp(-self.t * (1.0 - self.eigenvalues.min())))


WEIGHTS = ("binary", "density")


def density_weighted(adjacency: sp.csr_matrix, r2_rows: np.ndarray, r2_landmarks: np.ndarray,
                     bandwidth2: float) -> sp.csr_matrix:
    """exp(-max(r2(x), r2(l)) / h2) on each edge (x, l) of a 0/1 adjacency.

    Joined rows are within max(r2(x), r2(l)) of each other, so that maximum is their mutual
    reachability distance (squared): no distance needs computing. A weight is never below
    the smallest normal float: a row far from everything (an outlier, r2 >~ 700 h2) would
    otherwise have no weight at all and a degree of 0, and its features would be 0 / 0. With
    the floor its features tend to 0, the limit of exp(-r2 / h2) as r2 grows.
    """
    rows = np.repeat(np.arange(adjacency.shape[0]), np.diff(adjacency.indptr))
    reach = np.maximum(r2_rows[rows], r2_landmarks[adjacency.indices])
    weights = np.maximum(np.exp(-reach / bandwidth2), _SMALLEST_WEIGHT)
    return sp.csr_matrix((weights, adjacency.indices, adjacency.indptr), shape=adjacency.shape)


def density_bandwidth(r2: np.ndarray) -> float:
    """h2 of the density weights: the median of the landmarks' positive squared radii.

    Zero radii (a landmark with more than ``n_neighbors`` exact copies) are left out: with
    many repeated rows their median is 0 and every other edge would weigh nothing. 1.0 when
    every radius is 0 (then every weight is exp(0) = 1 whatever h2).
    """
    positive = r2[r2 > 0]
    return float(np.median(positive)) if positive.size else 1.0


def edge_weights(adjacency: sp.csr_matrix, r2_rows: np.ndarray, r2_landmarks: np.ndarray,
                 weights: str, bandwidth2: float) -> sp.csr_matrix:
    """A 0/1 adjacency of rows to landmarks as is (``"binary"``) or density weighted."""
    if weights == "density":
        return density_weighted(adjacency, r2_rows, r2_landmarks, bandwidth2)
    return adjacency


def landmark_affinity(graph: LandmarkGraph, weights: str, bandwidth2: float) -> sp.csr_matrix:
    """The landmarks' edges, 0/1 or density weighted: the graph the spectrum is taken of."""
    return edge_weights(graph.landmark_adjacency, graph.r2, graph.r2, weights, bandwidth2)


#: leading eigenpairs the dense path asks LAPACK for first when t is "auto" (a subset is
#: ~3x cheaper than the whole spectrum at 1000 landmarks); t then tells which are needed
_FIRST_EIGENPAIRS = 64


def _spectrum(adjacency: sp.csr_matrix, n_components: int, dense_limit: int, t: float | str,
              n_clusters: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Significant leading eigenpairs of D^-1/2 A D^-1/2, the degrees and the diffusion time."""
    n = adjacency.shape[0]
    degrees = np.asarray(adjacency.sum(axis=1)).ravel()
    inv_sqrt = 1.0 / np.sqrt(degrees)
    norm_adj = adjacency.multiply(inv_sqrt[:, None]).multiply(inv_sqrt[None, :]).tocsr()
    if n <= dense_limit or n_components >= n - 1:
        dense = norm_adj.toarray()
        if t == "auto":
            # t needs lam_{k+1}; a few leading eigenpairs are often all that weigh anything
            m = min(n, max(_FIRST_EIGENPAIRS, 2 * ((n_clusters or 2) + 1)))
            lam, vec = dense_eigenpairs(dense, top=m)
            time = auto_diffusion_time(lam, n_clusters)
            if m < n and significant_eigenpairs(lam, time) == m:
                lam, vec = dense_eigenpairs(dense, above=weight_cutoff(time))
        else:
            time = float(t)
            lam, vec = dense_eigenpairs(dense, above=weight_cutoff(time))
    else:
        # per connected piece, started at the top eigenvector sqrt(degrees) (deterministic)
        lam, vec = leading_eigenpairs(norm_adj, n_components, np.sqrt(degrees))
        time = auto_diffusion_time(lam, n_clusters) if t == "auto" else float(t)
    keep = significant_eigenpairs(lam, time)
    return lam[:keep], np.ascontiguousarray(vec[:, :keep]), degrees, time


def _extension(state: HeatState, x: np.ndarray) -> np.ndarray:
    """Nystroem features of new rows: N(x, :) U diag(exp(-t (1 - lam) / 2) / lam), with the
    eigenpairs of |lam| <= ``MIN_EIGENVALUE`` left out."""
    adj = state.affinity(x)
    inv_sqrt_l = 1.0 / np.sqrt(state.degrees)
    projected = adj @ (state.eigenvectors * inv_sqrt_l[:, None])
    projected /= np.sqrt(np.asarray(adj.sum(axis=1)).ravel())[:, None]
    lam = state.eigenvalues
    keep = np.abs(lam) > MIN_EIGENVALUE
    factor = np.zeros_like(lam)
    factor[keep] = state.scales[keep] / lam[keep]
    return projected * factor[None, :]


@register
class Heat(InnerProductKernel):
    name = "heat"
    fitted = True
    option_defaults = OPTION_DEFAULTS["heat"]

    def check(self, params):
        o = params.options
        for key in ("n_neighbors", "n_components", "dense_limit"):
            check_positive_int(key, o[key])
        if o["weights"] not in WEIGHTS:
            raise ParameterError(f"weights must be one of {WEIGHTS}, got {o['weights']!r}")
        check_diffusion_time(o["t"])

    def fit(self, params, landmarks, n_clusters=None):
        o = params.options
        # the graph of float32 rows is built in float64 too: squared distances and radii of
        # float32 values overflow above ~1e19 and vanish below ~1e-23 (the features, which
        # are what the model keeps in its dtype, do not need float32 radii)
        graph = LandmarkGraph.fit(np.asarray(landmarks, dtype=np.float64), o["n_neighbors"])
        bandwidth2 = density_bandwidth(graph.r2)
        adjacency = landmark_affinity(graph, o["weights"], bandwidth2)
        lam, vec, degrees, t = _spectrum(adjacency, int(o["n_components"]),
                                         int(o["dense_limit"]), o["t"], n_clusters)
        state = HeatState(graph, lam, vec, t, o["weights"], bandwidth2, degrees)
        state.__dict__["landmark_affinity"] = adjacency
        return state

    def prepare(self, params, x):
        state: HeatState = params.fitted
        rows = np.ascontiguousarray(x, dtype=state.graph.landmarks.dtype)
        out = np.empty((x.shape[0], state.eigenvalues.shape[0]))
        # a row equal to a landmark gets the landmark's own features (exact, eigenpairs
        # with lam ~ 0 included); only the other rows are placed in the graph
        index = state.landmark_index
        landmark_of = np.array([index.get(r.tobytes(), -1) for r in rows], dtype=np.int64)
        hit = landmark_of >= 0
        out[hit] = state.landmark_features[landmark_of[hit]]
        new_rows = rows[~hit]
        placed = np.empty((new_rows.shape[0], out.shape[1]))
        for block in row_blocks(new_rows.shape[0]):
            placed[block] = _extension(state, new_rows[block])
        out[~hit] = placed
        return np.ascontiguousarray(out, dtype=x.dtype)

    def fitted_to_arrays(self, fitted):
        arrays = fitted.graph.to_arrays("kernel_")
        arrays["kernel_eigenvalues"] = fitted.eigenvalues
        arrays["kernel_eigenvectors"] = fitted.eigenvectors
        arrays["kernel_heat_degrees"] = fitted.degrees
        return arrays, {"n_neighbors": fitted.graph.n_neighbors, "t": fitted.t,
                        "weights": fitted.weights, "bandwidth2": fitted.bandwidth2}

    def fitted_from_arrays(self, arrays, meta):
        graph = LandmarkGraph.from_arrays(arrays, "kernel_", int(meta["n_neighbors"]))
        # states saved before edge weights existed are binary
        degrees = arrays["kernel_heat_degrees"] if "kernel_heat_degrees" in arrays else None
        return HeatState(graph, arrays["kernel_eigenvalues"].astype(np.float64),
                         np.ascontiguousarray(arrays["kernel_eigenvectors"], dtype=np.float64),
                         float(meta["t"]), str(meta.get("weights", "binary")),
                         float(meta.get("bandwidth2", 1.0)),
                         None if degrees is None else degrees.astype(np.float64))
