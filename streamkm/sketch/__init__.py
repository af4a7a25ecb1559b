"""Feature sketching for high-dimensional streams: random projection, approximate SVD,
leverage-score selection (Boutsidis et al.; docs/references.md).

Each sketcher maps rows of dimension n (dense, or scipy CSR without densifying) to r
dimensions so that k-means on the sketch is a constant-factor approximation of k-means on
the input (Boutsidis, Zouzias, Mahoney, Drineas):

- :class:`RandomProjection` -- Gaussian, sign or very sparse projection, r = O(k / eps^2),
  (2 + eps)-approximation (Theorem 12);
- :class:`ApproxSVD` -- approximate top-k right singular vectors, r = k,
  (2 + eps)-approximation (Theorem 13);
- :class:`LeverageScoreSelector` -- leverage-score feature selection, r = O(k log k / eps^2),
  (3 + eps)-approximation (Theorem 11).

Every sketcher has ``fit`` / ``transform`` / ``fit_transform`` and a pickle-free state:
``get_state() -> (arrays, meta)`` and ``from_state(arrays, meta)`` (or
:func:`sketcher_from_state` for any type); restored sketchers transform bit-identically.

:class:`SketchedKernelKMeans` chains a sketcher and :class:`~streamkm.MiniBatchKernelKMeans`
for streams (dense or CSR batches), re-sketching on a reservoir of recent raw rows
(:class:`RowReservoir`) every ``resketch_every`` batches or on drift.
"""

from __future__ import annotations

from streamkm.sketch._base import STATE_FORMAT_VERSION, BaseSketcher
from streamkm.sketch._dimension import feature_selection_dimension, kmeans_sketch_dimension
from streamkm.sketch.leverage import LeverageScoreSelector, leverage_probabilities
from streamkm.sketch.pipeline import SketchedKernelKMeans, is_data_dependent
from streamkm.sketch.projection import PROJECTION_KINDS, RandomProjection
from streamkm.sketch.reservoir import RowReservoir
from streamkm.sketch.state import SKETCHER_TYPES, sketcher_from_state
from streamkm.sketch.svd import ApproxSVD, approximate_right_singular_vectors

__all__ = [
    "ApproxSVD",
    "BaseSketcher",
    "LeverageScoreSelector",
    "PROJECTION_KINDS",
    "RandomProjection",
    "SKETCHER_TYPES",
    "RowReservoir",
    "STATE_FORMAT_VERSION",
    "SketchedKernelKMeans",
    "approximate_right_singular_vectors",
    "feature_selection_dimension",
    "is_data_dependent",
    "kmeans_sketch_dimension",
    "leverage_probabilities",
    "sketcher_from_state",
]
