"""The kernel parameters of the kernel k-means estimators in scikit-learn's constraint
vocabulary, made from :data:`streamkm.kernels._params.KERNEL_RULES` (checked by
:meth:`streamkm._core.estimator.StreamkmEstimator._validate_params`)."""

from __future__ import annotations

from typing import Any

from streamkm.kernels._params import KERNEL_RULES

__all__ = ["KERNEL_CONSTRAINTS"]

#: The kernel parameters (and ``n_clusters``) of the kernel k-means estimators. Kernel
#: names come from the registry (:func:`~streamkm.kernels.kernel_names`); ``gamma="auto"``
#: (like None): see :func:`streamkm.kernels.build_kernel`.
KERNEL_CONSTRAINTS: dict[str, list[Any]] = {
    name: [rule.to_sklearn() for rule in rules] for name, rules in KERNEL_RULES.items()}
