"""numba kernels of streamkm (private).

Every function here is a module-level ``@njit(cache=True, nogil=True)`` function over
contiguous arrays, and each is tested against a plain-numpy reference in ``tests/``. They
release the GIL, so the service's step thread computes while its loop reads the next batch
(``tests/test_numba_releases_gil.py``). Callers go through the public wrappers
(``streamkm.kernels``, the estimators), which validate shapes and dtypes.
"""
