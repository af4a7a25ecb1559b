"""A fitted kernel's fit (its graph and eigendecomposition) runs with one BLAS thread, as a
step does, wherever it is called from, and leaves the caller's BLAS setting as it was."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from streamkm.kernels import KernelSpec

pytestmark = pytest.mark.unit


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.mark.parametrize("name", ["heat", "anchor", "level_set", "knn"])
def test_kernel_fit_holds_blas_to_one_thread_and_restores_it(name, monkeypatch):
    kind = KernelSpec(name).kind
    seen: list[list[int]] = []
    fit = type(kind).fit

    def watched(self, params, landmarks, n_clusters=None):
        seen.append(_blas_threads())
        return fit(self, params, landmarks, n_clusters)

    monkeypatch.setattr(type(kind), "fit", watched)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    rows = np.concatenate([c + np.random.default_rng(i).normal(size=(200, 2))
                           for i, c in enumerate(centers)])
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        fitted = KernelSpec(name).fit(rows, 3)
        after = _blas_threads()
    assert fitted.fitted is not None
    assert seen and all(threads == 1 for threads in seen[0])
    assert after == before
