"""``gamma="auto"``: which kernel to use, decided once on the initialisation sample.

No single rbf width separates non-convex shapes (moons, rings: the kernel k-means objective
itself prefers a convex cut), and on data with many clusters (digits, PenDigits) a diffusion
over an anchor graph beats every width; on other real data the median width or plain
(linear) k-means is best. So ``"auto"`` compares candidate kernels on the sample, without
labels, by one score:

**the expected cut of two common k-nn graphs.** At most ``DECISION_ROWS`` distinct rows of
the sample are drawn by a generator seeded with their number after sorting them (so the
draw does not depend on the order the rows came in). Each candidate clusters those rows by
kernel k-means from ``SCORE_STARTS`` independent k-means++ starts (seeded the same way for
every candidate); its score is the mean over the starts of

    ncut(mutual k-nn graph) + ncut(symmetric k-nn graph),   ncut = sum_j cut(C_j) / vol(C_j)

of the partition found (``AUTO_NEIGHBORS`` neighbours, 0/1 edges, :func:`knn_graphs`). The
two graphs see different failures. The mutual graph keeps clusters of unequal density apart
(a sparse row is not joined to a dense region unless the dense rows point back), but it
leaves many rows in sparse regions with no edge at all, so cutting off a handful of outlying
rows costs nothing on it. The symmetric graph joins every row to its neighbours, so such a
cut costs their edges there; on it alone a dense core and a diffuse cloud around it are one
piece. A partition that follows the data's shapes cuts little of both; a kernel whose starts
land on different partitions pays for the bad ones.

The candidates: the ``kind`` at the median width (the reference), the linear kernel (plain
k-means), the anchor-graph kernel and the density level-set kernel fitted on the offered
rows (all of X in ``fit``, at most ``AUTO_ANCHOR_ROWS``; the sample in streaming). The
level-set kernel's partition does not depend on a start (its k pieces) and is scored once.
:func:`streamkm.kernels._decision.decide` takes the lowest score and keeps the reference
unless it is beaten by more than the score's resolution, one row's share of the two cuts:
moving a row to another cluster changes each cut by about its degree over its cluster's
volume, k / n on average (k clusters, n rows), so 2 k / n for the sum. Measured and dropped
as not paying their way: rbf at half and twice the median width (on the suite they won
where they did not label better, ring) and the density-weighted heat kernel on the decision
rows (it adds an eigendecomposition of the decision rows' graph and never won by a margin
that gained ARI); ``candidates=`` can still add the heat kernel.

No other kernel is considered when ``allow_graph`` is false (drift handling, sketching) or
when the sample has fewer than ``AUTO_MIN_ROWS`` (or 20 k) distinct rows; the decision then
records why. Evidence and limits: docs/kernels.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from streamkm._core.kernel_lloyd import (
    Gram, feature_gram, gram_columns, gram_diagonal, kernel_lloyd, one_hot,
)
from streamkm._core.seeding import d2_sampling, greedy_trials, kernel_sq_dist_to
from streamkm._numba import knn_graph as _nkg
from streamkm.exceptions import NoLevelSetError
from streamkm.kernels._decision import AutoDecision, decide, not_considered
from streamkm.kernels._registry import KernelType
from streamkm.kernels._spec import KernelSpec

__all__ = ["AUTO_ANCHOR_ROWS", "AUTO_CANDIDATES", "AUTO_HEAT_OPTIONS", "AUTO_MIN_ROWS",
           "AUTO_NEIGHBORS", "GRAPH_CANDIDATES", "OTHER_CANDIDATES",
           "DECISION_ROWS", "LEVEL_SET_PAIRS", "LEVEL_SET_ROWS", "SCORE_STARTS",
           "auto_kernel_decision", "choose_auto_kernel", "decision_rows", "graph_cut",
           "knn_graphs", "level_set_rows", "mutual_knn_graph", "normalized_cut"]

AUTO_MIN_ROWS = 500
DECISION_ROWS = 1000
#: neighbours of the common graph and of the auto heat kernel's graph (with density weights
#: 20 measured better than 10 on noisy rings and the same on noisy moons: docs/kernels.md)
AUTO_NEIGHBORS = 20
AUTO_HEAT_OPTIONS = {"n_neighbors": AUTO_NEIGHBORS, "weights": "density"}
#: rows the anchor-graph and level-set kernels of ``"auto"`` are fitted on at most
#: (``fit(X)`` offers all of X; the anchor kernel's cost is linear in them)
AUTO_ANCHOR_ROWS = 20000
#: the kernels ``"auto"`` compares with the median width, in the order ties are broken;
#: the heat kernel may be added (``candidates=``) but does not pay its way: it never scored
#: lowest by a margin that gained ARI on the suite (docs/kernels.md), and it adds an
#: eigendecomposition of the decision rows' graph
AUTO_CANDIDATES = ("linear", "anchor", "level_set")
#: candidates built from a graph of the rows (not compared without ``allow_graph``)
GRAPH_CANDIDATES = ("heat", "anchor", "level_set")
#: every candidate ``candidates=`` may name, in the order ties are broken
OTHER_CANDIDATES = ("linear", *GRAPH_CANDIDATES)
#: independent k-means++ starts per candidate; the score is the mean over them
SCORE_STARTS = 5
_MAX_ITER = 50
#: the level-set kernel is fitted on at most this many offered rows, and fewer in many
#: dimensions: at most ``LEVEL_SET_PAIRS / d`` pairs of rows (d features), at least
#: ``DECISION_ROWS`` rows
LEVEL_SET_ROWS = 5000
LEVEL_SET_PAIRS = 10**8


def normalized_cut(adjacency: sp.csr_matrix, labels: np.ndarray, n_clusters: int) -> float:
    """sum_j cut(C_j) / vol(C_j) of a partition of the graph's rows (empty clusters count 0)."""
    degrees = np.asarray(adjacency.sum(axis=1)).ravel()
    onehot = one_hot(labels, n_clusters, np.float64)
    volume = onehot.T @ degrees
    within = np.einsum("ij,ij->j", onehot, np.asarray(adjacency @ onehot))
    nonempty = volume > 0
    return float(((volume - within)[nonempty] / volume[nonempty]).sum())


