"""Tests of streamkm.batch: the batch clusterers (k-means, kernel k-means, 1-D DP, Ward,
spectral) and their numba kernels."""
