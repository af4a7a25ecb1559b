"""The estimator's parameter table (``streamkm/cluster/_params.py``): the same names and
defaults as the signature, and for every value the verdict and the message scikit-learn's
own validation gives with the constraints made from it; the built-in kernels as the
registry's table lists them."""

from __future__ import annotations

import importlib
import inspect
import math
from typing import Any

import numpy as np
import pytest
from sklearn.utils._param_validation import (
    InvalidParameterError,
    make_constraint,
    validate_parameter_constraints,
)

from streamkm import MiniBatchKernelKMeans
from streamkm._core.param_rules import Interval, Options, parameter_problem
from streamkm.cluster._params import ESTIMATOR, PARAMETER_RULES, PARAMETERS, relations_problem
from streamkm.drift import DriftPolicy
from streamkm.exceptions import ParameterError
from streamkm.kernels import get_kernel_type, kernel_names
from streamkm.kernels._builtin import BUILTIN_KERNELS, OPTION_DEFAULTS

pytestmark = pytest.mark.unit

VALUES: list[Any] = [
    True, False, np.bool_(True), None, 0, 1, -1, 3, 2**40, 0.0, 0.5, 1.0, 1.5, -0.25,
    math.nan, math.inf, np.float32(0.25), np.int64(7), "sqrt", "count", "farthest",
    "k-means++", "auto", "median", "eigengap", "heat", "rbf", "no-such-option", "",
    {}, {"n_neighbors": 7}, [1], (2,), DriftPolicy(), np.random.default_rng(0), object(),
]


def _sklearn_problem(name: str, value: Any) -> str | None:
    """scikit-learn's verdict on ``value`` under the estimator's ``_parameter_constraints``
    (a bool refused unless booleans are accepted, as the estimator always did)."""
    constraints = MiniBatchKernelKMeans._parameter_constraints[name]
    if isinstance(value, (bool, np.bool_)) and not any(
            c == "boolean" or c is bool for c in constraints):
        shown = [str(make_constraint(c)) for c in constraints]
        text = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        return f"The {name!r} parameter of {ESTIMATOR} must be {text}. Got {value!r} instead."
    try:
        validate_parameter_constraints({name: constraints}, {name: value},
                                       caller_name=ESTIMATOR)
    except InvalidParameterError as exc:
        return str(exc)
    return None


def test_the_table_is_the_signature_in_order_with_its_defaults() -> None:
    signature = inspect.signature(MiniBatchKernelKMeans.__init__).parameters
    assert [p.name for p in PARAMETERS] == [n for n in signature if n != "self"]
    for p in PARAMETERS:
        assert signature[p.name].default == p.default, p.name
        assert parameter_problem(ESTIMATOR, p, p.default) is None, p.name
    assert set(MiniBatchKernelKMeans._parameter_constraints) == set(PARAMETER_RULES)


@pytest.mark.parametrize("name", list(PARAMETER_RULES))
def test_every_value_gets_the_verdict_and_message_of_scikit_learn(name: str) -> None:
    for value in VALUES:
        expected = _sklearn_problem(name, value)
        assert parameter_problem(ESTIMATOR, PARAMETER_RULES[name], value) == expected, value
        if expected is None:
            MiniBatchKernelKMeans.check_param(name, value)
        else:
            with pytest.raises(ParameterError) as error:
                MiniBatchKernelKMeans.check_param(name, value)
            assert str(error.value) == expected


def test_rules_read_as_scikit_learn_words_them() -> None:
    assert str(Interval("int", 1, None, "left")) == "an int in the range [1, inf)"
    assert str(Interval("float", 0, 1, "right")) == "a float in the range (0.0, 1.0]"
    assert str(Interval("float", None, None, "neither")) == "a float in the range (-inf, inf)"
    assert str(Options({"sqrt"})) == "a str among {'sqrt'}"
    message = parameter_problem(ESTIMATOR, PARAMETER_RULES["tau"], 0)
    assert message == ("The 'tau' parameter of MiniBatchKernelKMeans must be an int in the "
                       "range [1, inf). Got 0 instead.")


def test_relations_are_the_estimators_checks_across_parameters() -> None:
    assert relations_problem({"kernel": "heat", "kernel_params": {"n_neighbors": 5}}) is None
    problem = relations_problem({"kernel": "rbf", "kernel_params": {"n_neighbors": 5}})
    assert problem == "kernel 'rbf' accepts kernel_params [], got unknown ['n_neighbors']"
    with pytest.raises(ParameterError, match=r"got unknown \['n_neighbors'\]"):
        MiniBatchKernelKMeans.from_params({"kernel_params": {"n_neighbors": 5}})
    problem = relations_problem({"n_clusters": 9, "drift": {"k_max": 4}})
    assert problem == "n_clusters=9 must lie in [drift.k_min, drift.k_max] = [1, 4]"
    with pytest.raises(ParameterError) as error:
        MiniBatchKernelKMeans.from_params({"n_clusters": 9, "drift": {"k_max": 4}})
    assert str(error.value) == problem


def test_built_in_kernels_are_known_by_name_and_options_before_import() -> None:
    assert kernel_names()[:len(BUILTIN_KERNELS)] == tuple(BUILTIN_KERNELS)
    for name, module in BUILTIN_KERNELS.items():
        kind = get_kernel_type(name)
        assert type(kind).__module__ == module == importlib.import_module(module).__name__
        assert kind.name == name
        assert kind.option_defaults == OPTION_DEFAULTS.get(name, {})
    assert set(OPTION_DEFAULTS) <= set(BUILTIN_KERNELS)
