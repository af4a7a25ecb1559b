"""Heat kernel K = exp(-t L) on the landmark k-nn graph (seed 002's "heat" kernel).

L = I - D^-1/2 A D^-1/2 is the normalised Laplacian of the symmetrised k-nn graph over the
landmark rows (:mod:`streamkm.kernels._graph`). With N = D^-1/2 A D^-1/2 = U diag(lam) U^T,
K = U diag(exp(-t (1 - lam))) U^T, so the kernel has explicit features
f(x) = U_x exp(-t (1 - lam) / 2) and the engine keeps explicit centers over them.

- Landmarks: with at most ``dense_limit`` landmarks every eigenpair is computed (dense
  eigh): the kernel is exact. Above, the ``n_components`` largest eigenpairs (sparse
  Lanczos); the dropped part of K is at most exp(-t (1 - lam_m)) per entry, reported as
  ``spec.fitted.truncation``.
- Rows equal to a landmark get its features U_l exp(-t (1 - lam) / 2) (exact).
- New rows (out of sample, Nystroem): U_x = N(x, :) U / lam with N(x, l) =
  A(x, l) / sqrt(d_x d_l), which gives back U_l exactly for a landmark; eigenpairs with
  |lam| <= 1e-6 are left out of new rows (their weight is at most exp(-t)).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.sparse.linalg import eigsh

from streamkm.exceptions import ParameterError
from streamkm.kernels._common import row_sq_norms
from streamkm.kernels._graph import LandmarkGraph, check_n_neighbors
from streamkm.kernels._registry import KernelType, register

__all__ = ["Heat", "HeatState"]

_MIN_EIGENVALUE = 1e-6


@dataclass(frozen=True)
class HeatState:
    """Fitted heat kernel: the graph and the spectral feature map."""

    graph: LandmarkGraph
    eigenvalues: np.ndarray  # (m,), float64
    eigenvectors: np.ndarray  # (n_landmarks, m), float64
    t: float

    @property
    def scales(self) -> np.ndarray:
        return np.exp(-self.t * (1.0 - self.eigenvalues) / 2.0)

    @cached_property
    def landmark_index(self) -> dict[bytes, int]:
        """Row bytes -> landmark position, to give landmarks their exact features."""
        return {row.tobytes(): i for i, row in enumerate(self.graph.landmarks)}

    @property
    def truncation(self) -> float:
        """Largest kernel weight dropped by the truncated spectrum (0 when complete)."""
        if self.eigenvectors.shape[1] >= self.eigenvectors.shape[0]:
            return 0.0
        return float(np.exp(-self.t * (1.0 - self.eigenvalues.min())))


def _spectrum(graph: LandmarkGraph, n_components: int, dense_limit: int
              ) -> tuple[np.ndarray, np.ndarray]:
    n = graph.landmarks.shape[0]
    adj = graph.adjacency(graph.landmarks, graph.r2, graph.degrees)
    inv_sqrt = 1.0 / np.sqrt(graph.degrees)
    norm_adj = adj.multiply(inv_sqrt[:, None]).multiply(inv_sqrt[None, :]).tocsr()
    if n <= dense_limit or n_components >= n - 1:
        lam, vec = np.linalg.eigh(norm_adj.toarray())
    else:
        v0 = np.sqrt(graph.degrees / graph.degrees.sum())  # the top eigenvector, deterministic start
        lam, vec = eigsh(norm_adj, k=n_components, which="LA", v0=v0)
    order = np.argsort(lam)[::-1]
    return lam[order], np.ascontiguousarray(vec[:, order])


def auto_diffusion_time(eigenvalues: np.ndarray, n_clusters: int | None) -> float:
    """t = ln(10) / (1 - lam_{k+1}): eigenvector k+1 keeps a tenth of its weight.

    The k leading eigenvectors (k = n_clusters) carry the cluster structure when the graph
    has k loosely joined parts (their eigenvalues are close to 1); diffusing until the
    (k+1)-th is damped tenfold keeps them and fades the within-cluster detail.
    """
    k = 2 if n_clusters is None else int(n_clusters)
    if eigenvalues.shape[0] <= k:
        return 1.0
    return float(np.log(10.0) / max(1.0 - eigenvalues[k], 1e-12))


@register
class Heat(KernelType):
    name = "heat"
    explicit_features = True
    fitted = True
    option_defaults = {"n_neighbors": 30, "t": "auto", "n_components": 50, "dense_limit": 2000}

    def check(self, params):
        o = params.options
        check_n_neighbors(o["n_neighbors"])
        t = o["t"]
        if t == "auto":
            return
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not np.isfinite(t) or t <= 0:
            raise ParameterError(f"t must be a positive finite number or 'auto', got {t!r}")
        for key in ("n_components", "dense_limit"):
            v = o[key]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ParameterError(f"{key} must be an integer >= 1, got {v!r}")

    def fit(self, params, landmarks, n_clusters=None):
        o = params.options
        graph = LandmarkGraph.fit(landmarks, o["n_neighbors"])
        lam, vec = _spectrum(graph, int(o["n_components"]), int(o["dense_limit"]))
        t = o["t"]
        if t == "auto":
            t = auto_diffusion_time(lam, n_clusters)
        return HeatState(graph, lam, vec, float(t))

    def prepare(self, params, x):
        state: HeatState = params.fitted
        graph = state.graph
        r2, deg = graph.place(x)
        adj = graph.adjacency(x, r2, deg)
        inv_sqrt_l = 1.0 / np.sqrt(graph.degrees)
        projected = adj @ (state.eigenvectors * inv_sqrt_l[:, None])
        projected /= np.sqrt(deg)[:, None]
        lam = state.eigenvalues
        keep = np.abs(lam) > _MIN_EIGENVALUE
        factor = np.zeros_like(lam)
        factor[keep] = state.scales[keep] / lam[keep]
        out = projected * factor[None, :]
        # a row equal to a landmark gets the landmark's own features (exact, eigenpairs
        # with lam ~ 0 included)
        rows = np.ascontiguousarray(x, dtype=graph.landmarks.dtype)
        index = state.landmark_index
        hits = [(i, index[r.tobytes()]) for i, r in enumerate(rows) if r.tobytes() in index]
        if hits:
            at, lm = np.array(hits).T
            out[at] = state.eigenvectors[lm] * state.scales[None, :]
        return np.ascontiguousarray(out, dtype=x.dtype)

    def block(self, params, x, y, x_sq, y_sq):
        return x @ y.T

    def diagonal(self, params, x):
        return row_sq_norms(x).astype(x.dtype, copy=False)

    def fitted_to_arrays(self, fitted):
        arrays = fitted.graph.to_arrays("kernel_")
        arrays["kernel_eigenvalues"] = fitted.eigenvalues
        arrays["kernel_eigenvectors"] = fitted.eigenvectors
        return arrays, {"n_neighbors": fitted.graph.n_neighbors, "t": fitted.t}

    def fitted_from_arrays(self, arrays, meta):
        graph = LandmarkGraph.from_arrays(arrays, "kernel_", int(meta["n_neighbors"]))
        return HeatState(graph, arrays["kernel_eigenvalues"].astype(np.float64),
                         np.ascontiguousarray(arrays["kernel_eigenvectors"], dtype=np.float64),
                         float(meta["t"]))
