"""What every public streamkm estimator shares with scikit-learn.

:class:`StreamkmEstimator` is a scikit-learn ``BaseEstimator`` (``get_params`` /
``set_params`` / ``clone`` / ``repr`` / tags) with declarative parameter validation: each
estimator lists its ``_parameter_constraints`` in scikit-learn's vocabulary, checked in one
place (:meth:`StreamkmEstimator._validate_params`), and input checks that set and verify
``n_features_in_`` / ``feature_names_in_`` as scikit-learn does. Every error is a
:class:`~streamkm.StreamkmError` as well as the exception scikit-learn raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import (
    InvalidParameterError,
    make_constraint,
    validate_parameter_constraints,
)
from sklearn.utils.validation import validate_data

from streamkm._core.param_rules import RANDOM_STATE_RULES, Parameter, parameter_problem
from streamkm._core.validation import check_finite
from streamkm.exceptions import InputTypeError, ParameterError, ValidationError

__all__ = ["StreamkmEstimator", "PreservesFloat32Mixin", "SparseInputMixin",
           "same_param_value", "RANDOM_STATE_CONSTRAINT"]

_FLOAT_DTYPES = (np.float64, np.float32)

#: ``random_state`` in every estimator: None, a non-negative int seed or a numpy Generator
#: (see :func:`streamkm._core.validation.check_random_state`).
RANDOM_STATE_CONSTRAINT: list[Any] = [rule.to_sklearn() for rule in RANDOM_STATE_RULES]


class SparseInputMixin:
    """Tags an estimator that takes scipy sparse input (put it first among the bases)."""

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.sparse = True
        return tags


class PreservesFloat32Mixin:
    """Tags a transformer whose ``transform`` keeps float32 input in float32 (put it first
    among the bases, before ``TransformerMixin``)."""

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class StreamkmEstimator(BaseEstimator):
    """Base class of the public estimators: scikit-learn's contract, streamkm's errors.

    As in scikit-learn, ``__init__`` only stores its arguments under the same names;
    ``_parameter_constraints`` maps each of them to its accepted values and
    :meth:`_check_param_relations` checks what involves several parameters.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    #: The parameters as plain rules (:mod:`streamkm._core.param_rules`), when the
    #: estimator has them: its values are checked by them (``_parameter_constraints`` is
    #: then made from them, for scikit-learn's tools).
    _parameter_rules: ClassVar[dict[str, Parameter]] = {}

    def _validate_params(self) -> None:
        """Check every parameter against ``_parameter_constraints``, then their relations.

        Raises :class:`~streamkm.ParameterError` naming the parameter and its value.
        """
        for name, value in self.get_params(deep=False).items():
            if name in self._parameter_constraints:
                type(self).check_param(name, value)
        self._check_param_relations()

    @classmethod
    def check_param(cls, name: str, value: Any) -> None:
        """Check one parameter value against its ``_parameter_constraints``.

        A bool is refused unless the parameter accepts booleans (``True`` is an int to
        Python, never a number of clusters here).

        Raises
        ------
        ParameterError
            ``"The 'name' parameter of Estimator must be ... Got value instead."``
        """
        if name in cls._parameter_rules:
            problem = parameter_problem(cls.__name__, cls._parameter_rules[name], value)
            if problem is not None:
                raise ParameterError(problem)
            return
        constraints = cls._parameter_constraints[name]
        if isinstance(value, (bool, np.bool_)) and not any(
                c == "boolean" or c is bool for c in constraints):
            shown = [c for c in map(make_constraint, constraints) if not c.hidden]
            text = str(shown[0]) if len(shown) == 1 else (
                f"{', '.join(str(c) for c in shown[:-1])} or {shown[-1]}")
            raise ParameterError(f"The {name!r} parameter of {cls.__name__} must be {text}. "
                                 f"Got {value!r} instead.")
        try:
            validate_parameter_constraints({name: constraints}, {name: value},
                                           caller_name=cls.__name__)
        except InvalidParameterError as exc:
            raise ParameterError(str(exc)) from None

    def _check_param_relations(self) -> None:
        """Checks that involve several parameters (none by default)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> StreamkmEstimator:
        """An unfitted estimator from a mapping of parameters, validated.

        This is the one source of truth for what the parameters accept: configuration
        layers call it instead of re-stating the rules.

        Raises
        ------
        ParameterError
            An unknown parameter name (all of them named), or a bad value.
        """
        valid = set(cls._get_param_names())
        unknown = sorted(set(params) - valid)
        if unknown:
            raise ParameterError(
                f"unknown parameter(s) {unknown!r} for {cls.__name__}; "
                f"valid parameters are {sorted(valid)}"
            )
        estimator = cls(**params)
        estimator._validate_params()
        return estimator

    def set_params(self, **params: Any) -> StreamkmEstimator:
        """Set parameters by name; an unknown name raises :class:`~streamkm.ParameterError`.

        Values are checked when the estimator is next fitted, as in scikit-learn.
        """
        try:
            return super().set_params(**params)
        except ValueError as exc:
            if isinstance(exc, ParameterError):
                raise
            raise ParameterError(str(exc)) from None

    def _validate_X(self, X: Any, *, reset: bool, accept_sparse: bool = False,
                    name: str = "X") -> Any:
        """``X`` as a C-contiguous float32/float64 array (CSR if sparse is accepted).

        ``reset=True`` (fitting from scratch) records ``n_features_in_`` and
        ``feature_names_in_``; ``reset=False`` checks them, warning or raising exactly as
        scikit-learn does (e.g. a DataFrame with renamed columns raises). float32 stays
        float32, other numeric input becomes float64. Errors are
        :class:`~streamkm.ValidationError` (or :class:`~streamkm.InputTypeError`) with
        scikit-learn's wording; NaN / infinity is reported with its position.
        """
        if (not reset and type(X) is np.ndarray and X.ndim == 2 and X.shape[0] > 0
                and X.dtype in _FLOAT_DTYPES and X.flags.c_contiguous
                and X.shape[1] == getattr(self, "n_features_in_", -1)
                and not hasattr(self, "feature_names_in_")):
            # the streaming hot path: an array the fitted model can take as it is
            check_finite(X, name)
            return X
        try:
            x = validate_data(
                self, X, reset=reset, accept_sparse="csr" if accept_sparse else False,
                dtype=_FLOAT_DTYPES, order="C", ensure_all_finite=False,
            )
        except TypeError as exc:
            raise InputTypeError(str(exc)) from exc
        except ValueError as exc:
            if isinstance(exc, ValidationError):
                raise
            message = str(exc)
            if "Reshape your data" in message:  # scikit-learn's message quotes all of X
                message = (
                    f"{name} must be 2-D (n_samples, n_features), got shape "
                    f"{np.shape(X)!r}. Reshape your data either using array.reshape(-1, 1) "
                    "if your data has a single feature or array.reshape(1, -1) if it "
                    "contains a single sample."
                )
            raise ValidationError(message) from exc
        if hasattr(x, "tocsr"):
            from streamkm._core.sparse_input import check_sketch_input

            return check_sketch_input(x, name=name)
        check_finite(x, name)
        return x


def same_param_value(a: Any, b: Any) -> bool:
    """Whether two parameter values are the same (equal and of the same type, or identical)."""
    if a is b:
        return True
    try:
        return bool(a == b) and type(a) is type(b)
    except (TypeError, ValueError):
        return False
