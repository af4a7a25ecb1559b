"""Density level-set kernel: the indicator of the data's high-density connected pieces.

Clusters taken as the connected components of a density level set (Hartigan, 1975; the
view behind DBSCAN and HDBSCAN), given to kernel k-means as a kernel. On ``fit`` with k
clusters:

1. Each fitted row's density radius r(x) is the distance to its ``n_neighbors``-th
   nearest other row (a small radius is a high density), and its score
   r2(x) / m(x)^a, m(x) the mean r2 of those neighbours and a = ``relative``: a = 0
   ranks rows by density (a global level set), a = 1 by density relative to their
   neighbourhood (a local outlier factor: a sparse cluster is kept as whole as a dense
   one). The default 0.5 is between: on two noisy rings (factor 0.6, noise 0.08, n 2000)
   a = 0 found the rings in 9 of 10 seeds, 0.5 in 10, 0.75 in 9, 1 in 5; on rings of
   unequal density (factor 0.3, noise 0.03, 1600 rows) a = 0 in 0 of 6, 0.5 in 5, 1 in 6.
2. For kept fractions q = 0.95, 0.90, ... down to ``min_keep``: the core is the fraction
   q of rows with the lowest scores, each core row joined to those of its
   ``graph_neighbors`` nearest rows that are core rows too. The first q at which exactly
   k connected pieces of the core hold at least ``min_size`` of it each gives the
   clusters; the rows of those pieces are the kernel's anchors, labelled by piece.
3. No such q: the rows have no k-piece level set and the kernel cannot be fitted
   (:class:`streamkm.exceptions.NoLevelSetError`).

A row x (fitted or new) is joined to its ``n_nearest`` nearest anchors with the anchor
kernel's weights (exp(-d2 / mean d2), summing to 1), and its features are the weight it
puts on each piece: f(x) = Z(x, :) L, L the anchors' one-hot piece labels, so
K(x, y) = <f(x), f(y)> and kernel k-means with k clusters finds the pieces (the features
of rows deep inside piece j are the j-th unit vector; rows between pieces are split by
the pieces their nearest anchors belong to).

The rule is scale-free (scores are only ranked, weights are relative to each row's own
distances). It separates clusters that a density valley separates even where no kernel
width does (two noisy rings), and it needs many rows per cluster in a low-dimensional
space: in high dimensions density radii hardly differ. ``gamma="auto"`` takes it when its
pieces cut the least of the decision rows' mutual and symmetric k-nn graphs (:mod:`streamkm.kernels._auto`). The kernel is fitted on at most
``n_rows`` distinct rows (a generator seeded with their number draws them; its cost is
``n_rows`` squared distances), computed in float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from streamkm._core.kernel_lloyd import one_hot
from streamkm._numba.anchor_graph import nearest_anchors
from streamkm.exceptions import NoLevelSetError, ParameterError, StateError
from streamkm.kernels._common import (InnerProductKernel, check_number_in, check_positive_int,
                                     features_by_blocks)
from streamkm.kernels._graph import distinct_rows
from streamkm.kernels._builtin import OPTION_DEFAULTS
from streamkm.kernels._registry import register
from streamkm.kernels.anchor import anchor_weights

__all__ = ["LevelSet", "LevelSetState", "density_radii", "density_scores", "fit_level_set"]

#: the kept fractions tried step down by this much from the first
_KEEP_STEP = 0.05
_FIRST_KEEP = 0.95


@dataclass(frozen=True)
class LevelSetState:
    """Fitted level-set kernel: the anchors (rows of the k pieces) and their piece labels."""

    anchors: np.ndarray  # (p, d) float64
    labels: np.ndarray  # (p,) int64 in [0, n_pieces)
    n_pieces: int
    n_nearest: int
    keep: float  # the kept fraction at which the pieces were found

    @cached_property
    def anchors_t(self) -> np.ndarray:
        return np.ascontiguousarray(self.anchors.T)

    @cached_property
    def membership(self) -> np.ndarray:
        """(p, n_pieces) one-hot piece labels of the anchors, float64."""
        return one_hot(self.labels, self.n_pieces, np.float64)

    def features(self, x: np.ndarray) -> np.ndarray:
        """f(x) = Z(x, :) @ membership: the anchor weight on each piece, float64."""
        z = anchor_weights(np.ascontiguousarray(x, dtype=np.float64), self.anchors_t,
                           self.n_nearest)
        return np.asarray(z @ self.membership)


def density_radii(rows: np.ndarray, n_neighbors: int,
                  graph_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
    """Squared density radii of distinct float64 ``rows`` (distance to the
    ``n_neighbors``-th nearest other row) and each row's max(``n_neighbors``,
    ``graph_neighbors``) nearest other rows, nearest first."""
    reach = min(max(n_neighbors, graph_neighbors), rows.shape[0] - 1)
    indices, sq = nearest_anchors(rows, np.ascontiguousarray(rows.T), reach + 1)
    # distinct rows: a row is its own nearest, alone at distance 0
    r2 = sq[:, min(n_neighbors, reach)]
    return r2, np.ascontiguousarray(indices[:, 1:])


def density_scores(r2: np.ndarray, neighbors: np.ndarray, n_neighbors: int,
                   relative: float) -> np.ndarray:
    """r2(x) / mean(r2 of x's ``n_neighbors`` nearest rows) ** ``relative``: rows are kept
    in increasing order of it. 0 ranks by density alone (a global level set), 1 by density
    relative to the neighbourhood (each region on its own scale)."""
    if relative == 0.0:
        return r2
    around = r2[neighbors[:, :n_neighbors]].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = r2 / around**relative
    return np.where(around > 0, score, 0.0)


def _pieces(neighbors: np.ndarray, core: np.ndarray) -> np.ndarray:
    """Connected pieces of the core rows joined to their core neighbours (non-core: -1)."""
    n, r = neighbors.shape
    sources = np.repeat(np.arange(n), r)
    targets = neighbors.ravel()
    both = core[sources] & core[targets]
    graph = sp.csr_matrix((np.ones(int(both.sum())), (sources[both], targets[both])),
                          shape=(n, n))
    return np.where(core, connected_components(graph, directed=False)[1], -1)


def fit_level_set(rows: np.ndarray, n_clusters: int, n_neighbors: int, graph_neighbors: int,
                  n_nearest: int, min_keep: float, min_size: float, n_rows: int,
                  relative: float) -> LevelSetState:
    """The level-set kernel of float64 ``rows`` with ``n_clusters`` pieces (module
    docstring); :class:`NoLevelSetError` when no kept fraction gives them."""
    distinct = distinct_rows(rows)
    if distinct.shape[0] > n_rows:
        rng = np.random.default_rng(distinct.shape[0])
        distinct = distinct[np.sort(rng.choice(distinct.shape[0], n_rows, replace=False))]
    distinct = np.ascontiguousarray(distinct, dtype=np.float64)
    n = distinct.shape[0]
    if n_clusters == 1:  # one cluster: every row, whatever its level sets
        return LevelSetState(distinct, np.zeros(n, dtype=np.int64), 1, int(n_nearest), 1.0)
    if n < 2 * n_clusters:
        raise NoLevelSetError(
            f"{n} distinct rows are too few for a level set of n_clusters={n_clusters} pieces"
        )
    r2, neighbors = density_radii(distinct, n_neighbors, graph_neighbors)
    order = np.argsort(density_scores(r2, neighbors, n_neighbors, relative), kind="stable")
    neighbors = neighbors[:, :graph_neighbors]
    keep = _FIRST_KEEP
    while keep >= min_keep - 1e-9:
        core = np.zeros(n, dtype=bool)
        core[order[:int(round(keep * n))]] = True
        piece = _pieces(neighbors, core)
        sizes = np.bincount(piece[core])
        large = np.flatnonzero(sizes >= min_size * core.sum())
        if large.shape[0] == n_clusters:
            members = np.isin(piece, large)
            labels = np.searchsorted(large, piece[members]).astype(np.int64)
            return LevelSetState(np.ascontiguousarray(distinct[members]), labels,
                                 int(n_clusters), int(n_nearest), float(round(keep, 4)))
        keep -= _KEEP_STEP
    raise NoLevelSetError(
        f"no density level set of the {n} rows splits into n_clusters={n_clusters} pieces "
        f"of at least {min_size:g} of the kept rows each, keeping {_FIRST_KEEP:g} down to "
        f"{min_keep:g} of them: the clusters are not separated by a density valley; use "
        f"another kernel"
    )


@register
class LevelSet(InnerProductKernel):
    name = "level_set"
    fitted = True
    option_defaults = OPTION_DEFAULTS["level_set"]

    def check(self, params):
        o = params.options
        for key in ("n_neighbors", "graph_neighbors", "n_nearest", "n_rows"):
            check_positive_int(key, o[key])
        check_number_in("min_keep", o["min_keep"], 0.05, _FIRST_KEEP)
        check_number_in("min_size", o["min_size"], 0.0, _FIRST_KEEP)
        check_number_in("relative", o["relative"], 0.0, 1.0)

    def fit(self, params, landmarks, n_clusters=None):
        if n_clusters is None:
            raise ParameterError("the level_set kernel is fitted for a number of clusters: "
                                 "n_clusters is needed")
        o = params.options
        return fit_level_set(np.ascontiguousarray(landmarks, dtype=np.float64), int(n_clusters),
                             int(o["n_neighbors"]), int(o["graph_neighbors"]),
                             int(o["n_nearest"]), float(o["min_keep"]), float(o["min_size"]),
                             int(o["n_rows"]), float(o["relative"]))

    def prepare(self, params, x):
        state: LevelSetState = params.fitted
        return features_by_blocks(state.features, x, state.n_pieces)

    def fitted_to_arrays(self, fitted):
        return ({"kernel_anchors": fitted.anchors, "kernel_anchor_labels": fitted.labels},
                {"n_nearest": fitted.n_nearest, "n_pieces": fitted.n_pieces,
                 "keep": fitted.keep})

    def fitted_from_arrays(self, arrays, meta):
        anchors = np.ascontiguousarray(arrays["kernel_anchors"], dtype=np.float64)
        labels = np.asarray(arrays["kernel_anchor_labels"], dtype=np.int64)
        n_pieces = int(meta["n_pieces"])
        if anchors.ndim != 2 or labels.shape != (anchors.shape[0],) or labels.size == 0 \
                or labels.min() < 0 or labels.max() >= n_pieces:
            raise StateError(f"level_set kernel state: {labels.shape[0]} anchor labels in "
                             f"[{labels.min(initial=0)}, {labels.max(initial=0)}] do not fit "
                             f"{anchors.shape[0]} anchors of {n_pieces} pieces")
        return LevelSetState(anchors, labels, n_pieces, int(meta["n_nearest"]),
                             float(meta["keep"]))
