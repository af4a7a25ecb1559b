"""The pickle-free, versioned state of :class:`~streamkm.cluster.MiniBatchKernelKMeans`:
plain arrays plus JSON-able metadata, written by ``get_state`` and read back by
``from_state`` (bit-identical predictions and training, random generator included)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streamkm._core.rng_state import rng_from_json_state, rng_state_to_json
from streamkm._version import __version__
from streamkm.cluster._centers import ExplicitCenters, SupportCenters
from streamkm.cluster._kernel_refresh import RowReservoir
from streamkm.cluster._monitor import ConvergenceMonitor
from streamkm.cluster._novelty import SCORE_PREFIX, NoveltyBuffers
from streamkm.exceptions import StateError
from streamkm.kernels import KernelSpec
from streamkm.kernels._decision import AutoDecision

__all__ = ["STATE_FORMAT", "STATE_VERSION", "model_state", "model_from_state"]

STATE_FORMAT = "streamkm.MiniBatchKernelKMeans"
STATE_VERSION = 1


def model_state(model: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A fitted ``MiniBatchKernelKMeans``'s state as copied arrays and metadata."""
    model._check_fitted()
    params = model.get_params()
    if not isinstance(params["random_state"], (int, type(None))):
        params["random_state"] = None
    policy = model._drift_policy()
    params["drift"] = None if policy is None else policy.to_dict()
    arrays = dict(model._centers.to_arrays())
    arrays["counts"] = model.counts_
    kernel_arrays, kernel_fitted = model._kernel_spec.to_arrays()
    arrays.update(kernel_arrays)
    meta = {
        "format": STATE_FORMAT,
        "format_version": STATE_VERSION,
        "streamkm_version": __version__,
        "params": params,
        "n_features_in": int(model.n_features_in_),
        "dtype": np.dtype(model._dtype).name,
        "kernel_spec": model._kernel_spec.to_dict(),
        "kernel_fitted": kernel_fitted,
        "auto_decision": model.auto_decision_,
        "gamma_": model.gamma_,
        "n_steps": int(model.n_steps_),
        "batch_objective": None if math.isnan(model.batch_objective_) else model.batch_objective_,
        "improvement": model.improvement_,
        "init_objective": float(model.init_objective_),
        "next_tag": int(getattr(model._centers, "next_tag", 0)),
        "monitor": model._monitor.to_dict(),
        "raw_n_features": getattr(model, "_raw_n_features", None),
        "rng": rng_state_to_json(model._rng),
        "feature_names_in": (None if not hasattr(model, "feature_names_in_")
                             else [str(n) for n in model.feature_names_in_]),
    }
    drift = model.__dict__.get("_drift")
    if drift is not None:
        drift_arrays, meta["drift"] = drift.to_state()
        arrays.update(drift_arrays)
    reservoir = model.__dict__.get("_reservoir")
    if reservoir is not None:
        reservoir_arrays, meta["kernel_reservoir"] = reservoir.to_state()
        arrays.update(reservoir_arrays)
    novelty_arrays, meta["novelty"] = model._novelty_buffers().to_state()
    arrays.update(novelty_arrays)
    score_arrays, meta["novelty_scores"] = model._novelty_score_buffers().to_state()
    arrays.update(score_arrays)
    return {name: np.array(value, copy=True) for name, value in arrays.items()}, meta


def model_from_state(cls: type, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Any:
    """A ``cls`` (``MiniBatchKernelKMeans`` or a subclass) rebuilt from :func:`model_state`
    output.

    Raises
    ------
    StateError
        Another format or format version, or a malformed or inconsistent state.
    """
    if meta.get("format") != STATE_FORMAT:
        raise StateError(f"not a {STATE_FORMAT} state: format={meta.get('format')!r}")
    if meta.get("format_version") != STATE_VERSION:
        raise StateError(
            f"unsupported state format_version={meta.get('format_version')!r} "
            f"(this streamkm reads {STATE_VERSION})"
        )
    try:
        model = cls(**meta["params"])
        model._validate_params()
        model.n_features_in_ = int(meta["n_features_in"])
        model._dtype = np.dtype(meta["dtype"])
        model._kernel_spec = KernelSpec.from_dict(
            meta["kernel_spec"], arrays, meta.get("kernel_fitted"))
        model.gamma_ = meta["gamma_"]
        decision = meta.get("auto_decision")
        model.auto_decision_ = (None if decision is None
                                else AutoDecision.from_dict(decision).to_dict())
        if model._kernel_spec.explicit_features:
            model._centers = ExplicitCenters.from_arrays(arrays)
        else:
            model._centers = SupportCenters.from_arrays(
                model._kernel_spec, int(model.tau), arrays, int(meta["next_tag"])
            )
        if meta.get("raw_n_features") is not None:
            model._raw_n_features = int(meta["raw_n_features"])
        model.counts_ = arrays["counts"].astype(np.int64)
        model.n_steps_ = int(meta["n_steps"])
        bo = meta["batch_objective"]
        model.batch_objective_ = math.nan if bo is None else float(bo)
        model.improvement_ = meta["improvement"]
        model.init_objective_ = float(meta["init_objective"])
        model._monitor = ConvergenceMonitor(
            float(model.tol), int(model.patience), float(model.wake_margin),
            float(model.smoothing),
        )
        model._monitor.load_dict(meta["monitor"])
        model._rng = rng_from_json_state(meta["rng"])
        model._remember_frozen_params()
        if meta.get("feature_names_in") is not None:
            model.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
        if meta.get("drift") is not None:
            from streamkm.drift.controller import DriftController

            model._drift = DriftController.from_state(arrays, meta["drift"], model._dtype)
        if meta.get("kernel_reservoir") is not None:
            model._reservoir = RowReservoir.from_state(arrays, meta["kernel_reservoir"],
                                                       model._dtype)
        if meta.get("novelty") is not None:  # states written before novelty: empty buffers
            model._novelty = NoveltyBuffers.from_state(arrays, meta["novelty"])
        if meta.get("novelty_scores") is not None:  # states without them: empty buffers
            model._novelty_scores = NoveltyBuffers.from_state(
                arrays, meta["novelty_scores"], SCORE_PREFIX)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, StateError):
            raise
        raise StateError(f"malformed {STATE_FORMAT} state: {exc!r}") from exc
    k = model._centers.n_clusters
    if model.counts_.shape != (k,) or (
        "_drift" not in model.__dict__ and k != model.n_clusters
    ):
        raise StateError(
            f"counts has shape {model.counts_.shape!r} for {k} centers, expected "
            f"({model.n_clusters},) without drift handling"
        )
    if "_drift" in model.__dict__ and model._drift.cluster_ids.shape != (k,):
        raise StateError(
            f"drift state has {model._drift.cluster_ids.shape[0]} cluster ids for {k} centers"
        )
    return model
