"""Kernel functions: K(x, y) = <phi(x), phi(y)> for the supported kernels.

``KernelSpec`` holds a kernel's name and resolved parameters and computes kernel blocks
K(X, Y) (one GEMM plus an in-place numba transform) and diagonals K(x, x), keeping the
input's floating dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._numba import kernels as _nk
from streamkm.exceptions import ParameterError

__all__ = ["KERNELS", "KernelSpec", "median_heuristic_gamma", "pairwise_kernel"]

KERNELS = ("rbf", "laplacian", "polynomial", "cosine", "linear")
_MEDIAN_SAMPLE = 1000


def _inv_norms(x: np.ndarray) -> np.ndarray:
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    inv = np.zeros_like(norms)
    np.divide(1.0, norms, out=inv, where=norms > 0)
    return inv


@dataclass(frozen=True)
class KernelSpec:
    """A kernel with resolved parameters.

    Parameters
    ----------
    name : {"rbf", "laplacian", "polynomial", "cosine", "linear"}
        ``rbf``: exp(-gamma ||x-y||^2); ``laplacian``: exp(-gamma ||x-y||_1);
        ``polynomial``: (gamma <x,y> + coef0)^degree; ``cosine``: <x,y>/(||x|| ||y||);
        ``linear``: <x,y>.
    gamma : float or None
        Required (positive) for rbf, laplacian and polynomial; ignored otherwise.
    degree : int
        Degree of the polynomial kernel.
    coef0 : float
        Constant term of the polynomial kernel.
    """

    name: str
    gamma: float | None = None
    degree: int = 3
    coef0: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in KERNELS:
            raise ParameterError(f"kernel must be one of {KERNELS}, got {self.name!r}")
        if self.name in ("rbf", "laplacian", "polynomial"):
            if self.gamma is None or not np.isfinite(self.gamma) or self.gamma <= 0:
                raise ParameterError(
                    f"gamma must be a positive finite number for kernel {self.name!r}, "
                    f"got {self.gamma!r}"
                )
        if self.name == "polynomial" and (
            isinstance(self.degree, bool) or not isinstance(self.degree, (int, np.integer))
            or self.degree < 1
        ):
            raise ParameterError(f"degree must be an integer >= 1, got {self.degree!r}")
        if self.name == "polynomial" and not np.isfinite(self.coef0):
            raise ParameterError(f"coef0 must be finite, got {self.coef0!r}")

    @property
    def is_normalized(self) -> bool:
        """True when K(x, x) == 1 for every nonzero x (rbf, laplacian, cosine)."""
        return self.name in ("rbf", "laplacian", "cosine")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (see :meth:`from_dict`)."""
        return {
            "name": self.name,
            "gamma": None if self.gamma is None else float(self.gamma),
            "degree": int(self.degree),
            "coef0": float(self.coef0),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelSpec:
        """Rebuild a spec written by :meth:`to_dict`."""
        return cls(
            name=data["name"], gamma=data["gamma"], degree=int(data["degree"]),
            coef0=float(data["coef0"]),
        )

    def diagonal(self, x: np.ndarray) -> np.ndarray:
        """K(x_i, x_i) for every row, shape (n,), in x's dtype."""
        dtype = x.dtype
        if self.name in ("rbf", "laplacian"):
            return np.ones(x.shape[0], dtype=dtype)
        if self.name == "cosine":
            return (np.einsum("ij,ij->i", x, x) > 0).astype(dtype)
        sq = np.einsum("ij,ij->i", x, x)
        if self.name == "linear":
            return sq.astype(dtype, copy=False)
        g = dtype.type(self.gamma)
        return ((g * sq + dtype.type(self.coef0)) ** self.degree).astype(dtype, copy=False)

    def block(
        self,
        x: np.ndarray,
        y: np.ndarray,
        *,
        x_sq: np.ndarray | None = None,
        y_sq: np.ndarray | None = None,
    ) -> np.ndarray:
        """The kernel block K(x, y), shape (len(x), len(y)), in the common dtype.

        ``x_sq`` / ``y_sq`` (squared row norms) may be passed when already known (rbf).
        Both inputs must be C-contiguous 2-D arrays of the same float dtype.
        """
        if self.name == "laplacian":
            out = np.empty((x.shape[0], y.shape[0]), dtype=x.dtype)
            if x.shape[0] and y.shape[0]:
                _nk.laplacian_block(x, y, float(self.gamma), out)
            return out
        inner = x @ y.T
        if inner.size == 0 or self.name == "linear":
            return inner
        if self.name == "rbf":
            if x_sq is None:
                x_sq = np.einsum("ij,ij->i", x, x)
            if y_sq is None:
                y_sq = np.einsum("ij,ij->i", y, y)
            return _nk.rbf_from_inner(inner, x_sq, y_sq, float(self.gamma))
        if self.name == "polynomial":
            return _nk.polynomial_from_inner(
                inner, float(self.gamma), float(self.coef0), int(self.degree)
            )
        return _nk.cosine_from_inner(inner, _inv_norms(x), _inv_norms(y))


def median_heuristic_gamma(
    x: np.ndarray, kernel: str, rng: np.random.Generator
) -> float:
    """Default gamma for a kernel on the sample ``x``.

    rbf: 1 / median of the squared pairwise distances; laplacian: 1 / median of the
    pairwise L1 distances (both on at most 1000 rows drawn with ``rng``); polynomial:
    1 / n_features. Falls back to 1.0 when the median is 0 (all rows equal).
    """
    if kernel == "polynomial":
        return 1.0 / x.shape[1]
    if x.shape[0] > _MEDIAN_SAMPLE:
        x = x[np.sort(rng.choice(x.shape[0], _MEDIAN_SAMPLE, replace=False))]
    x64 = np.asarray(x, dtype=np.float64)
    iu = np.triu_indices(x64.shape[0], k=1)
    if kernel == "laplacian":
        dist = np.abs(x64[:, None, :] - x64[None, :, :]).sum(axis=2)[iu]
    else:
        sq = np.einsum("ij,ij->i", x64, x64)
        dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x64 @ x64.T), 0.0)[iu]
    med = float(np.median(dist)) if dist.size else 0.0
    return 1.0 / med if med > 0 else 1.0


def pairwise_kernel(
    x: np.ndarray,
    y: np.ndarray | None = None,
    kernel: str = "rbf",
    *,
    gamma: float | None = None,
    degree: int = 3,
    coef0: float = 1.0,
) -> np.ndarray:
    """K(x, y) for 2-D float arrays (y defaults to x); gamma must be given where used."""
    xa = np.ascontiguousarray(x)
    if xa.dtype not in (np.float32, np.float64):
        xa = xa.astype(np.float64)
    ya = xa if y is None else np.ascontiguousarray(y, dtype=xa.dtype)
    return KernelSpec(kernel, gamma, degree, coef0).block(xa, ya)
