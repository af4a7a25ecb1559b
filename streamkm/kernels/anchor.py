"""Anchor-graph heat kernel: a diffusion over the bipartite graph of rows and anchor rows.

Each row x is joined to its ``n_nearest`` (r) nearest anchors (a subset of at most
``n_anchors`` distinct fitted rows) with weights w(x, a) = exp(-||x - a||^2 / h2(x)),
h2(x) the mean of its r squared distances, normalised to sum to 1: a row of the sparse
(n, p) matrix Z. Rows are joined through the anchors they share, W = Z Lambda^-1 Z^T with
Lambda = diag(Z^T 1) (the anchor graph of Liu, He and Chang, 2010; landmark-based spectral
clustering of Chen and Cai, 2011). W's rows sum to 1, so it is its own normalised affinity,
and with B = Z Lambda^-1/2 = U diag(s) V^T, W = U diag(s^2) U^T. The kernel is the heat
kernel of that graph, K = exp(-t (I - W)), with explicit features

    f(x) = Z(x, :) Lambda^-1/2 V diag(exp(-t (1 - s^2) / 2) / s),

one fixed linear map of the row's anchor weights. For a fitted row this is exactly its
row of U scaled by the heat weights; a new row (``predict``, ``partial_fit``, the service)
is joined to the same anchors by the same rule and mapped the same way (its Nystroem
extension), so fitted and new rows are treated alike.

Unlike the k-nn graph of the ``heat`` kernel, the graph never joins two rows directly: its
cost is linear in the number of rows (r nearest of p anchors per row, one p x p
eigenproblem), so ``fit(X)`` can take every row of a large X. h2(x) is per row, so the
weights are scale-free, and a far outlier still has weights exp(-d2 / h2) >= exp(-r)
(they never underflow).

- ``t="auto"``: ln(10) / (1 - s^2_{k+1}), as for ``heat``: the k leading eigenvectors keep
  their weight and the (k+1)-th keeps a tenth.
- Eigenpairs: at most the ``n_components`` leading ones, of those the ones whose weight
  exp(-t (1 - s^2)) is at least 1e-6 of the leading one's and s^2 > 0.1 (dividing by a
  small s amplifies a new row's noise; the weight of a dropped one is at most
  exp(-0.9 t)).
- Anchors: ``n_anchors`` distinct fitted rows drawn without replacement by a generator
  seeded with the number of distinct rows (the same rows give the same anchors).
- The graph is computed in float64 whatever the rows' dtype; features are returned in it.
- The fitted rows' anchor weights are kept until those rows are prepared once (``fit(X)``
  fits the kernel on X, then prepares X): their joins are not searched twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from streamkm._core.state_io import array_digest
from streamkm._numba.anchor_graph import nearest_anchors
from streamkm.kernels._common import (InnerProductKernel, check_diffusion_time,
                                     check_positive_int, features_by_blocks)
from streamkm.kernels._graph import distinct_rows, row_blocks
from streamkm.kernels._builtin import OPTION_DEFAULTS
from streamkm.kernels._registry import register
from streamkm.kernels._spectral import (MIN_EIGENVALUE, auto_diffusion_time,
                                        leading_eigenpairs, significant_eigenpairs)

__all__ = ["Anchor", "AnchorState", "anchor_weights"]


@dataclass(frozen=True)
class AnchorState:
    """Fitted anchor-graph kernel: the anchors and the map from anchor weights to features."""

    anchors: np.ndarray  # (p, d) float64
    projection: np.ndarray  # (p, m) float64: Lambda^-1/2 V diag(exp(-t (1 - s^2) / 2) / s)
    eigenvalues: np.ndarray  # (m,) float64: s^2, decreasing
    t: float
    n_nearest: int

    @cached_property
    def anchors_t(self) -> np.ndarray:
        return np.ascontiguousarray(self.anchors.T)

    def weights(self, x: np.ndarray) -> sp.csr_matrix:
        """Z: the sparse (n, p) anchor weights of the rows of x (each row sums to 1)."""
        return anchor_weights(np.ascontiguousarray(x, dtype=np.float64), self.anchors_t,
                              self.n_nearest)

    def features(self, x: np.ndarray) -> np.ndarray:
        """f(x) = Z(x, :) @ projection, in float64."""
        return np.asarray(self.weights(x) @ self.projection)

    def remember_fitted_weights(self, rows: np.ndarray, z: sp.csr_matrix) -> None:
        """Keep Z of the fitted ``rows`` (float64) for :meth:`take_fitted_weights`."""
        self.__dict__["_fitted_weights"] = (rows.shape, array_digest(rows), z)

    def take_fitted_weights(self, x: np.ndarray) -> sp.csr_matrix | None:
        """Z of x if x holds the fitted rows (their values, in any float dtype), once; else
        None. A state restored from arrays keeps none."""
        kept = self.__dict__.get("_fitted_weights")
        if kept is None or kept[0] != x.shape:
            return None
        if kept[1] != array_digest(np.asarray(x, dtype=np.float64)):
            return None
        self.__dict__.pop("_fitted_weights", None)
        return kept[2]


def anchor_weights(x: np.ndarray, anchors_t: np.ndarray, n_nearest: int) -> sp.csr_matrix:
    """Each row's weights exp(-d2 / mean(d2)) on its ``n_nearest`` nearest anchors,
    normalised to sum to 1 (equal weights when they are all at distance 0)."""
    n, p = x.shape[0], anchors_t.shape[1]
    r = min(n_nearest, p)
    indices, sq = nearest_anchors(x, anchors_t, r)
    scale = sq.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        weights = np.where(scale > 0, np.exp(-sq / scale), 1.0)
    weights /= weights.sum(axis=1, keepdims=True)
    return sp.csr_matrix((weights.ravel(), indices.ravel(), np.arange(0, n * r + 1, r)),
                         shape=(n, p))


def _choose_anchors(rows: np.ndarray, n_anchors: int) -> np.ndarray:
    """At most ``n_anchors`` distinct rows, drawn by a generator seeded with their number."""
    distinct = distinct_rows(rows)
    if distinct.shape[0] <= n_anchors:
        return np.ascontiguousarray(distinct)
    rng = np.random.default_rng(distinct.shape[0])
    return np.ascontiguousarray(distinct[np.sort(rng.choice(distinct.shape[0], n_anchors,
                                                            replace=False))])


def fit_anchor_graph(rows: np.ndarray, n_anchors: int, n_nearest: int, t: float | str,
                     n_clusters: int | None, n_components: int = 50) -> AnchorState:
    """The anchor-graph heat kernel of ``rows`` (float64): module docstring."""
    anchors = _choose_anchors(rows, n_anchors)
    anchors_t = np.ascontiguousarray(anchors.T)
    z = sp.vstack([anchor_weights(rows[block], anchors_t, n_nearest)
                   for block in row_blocks(rows.shape[0])]).tocsr()
    column = np.asarray(z.sum(axis=0)).ravel()
    inv_sqrt = np.zeros_like(column)
    np.divide(1.0, np.sqrt(column), out=inv_sqrt, where=column > 0)
    b = z @ sp.diags(inv_sqrt)
    gram = (b.T @ b).tocsr()
    # t="auto" needs s^2_{k+1} even when fewer eigenpairs are kept
    top = min(gram.shape[0], max(n_components, (n_clusters or 2) + 1))
    lam, vec = leading_eigenpairs(gram, top, np.sqrt(column), b.tocsr())
    time = auto_diffusion_time(lam, n_clusters) if t == "auto" else float(t)
    keep = min(significant_eigenpairs(lam, time), n_components)
    lam, vec = lam[:keep], vec[:, :keep]
    usable = lam > MIN_EIGENVALUE
    lam, vec = lam[usable], vec[:, usable]
    scale = np.exp(-time * (1.0 - lam) / 2.0) / np.sqrt(lam)
    projection = np.ascontiguousarray(inv_sqrt[:, None] * vec * scale[None, :])
    state = AnchorState(anchors, projection, np.ascontiguousarray(lam), time, int(n_nearest))
    state.remember_fitted_weights(rows, z)
    return state


@register
class Anchor(InnerProductKernel):
    name = "anchor"
    fitted = True
    option_defaults = OPTION_DEFAULTS["anchor"]

    def check(self, params):
        o = params.options
        for key in ("n_anchors", "n_nearest", "n_components"):
            check_positive_int(key, o[key])
        check_diffusion_time(o["t"])

    def fit(self, params, landmarks, n_clusters=None):
        o = params.options
        return fit_anchor_graph(np.ascontiguousarray(landmarks, dtype=np.float64),
                                int(o["n_anchors"]), int(o["n_nearest"]), o["t"], n_clusters,
                                int(o["n_components"]))

    def prepare(self, params, x):
        state: AnchorState = params.fitted
        z = state.take_fitted_weights(x)
        if z is not None:  # the same rows the same way: f(x) = Z(x, :) @ projection
            return np.asarray(z @ state.projection).astype(x.dtype, copy=False)
        return features_by_blocks(state.features, x, state.eigenvalues.shape[0])

    def fitted_to_arrays(self, fitted):
        return ({"kernel_anchors": fitted.anchors, "kernel_anchor_projection": fitted.projection,
                 "kernel_eigenvalues": fitted.eigenvalues},
                {"n_nearest": fitted.n_nearest, "t": fitted.t})

    def fitted_from_arrays(self, arrays, meta):
        return AnchorState(np.ascontiguousarray(arrays["kernel_anchors"], dtype=np.float64),
                           np.ascontiguousarray(arrays["kernel_anchor_projection"],
                                                dtype=np.float64),
                           arrays["kernel_eigenvalues"].astype(np.float64), float(meta["t"]),
                           int(meta["n_nearest"]))
