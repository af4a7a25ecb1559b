"""Batch (offline) clustering algorithms: the foundations and exact baselines.

The algorithms of the clustering chapter of "Foundations of Data Science", used as
initialisers, in bisect/merge, and as the references the streaming engine is compared with:

- :class:`KMeans` (Lloyd's algorithm), :func:`kmeans_plusplus`, :func:`farthest_traversal`
- :func:`k_center`: k-center by farthest traversal (2-approximation)
- :func:`ward_cost`, :class:`WardAgglomerative`: Ward's merge criterion and clustering
- :func:`kmeans_1d`: exact 1-D k-means by dynamic programming
- :class:`SpectralClustering`: SVD projection + k-means, or normalised-Laplacian bisection
- :class:`KernelKMeans`, :func:`kernel_lloyd`: exact full-batch kernel k-means
"""

from __future__ import annotations

from streamkm.batch.kcenter import k_center
from streamkm.batch.kernel_kmeans import KernelKMeans, KernelLloydResult, kernel_lloyd
from streamkm.batch.kmeans import KMeans, LloydResult, lloyd
from streamkm.batch.kmeans_1d import kmeans_1d
from streamkm.batch.seeding import farthest_traversal, kmeans_plusplus
from streamkm.batch.spectral import SpectralClustering
from streamkm.batch.ward import WardAgglomerative, ward_cost

__all__ = [
    "KMeans",
    "LloydResult",
    "lloyd",
    "kmeans_plusplus",
    "farthest_traversal",
    "k_center",
    "ward_cost",
    "WardAgglomerative",
    "kmeans_1d",
    "SpectralClustering",
    "KernelKMeans",
    "KernelLloydResult",
    "kernel_lloyd",
]