def decision_rows(sample: np.ndarray) -> np.ndarray:
    """At most ``DECISION_ROWS`` distinct rows of ``sample`` (float64), the same for any
    order of its rows: the distinct rows sorted, then a draw seeded by their number."""
    rows = np.unique(np.asarray(sample, dtype=np.float64), axis=0)
    if rows.shape[0] > DECISION_ROWS:
        draw = np.random.default_rng(rows.shape[0])
        rows = rows[np.sort(draw.choice(rows.shape[0], DECISION_ROWS, replace=False))]
    return np.ascontiguousarray(rows)


def knn_graphs(rows: np.ndarray, n_neighbors: int = AUTO_NEIGHBORS
               ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The 0/1 mutual and symmetric k-nn graphs of ``rows`` (float64, distinct), from one
    pass over the pairs: i and j are joined in the mutual graph when each is within the
    other's ``n_neighbors``-th neighbour distance (ties included), in the symmetric graph
    when either is; no self loops. Unlike the symmetric graph, the mutual one does not join
    a row in a sparse region to the dense region it points into unless the dense rows point
    back: clusters of unequal density stay apart (Maier, Hein and von Luxburg 2009); but it
    leaves rows in sparse regions with few or no edges, which the symmetric graph joins."""
    m = rows.shape[0]
    indptr, indices = _nkg.join_rows(rows, np.ascontiguousarray(rows.T), np.zeros(m),
                                     min(n_neighbors, m - 1), False, np.empty(m))
    within = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(m, m))
    return (_without_self_loops(within.minimum(within.T)),
            _without_self_loops(within.maximum(within.T)))


def mutual_knn_graph(rows: np.ndarray, n_neighbors: int = AUTO_NEIGHBORS) -> sp.csr_matrix:
    """The 0/1 mutual k-nn graph of ``rows`` (:func:`knn_graphs`)."""
    return knn_graphs(rows, n_neighbors)[0]


def graph_cut(graphs: tuple[sp.csr_matrix, ...], labels: np.ndarray,
              n_clusters: int) -> float:
    """The sum over ``graphs`` of the partition's :func:`normalized_cut`."""
    return float(sum(normalized_cut(graph, labels, n_clusters) for graph in graphs))


def _without_self_loops(adjacency: sp.spmatrix) -> sp.csr_matrix:
    coo = adjacency.tocoo()
    off = coo.row != coo.col
    out = sp.csr_matrix((coo.data[off], (coo.row[off], coo.col[off])), shape=adjacency.shape)
    out.eliminate_zeros()
    return out


class _FormedGram:
    """A kernel over row indices whose values are a formed Gram matrix: what the k-means++
    seeding asks of a kernel (its diagonal, blocks of every row against a few) without
    recomputing the kernel."""

    def __init__(self, kmat: Gram) -> None:
        self.kmat = kmat
        self.diag = gram_diagonal(kmat)

    def diagonal(self, index: np.ndarray) -> np.ndarray:
        return self.diag[index[:, 0]]

    def block(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return gram_columns(self.kmat, y[:, 0])[x[:, 0]]


def _expected_cut(kmat: Gram, graphs: tuple[sp.csr_matrix, ...], n_clusters: int) -> float:
    """Mean :func:`graph_cut` of ``graphs`` over ``SCORE_STARTS`` kernel k-means runs on
    the Gram ``kmat``, each from its own k-means++ start; the starts' generator is seeded
    the same for every candidate."""
    n = kmat.shape[0]
    draw = np.random.default_rng(n)
    formed = _FormedGram(kmat)
    index = np.arange(n)[:, None]
    cuts = []
    for _ in range(SCORE_STARTS):
        seeds = d2_sampling(n, n_clusters, kernel_sq_dist_to(formed, index), draw,
                            n_local_trials=greedy_trials(n_clusters))
        labels = kernel_lloyd(kmat, seeds, max_iter=_MAX_ITER, diag=formed.diag).labels
        cuts.append(graph_cut(graphs, labels, n_clusters))
    return float(np.mean(cuts))


def auto_kernel_decision(kind: KernelType, gamma: float, sample: np.ndarray,
                         n_clusters: int, *, allow_graph: bool,
                         landmarks: np.ndarray | None = None,
                         candidates: tuple[str, ...] = AUTO_CANDIDATES,
                         ) -> tuple[KernelSpec, AutoDecision]:
    """The kernel ``gamma="auto"`` resolves to and the decision that chose it (module
    docstring): ``kind`` at width ``gamma`` (the reference), or one of ``candidates`` (a
    subset of ``OTHER_CANDIDATES``, in the order ties are broken): the linear kernel, the
    heat kernel fitted on the decision rows, the anchor-graph or level-set kernel fitted on
    ``landmarks`` (default ``sample``; at most ``AUTO_ANCHOR_ROWS`` of them)."""
    unknown = sorted(set(candidates) - set(OTHER_CANDIDATES))
    if unknown:
        raise ValueError(f"auto candidates are among {OTHER_CANDIDATES}, got {unknown}")
    reference = kind.name
    width_spec = KernelSpec(kind.name, gamma)
    if not allow_graph:
        return width_spec, not_considered(
            reference, "graph kernels are not allowed for this model (drift handling or "
                       "raw rows for re-sketching): the median width is used")
    if not kind.shift_invariant or n_clusters < 2:
        return width_spec, not_considered(
            reference, f"no other kernel competes for kernel {kind.name!r} with "
                       f"n_clusters={n_clusters}")
    rows = decision_rows(sample)
    needed = max(AUTO_MIN_ROWS, 20 * n_clusters)
    if rows.shape[0] < needed:
        return width_spec, not_considered(
            reference, f"the sample has {rows.shape[0]} distinct rows, fewer than the "
                       f"{needed} a graph needs: the median width is used")
    graphs = knn_graphs(rows)
    offered = _offered_rows(sample if landmarks is None else landmarks)
    specs: dict[str, KernelSpec] = {reference: width_spec}
    scores: dict[str, float | None] = {
        reference: _expected_cut(width_spec.block(rows, rows), graphs, n_clusters)}
    for name in candidates:
        if name == "level_set":
            try:
                spec = KernelSpec("level_set", options={
                    "n_rows": level_set_rows(offered.shape[1])}).fit(offered, n_clusters)
            except NoLevelSetError:
                scores[name] = None  # the rows have no level set of k pieces
                continue
            # its partition is its k pieces: no start to average over
            scores[name] = graph_cut(graphs, np.argmax(spec.prepare(rows), axis=1),
                                     n_clusters)
        else:
            if name == "linear":
                spec = KernelSpec("linear").fit(offered, n_clusters)
            elif name == "heat":
                spec = KernelSpec("heat", options=AUTO_HEAT_OPTIONS).fit(rows, n_clusters)
            else:
                spec = KernelSpec("anchor").fit(offered, n_clusters)
            prepared = np.ascontiguousarray(spec.prepare(rows), dtype=np.float64)
            scores[name] = _expected_cut(feature_gram(prepared), graphs, n_clusters)
        specs[name] = spec
    # the score's resolution: moving one row across a cut changes each graph's cut by about
    # its degree over its cluster's volume, (vol / n) / (vol / k) = k / n
    tolerance = len(graphs) * n_clusters / rows.shape[0]
    decision = decide(scores, reference, tolerance)
    return specs[decision.chosen], decision


def choose_auto_kernel(kind: KernelType, gamma: float, sample: np.ndarray,
                       n_clusters: int, *, allow_graph: bool,
                       landmarks: np.ndarray | None = None,
                       on_decision: Callable[[AutoDecision], None] | None = None,
                       ) -> KernelSpec:
    """The kernel ``gamma="auto"`` resolves to (:func:`auto_kernel_decision`);
    ``on_decision`` is called with the decision."""
    spec, decision = auto_kernel_decision(kind, gamma, sample, n_clusters,
                                          allow_graph=allow_graph, landmarks=landmarks)
    if on_decision is not None:
        on_decision(decision)
    return spec


def level_set_rows(n_features: int) -> int:
    """Rows the level-set candidate is fitted on: ``LEVEL_SET_ROWS``, fewer in many
    dimensions (at most ``LEVEL_SET_PAIRS / n_features`` pairs), at least ``DECISION_ROWS``."""
    budget = int(np.sqrt(LEVEL_SET_PAIRS / max(n_features, 1)))
    return min(LEVEL_SET_ROWS, max(DECISION_ROWS, budget))


def _offered_rows(rows: np.ndarray) -> np.ndarray:
    """At most ``AUTO_ANCHOR_ROWS`` of the offered ``rows`` (float64), drawn by a generator
    seeded with their number: the rows the anchor and level-set kernels are fitted on."""
    if rows.shape[0] > AUTO_ANCHOR_ROWS:
        draw = np.random.default_rng(rows.shape[0])
        rows = rows[np.sort(draw.choice(rows.shape[0], AUTO_ANCHOR_ROWS, replace=False))]
    return np.ascontiguousarray(rows, dtype=np.float64)
