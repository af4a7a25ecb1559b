"""k-nearest-neighbour graph kernel K = D^-1 A D^-1 (seed 002's "k-nn" kernel).

A is the symmetrised k-nn graph with self loops over the landmark rows (see
:mod:`streamkm.kernels._graph`), D its degrees. On the landmarks the kernel is exactly
D^-1 A D^-1; a new row is placed in the same graph by the radius rule (its neighbours among
the landmarks, its degree), so predict / partial_fit work on rows never seen. The kernel is
sparse: K(x, y) = 1 / (d_x d_y) when x and y are joined, else 0; K(x, x) = 1 / d_x^2, so the
feature-space norm bound is max_x 1 / d_x.

Prepared rows are the features followed by r2 and 1 / degree; blocks are computed by
:func:`streamkm._numba.knn_graph.knn_block` (no n x n matrix, no GEMM).
"""

from __future__ import annotations

import numpy as np

from streamkm._numba import knn_graph as _nkg
from streamkm.kernels._common import check_positive_int
from streamkm.kernels._graph import LandmarkGraph
from streamkm.kernels._builtin import OPTION_DEFAULTS
from streamkm.kernels._registry import KernelType, register

__all__ = ["KNN"]


@register
class KNN(KernelType):
    name = "knn"
    fitted = True
    option_defaults = OPTION_DEFAULTS["knn"]

    def check(self, params):
        check_positive_int("n_neighbors", params.options["n_neighbors"])

    def fit(self, params, landmarks, n_clusters=None):
        return LandmarkGraph.fit(landmarks, params.options["n_neighbors"])

    def prepare(self, params, x):
        graph: LandmarkGraph = params.fitted
        r2, deg = graph.place(x)
        out = np.empty((x.shape[0], x.shape[1] + 2), dtype=x.dtype)
        out[:, :-2] = x
        out[:, -2] = r2
        out[:, -1] = 1.0 / deg
        return out

    def block(self, params, x, y, x_sq, y_sq):
        out = np.empty((x.shape[0], y.shape[0]), dtype=x.dtype)
        if out.size:
            _nkg.knn_block(x, y, out)
        return out

    def diagonal(self, params, x):
        return (x[:, -1] * x[:, -1]).astype(x.dtype)

    def fitted_to_arrays(self, fitted):
        return fitted.to_arrays("kernel_"), {"n_neighbors": fitted.n_neighbors}

    def fitted_from_arrays(self, arrays, meta):
        return LandmarkGraph.from_arrays(arrays, "kernel_", int(meta["n_neighbors"]))
