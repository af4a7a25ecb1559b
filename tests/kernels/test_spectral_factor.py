"""Leading eigenpairs of a Gram F^T F found by multiplying by its sparse factor F agree with
those of the formed Gram (streamkm.kernels._spectral.leading_eigenpairs)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamkm.kernels._spectral import _gram_operator, leading_eigenpairs

pytestmark = pytest.mark.unit


def _anchor_like_factor(n: int, p: int, r: int, blocks: int, seed: int) -> sp.csr_matrix:
    """n x p, r entries a row, each row's anchors within one of ``blocks`` column groups
    (so F^T F has that many connected blocks); columns scaled so the leading eigenvector
    of F^T F is known (sqrt of the column sums of the row-normalised weights)."""
    rng = np.random.default_rng(seed)
    group = np.array_split(np.arange(p), blocks)
    rows, cols, vals = [], [], []
    for i in range(n):
        own = group[i % blocks]
        pick = rng.choice(own, size=r, replace=False)
        w = rng.random(r) + 0.1
        rows += [i] * r
        cols += list(pick)
        vals += list(w / w.sum())
    z = sp.csr_matrix((vals, (rows, cols)), shape=(n, p))
    column = np.asarray(z.sum(axis=0)).ravel()
    return (z @ sp.diags(1.0 / np.sqrt(column))).tocsr()


def _same_pairs(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> None:
    np.testing.assert_allclose(a[0], b[0], atol=1e-12)
    # eigenvectors up to sign and to a rotation within a repeated eigenvalue (each block
    # has eigenvalue 1): the projectors onto the spans agree
    np.testing.assert_allclose(a[1] @ a[1].T, b[1] @ b[1].T, atol=1e-9)


@pytest.mark.parametrize("blocks", [1, 3])
def test_factor_gives_the_formed_grams_eigenpairs(blocks):
    factor = _anchor_like_factor(1500, 600, 4, blocks, seed=blocks)
    gram = (factor.T @ factor).tocsr()
    start = np.sqrt(np.asarray((factor.T @ factor).sum(axis=0)).ravel())
    assert 2 * factor.nnz < gram.nnz  # the factor is the sparser form here
    _same_pairs(leading_eigenpairs(gram, 20, start, factor),
                leading_eigenpairs(gram, 20, start))


def test_gram_operator_keeps_the_gram_when_the_factor_is_not_sparser():
    factor = sp.random(40, 30, density=0.9, format="csr", random_state=0)
    gram = (factor.T @ factor).tocsr()
    assert _gram_operator(gram, factor) is gram
    assert _gram_operator(gram, None) is gram


def test_gram_operator_multiplies_by_the_factors_gram():
    factor = _anchor_like_factor(500, 100, 4, 1, seed=7)
    gram = (factor.T @ factor).tocsr()
    op = _gram_operator(gram, factor)
    assert op is not gram
    v = np.random.default_rng(0).normal(size=100)
    np.testing.assert_allclose(op @ v, gram @ v, rtol=1e-12, atol=1e-14)
