"""The parameters of :class:`streamkm.MiniBatchKernelKMeans`: names, defaults and what each
accepts, in plain Python (:mod:`streamkm._core.param_rules`).

The one definition of each parameter: the estimator checks its values with these rules and
makes scikit-learn's ``_parameter_constraints`` from them; the service's ``[model]`` section
(:mod:`streamkm.config.sections`) is built from this table, so that checking a configuration
loads neither scikit-learn nor numba. A new parameter is one entry here (in the order of the
estimator's signature, with its default) plus the estimator's keyword argument.
"""

from __future__ import annotations

import math

from typing import Any

from streamkm._core.param_rules import (
    BOOLEAN,
    NONE,
    RANDOM_STATE_RULES,
    InstanceOf,
    Interval,
    Options,
    Parameter,
)
from streamkm.drift.policy import DriftPolicy
from streamkm.kernels._params import KERNEL_RULES
from streamkm.kernels._registry import kernel_options_problem

__all__ = ["ESTIMATOR", "PARAMETERS", "PARAMETER_RULES", "relations_problem"]

#: The estimator the parameters belong to (named in messages).
ESTIMATOR = "MiniBatchKernelKMeans"

_AT_LEAST_1 = (Interval("int", 1, None, "left"),)

#: Every parameter, in the order of the estimator's signature.
PARAMETERS: tuple[Parameter, ...] = (
    Parameter("n_clusters", 8, KERNEL_RULES["n_clusters"]),
    Parameter("kernel", "rbf", KERNEL_RULES["kernel"]),
    Parameter("gamma", "auto", KERNEL_RULES["gamma"]),
    Parameter("degree", 3, KERNEL_RULES["degree"]),
    Parameter("coef0", 1.0, KERNEL_RULES["coef0"]),
    Parameter("batch_size", 1024, _AT_LEAST_1),
    Parameter("tau", 200, _AT_LEAST_1),
    Parameter("learning_rate", "sqrt", (Options({"sqrt", "count"}),)),
    Parameter("tol", 0.005, (Interval("float", 0, None, "left"),)),
    Parameter("patience", 10, _AT_LEAST_1),
    Parameter("max_iter", 300, _AT_LEAST_1),
    Parameter("init", "k-means++", (Options({"k-means++", "farthest"}),)),
    Parameter("n_init", 3, _AT_LEAST_1),
    Parameter("init_size", None, (*_AT_LEAST_1, NONE)),
    Parameter("n_warmup", 100, (Interval("int", 0, None, "left"),)),
    Parameter("wake_margin", 0.1, (Interval("float", 0, None, "left"),)),
    Parameter("smoothing", 0.2, (Interval("float", 0, 1, "right"),)),
    Parameter("random_state", None, RANDOM_STATE_RULES),
    Parameter("drift", None, (BOOLEAN, InstanceOf(dict), InstanceOf(DriftPolicy), NONE)),
    Parameter("kernel_params", None, KERNEL_RULES["kernel_params"]),
    Parameter("outlier_alpha", None, (Interval("float", 0, 1, "neither"), NONE)),
    Parameter("outliers", "exclude", (Options({"exclude", "learn"}),)),
    Parameter("novelty_window", 256, _AT_LEAST_1),
    Parameter("label_outliers", False, (BOOLEAN,)),
)

#: The table by name.
PARAMETER_RULES: dict[str, Parameter] = {p.name: p for p in PARAMETERS}


def relations_problem(params: dict[str, Any]) -> str | None:
    """What is wrong across parameters (``kernel_params`` the kernel does not have; a
    ``drift`` policy whose [k_min, k_max] excludes ``n_clusters``; an ``outlier_alpha``
    below the smallest novelty score a ``novelty_window`` allows, so that nothing could
    ever be flagged), or None.

    ``params`` holds valid values of (some of) the parameters; missing ones take their
    defaults.
    """
    value = {p.name: params.get(p.name, p.default) for p in PARAMETERS}
    problem = kernel_options_problem(value["kernel"], value["kernel_params"])
    if problem is not None:
        return problem
    problem = _outlier_level_problem(value["outlier_alpha"], int(value["novelty_window"]))
    if problem is not None:
        return problem
    policy = DriftPolicy.from_param(value["drift"])
    if policy is not None:
        return policy.problem_against(int(value["n_clusters"]))
    return None


def _outlier_level_problem(alpha: float | None, window: int) -> str | None:
    """A record is flagged when its novelty is at most ``alpha``; against a cluster's buffer
    of ``window`` distances the smallest novelty is ``1 / (window + 1)``."""
    if alpha is None or alpha * (window + 1) >= 1.0:
        return None
    needed = math.ceil(1.0 / alpha) - 1
    return (f"outlier_alpha={alpha!r} can never flag a record with novelty_window={window!r}: "
            f"the smallest novelty score is 1 / (novelty_window + 1) = {1.0 / (window + 1):.4g}; "
            f"set novelty_window to at least {needed} or outlier_alpha to at least "
            f"{1.0 / (window + 1):.4g}")
