"""The kernel parameters of the kernel k-means estimators, in scikit-learn's constraint
vocabulary (checked by :meth:`streamkm._core.estimator.StreamkmEstimator._validate_params`)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

from sklearn.utils._param_validation import Interval, StrOptions

from streamkm.kernels import GAMMA_RULES, kernel_names

__all__ = ["KERNEL_CONSTRAINTS"]


class _RegisteredKernel(StrOptions):
    """The names of the kernels registered now (a kernel registered after import counts)."""

    def __init__(self) -> None:
        super().__init__(set(kernel_names()))

    @property
    def options(self) -> set[str]:
        return set(kernel_names())

    @options.setter
    def options(self, value: set[str]) -> None:
        """Ignored: the registry is the one list of kernels."""


#: The kernel parameters (and ``n_clusters``) of the kernel k-means estimators. Kernel
#: names come from the registry (:func:`~streamkm.kernels.kernel_names`); ``gamma="auto"`` (like None): see
#: :func:`streamkm.kernels.build_kernel`.
KERNEL_CONSTRAINTS: dict[str, list[Any]] = {
    "n_clusters": [Interval(Integral, 1, None, closed="left")],
    "kernel": [_RegisteredKernel()],
    "gamma": [Interval(Real, 0, None, closed="neither"), StrOptions(set(GAMMA_RULES)), None],
    "kernel_params": [dict, None],
    "degree": [Interval(Integral, 1, None, closed="left")],
    "coef0": [Interval(Real, None, None, closed="neither")],
}
