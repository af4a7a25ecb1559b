"""``gamma="auto"`` for the shift-invariant kernels (rbf, laplacian): the heat kernel when
the initialisation sample is non-convex, else the anchor-graph kernel or the median width,
or the density level-set kernel when a density valley separates what neither cuts along.

No single width makes rbf kernel k-means separate two rings: on ``make_circles`` the ring
partition has a *higher* rbf kernel k-means objective than a convex cut at every width
(docs/kernels.md), and locally scaled Gaussians (Zelnik-Manor & Perona) have the true
partition as a near-optimum that Lloyd iterations do not reach. A diffusion over the k-nn
graph (the ``heat`` kernel) does, once its edges are weighted by density so that the noise
between two shapes does not bridge them (``weights="density"``). On real data with many
clusters (digits, PenDigits) a diffusion over an anchor graph (the ``anchor`` kernel,
fitted on many more rows than the decision's) beats every rbf width. So ``"auto"``
decides, once, on the initialisation sample, which kernel to use, without labels:

1. On at most ``DECISION_ROWS`` rows of the sample, cluster twice: kernel k-means with the
   median-width kernel and with the density-weighted heat kernel fitted on those rows
   (``_N_STARTS`` k-means++ starts each, lowest objective).
2. Score both partitions by their normalised cut on the heat kernel's weighted k-nn graph,
   sum_j cut(C_j) / vol(C_j): how much edge weight the partition cuts, a label-free measure
   of whether clusters follow the data's connected shapes.
3. Take the heat kernel when its partition's cut is below ``NCUT_RATIO``
   times the median width's and either at least ``NCUT_MARGIN`` lower (well-separated
   convex clusters have both cuts near 0) or zero (the graph falls apart into the heat
   partition's clusters while the median width cuts some edges). Also take the heat kernel
   when its partition cuts nothing and the graph has exactly k connected pieces: the
   median width can find them on the decision rows and still cut across them in the fit
   (rings of factor 0.3 with noise 0.03, one seed of ten). On moons and rings the median
   width cuts across the shapes and the heat kernel is chosen, fitted on the decision rows
   (its landmarks, at most ``DECISION_ROWS``; every other row, in ``fit`` and in the
   stream, uses its out-of-sample extension).
4. Otherwise fit the anchor-graph kernel on the landmark rows offered (all of X in
   ``fit``, at most ``AUTO_ANCHOR_ROWS`` of them; the sample in streaming), cluster the
   decision rows with it the same way (``_ANCHOR_STARTS`` starts), and take it when its
   partition cuts no more of the graph than the median width's (more by at most one
   edge's rounding, ``_EDGE_CUT``); else keep the median width. The check keeps the
   median width where the anchor graph joins clusters the width separates (thin, nearly
   one-dimensional clusters whose tails touch: the README's scaled three clusters, ARI
   0.46 with the anchor kernel, 1.0 with the median width).
5. Then, whatever steps 1-4 chose, fit the density level-set kernel (``kernel="level_set"``:
   the indicator of the k connected pieces of the rows' densest 75-95%) on the offered
   rows (at most ``LEVEL_SET_ROWS``, fewer in many dimensions), if they have such pieces,
   and take it when its partition of the decision rows cuts less than ``NCUT_RATIO``
   times, and at least ``_LEVEL_SET_MARGIN`` less than, the chosen partition (the heat
   kernel's; else the lower of the median width's and the anchor kernel's), on the
   decision rows' k-nn graph with density-sharpened weights exp(-2 max(r2(x), r2(y)) / h2)
   (r2 a row's squared distance to its 20th nearest piece row, h2 their median). Between
   rings of factor 0.6 with noise 0.08 the valley holds enough rows that the heat kernel's
   graph joins the rings, while the level set still splits there; the sharper weights
   make the valley cut 0.02-0.2 of the cuts across both rings. Where heat was chosen but
   cuts across the shapes (two noisy spirals, three rings, moons with noise 0.15) the
   level set follows them. On blobs, digits and PenDigits the level set, where it exists,
   cuts no less than the others and is not taken.

The choice is recorded in the model state (the resolved :class:`KernelSpec`). No graph
kernel is considered when ``allow_graph`` is false (drift handling: a graph fixed on
the initialisation sample cannot follow clusters into new regions) or when the sample has
fewer than ``AUTO_MIN_ROWS`` rows (the graph needs many rows per cluster); the median width
is kept then. The heat kernel of ``"auto"`` uses ``AUTO_NEIGHBORS`` neighbours, the anchor
kernel its defaults.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from streamkm._kernel_lloyd import (
    Gram,
    feature_gram,
    gram_columns,
    gram_diagonal,
    kernel_lloyd,
    one_hot,
)
from streamkm._numba.anchor_graph import nearest_anchors
from streamkm.exceptions import NoLevelSetError
from streamkm.kernels._graph import distinct_rows
from streamkm.kernels._registry import KernelType
from streamkm.kernels._spec import KernelSpec
from streamkm.kernels.heat import density_bandwidth, density_weighted

__all__ = ["AUTO_ANCHOR_ROWS", "AUTO_HEAT_OPTIONS", "AUTO_MIN_ROWS", "AUTO_NEIGHBORS",
           "DECISION_ROWS", "LEVEL_SET_PAIRS", "LEVEL_SET_ROWS", "NCUT_MARGIN", "NCUT_RATIO",
           "choose_auto_kernel", "level_set_rows", "normalized_cut"]

AUTO_MIN_ROWS = 500
DECISION_ROWS = 1000
#: neighbours of the auto heat kernel's graph: with density weights 20 measured better than
#: 10 on noisy rings and the same on noisy moons (docs/kernels.md)
AUTO_NEIGHBORS = 20
AUTO_HEAT_OPTIONS = {"n_neighbors": AUTO_NEIGHBORS, "weights": "density"}
#: rows the anchor-graph kernel of ``"auto"`` is fitted on at most (``fit(X)`` offers all of
#: X; its cost is linear in them: the 10 nearest of 1500 anchors per row)
AUTO_ANCHOR_ROWS = 20000
NCUT_RATIO = 0.5
#: ... and by at least this much: well-separated convex clusters have both cuts near 0
NCUT_MARGIN = 0.01
#: a heat partition cutting no edge at all (the graph falls apart into its clusters) beats
#: any width partition that cuts some, however few: on well-separated rings the median
#: width can find the rings on the decision rows and still cut across them in the fit
_ZERO_CUT = 1e-12
#: ... and "cuts some" means more than rounding: one edge of a 1000-row, 20-neighbour graph
#: is about 1e-4 of its volume
_EDGE_CUT = 1e-6
_N_STARTS = 5
#: starts of the anchor kernel's Lloyd runs in step 4: with 5, one PenDigits sample in 10
#: landed in a local optimum cutting 0.85 (the others 0.38-0.68) and the median width was
#: kept (ARI 0.62 instead of 0.77); with 10 the anchor kernel was taken in 10 of 10, and
#: the three-cluster, blobs and 16-d blobs decisions were unchanged
_ANCHOR_STARTS = 10
_MAX_ITER = 50
#: step 5 fits the level-set kernel on at most this many offered rows, and fewer in many
#: dimensions: at most ``LEVEL_SET_PAIRS / d`` pairs of rows (d features), at least
#: ``DECISION_ROWS`` rows
LEVEL_SET_ROWS = 5000
LEVEL_SET_PAIRS = 10**8
#: exponent factor of step 5's density-sharpened edge weights: with 1 (the heat kernel's
#: density weights) a cut along the valley between two noisy rings (factor 0.6, noise
#: 0.08) costs as much as cuts across both rings; with 2 it costs 0.02-0.2 of theirs
_SHARPNESS = 2.0
#: ... and step 5's margin, a tenth of ``NCUT_MARGIN``: the sharpened weights make every
#: cut smaller; on two noisy spirals the heat partition cut 0.006-0.009 of the sharpened
#: graph and the level set's 0.0001 (ARI 0.29-0.39 against 0.99), which a margin of 0.01
#: refused
_LEVEL_SET_MARGIN = 0.001


def normalized_cut(adjacency: sp.csr_matrix, labels: np.ndarray, n_clusters: int) -> float:
    """sum_j cut(C_j) / vol(C_j) of a partition of the graph's rows (empty clusters count 0)."""
    degrees = np.asarray(adjacency.sum(axis=1)).ravel()
    onehot = one_hot(labels, n_clusters, np.float64)
    volume = onehot.T @ degrees
    within = np.einsum("ij,ij->j", onehot, np.asarray(adjacency @ onehot))
    nonempty = volume > 0
    return float(((volume - within)[nonempty] / volume[nonempty]).sum())


