"""The kernel registry: one registered :class:`KernelType` per kernel name.

A kernel is one object that says what it computes (``block``, ``diagonal``) and what it is
(its traits). Everything else in streamkm (the mini-batch engine, exact kernel k-means,
seeding, drift handling) asks the registry and the traits instead of testing kernel names,
so adding a kernel is one module that calls :func:`register` plus its tests.

Traits
------
normalized
    K(x, x) = 1 for every nonzero x (the feature-space norm bound gamma of seed 002 is 1).
shift_invariant
    K(x + c, y + c) = K(x, y): the kernel depends on x - y only.
needs_gamma
    The kernel has a width/scale coefficient ``gamma`` (resolved by
    :func:`streamkm.kernels.resolve_gamma`: a float, ``"auto"`` or ``"median"``).
explicit_features
    K(x, y) = <f(x), f(y)> for a feature map f that :meth:`KernelType.prepare` computes,
    so centers can be kept as explicit vectors in that space (the engine's fast path).
fitted
    The kernel is defined relative to a data set (graph kernels): it must be fitted on
    landmark rows (:meth:`KernelType.fit`) and its fitted state is part of the model state.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, ClassVar

from streamkm.exceptions import parameter_error
from streamkm.kernels._builtin import BUILTIN_KERNELS, OPTION_DEFAULTS

if TYPE_CHECKING:
    import numpy as np

__all__ = ["KernelType", "register", "get_kernel_type", "kernel_names",
           "kernel_option_defaults", "kernel_options_problem"]

_REGISTRY: dict[str, KernelType] = {}


class KernelType:
    """Base of a registered kernel. Subclasses set the class attributes and override
    :meth:`block` and :meth:`diagonal` (and :meth:`fit` / :meth:`prepare` when fitted).

    The ``params`` argument of every method is the :class:`streamkm.kernels.KernelSpec`
    holding the resolved parameters (``gamma``, ``degree``, ``coef0``, ``options``) and, for
    a fitted kernel, its fitted state (``spec.fitted``).
    """

    name: ClassVar[str] = ""
    normalized: ClassVar[bool] = False
    shift_invariant: ClassVar[bool] = False
    needs_gamma: ClassVar[bool] = False
    explicit_features: ClassVar[bool] = False
    fitted: ClassVar[bool] = False
    #: option names accepted in ``kernel_params`` with their defaults
    option_defaults: ClassVar[dict[str, Any]] = {}

    def check(self, params: Any) -> None:
        """Raise :class:`ParameterError` for parameters this kernel cannot use."""

    def block(self, params: Any, x: np.ndarray, y: np.ndarray, x_sq: np.ndarray | None,
              y_sq: np.ndarray | None) -> np.ndarray:
        """K(x, y) for prepared rows, shape (len(x), len(y)), in x's dtype."""
        raise NotImplementedError

    def diagonal(self, params: Any, x: np.ndarray) -> np.ndarray:
        """K(x_i, x_i) for prepared rows, shape (n,), in x's dtype."""
        raise NotImplementedError

    def default_gamma(self, x: np.ndarray, rng: np.random.Generator) -> float:
        """The width heuristic used by ``gamma="median"`` (needs_gamma kernels only)."""
        raise parameter_error(f"kernel {self.name!r} has no gamma")

    def fit(self, params: Any, landmarks: np.ndarray, n_clusters: int | None = None) -> Any:
        """Fitted state on landmark rows (fitted kernels only); ``n_clusters`` may steer
        data-driven options."""
        raise parameter_error(f"kernel {self.name!r} is not fitted on data")

    def prepare(self, params: Any, x: np.ndarray) -> np.ndarray:
        """Input rows -> the rows ``block`` and ``diagonal`` work on (identity by default)."""
        return x

    def fitted_to_arrays(self, fitted: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Fitted state as arrays and JSON-able metadata (fitted kernels only)."""
        return {}, {}

    def fitted_from_arrays(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Any:
        """Inverse of :meth:`fitted_to_arrays`."""
        return None


def register(kernel: type[KernelType]) -> type[KernelType]:
    """Class decorator: add a kernel type to the registry under its ``name``."""
    if not kernel.name:
        raise parameter_error(f"{kernel.__name__} has no name")
    builtin = BUILTIN_KERNELS.get(kernel.name)
    if ((kernel.name in _REGISTRY and type(_REGISTRY[kernel.name]) is not kernel)
            or (builtin is not None and kernel.__module__ != builtin)):
        raise parameter_error(f"a kernel named {kernel.name!r} is already registered")
    _REGISTRY[kernel.name] = kernel()
    return kernel


def get_kernel_type(name: Any) -> KernelType:
    """The registered kernel called ``name`` (a built-in one is imported on first use); a
    clear error naming the known ones."""
    registered = _registered(name)
    if registered is not None:
        return registered
    if _is_builtin(name):
        importlib.import_module(BUILTIN_KERNELS[name])
        return _REGISTRY[name]
    raise parameter_error(f"kernel must be one of {kernel_names()}, got {name!r}")


def kernel_names() -> tuple[str, ...]:
    """Names of the built-in and the registered kernels, in registration order (the
    built-in ones first, imported or not)."""
    return tuple(dict.fromkeys([*BUILTIN_KERNELS, *_REGISTRY]))


def _registered(name: Any) -> KernelType | None:
    """The kernel registered as ``name``, or None (also for an unhashable ``name``)."""
    try:
        return _REGISTRY.get(name)
    except TypeError:
        return None


def _is_builtin(name: Any) -> bool:
    try:
        return name in BUILTIN_KERNELS
    except TypeError:  # unhashable
        return False


def kernel_option_defaults(name: Any) -> dict[str, Any]:
    """The ``kernel_params`` options of kernel ``name`` with their defaults, without
    importing a built-in kernel.

    Raises
    ------
    ParameterError
        ``name`` is no kernel.
    """
    registered = _registered(name)
    if registered is not None:
        return dict(registered.option_defaults)
    if _is_builtin(name):
        return dict(OPTION_DEFAULTS.get(name, {}))
    raise parameter_error(f"kernel must be one of {kernel_names()}, got {name!r}")


def kernel_options_problem(name: Any, options: dict[str, Any] | None) -> str | None:
    """What is wrong with ``options`` as the ``kernel_params`` of kernel ``name`` (an option
    it does not have), or None; ``name`` must be a kernel."""
    known = kernel_option_defaults(name)
    unknown = sorted(set(options or {}) - set(known))
    if unknown:
        return f"kernel {name!r} accepts kernel_params {sorted(known)}, got unknown {unknown!r}"
    return None
