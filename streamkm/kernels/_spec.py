"""``KernelSpec``: a registered kernel with resolved parameters (and fitted state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkm.exceptions import parameter_error
from streamkm.kernels._registry import KernelType, get_kernel_type, kernel_options_problem

__all__ = ["KernelSpec", "check_kernel_options"]


def check_kernel_options(name: str, options: dict[str, Any] | None) -> None:
    """Raise :class:`ParameterError` if ``options`` names an option the registered kernel
    ``name`` does not have."""
    problem = kernel_options_problem(name, options)
    if problem is not None:
        raise parameter_error(problem)


@dataclass(frozen=True)
class KernelSpec:
    """A kernel with resolved parameters.

    Parameters
    ----------
    name : str
        A registered kernel (:func:`streamkm.kernels.kernel_names`).
    gamma : float or None
        Required (positive) for kernels with the ``needs_gamma`` trait; ignored otherwise.
    degree : int
        Degree of the polynomial kernel.
    coef0 : float
        Constant term of the polynomial kernel.
    options : dict
        Kernel-specific options (e.g. ``n_neighbors`` of the graph kernels); unknown names
        are errors, missing ones take the kernel's defaults.
    fitted : object
        Fitted state of a ``fitted`` kernel (graph kernels), built by :meth:`fit`.
    """

    name: str
    gamma: float | None = None
    degree: int = 3
    coef0: float = 1.0
    options: dict[str, Any] = field(default_factory=dict, compare=False)
    fitted: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        kind = self.kind
        if kind.needs_gamma:
            if (self.gamma is None or isinstance(self.gamma, (str, bool))
                    or not np.isfinite(self.gamma) or self.gamma <= 0):
                raise parameter_error(
                    f"gamma must be a positive finite number for kernel {self.name!r}, "
                    f"got {self.gamma!r}"
                )
        check_kernel_options(self.name, self.options)
        merged = {**kind.option_defaults, **self.options}
        object.__setattr__(self, "options", merged)
        kind.check(self)

    # ------------------------------------------------------------------ traits
    @property
    def kind(self) -> KernelType:
        """The registered :class:`KernelType`."""
        return get_kernel_type(self.name)

    @property
    def explicit_features(self) -> bool:
        """Centers can be explicit vectors over the prepared rows (see the registry)."""
        return self.kind.explicit_features

    @property
    def needs_fit(self) -> bool:
        """A fitted kernel that has not been fitted yet."""
        return self.kind.fitted and self.fitted is None

    # ------------------------------------------------------------------ data
    def fit(self, landmarks: np.ndarray, n_clusters: int | None = None) -> KernelSpec:
        """A copy fitted on ``landmarks`` (fitted kernels); other kernels return self."""
        if not self.kind.fitted:
            return self
        return KernelSpec(self.name, self.gamma, self.degree, self.coef0, dict(self.options),
                          self.kind.fit(self, np.ascontiguousarray(landmarks), n_clusters))

    def prepare(self, x: np.ndarray) -> np.ndarray:
        """Input rows -> the rows :meth:`block` works on (identity except graph kernels)."""
        if self.needs_fit:
            raise parameter_error(f"kernel {self.name!r} must be fitted on landmark rows first")
        return self.kind.prepare(self, x)

    def diagonal(self, x: np.ndarray) -> np.ndarray:
        """K(x_i, x_i) for every prepared row, shape (n,), in x's dtype."""
        return self.kind.diagonal(self, x)

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
        Both inputs must be C-contiguous 2-D prepared arrays of the same float dtype.
        """
        return self.kind.block(self, x, y, x_sq, y_sq)

    # ------------------------------------------------------------------ state
    def to_dict(self) -> dict[str, Any]:
        """JSON-able parameters (see :meth:`from_dict`); fitted state: :meth:`to_arrays`."""
        return {
            "name": self.name,
            "gamma": None if self.gamma is None else float(self.gamma),
            "degree": int(self.degree),
            "coef0": float(self.coef0),
            "options": dict(self.options),
        }

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The fitted state as arrays and JSON-able metadata (empty when not fitted)."""
        if self.fitted is None:
            return {}, {}
        return self.kind.fitted_to_arrays(self.fitted)

    @classmethod
    def from_dict(cls, data: dict[str, Any], arrays: dict[str, np.ndarray] | None = None,
                  fitted_meta: dict[str, Any] | None = None) -> KernelSpec:
        """Rebuild a spec written by :meth:`to_dict` (and :meth:`to_arrays`)."""
        spec = cls(
            name=data["name"], gamma=data["gamma"], degree=int(data["degree"]),
            coef0=float(data["coef0"]), options=dict(data.get("options", {})),
        )
        if spec.kind.fitted and fitted_meta:
            fitted = spec.kind.fitted_from_arrays(arrays or {}, fitted_meta)
            spec = cls(spec.name, spec.gamma, spec.degree, spec.coef0, dict(spec.options),
                       fitted)
        return spec
