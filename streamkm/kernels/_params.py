"""What the kernel parameters of the kernel k-means estimators accept, in plain Python
(:mod:`streamkm._core.param_rules`): ``n_clusters``, ``kernel`` (a registered kernel, one
registered after import counts), ``gamma``, ``kernel_params``, ``degree`` and ``coef0``.

Read without importing any kernel (the built-in ones are known by name,
:mod:`streamkm.kernels._builtin`); each estimator adds its defaults.
"""

from __future__ import annotations

import functools
from typing import Any

from streamkm._core.param_rules import NONE, InstanceOf, Interval, Options, Rule
from streamkm.kernels._builtin import GAMMA_RULES
from streamkm.kernels._registry import kernel_names

__all__ = ["KERNEL_RULES", "KernelNames"]


class KernelNames(Options):
    """The names of the kernels registered now (built-in ones included)."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def options(self) -> set[str]:
        return set(kernel_names())

    def __repr__(self) -> str:
        return "KernelNames()"

    def to_sklearn(self) -> Any:
        return _registered_kernel_class()()


@functools.cache
def _registered_kernel_class() -> type:
    """scikit-learn's ``StrOptions`` over the kernels registered when it is asked."""
    from sklearn.utils._param_validation import StrOptions

    class RegisteredKernel(StrOptions):
        """The names of the kernels registered now (a kernel registered after import
        counts)."""

        def __init__(self) -> None:
            super().__init__(set(kernel_names()))

        @property
        def options(self) -> set[str]:
            return set(kernel_names())

        @options.setter
        def options(self, value: set[str]) -> None:
            """Ignored: the registry is the one list of kernels."""

    return RegisteredKernel


#: Kernel parameter -> the rules a value must meet (any one of them).
KERNEL_RULES: dict[str, tuple[Rule, ...]] = {
    "n_clusters": (Interval("int", 1, None, "left"),),
    "kernel": (KernelNames(),),
    "gamma": (Interval("float", 0, None, "neither"), Options(GAMMA_RULES), NONE),
    "kernel_params": (InstanceOf(dict), NONE),
    "degree": (Interval("int", 1, None, "left"),),
    "coef0": (Interval("float", None, None, "neither"),),
}
