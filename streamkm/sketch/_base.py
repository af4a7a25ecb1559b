"""What every sketcher shares: fit/transform plumbing and the pickle-free state format."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context

from streamkm._core.estimator import PreservesFloat32Mixin, SparseInputMixin, StreamkmEstimator
from streamkm._core.sparse_input import SketchInput
from streamkm.exceptions import NotFittedError, StateError

__all__ = ["BaseSketcher", "STATE_FORMAT_VERSION"]

#: Version of the ``get_state`` / ``from_state`` layout; bumped on incompatible changes.
STATE_FORMAT_VERSION = 1

_FLOAT_DTYPES = {"float32": np.float32, "float64": np.float64}


class BaseSketcher(SparseInputMixin, PreservesFloat32Mixin, ClassNamePrefixFeaturesOutMixin,
                   TransformerMixin, StreamkmEstimator):
    """Base of the sketchers: validation, ``fit_transform`` and state (de)serialisation.

    A sketcher is a scikit-learn transformer (dense or CSR input, float32 kept). Subclasses
    define ``_parameter_constraints``, ``_check_params_for`` (the checks that need the
    number of features), ``_fit``, ``_transform``, ``_fitted_arrays`` and
    ``_restore_fitted``.
    """

    n_features_in_: int
    n_components_: int

    # -- parameters -------------------------------------------------------------------
    def _check_params_for(self, n_features: int) -> None:
        """Parameter checks that depend on the number of input features (none by default)."""

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    # -- fitting ----------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> BaseSketcher:
        """Learn the sketch from ``X`` (dense array or scipy CSR matrix).

        Parameters
        ----------
        X : array-like or scipy sparse matrix of shape (n_samples, n_features)
            Training rows. Sparse input is never densified.
        y : ignored

        Returns
        -------
        self
        """
        x = self._validate_X(X, reset=True, accept_sparse=True)
        self._check_params_for(x.shape[1])
        self._fit(x)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Map ``X`` to the sketch space.

        Parameters
        ----------
        X : array-like or scipy sparse matrix of shape (n_samples, n_features_in_)

        Returns
        -------
        numpy.ndarray of shape (n_samples, n_components_)
            Dense sketch, float32 for float32 input, float64 otherwise.
        """
        self._check_fitted()
        return self._transform(self._validate_X(X, reset=False, accept_sparse=True))

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X)`` then ``transform(X)``, validating ``X`` once."""
        x = self._validate_X(X, reset=True, accept_sparse=True)
        self._check_params_for(x.shape[1])
        self._fit(x)
        return self._transform(x)

    def _fit(self, x: SketchInput) -> None:
        raise NotImplementedError

    def _transform(self, x: SketchInput) -> np.ndarray:
        raise NotImplementedError

    def _is_fitted(self) -> bool:
        return hasattr(self, "n_components_")

    def __sklearn_is_fitted__(self) -> bool:
        return self._is_fitted()

    def _check_fitted(self) -> None:
        if not self._is_fitted():
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call fit before transform"
            )

    # -- state ------------------------------------------------------------------------
    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _fitted_meta(self) -> dict[str, Any]:
        return {}

    def _restore_fitted(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        raise NotImplementedError

    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The sketcher as named numpy arrays plus JSON-able metadata (no pickle).

        A numpy Generator given as ``random_state`` is not serialised (saved as None): the
        fitted sketch does not need it, and the caller owns that RNG's state.

        Returns
        -------
        arrays : dict of str to numpy.ndarray
            The learned arrays (empty if not fitted).
        meta : dict
            Sketcher type, format version, parameters and learned scalars.
        """
        params = self.get_params()
        rs = params.get("random_state")
        if "random_state" in params and not (rs is None or isinstance(rs, numbers.Integral)):
            params["random_state"] = None
        elif isinstance(rs, numbers.Integral):
            params["random_state"] = int(rs)
        meta: dict[str, Any] = {
            "sketcher": type(self).__name__,
            "format_version": STATE_FORMAT_VERSION,
            "params": params,
            "fitted": self._is_fitted(),
        }
        arrays: dict[str, np.ndarray] = {}
        if self._is_fitted():
            meta["n_features_in"] = int(self.n_features_in_)
            meta["n_components"] = int(self.n_components_)
            meta.update(self._fitted_meta())
            arrays = {name: np.array(a, copy=True) for name, a in self._fitted_arrays().items()}
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> BaseSketcher:
        """Rebuild a sketcher saved by :meth:`get_state`; its transforms are bit-identical.

        Raises
        ------
        StateError
            Wrong sketcher type, unsupported format version, or missing/inconsistent arrays.
        """
        if not isinstance(meta, dict):
            raise StateError(f"sketcher meta must be a dict, got {type(meta).__name__!r}")
        if meta.get("sketcher") != cls.__name__:
            raise StateError(
                f"state is for sketcher {meta.get('sketcher')!r}, not {cls.__name__!r}"
            )
        if meta.get("format_version") != STATE_FORMAT_VERSION:
            raise StateError(
                f"unsupported sketcher state format_version {meta.get('format_version')!r} "
                f"(this streamkm reads {STATE_FORMAT_VERSION})"
            )
        params = meta.get("params")
        if not isinstance(params, dict) or set(params) != set(cls._get_param_names()):
            raise StateError(f"sketcher state has bad params {params!r}")
        obj = cls(**params)
        if meta.get("fitted"):
            try:
                obj.n_features_in_ = int(meta["n_features_in"])
                obj.n_components_ = int(meta["n_components"])
                obj._restore_fitted(dict(arrays), meta)
            except (KeyError, TypeError, ValueError) as exc:
                if isinstance(exc, StateError):
                    raise
                raise StateError(f"malformed {cls.__name__} state: {exc!r}") from exc
        return obj


def require_array(
    arrays: dict[str, np.ndarray], name: str, shape: tuple[int, ...], dtypes: tuple[type, ...]
) -> np.ndarray:
    """``arrays[name]`` checked for shape and dtype, else a StateError quoting both."""
    if name not in arrays:
        raise StateError(f"sketcher state lacks array {name!r}")
    arr = np.asarray(arrays[name])
    if arr.shape != shape or not any(arr.dtype == d for d in dtypes):
        raise StateError(
            f"state array {name!r} has shape {arr.shape!r} and dtype {arr.dtype!s}, "
            f"expected shape {shape!r} and dtype in {[np.dtype(d).name for d in dtypes]}"
        )
    return np.array(arr, copy=True)


def float_dtype_from_name(name: Any) -> type:
    """float32/float64 from its name in a state, else a StateError."""
    if name not in _FLOAT_DTYPES:
        raise StateError(f"sketcher state has unsupported dtype {name!r}")
    return _FLOAT_DTYPES[name]
