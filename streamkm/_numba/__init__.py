"""numba kernels of streamkm (private).

Every function here is a module-level ``@njit(cache=True)`` function over contiguous
arrays, and each is tested against a plain-numpy reference in ``tests/``. Callers go through
the public wrappers (``streamkm.kernels``, the estimators), which validate shapes and dtypes.
"""
