"""Tests of streamkm.cluster: the MiniBatchKernelKMeans engine (API, kernels, recursion,
properties, quality)."""
