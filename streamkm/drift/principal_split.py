"""A cheap bisection of plain rows: 2-means started from the split at the mean along the
principal axis.

Used on a cluster's input rows each step (:meth:`DriftController.input_split
<streamkm.drift.controller.DriftController.input_split>`), where the full kernel bisection
(:func:`~streamkm.drift.bisect.kernel_bisect`, many starts on a kernel matrix) would cost a
step more than the step itself. One start from the principal axis finds two groups whose
distance dominates the rows' spread (the case the split test accepts); Lloyd iterations then
settle the sides.
"""

from __future__ import annotations

import numpy as np

__all__ = ["principal_split"]


def principal_split(rows: np.ndarray, max_iter: int) -> tuple[np.ndarray, float]:
    """Split ``rows`` (n, d) in two: sides (0 / 1, int64) and the SSE reduction
    1 - SSE_split / SSE_unsplit (0.0 when the rows do not spread or a side is empty).

    The start is the sign of each row's coordinate on the leading eigenvector of the rows'
    covariance (the principal axis through their mean); at most ``max_iter`` Lloyd
    iterations with explicit means follow, stopping when no row changes side.
    """
    x = np.asarray(rows, dtype=np.float64)
    centered = x - x.mean(axis=0)
    sse_unsplit = float(np.einsum("ij,ij->", centered, centered))
    if x.shape[0] < 2 or sse_unsplit <= 0.0:
        return np.zeros(x.shape[0], dtype=np.int64), 0.0
    _, vectors = np.linalg.eigh(centered.T @ centered)
    side = (centered @ vectors[:, -1] > 0.0).astype(np.int64)
    for _ in range(int(max_iter)):
        if side.min() == side.max():
            return side, 0.0
        mean0, mean1 = x[side == 0].mean(axis=0), x[side == 1].mean(axis=0)
        # nearer to mean1 than to mean0 (ties to side 0): beyond the bisecting hyperplane
        new = ((x - 0.5 * (mean0 + mean1)) @ (mean1 - mean0) > 0.0).astype(np.int64)
        if np.array_equal(new, side):
            break
        side = new
    if side.min() == side.max():
        return side, 0.0
    sse = sum(float(((x[side == s] - x[side == s].mean(axis=0)) ** 2).sum()) for s in (0, 1))
    return side, max(0.0, 1.0 - sse / sse_unsplit)