def _kernel_lloyd(kmat: Gram, n_clusters: int, rng: np.random.Generator,
                  n_starts: int = _N_STARTS) -> np.ndarray:
    """Labels of the lowest-objective of a few k-means++-seeded kernel Lloyd runs."""
    n = kmat.shape[0]
    diag = gram_diagonal(kmat)
    best, best_obj = np.zeros(n, dtype=np.int64), np.inf
    for _ in range(n_starts):
        first = int(rng.integers(n))
        seeds = [first]
        closest = np.maximum(diag - 2.0 * gram_columns(kmat, first) + diag[first], 0.0)
        for _ in range(1, n_clusters):
            total = closest.sum()
            pick = int(rng.choice(n, p=closest / total)) if total > 0 else int(rng.integers(n))
            seeds.append(pick)
            closest = np.minimum(
                closest, np.maximum(diag - 2.0 * gram_columns(kmat, pick) + diag[pick], 0.0))
        run = kernel_lloyd(kmat, np.array(seeds, dtype=np.int64), max_iter=_MAX_ITER, diag=diag)
        if run.objective < best_obj:
            best, best_obj = run.labels, run.objective
    return best


def choose_auto_kernel(kind: KernelType, gamma: float, sample: np.ndarray,
                       n_clusters: int, *, allow_graph: bool,
                       landmarks: np.ndarray | None = None) -> KernelSpec:
    """The kernel ``gamma="auto"`` resolves to (module docstring): ``kind`` at width
    ``gamma`` (the median rule) when no graph kernel may be used, else the heat kernel
    fitted on ``sample`` or the anchor-graph kernel fitted on ``landmarks`` (default
    ``sample``; at most ``AUTO_ANCHOR_ROWS`` of them)."""
    width_spec = KernelSpec(kind.name, gamma)
    if not allow_graph or not kind.shift_invariant or n_clusters < 2:
        return width_spec
    rows = distinct_rows(sample)  # the graph is over distinct rows, so are the cuts
    if rows.shape[0] < max(AUTO_MIN_ROWS, 20 * n_clusters):
        return width_spec
    # the decision has its own generator: it must not shift the model's random stream
    rng = np.random.default_rng(sample.shape[0])
    if rows.shape[0] > DECISION_ROWS:
        rows = rows[np.sort(rng.choice(rows.shape[0], DECISION_ROWS, replace=False))]
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    heat = KernelSpec("heat", options=AUTO_HEAT_OPTIONS).fit(rows, n_clusters)
    features = heat.fitted.landmark_features  # the decision rows are its landmarks
    adjacency = heat.fitted.landmark_affinity
    labels, cuts = {}, {}
    for name, kmat in (("width", width_spec.block(rows, rows)),
                       ("heat", feature_gram(features))):
        labels[name] = _kernel_lloyd(kmat, n_clusters, rng)
        cuts[name] = normalized_cut(adjacency, labels[name], n_clusters)
    offered = _offered_rows(sample if landmarks is None else landmarks, rng)
    graph = heat.fitted.graph.landmark_adjacency
    if cuts["heat"] < NCUT_RATIO * cuts["width"] and (
            cuts["width"] - cuts["heat"] > NCUT_MARGIN
            or cuts["heat"] <= _ZERO_CUT < _EDGE_CUT <= cuts["width"]) or (
            # k separate pieces, found by heat: the median width may find them on these
            # rows and still cut across them in the fit (rings of factor 0.3, 1 seed in 10)
            cuts["heat"] <= _ZERO_CUT
            and connected_components(adjacency, directed=False)[0] == n_clusters):
        level = _level_set_kernel(offered, rows, graph, n_clusters, [labels["heat"]])
        return heat if level is None else level
    anchor = KernelSpec("anchor").fit(offered, n_clusters)
    labels["anchor"] = _kernel_lloyd(feature_gram(anchor.prepare(rows)), n_clusters, rng,
                                     _ANCHOR_STARTS)
    anchor_cut = normalized_cut(adjacency, labels["anchor"], n_clusters)
    chosen = anchor if anchor_cut <= cuts["width"] + _EDGE_CUT else width_spec
    level = _level_set_kernel(offered, rows, graph, n_clusters,
                              [labels["width"], labels["anchor"]])
    return chosen if level is None else level


