"""The spectra of the graph kernels (``heat``, ``anchor``): leading eigenpairs, which of them
weigh anything in exp(-t (1 - lam)), and the automatic diffusion time."""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

__all__ = ["MIN_EIGENVALUE", "WEIGHT_FLOOR", "auto_diffusion_time", "dense_eigenpairs",
           "leading_eigenpairs", "significant_eigenpairs", "weight_cutoff"]

#: eigenpairs below this are left out of new rows: the Nystroem extension divides by the
#: eigenvalue, so a small one amplifies the new row's noise (features with norms 100x the
#: landmarks' and a collapsed clustering on well-separated blobs with t ~ 6); their kernel
#: weight is at most exp(-0.9 t)
MIN_EIGENVALUE = 0.1
#: eigenpairs whose kernel weight exp(-t (1 - lam)) is below this fraction of the leading
#: one's are dropped after fitting: they change no kernel entry by more than this (relative
#: to the largest weight) and, with t="auto", are most of the spectrum (PenDigits, 1000
#: landmarks: 36 of 1000 eigenpairs are kept), so features, steps and states shrink with them
WEIGHT_FLOOR = 1e-6


def weight_cutoff(time: float, leading: float = 1.0) -> float:
    """The smallest eigenvalue whose weight exp(-t (1 - lam)) is ``WEIGHT_FLOOR`` of the
    leading eigenvalue's (1 for the normalised adjacency of a graph)."""
    return leading - np.log(1.0 / WEIGHT_FLOOR) / time


def significant_eigenpairs(eigenvalues: np.ndarray, t: float) -> int:
    """How many leading eigenpairs (eigenvalues in decreasing order) have a kernel weight
    exp(-t (1 - lam)) of at least ``WEIGHT_FLOOR`` times the leading one's (at least 1)."""
    if eigenvalues.shape[0] == 0:
        return 0
    return max(1, int(np.count_nonzero(eigenvalues >= weight_cutoff(t, eigenvalues[0]))))


def auto_diffusion_time(eigenvalues: np.ndarray, n_clusters: int | None) -> float:
    """t = ln(10) / (1 - lam_{k+1}): eigenvector k+1 keeps a tenth of its weight.

    The k leading eigenvectors (k = n_clusters) carry the cluster structure when the graph
    has k loosely joined parts (their eigenvalues are close to 1); diffusing until the
    (k+1)-th is damped tenfold keeps them and fades the within-cluster detail.
    """
    k = 2 if n_clusters is None else int(n_clusters)
    if eigenvalues.shape[0] <= k:
        return 1.0
    return float(np.log(10.0) / max(1.0 - eigenvalues[k], 1e-12))


def dense_eigenpairs(dense: np.ndarray, *, top: int | None = None,
                     above: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of a symmetric matrix with spectrum in [-1, 1] (LAPACK), eigenvalues in
    decreasing order: the ``top`` largest, or those >= ``above``, else (or when that is all)
    every one."""
    n = dense.shape[0]
    if top is not None and top < n:
        lam, vec = scipy.linalg.eigh(dense, subset_by_index=[n - top, n - 1], driver="evr")
    elif above is not None and above > -1.0:
        lam, vec = scipy.linalg.eigh(dense, subset_by_value=(above - 1e-9, np.inf),
                                     driver="evr")
    else:
        lam, vec = np.linalg.eigh(dense)
    return lam[::-1], vec[:, ::-1]


#: blocks up to this many times the eigenpairs asked for are solved dense (LAPACK); larger
#: ones by sparse Lanczos (ARPACK), several times faster at 1500 anchors (0.05 s vs 0.25 s
#: on PenDigits' anchor graph, the same eigenvalues to 1e-15)
_DENSE_FACTOR = 2


def _solved_dense(size: int, top: int) -> bool:
    return size <= max(_DENSE_FACTOR * top, top + 1)


def _gram_operator(block: sp.csr_matrix,
                   factor: sp.csr_matrix | None) -> sp.csr_matrix | LinearOperator:
    """``block`` as Lanczos multiplies by it: itself, or v -> F^T (F v) when its ``factor``
    F (block = F^T F) has fewer than half its entries (an anchor graph's F has r entries a
    row, its Gram up to r^2 a row: on twonorm 74,000 against 261,000)."""
    if factor is None or 2 * factor.nnz >= block.nnz:
        return block
    factor_t = factor.T.tocsr()
    return LinearOperator(block.shape, matvec=lambda v: factor_t @ (factor @ v),
                          dtype=np.float64)


def _block_eigenpairs(block: sp.csr_matrix, top: int, start: np.ndarray,
                      factor: sp.csr_matrix | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The ``top`` largest eigenpairs of one connected block (``factor``: F with
    block = F^T F, or None), decreasing."""
    size = block.shape[0]
    if _solved_dense(size, top) or not np.any(start > 0):
        return dense_eigenpairs(block.toarray(), top=min(top, size))
    try:
        lam, vec = eigsh(_gram_operator(block, factor), k=top, which="LA",
                         v0=start / np.linalg.norm(start))
    except ArpackNoConvergence:
        return dense_eigenpairs(block.toarray(), top=top)
    order = np.argsort(lam)[::-1]
    return lam[order], vec[:, order]


def leading_eigenpairs(gram: sp.csr_matrix, top: int, start: np.ndarray,
                       factor: sp.csr_matrix | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The ``top`` largest eigenpairs of the symmetric p x p ``gram``, decreasing; with its
    ``factor`` F (gram = F^T F, n x p), Lanczos multiplies by F^T F when F is sparser.

    Solved per connected block: Lanczos from one start vector finds one vector of a
    repeated eigenvalue, and a graph of c pieces has eigenvalue 1 c times (30 blobs, 15
    pieces: Lanczos on the whole matrix found 9). Within a connected block the leading
    eigenvalue is simple; ``start`` (the leading eigenvector: sqrt of the degrees, or of
    the anchor weights) starts each block's Lanczos, so the result is deterministic.
    """
    p = gram.shape[0]
    n_blocks, block_of = connected_components(gram, directed=False)
    if n_blocks == 1:
        return _block_eigenpairs(gram, top, start, factor)
    values, vectors = [], []
    for b in range(n_blocks):
        members = np.flatnonzero(block_of == b)
        wanted = min(top, members.shape[0])
        # a row of F with an entry in the block has all its entries there (sliced only
        # for a block Lanczos solves)
        sub = (None if factor is None or _solved_dense(members.shape[0], wanted)
               else factor[:, members])
        lam, vec = _block_eigenpairs(gram[members][:, members], wanted, start[members], sub)
        full = np.zeros((p, lam.shape[0]))
        full[members] = vec
        values.append(lam)
        vectors.append(full)
    lam = np.concatenate(values)
    order = np.argsort(-lam, kind="stable")[:top]
    return lam[order], np.hstack(vectors)[:, order]
