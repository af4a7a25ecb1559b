"""The engine's center updates against explicit references of the same recursion."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans
from streamkm.cluster._centers import ExplicitCenters, SupportCenters, learning_rates, sq_norms
from streamkm.kernels import KernelSpec

pytestmark = pytest.mark.unit


def _stream(seed, n_batches=12, b=60, d=4, k=3):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=4.0, size=(k, d))
    for _ in range(n_batches):
        lab = rng.integers(k, size=b)
        yield means[lab] + rng.normal(size=(b, d))


def _numpy_linear_recursion(seeds, batches, rate):
    centers = seeds.astype(np.float64).copy()
    counts = np.zeros(len(centers), dtype=np.int64)
    history = []
    for x in batches:
        d = ((x[:, None, :] - centers[None]) ** 2).sum(-1)
        labels = d.argmin(1)
        for j in range(len(centers)):
            members = x[labels == j]
            bj = len(members)
            if bj == 0:
                continue
            a = np.sqrt(bj / len(x)) if rate == "sqrt" else bj / (counts[j] + bj)
            centers[j] = (1 - a) * centers[j] + a * members.mean(0)
            counts[j] += bj
        history.append((labels, centers.copy()))
    return history


@pytest.mark.parametrize("rate", ["sqrt", "count"])
def test_linear_explicit_centers_equal_numpy_recursion(rate):
    batches = list(_stream(0))
    seeds = batches[0][:3].copy()
    store = ExplicitCenters(seeds.copy())
    counts = np.zeros(3, dtype=np.int64)
    spec = KernelSpec("linear")
    for (labels, centers), x in zip(_numpy_linear_recursion(seeds, batches, rate), batches):
        out = store.step(x, sq_norms(x), spec.diagonal(x), learning_rate=rate, counts=counts, update=True)
        counts += out.batch_counts
        np.testing.assert_array_equal(out.labels, labels)
        np.testing.assert_allclose(store.centers, centers, rtol=0, atol=1e-10)


@pytest.mark.parametrize("rate", ["sqrt", "count"])
def test_untruncated_support_centers_with_linear_kernel_equal_explicit_centroids(rate):
    batches = list(_stream(1))
    seeds = batches[0][:3].copy()
    spec = KernelSpec("linear")
    store = SupportCenters.from_seeds(spec, 10**9, seeds, np.arange(3))
    counts = np.zeros(3, dtype=np.int64)
    for (labels, centers), x in zip(_numpy_linear_recursion(seeds, batches, rate), batches):
        out = store.step(x, sq_norms(x), spec.diagonal(x), learning_rate=rate, counts=counts, update=True)
        counts += out.batch_counts
        np.testing.assert_array_equal(out.labels, labels)
        implicit = np.stack([
            store.weights[a:b] @ store.rows[a:b] for a, b in zip(store.offsets[:-1], store.offsets[1:])
        ])
        np.testing.assert_allclose(implicit, centers, rtol=0, atol=1e-10)


@pytest.mark.parametrize("rate", ["sqrt", "count"])
def test_untruncated_rbf_centers_equal_explicit_recursion_on_full_kernel_matrix(rate):
    batches = list(_stream(2, n_batches=10, b=50))
    spec = KernelSpec("rbf", 0.2)
    seeds = batches[0][:3].copy()
    store = SupportCenters.from_seeds(spec, 10**9, seeds, np.arange(3))
    # Reference: every center as explicit weights over every row seen (seeds first).
    seen = seeds.copy()
    weights = np.eye(3)
    counts = np.zeros(3, dtype=np.int64)
    for x in batches:
        kx = spec.block(x, seen)
        kss = spec.block(seen, seen)
        inner = kx @ weights.T
        cc = np.einsum("jn,nm,jm->j", weights, kss, weights)
        labels = (1.0 - 2 * inner + cc).argmin(1)
        bc = np.bincount(labels, minlength=3)
        alpha = learning_rates(rate, bc, len(x), counts)
        new_cols = np.zeros((3, len(x)))
        for j in range(3):
            if bc[j]:
                weights[j] *= 1 - alpha[j]
                new_cols[j, labels == j] = alpha[j] / bc[j]
        weights = np.hstack([weights, new_cols])
        seen = np.vstack([seen, x])
        kall = spec.block(x, seen)
        cc_after = np.einsum("jn,nm,jm->j", weights, spec.block(seen, seen), weights)
        after = np.maximum(1.0 - 2 * kall @ weights.T + cc_after, 0).min(1).mean()

        out = store.step(x, sq_norms(x), spec.diagonal(x), learning_rate=rate, counts=counts, update=True)
        counts += out.batch_counts
        np.testing.assert_array_equal(out.labels, labels)
        np.testing.assert_allclose(store.center_sq_norms, cc_after, rtol=0, atol=1e-10)
        assert out.objective_after == pytest.approx(after, abs=1e-10)
    # The implicit centers' inner products with fresh points match the explicit ones.
    probe = np.random.default_rng(9).normal(size=(20, 4))
    np.testing.assert_allclose(store.inner_products(probe, sq_norms(probe)),
                               spec.block(probe, seen) @ weights.T, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "polynomial", "cosine"])
def test_truncated_supports_are_bounded_convex_combinations(kernel, dtype):
    tau = 70
    model = MiniBatchKernelKMeans(3, kernel=kernel, tau=tau, tol=0.0, n_init=1, random_state=0)
    for x in _stream(3, n_batches=15, b=90):
        model.partial_fit(x.astype(dtype))
        store = model._centers
        for j, (a, b) in enumerate(zip(store.offsets[:-1], store.offsets[1:])):
            w = store.weights[a:b]
            tags = store.tags[a:b]
            assert np.all(w >= 0)
            assert w.sum() == pytest.approx(1.0, abs=1e-12)
            newest = tags == tags.max()
            # Only the newest batch may exceed tau on its own; older rows fit in the budget.
            assert newest.sum() > tau or (b - a) <= tau
            assert np.all(np.diff(tags) >= 0)
            g = store.grams[j]
            ref = model._kernel_spec.block(store.rows[a:b], store.rows[a:b])
            np.testing.assert_allclose(g, ref, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-6)
        assert store.rows.dtype == dtype
    assert model.transform(x.astype(dtype)).dtype == dtype