def level_set_rows(n_features: int) -> int:
    """Rows step 5 fits the level set on: ``LEVEL_SET_ROWS``, fewer in many dimensions (at
    most ``LEVEL_SET_PAIRS / n_features`` pairs), at least ``DECISION_ROWS``."""
    budget = int(np.sqrt(LEVEL_SET_PAIRS / max(n_features, 1)))
    return min(LEVEL_SET_ROWS, max(DECISION_ROWS, budget))


def _level_set_kernel(offered: np.ndarray, rows: np.ndarray, adjacency: sp.csr_matrix,
                      n_clusters: int, others: list[np.ndarray]) -> KernelSpec | None:
    """Step 5: the level-set kernel fitted on the ``offered`` rows (float64), when its
    partition of the decision ``rows`` cuts clearly less of their density-sharpened graph
    than every partition in ``others``; else None."""
    options = {"n_rows": level_set_rows(offered.shape[1])}
    try:
        level = KernelSpec("level_set", options=options).fit(offered, n_clusters)
    except NoLevelSetError:
        return None
    state = level.fitted
    sharp = _sharpened(adjacency, rows, state.anchors_t, int(level.options["n_neighbors"]))
    level_cut = normalized_cut(sharp, np.argmax(level.prepare(rows), axis=1), n_clusters)
    best_other = min(normalized_cut(sharp, other, n_clusters) for other in others)
    if level_cut < NCUT_RATIO * best_other and best_other - level_cut > _LEVEL_SET_MARGIN:
        return level
    return None


def _sharpened(adjacency: sp.csr_matrix, rows: np.ndarray, anchors_t: np.ndarray,
               n_neighbors: int) -> sp.csr_matrix:
    """The 0/1 ``adjacency`` of the decision rows with the heat kernel's density weights at
    ``_SHARPNESS`` times their exponent, exp(-s max(r2(x), r2(y)) / h2): r2 a row's squared
    distance to its ``n_neighbors``-th nearest level-set anchor, h2 their median."""
    reach = min(n_neighbors, anchors_t.shape[1])
    r2 = nearest_anchors(rows, anchors_t, reach)[1][:, reach - 1]
    return density_weighted(adjacency, r2, r2, density_bandwidth(r2) / _SHARPNESS)


def _offered_rows(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """At most ``AUTO_ANCHOR_ROWS`` of the offered ``rows`` (drawn at random), float64: the
    rows steps 4 and 5 fit their kernels on."""
    if rows.shape[0] > AUTO_ANCHOR_ROWS:
        rows = rows[np.sort(rng.choice(rows.shape[0], AUTO_ANCHOR_ROWS, replace=False))]
    return np.ascontiguousarray(rows, dtype=np.float64)
