"""Truncated mini-batch kernel k-means (seed 002; DESIGN.md §2)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from streamkm._estimator import ParamsMixin
from streamkm._raw_rows import RawRows
from streamkm._rng_state import rng_from_json_state, rng_state_to_json
from streamkm._validation import (
    check_array,
    check_choice,
    check_float,
    check_int,
    check_random_state,
)
from streamkm._version import __version__
from streamkm.cluster._centers import ExplicitCenters, SupportCenters, sq_norms
from streamkm.cluster._monitor import ConvergenceMonitor
from streamkm.cluster._seeding import kernel_farthest_traversal, kernel_kmeans_plusplus
from streamkm.cluster._warmup import WarmedCandidate, warm_up
from streamkm.exceptions import NotFittedError, StateError, ValidationError
from streamkm.kernels import KERNELS, KernelSpec, median_heuristic_gamma
from streamkm.model import StepReport
from streamkm.state_io import read_npz, write_npz_atomic

__all__ = ["MiniBatchKernelKMeans", "StepReport"]

STATE_FORMAT = "streamkm.MiniBatchKernelKMeans"
STATE_VERSION = 1
_BLOCK_ELEMENTS = 1 << 22  # kernel-block entries per chunk in transform / predict


class MiniBatchKernelKMeans(ParamsMixin):
    """Mini-batch kernel k-means with sliding-window truncated centers.

    Each center is a convex combination of recent data rows in the kernel's feature space
    (the linear kernel keeps explicit centroids instead). A step on a batch B assigns its
    rows to the nearest centers, then moves each center toward the mean of its rows,
    C_j <- (1 - alpha_j) C_j + alpha_j cm(B_j), and truncates the center's support to the
    newest batches holding at most ``tau`` rows. The cost of a step does not depend on how
    much of the stream has been seen.

    Parameters
    ----------
    n_clusters : int
        Number of clusters k.
    kernel : {"rbf", "laplacian", "polynomial", "cosine", "linear"}, default="rbf"
        The kernel K(x, y) (see :class:`streamkm.kernels.KernelSpec`).
    gamma : float, optional
        Kernel coefficient. Default: for rbf 1 / median squared pairwise distance of the
        initialisation sample, for laplacian 1 / median L1 distance, for polynomial
        1 / n_features. Resolved value in ``gamma_``.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Constant term of the polynomial kernel.
    batch_size : int, default=1024
        Rows per mini-batch in :meth:`fit` and in the initial warm-up.
    tau : int, default=200
        Maximum support rows per center kept from past batches (the newest batch is always
        kept, even when larger).
    learning_rate : {"sqrt", "count"}, default="sqrt"
        ``"sqrt"``: alpha_j = sqrt(b_j / b) (the paper's rate, does not decay);
        ``"count"``: alpha_j = b_j / (v_j + b_j), v_j the rows seen by center j.
    tol : float, default=0.02
        A step whose relative batch improvement is below ``tol`` counts as small.
    patience : int, default=5
        Small steps in a row after which the model is converged: :meth:`fit` stops;
        streaming updates become assign-only until the objective rises (see ``wake_margin``).
    max_iter : int, default=300
        Maximum number of steps of :meth:`fit`.
    init : {"k-means++", "farthest"}, default="k-means++"
        Seeding in feature space: greedy kernel k-means++ or farthest traversal.
    n_init : int, default=3
        Candidate initialisations. Each is warmed up by full-batch kernel k-means on the
        initialisation sample (its kernel matrix computed once) and the one with the lowest
        objective on the sample is kept.
    init_size : int, optional
        Rows of the initialisation sample: in :meth:`fit` drawn from X (default
        ``min(n, 3 * batch_size)``), in the first :meth:`partial_fit` the first rows of the
        batch (default: the whole batch).
    n_warmup : int, default=100
        Maximum warm-up iterations per candidate; a candidate stops earlier once its
        assignment of the sample no longer changes.
    wake_margin : float, default=0.1
        While converged, learning resumes when the smoothed batch objective exceeds the
        converged level by this relative margin.
    smoothing : float, default=0.2
        Weight of the newest batch objective in its exponentially weighted moving average.
    random_state : int, numpy Generator or None
        Seed of every random choice (sampling, seeding). The generator's state is part of
        the saved state.
    drift : DriftPolicy, dict, bool or None, default=None
        Drift handling (``docs/drift.md``): per-cluster spread monitors, re-bisection of
        drifting clusters by kernel 2-means from RTMM pairs, Ward merges keeping the number
        of clusters within [k_min, k_max], stable cluster ids. ``True`` uses the default
        :class:`streamkm.drift.DriftPolicy`, a dict sets some of its fields. None (default)
        leaves the number of clusters fixed.

    Attributes
    ----------
    n_features_in_ : int
    n_steps_ : int
        Steps taken (each batch is one step, assign-only or not).
    converged_ : bool
    batch_objective_ : float
        f_B of the latest batch before its update.
    improvement_ : float or None
        f_B(C_i) - f_B(C_{i+1}) of the latest updating step.
    counts_ : ndarray of shape (n_clusters,), int64
        Rows assigned to each cluster by all steps (warm-up excluded).
    gamma_ : float or None
        The resolved kernel coefficient (None for cosine and linear).
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Explicit centers; linear kernel only.
    n_converged_ / n_woke_ : int
        Monitor transitions so far.
    n_clusters_ : int
        Current number of clusters (changes with drift handling only).
    cluster_ids_ : ndarray of shape (n_clusters_,), int64
        Stable id of the cluster at each position (``predict`` returns positions:
        ``cluster_ids_[predict(X)]`` are stable ids). ``arange(n_clusters)`` without drift.
    n_splits_ / n_merges_ : int
        Drift splits and merges so far (0 without drift handling).
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        kernel: str = "rbf",
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        batch_size: int = 1024,
        tau: int = 200,
        learning_rate: str = "sqrt",
        tol: float = 0.02,
        patience: int = 5,
        max_iter: int = 300,
        init: str = "k-means++",
        n_init: int = 3,
        init_size: int | None = None,
        n_warmup: int = 100,
        wake_margin: float = 0.1,
        smoothing: float = 0.2,
        random_state: int | np.random.Generator | None = None,
        drift: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.batch_size = batch_size
        self.tau = tau
        self.learning_rate = learning_rate
        self.tol = tol
        self.patience = patience
        self.max_iter = max_iter
        self.init = init
        self.n_init = n_init
        self.init_size = init_size
        self.n_warmup = n_warmup
        self.wake_margin = wake_margin
        self.smoothing = smoothing
        self.random_state = random_state
        self.drift = drift

    # ------------------------------------------------------------------ parameters
    def _validate_params(self) -> None:
        check_int(self.n_clusters, "n_clusters", low=1)
        check_choice(self.kernel, "kernel", KERNELS)
        if self.gamma is not None:
            check_float(self.gamma, "gamma", low=0.0, low_inclusive=False)
        check_int(self.degree, "degree", low=1)
        check_float(self.coef0, "coef0")
        check_int(self.batch_size, "batch_size", low=1)
        check_int(self.tau, "tau", low=1)
        check_choice(self.learning_rate, "learning_rate", ("sqrt", "count"))
        check_float(self.tol, "tol", low=0.0)
        check_int(self.patience, "patience", low=1)
        check_int(self.max_iter, "max_iter", low=1)
        check_choice(self.init, "init", ("k-means++", "farthest"))
        check_int(self.n_init, "n_init", low=1)
        if self.init_size is not None:
            check_int(self.init_size, "init_size", low=1)
        check_int(self.n_warmup, "n_warmup", low=0)
        check_float(self.wake_margin, "wake_margin", low=0.0)
        check_float(self.smoothing, "smoothing", low=0.0, high=1.0, low_inclusive=False)
        policy = self._drift_policy()
        if policy is not None:
            policy.check_against(int(self.n_clusters))

    def _drift_policy(self) -> Any:
        from streamkm.drift.policy import DriftPolicy

        return DriftPolicy.from_param(self.drift)

    def _is_fitted(self) -> bool:
        return hasattr(self, "_centers")

    def is_fitted(self) -> bool:
        """Whether the model has centers (a first batch or ``fit`` initialised it)."""
        return self._is_fitted()

    def state_parts(self) -> dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]]:
        """The fitted state by checkpoint namespace: ``{"model": self.get_state()}``."""
        return {"model": self.get_state()}

    def _check_fitted(self) -> None:
        if not self._is_fitted():
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call fit or partial_fit first"
            )

    # ------------------------------------------------------------------ initialisation
    def _reset(self) -> None:
        for name in ("_centers", "_kernel_spec", "_monitor", "_rng", "_drift"):
            self.__dict__.pop(name, None)

    def _initialize(self, sample: np.ndarray, rng: np.random.Generator,
                    raw_sample: RawRows | None = None) -> None:
        k = self.n_clusters
        if sample.shape[0] < k:
            raise ValidationError(
                f"n_samples={sample.shape[0]} should be >= n_clusters={k} to initialise"
            )
        self._rng = rng
        self.n_features_in_ = sample.shape[1]
        self._dtype = sample.dtype
        gamma = self.gamma
        if gamma is None and self.kernel in ("rbf", "laplacian", "polynomial"):
            gamma = median_heuristic_gamma(sample, self.kernel, rng)
        self.gamma_ = None if self.kernel in ("cosine", "linear") else float(gamma)
        self._kernel_spec = KernelSpec(self.kernel, self.gamma_, self.degree, float(self.coef0))

        kmat = self._kernel_spec.block(sample, sample)
        diag = self._kernel_spec.diagonal(sample)
        seeding = kernel_kmeans_plusplus if self.init == "k-means++" else kernel_farthest_traversal
        best: WarmedCandidate | None = None
        for _ in range(self.n_init):
            seeds = seeding(sample, k, self._kernel_spec, rng)
            candidate = warm_up(kmat, diag, seeds, max_steps=int(self.n_warmup))
            if best is None or candidate.objective < best.objective:
                best = candidate
        if self.kernel == "linear":
            self._centers = ExplicitCenters.from_sample_weights(sample, best.weights, raw_sample)
        else:
            self._centers = SupportCenters.from_sample_weights(
                self._kernel_spec, int(self.tau), sample, kmat, best.weights, raw_sample
            )
        best_objective = best.objective
        self._monitor = ConvergenceMonitor(
            float(self.tol), int(self.patience), float(self.wake_margin), float(self.smoothing)
        )
        self.counts_ = np.zeros(k, dtype=np.int64)
        self.n_steps_ = 0
        self.batch_objective_ = math.nan
        self.improvement_ = None
        self.init_objective_ = best_objective
        policy = self._drift_policy()
        if policy is not None:
            from streamkm.drift.controller import DriftController

            self._drift = DriftController(
                policy, k, policy.resolved_k_max(k), sample.shape[1], sample.dtype,
                keeps_raw=raw_sample is not None,
                rng=np.random.default_rng(int(rng.integers(2**63))),
            )

    # ------------------------------------------------------------------ learning
    def fit(self, X: Any, y: Any = None) -> MiniBatchKernelKMeans:
        """Fit on X: mini-batches sampled with replacement until early stop or ``max_iter``.

        Early stop: ``patience`` steps in a row with relative improvement below ``tol``.
        """
        self._validate_params()
        x = check_array(X)
        self._reset()
        rng = check_random_state(self.random_state)
        n = x.shape[0]
        if n < self.n_clusters:
            raise ValidationError(
                f"n_samples={n} should be >= n_clusters={self.n_clusters}"
            )
        init_size = min(n, self.init_size or 3 * self.batch_size)
        init_rows = np.sort(rng.choice(n, size=init_size, replace=False))
        self._initialize(np.ascontiguousarray(x[init_rows]), rng)
        batch = min(self.batch_size, n)
        for _ in range(self.max_iter):
            rows = rng.integers(n, size=batch)
            self.step(x[rows])
            if self._monitor.converged:
                break
        return self

    def partial_fit(self, X: Any, y: Any = None,
                    sample_weight: Any = None) -> MiniBatchKernelKMeans:
        """One mini-batch step on X (the first call initialises from X). Returns self.

        ``sample_weight``: optional positive integer multiplicity of each row (see
        :meth:`step`).
        """
        self.step(X, sample_weight=sample_weight)
        return self

    def step(self, X: Any, *, raw: RawRows | None = None,
             sample_weight: Any = None) -> StepReport:
        """One mini-batch step on the batch X, returning what it did.

        The first call initialises the model from X (which needs at least ``n_clusters``
        rows). While converged the step only assigns; the monitor may wake the model.

        ``raw``: when X holds sketched features, the same rows before sketching (dense or
        CSR). A model started with raw rows keeps the raw version of its support rows (of its
        centroids for the linear kernel) and needs ``raw`` at every step; :meth:`resketch`
        then re-projects them.

        ``sample_weight``: positive integer multiplicity of each row (a row with weight m
        stands for m identical records). The batch objective is the weighted mean, the
        learning rates use the weighted b_j and b, a center's batch part is the weighted
        mean of its rows, and ``counts_`` grows by the weighted counts (exact integers).
        Truncation still counts support rows. Integer multiplicities give the same centers
        as repeating the rows (up to rounding). ``None`` (default): every row counts once.
        The first call initialises from the unweighted rows, then steps with the weights.
        Not combined with ``raw``.
        """
        weights = None if sample_weight is None else _check_sample_weight(
            sample_weight, getattr(X, "shape", (len(X),))[0])
        if weights is not None and raw is not None:
            raise ValidationError("sample_weight cannot be combined with raw rows (sketching)")
        if not self._is_fitted():
            self._validate_params()
            x = check_array(X)
            self._check_raw(raw, x.shape[0], first=True)
            init_size = x.shape[0] if self.init_size is None else min(x.shape[0], self.init_size)
            self._initialize(x[:init_size], check_random_state(self.random_state),
                             None if raw is None else raw[:init_size])
        else:
            x = self._check_input(X)
            self._check_raw(raw, x.shape[0], first=False)
        x_sq = sq_norms(x)
        diag = self._kernel_spec.diagonal(x)
        update = not self._monitor.converged
        outcome = self._centers.step(
            x, x_sq, diag, learning_rate=self.learning_rate, counts=self.counts_, update=update,
            raw=raw, **({} if weights is None else {"sample_weight": weights}),
        )
        self.counts_ += outcome.batch_counts
        self.n_steps_ += 1
        improvement = None
        if outcome.objective_after is not None:
            improvement = outcome.objective_before - outcome.objective_after
        self.batch_objective_ = outcome.objective_before
        if update:
            self.improvement_ = improvement
        event = self._monitor.observe(outcome.objective_before, improvement)
        events: list[dict[str, Any]] = []
        if event is not None:
            events.append({"event": event, "step": self.n_steps_,
                           "objective": float(outcome.objective_before)})
        drift = self.__dict__.get("_drift")
        if drift is None:
            cluster_ids = outcome.labels
        else:
            cluster_ids = drift.cluster_ids[outcome.labels]
            drift_events, self.counts_ = drift.after_step(
                step=self.n_steps_, labels=outcome.labels,
                sq_distances=outcome.min_sq_distances, x=x, raw=raw, centers=self._centers,
                counts=self.counts_, kernel=self._kernel_spec,
            )
            if drift.active and event != "converged" and self._monitor.wake():
                event = "woke"
                events.append({"event": "woke", "step": self.n_steps_,
                               "objective": float(outcome.objective_before), "cause": "drift"})
            events += drift_events
        return StepReport(
            labels=outcome.labels, sq_distances=outcome.min_sq_distances,
            objective=outcome.objective_before, improvement=improvement, updated=update,
            step=self.n_steps_, cluster_ids=cluster_ids, events=tuple(events),
        )

    def _check_raw(self, raw: RawRows | None, n: int, *, first: bool) -> None:
        keeps_raw = raw is not None if first else self._centers.raw is not None
        if keeps_raw and raw is None:
            raise ValidationError(
                "this model keeps raw support rows (it was started with raw=...): "
                "pass raw= with every batch"
            )
        if not keeps_raw and raw is not None:
            raise ValidationError("this model was started without raw rows: raw= is not accepted")
        if raw is not None:
            if getattr(raw, "ndim", 2) != 2 or raw.shape[0] != n:
                raise ValidationError(
                    f"raw must have one row per row of X ({n}), got shape {raw.shape!r}"
                )
            if first:
                self._raw_n_features = int(raw.shape[1])
            elif raw.shape[1] != self._raw_n_features:
                raise ValidationError(
                    f"raw has {raw.shape[1]} features, but the model was started with "
                    f"{self._raw_n_features}"
                )

    def resketch(self, transform: Callable[[RawRows], np.ndarray]) -> None:
        """Re-project the kept raw rows with a new sketch ``transform`` (raw rows -> features).

        Support rows (centroids for the linear kernel) are replaced by ``transform`` of their
        raw versions and every cached kernel value is recomputed; weights, counts and the
        monitor stay. Later batches must be sketched with the same ``transform``.
        """
        self._check_fitted()
        if self._centers.raw is None:
            raise NotFittedError(
                "resketch needs the raw rows: start the model with step(X, raw=...)"
            )
        rows = check_array(transform(self._centers.raw), name="transform(raw)")
        rows = rows.astype(self._dtype, copy=False)
        drift = self.__dict__.get("_drift")
        if drift is not None:
            spreads_before = drift.window_spreads(self._centers, self._kernel_spec)
        self._centers.reproject(rows)
        self.n_features_in_ = int(rows.shape[1])
        if drift is not None:
            drift.reproject(transform, self.n_features_in_, self._centers, self._kernel_spec,
                            spreads_before)

    # ------------------------------------------------------------------ inference
    def _check_input(self, X: Any) -> np.ndarray:
        x = check_array(X, n_features=self.n_features_in_)
        return x if x.dtype == self._dtype else x.astype(self._dtype)

    def _chunked_distances(self, store: SupportCenters | ExplicitCenters, x: np.ndarray) -> np.ndarray:
        n = x.shape[0]
        width = int(store.support_sizes().sum()) + 1
        chunk = max(1, _BLOCK_ELEMENTS // width)
        out = np.empty((n, store.n_clusters), dtype=x.dtype)
        for lo in range(0, n, chunk):
            part = x[lo:lo + chunk]
            out[lo:lo + chunk] = store.sq_distances(
                part, sq_norms(part), self._kernel_spec.diagonal(part)
            )
        return out

    def transform(self, X: Any) -> np.ndarray:
        """Squared kernel distances ||phi(x) - C_j||^2, shape (n_samples, n_clusters)."""
        self._check_fitted()
        return self._chunked_distances(self._centers, self._check_input(X))

    def predict(self, X: Any) -> np.ndarray:
        """Index of the nearest center of each row (int64)."""
        return np.argmin(self.transform(X), axis=1).astype(np.int64)

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit on X, then predict X."""
        return self.fit(X).predict(X)

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the mean squared kernel distance of the rows of X to their nearest center."""
        return -float(self.transform(X).min(axis=1).mean(dtype=np.float64))

    @property
    def converged_(self) -> bool:
        self._check_fitted()
        return self._monitor.converged

    @property
    def n_converged_(self) -> int:
        self._check_fitted()
        return self._monitor.n_converged

    @property
    def n_woke_(self) -> int:
        self._check_fitted()
        return self._monitor.n_woke

    @property
    def n_clusters_(self) -> int:
        self._check_fitted()
        return int(self._centers.n_clusters)

    @property
    def cluster_ids_(self) -> np.ndarray:
        self._check_fitted()
        drift = self.__dict__.get("_drift")
        if drift is None:
            return np.arange(self._centers.n_clusters, dtype=np.int64)
        return drift.cluster_ids.copy()

    @property
    def n_splits_(self) -> int:
        self._check_fitted()
        drift = self.__dict__.get("_drift")
        return 0 if drift is None else int(drift.n_splits)

    @property
    def n_merges_(self) -> int:
        self._check_fitted()
        drift = self.__dict__.get("_drift")
        return 0 if drift is None else int(drift.n_merges)

    @property
    def cluster_centers_(self) -> np.ndarray:
        self._check_fitted()
        if self.kernel != "linear":
            raise AttributeError(
                f"cluster_centers_ exists only for kernel='linear', not {self.kernel!r}: "
                "kernel centers are implicit (convex combinations of support rows)"
            )
        return self._centers.centers

    # ------------------------------------------------------------------ state
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The fitted state as plain arrays and JSON-able metadata (no pickle).

        :meth:`from_state` rebuilds a model that predicts and keeps training bit-identically,
        random generator included.
        """
        self._check_fitted()
        params = self.get_params()
        if not isinstance(params["random_state"], (int, type(None))):
            params["random_state"] = None
        policy = self._drift_policy()
        params["drift"] = None if policy is None else policy.to_dict()
        arrays = dict(self._centers.to_arrays())
        arrays["counts"] = self.counts_
        meta = {
            "format": STATE_FORMAT,
            "format_version": STATE_VERSION,
            "streamkm_version": __version__,
            "params": params,
            "n_features_in": int(self.n_features_in_),
            "dtype": np.dtype(self._dtype).name,
            "kernel_spec": self._kernel_spec.to_dict(),
            "gamma_": self.gamma_,
            "n_steps": int(self.n_steps_),
            "batch_objective": None if math.isnan(self.batch_objective_) else self.batch_objective_,
            "improvement": self.improvement_,
            "init_objective": float(self.init_objective_),
            "next_tag": int(getattr(self._centers, "next_tag", 0)),
            "monitor": self._monitor.to_dict(),
            "raw_n_features": getattr(self, "_raw_n_features", None),
            "rng": rng_state_to_json(self._rng),
        }
        drift = self.__dict__.get("_drift")
        if drift is not None:
            drift_arrays, meta["drift"] = drift.to_state()
            arrays.update(drift_arrays)
        return arrays, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> MiniBatchKernelKMeans:
        """Rebuild a model from :meth:`get_state` output."""
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
            model._kernel_spec = KernelSpec.from_dict(meta["kernel_spec"])
            model.gamma_ = meta["gamma_"]
            if model.kernel == "linear":
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
            if meta.get("drift") is not None:
                from streamkm.drift.controller import DriftController

                model._drift = DriftController.from_state(arrays, meta["drift"], model._dtype)
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

    def save(self, path: str | Path) -> None:
        """Write the state to one ``.npz`` file (atomic; no pickle)."""
        arrays, meta = self.get_state()
        write_npz_atomic(path, arrays, meta)

    @classmethod
    def load(cls, path: str | Path) -> MiniBatchKernelKMeans:
        """Read a model written by :meth:`save` (verifying its SHA-256 digests)."""
        arrays, meta = read_npz(path)
        return cls.from_state(arrays, meta)


def _check_sample_weight(sample_weight: Any, n: int) -> np.ndarray:
    """Positive integer multiplicities as float64, one per row."""
    w = np.asarray(sample_weight)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValidationError(
            f"sample_weight must have shape ({n},), got {w.shape!r}"
        )
    if w.dtype.kind not in "iuf" or (w.dtype.kind == "f" and not np.all(np.isfinite(w))):
        raise ValidationError(f"sample_weight must be numeric and finite, got dtype {w.dtype}")
    if n and (w.min() < 1 or np.any(w != np.rint(w)) or w.max() > 2**52):
        bad = w[(w < 1) | (w != np.rint(w)) | (w > 2**52)][0]
        raise ValidationError(
            f"sample_weight must hold integers in [1, 2**52], got {bad!r}"
        )
    return w.astype(np.float64)
