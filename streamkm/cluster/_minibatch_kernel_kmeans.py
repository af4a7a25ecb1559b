"""Truncated mini-batch kernel k-means (after Jourdan and Schwartzman, docs/references.md)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
from sklearn.base import (
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)

from streamkm._core.estimator import (
    PreservesFloat32Mixin,
    StreamkmEstimator,
    same_param_value,
)
from streamkm._core.kernel_lloyd import feature_gram
from streamkm._core.param_rules import sklearn_constraints
from streamkm._core.raw_rows import RawRows
from streamkm._core.state_io import read_npz, write_npz_atomic
from streamkm._core.threads import step_threads
from streamkm._core.validation import check_array, check_random_state
from streamkm.cluster._centers import ExplicitCenters, SupportCenters, sq_norms
from streamkm.cluster._inputs import check_raw, check_sample_weight
from streamkm.cluster._kernel_refresh import (RESERVOIR_ROWS, RowReservoir, refresh_model_kernel,
                                              refresh_reason)
from streamkm.cluster._monitor import ConvergenceMonitor
from streamkm.cluster._novelty import (
    SCORE_PREFIX,
    NoveltyBuffers,
    NoveltyMixin,
    confidence_fields,
)
from streamkm.cluster._params import PARAMETER_RULES, PARAMETERS, relations_problem
from streamkm.cluster._state import model_from_state, model_state
from streamkm.cluster._seeding import kernel_farthest_traversal, kernel_kmeans_plusplus
from streamkm.cluster._warmup import best_warm_start, warm_up
from streamkm.drift.birth import capped_distances
from streamkm.drift.policy import DriftPolicy
from streamkm.exceptions import (NotFittedError, ParameterError, ValidationError)
from streamkm.kernels import KernelSpec, build_kernel
from streamkm.kernels._decision import AutoDecision
from streamkm.model import StepReport

__all__ = ["MiniBatchKernelKMeans", "StepReport"]

_BLOCK_ELEMENTS = 1 << 22  # kernel-block entries per chunk in transform / predict
#: Parameters a fitted model is built from: changing one between ``partial_fit`` / ``step``
#: calls raises (refit or clone instead). The others take effect as documented in the class.
FROZEN_AFTER_FIT = ("n_clusters", "kernel", "gamma", "kernel_params", "degree", "coef0", "tau", "tol",
                    "patience", "wake_margin", "smoothing", "drift", "novelty_window")


class MiniBatchKernelKMeans(NoveltyMixin, PreservesFloat32Mixin, ClassNamePrefixFeaturesOutMixin,
                            ClusterMixin, TransformerMixin, StreamkmEstimator):
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
    kernel : str, default="rbf"
        A registered kernel (:func:`streamkm.kernels.kernel_names`): "rbf", "laplacian",
        "polynomial", "cosine", "linear", seed 002's graph kernels "knn" and "heat",
        "anchor" (the heat kernel of an anchor graph) or "level_set" (the indicator of
        the k connected pieces of the data's densest rows); graph kernels are fitted on
        landmark rows (all of X in :meth:`fit`; in streaming the initialisation sample,
        then refitted on the 4,096 most recent rows each time that many have arrived,
        after a drift split or merge or a split drift handling rejected, when a
        cluster's input rows fall into two groups (drift handling on), and at a
        re-sketch; a refit is adopted unless the current kernel, the kernel fitted on the
        newest half of those rows or the previous refit's runner-up cuts the recent rows'
        graph less: a ``kernel_refreshed`` or
        ``kernel_kept`` event; see ``docs/kernels.md``).
    gamma : float, "auto", "median" or "eigengap", default="auto"
        Kernel coefficient of rbf, laplacian and polynomial, resolved once on the
        initialisation sample (:func:`streamkm.kernels.resolve_gamma`): ``"median"`` is the
        median heuristic (polynomial: 1 / n_features), ``"eigengap"`` picks among widths
        median * 2^j by the eigengap of the normalised kernel matrix. ``"auto"`` (or None)
        for rbf / laplacian chooses the kernel, once, on the initialisation sample: of the
        median-width kernel, the linear kernel (plain k-means), the anchor-graph kernel and
        the density level-set kernel (both fitted on X in :meth:`fit`, at most 20,000 of
        its rows), the one whose kernel k-means cuts least of the sample's mutual and
        symmetric k-nn graphs on average over 5 starts; the median width unless beaten by
        more than 2 k / n (``auto_decision_`` holds the scores). With drift handling or a
        sketch a graph kernel is refitted on the recent rows as the stream goes. Always the median width with
        explicit ``kernel_params``, and below
        max(500, 20 k) distinct sample rows (in
        streaming the sample is the first batch: make the first :meth:`partial_fit` call
        at least that large). Pass ``gamma="median"`` or a number to keep rbf itself. The
        choice is ``kernel_`` and ``gamma_`` (None for a graph kernel), kept in the
        state. Rule, evidence and limits: docs/kernels.md.
    kernel_params : dict, optional
        Kernel options: ``n_neighbors`` (knn, heat; default 30), ``t``, ``n_components``,
        ``dense_limit`` and ``weights`` (heat: ``"binary"`` or ``"density"``);
        ``n_anchors`` (default 1500), ``n_nearest`` (10), ``t`` and ``n_components`` (50)
        (anchor); ``n_neighbors`` (20), ``graph_neighbors`` (10), ``n_nearest`` (10),
        ``min_keep`` (0.75), ``min_size`` (0.05), ``n_rows`` (5000) and ``relative`` (0.5)
        (level_set).
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Constant term of the polynomial kernel.
    batch_size : int, default=1024
        Rows per mini-batch in :meth:`fit` and in the initial warm-up.
    tau : int, default=200
        Maximum support rows per center. A center given more than ``tau`` rows of one batch
        keeps an unbiased random subsample of ``tau`` of them (its learning rate, counts and
        objectives still use all). Memory: at most k * tau support rows and k * tau^2 Gram
        values (docs/engine.md gives the step's workspace).
    learning_rate : {"sqrt", "count"}, default="sqrt"
        ``"sqrt"``: alpha_j = sqrt(b_j / b) (the paper's rate, does not decay);
        ``"count"``: alpha_j = b_j / (v_j + b_j), v_j the rows seen by center j.
    tol : float, default=0.005
        A step counts as small when the smoothed (EWMA) batch objective makes no new
        minimum by this relative margin (rule and evidence: ``streamkm.cluster._monitor``
        and docs/benchmarks.md).
    patience : int, default=10
        Small steps in a row after which the model is converged: :meth:`fit` stops;
        streaming updates become assign-only until the objective rises (see ``wake_margin``;
        after a quick re-wake the model learns at least a doubling dwell time first).
    max_iter : int, default=300
        Maximum number of steps of :meth:`fit`.
    init : {"k-means++", "farthest"}, default="k-means++"
        Seeding in feature space: greedy kernel k-means++ or farthest traversal.
    n_init : int, default=3
        Candidate initialisations. Each is warmed up by full-batch kernel k-means on the
        initialisation sample (its kernel matrix computed once; the Lloyd iterations of
        :class:`streamkm.batch.KernelKMeans`, so a cluster left empty takes the sample row
        farthest from its center) and the one with the lowest objective on the sample (mean
        squared feature-space distance of its rows to the nearest center) is kept.
    init_size : int, optional
        Rows of the initialisation sample: in :meth:`fit` drawn from X (default
        ``min(n, 3 * batch_size)``), in the first :meth:`partial_fit` the first rows of the
        batch (default: the whole batch).
    n_warmup : int, default=100
        Maximum warm-up iterations (center updates) per candidate; a candidate stops earlier
        once its assignment of the sample no longer changes. 0 keeps the seed rows
        themselves as the initial centers.
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
    outlier_alpha : float in (0, 1) or None, default=None
        Flag a record as an outlier when its novelty (see :meth:`score_samples` and
        ``StepReport.novelty``) is at most this level: on a stream without outliers about
        this share of records is flagged (docs/novelty.md gives the measured rates). None
        (default) flags nothing; novelty is computed either way.
    outliers : {"exclude", "learn"}, default="exclude"
        What flagged records do: ``"exclude"``: they are assigned and reported but do not
        move centers (nor enter their support); ``"learn"``: they are learnt like any
        record. Every assigned record enters its cluster's novelty buffer either way.
    novelty_window : int, default=256
        Recent members' novelty base scores (and squared distances to the center, for
        births) kept per cluster; the novelty score is calibrated against all clusters'
        values pooled.
    label_outliers : bool, default=False
        When True (and ``outlier_alpha`` is set), :meth:`predict` and ``labels_`` give -1
        for flagged records, as DBSCAN does for noise. Step reports keep the clusters.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,), int64
        After :meth:`fit`: the cluster of each row of the fitted X (``predict(X)`` with the
        final centers). After :meth:`partial_fit`: the clusters of the rows of the latest
        batch, assigned with the centers as they were *before* that batch's update (what
        the stream was told when the batch arrived). Not part of the saved state.
    inertia_ : float
        Sum of the squared kernel distances of those same rows to their centers (weighted
        by ``sample_weight`` in :meth:`partial_fit`). Not part of the saved state.
    n_iter_ : int
        Mini-batch steps run by the latest :meth:`fit` (set by :meth:`fit` only).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,), str
        Column names of the first fitted X when it was a DataFrame with string column
        names; later input must have the same names (as in scikit-learn).
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
        The resolved kernel coefficient (None for cosine, linear, the graph kernels, and
        when ``gamma="auto"`` chose a graph kernel).
    kernel_ : streamkm.kernels.KernelSpec
        The kernel in use, parameters resolved (see ``gamma``).
    auto_decision_ : dict or None
        What ``gamma="auto"`` compared and chose: ``candidates`` (kernel names, the
        median-width one first), ``scores`` (name -> expected normalised cut, lower is
        better, None when not scored), ``chosen``, ``reason`` and ``tolerance``; plain types,
        part of the saved state. None when no ``"auto"`` decision was made. The first
        step's report carries it as a ``kernel_chosen`` event (docs/kernels.md).
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

    Notes
    -----
    Changing parameters between :meth:`partial_fit` (or :meth:`step`) calls with
    ``set_params``: ``learning_rate`` takes effect at the next step; ``batch_size``,
    ``max_iter``, ``init``, ``n_init``, ``init_size``, ``n_warmup`` and ``random_state``
    only matter when the model starts (:meth:`fit`, or the first :meth:`partial_fit`) and
    are ignored until then. The parameters the fitted state is built from
    (``n_clusters``, ``kernel``, ``gamma``, ``degree``, ``coef0``, ``tau``, ``tol``,
    ``patience``, ``wake_margin``, ``smoothing``, ``drift``) cannot change: the next
    :meth:`partial_fit` raises :class:`~streamkm.ParameterError` naming the parameter;
    :meth:`fit` (or ``sklearn.base.clone``) starts over with the new values.

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm import MiniBatchKernelKMeans
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.3, (100, 2)), rng.normal(4, 0.3, (100, 2))])
    >>> model = MiniBatchKernelKMeans(2, batch_size=64, n_init=1, random_state=0).fit(X)
    >>> sorted(np.bincount(model.labels_).tolist())
    [100, 100]
    >>> bool(model.predict([[0.1, -0.2]])[0] != model.predict([[4.2, 3.9]])[0])
    True
    >>> stream = MiniBatchKernelKMeans(2, random_state=0)
    >>> for batch in np.array_split(rng.permutation(X), 4):
    ...     stream = stream.partial_fit(batch)
    >>> stream.n_steps_, stream.labels_.shape
    (4, (50,))
    """

    _parameter_rules = PARAMETER_RULES  # one definition per parameter: cluster/_params.py
    _parameter_constraints: dict[str, list[Any]] = sklearn_constraints(PARAMETERS)

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        kernel: str = "rbf",
        gamma: float | str | None = "auto",
        degree: int = 3,
        coef0: float = 1.0,
        batch_size: int = 1024,
        tau: int = 200,
        learning_rate: str = "sqrt",
        tol: float = 0.005,
        patience: int = 10,
        max_iter: int = 300,
        init: str = "k-means++",
        n_init: int = 3,
        init_size: int | None = None,
        n_warmup: int = 100,
        wake_margin: float = 0.1,
        smoothing: float = 0.2,
        random_state: int | np.random.Generator | None = None,
        drift: Any = None,
        kernel_params: dict[str, Any] | None = None,
        outlier_alpha: float | None = None,
        outliers: str = "exclude",
        novelty_window: int = 256,
        label_outliers: bool = False,
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
        self.kernel_params = kernel_params
        self.outlier_alpha = outlier_alpha
        self.outliers = outliers
        self.novelty_window = novelty_window
        self.label_outliers = label_outliers

    # ------------------------------------------------------------------ parameters
    def _check_param_relations(self) -> None:
        problem = relations_problem(self.get_params(deep=False))
        if problem is not None:
            raise ParameterError(problem)

    def _check_frozen_params(self) -> None:
        """Refuse a change, since the model started, of a parameter its state is built from."""
        for name, fitted in self._fitted_params.items():
            now = getattr(self, name)
            if not same_param_value(now, fitted):
                raise ParameterError(
                    f"{name} was changed from {fitted!r} to {now!r} after fitting; "
                    f"{type(self).__name__} cannot change {name} while it learns: call fit "
                    f"(or clone the estimator) to start over with the new value"
                )

    def _remember_frozen_params(self) -> None:
        self._fitted_params = {name: getattr(self, name) for name in FROZEN_AFTER_FIT}

    def _drift_policy(self) -> Any:
        return DriftPolicy.from_param(self.drift)

    def _is_fitted(self) -> bool:
        return hasattr(self, "_centers")

    def is_fitted(self) -> bool:
        """Whether the model has centers (a first batch or ``fit`` initialised it)."""
        return self._is_fitted()

    def state_parts(self) -> dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]]:
        """The fitted state by checkpoint namespace: ``{"model": self.get_state()}``."""
        return {"model": self.get_state()}

    def __sklearn_is_fitted__(self) -> bool:
        return self._is_fitted()

    @property
    def _n_features_out(self) -> int:
        return self.n_clusters_


    def _check_fitted(self) -> None:
        if not self._is_fitted():
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call fit or partial_fit first"
            )

    # ------------------------------------------------------------------ initialisation
    def _reset(self) -> None:
        for name in ("_centers", "_kernel_spec", "_monitor", "_rng", "_drift", "_reservoir",
                     "_pending_events", "_novelty", "_novelty_scores"):
            self.__dict__.pop(name, None)

    def _initialize(self, sample: np.ndarray, rng: np.random.Generator,
                    raw_sample: RawRows | None = None,
                    landmarks: np.ndarray | None = None) -> None:
        k = self.n_clusters
        if sample.shape[0] < k:
            raise ValidationError(
                f"n_samples={sample.shape[0]} should be >= n_clusters={k} to initialise"
            )
        self._rng = rng
        self.n_features_in_ = sample.shape[1]
        self._dtype = sample.dtype
        decisions: list[AutoDecision] = []
        self._kernel_spec = build_kernel(
            self.kernel, self.gamma, sample=sample, rng=rng, n_clusters=k, degree=self.degree,
            coef0=float(self.coef0), kernel_params=self.kernel_params, landmarks=landmarks,
            # in streaming a graph kernel follows the stream (and a new sketch) by refits
            # on the recent rows (streamkm.cluster._kernel_refresh)
            allow_graph=True,
            on_decision=decisions.append,
        )
        self.auto_decision_ = decisions[0].to_dict() if decisions else None
        if decisions:  # reported with the first step
            self.__dict__["_pending_events"] = [
                {"event": "kernel_chosen", "kernel": decisions[0].chosen, **self.auto_decision_}]
        self.gamma_ = self._kernel_spec.gamma
        input_rows = sample
        sample = self._kernel_spec.prepare(sample)

        if self._kernel_spec.explicit_features:
            kmat = feature_gram(sample)
        else:
            kmat = self._kernel_spec.block(sample, sample)
        diag = self._kernel_spec.diagonal(sample)
        seeding = kernel_kmeans_plusplus if self.init == "k-means++" else kernel_farthest_traversal
        warmed = [warm_up(kmat, diag, seeding(sample, k, self._kernel_spec, rng),
                          max_steps=int(self.n_warmup)) for _ in range(self.n_init)]
        # a graph kernel's start is picked by the cut of the input rows' graph
        best = best_warm_start(warmed, input_rows if self._kernel_spec.kind.fitted else None)
        if self._kernel_spec.explicit_features:
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
        self._novelty = NoveltyBuffers.empty(int(self.novelty_window), np.arange(k))
        self._novelty_scores = NoveltyBuffers.empty(int(self.novelty_window), np.arange(k),
                                                    SCORE_PREFIX)
        self._remember_frozen_params()
        policy = self._drift_policy()
        if policy is not None:
            from streamkm.drift.controller import DriftController

            self._drift = DriftController(
                policy, k, policy.resolved_k_max(k), sample.shape[1], sample.dtype,
                keeps_raw=raw_sample is not None,
                rng=np.random.default_rng(int(rng.integers(2**63))),
            )

    # ------------------------------------------------------------------ learning
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> MiniBatchKernelKMeans:
        """Fit on X: mini-batches sampled with replacement until early stop or ``max_iter``.

        Early stop: ``patience`` steps in a row in which the smoothed batch objective
        makes no new minimum by the relative margin ``tol``.
        Sets ``labels_`` and ``inertia_`` for X with the final centers and ``n_iter_``.
        """
        x = self._validate_X(X, reset=True)
        self._reset()
        rng = check_random_state(self.random_state)
        n = x.shape[0]
        if n < self.n_clusters:
            raise ValidationError(
                f"n_samples={n} should be >= n_clusters={self.n_clusters}"
            )
        init_size = min(n, self.init_size or 3 * self.batch_size)
        init_rows = np.sort(rng.choice(n, size=init_size, replace=False))
        with step_threads():  # the kernel choice's eigh and GEMMs: a step's BLAS limit
            self._initialize(np.ascontiguousarray(x[init_rows]), rng, landmarks=x)
        x = self._kernel_spec.prepare(x)
        batch = min(self.batch_size, n)
        n_iter = 0
        for n_iter in range(1, self.max_iter + 1):
            rows = rng.integers(n, size=batch)
            self._learn(x[rows], None, None)
            if self._monitor.converged:
                break
        self.n_iter_ = n_iter
        sq_distances = self._chunked_distances(self._centers, x)
        self.labels_ = np.argmin(sq_distances, axis=1).astype(np.int64)
        nearest = sq_distances[np.arange(n), self.labels_]
        self.inertia_ = float(nearest.sum(dtype=np.float64))
        self.labels_ = self._labels_with_outliers(self.labels_, self._flagged(x, sq_distances))
        return self

    def partial_fit(self, X: Any, y: Any = None,
                    sample_weight: Any = None) -> MiniBatchKernelKMeans:
        """One mini-batch step on X (the first call initialises from X: its seeds, warm-up
        and ``gamma="auto"``'s kernel choice see only this batch). Returns self.

        ``sample_weight``: optional positive integer multiplicity of each row (see
        :meth:`step`). Sets ``labels_`` / ``inertia_`` for this batch (see the class
        attributes); which parameters may change between calls is in the class Notes.
        """
        report = self.step(X, sample_weight=sample_weight)
        self.labels_ = self._labels_with_outliers(report.labels, report.outliers)
        distances = report.sq_distances.astype(np.float64)
        if sample_weight is not None:
            distances = distances * np.asarray(sample_weight, dtype=np.float64)
        self.inertia_ = float(distances.sum())
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
        With ``raw`` the kept raw support rows (raw centroids: weighted raw means) follow
        the same rule.
        """
        weights = None if sample_weight is None else check_sample_weight(
            sample_weight, getattr(X, "shape", (len(X),))[0])
        if not self._is_fitted():
            self._validate_params()
            x = self._validate_X(X, reset=True)
            check_raw(self, raw, x.shape[0], first=True)
            init_size = x.shape[0] if self.init_size is None else min(x.shape[0], self.init_size)
            with step_threads():
                self._initialize(x[:init_size], check_random_state(self.random_state),
                                 None if raw is None else raw[:init_size])
            if self._kernel_spec.kind.fitted:
                self._reservoir = RowReservoir(RESERVOIR_ROWS, x[:0],
                                               None if raw is None else raw[:0])
                # the first rows, which this step adds, are the ones the kernel was fitted on
                self._reservoir.rows_since_fit = -init_size
        else:
            self._check_frozen_params()
            x = self._check_input(X)
            check_raw(self, raw, x.shape[0], first=False)
        report = self._learn(self._kernel_spec.prepare(x), raw, weights)
        self._forget_rebuilt(report.events)
        if self._kernel_spec.kind.fitted:  # a refit recalibrates the novelty buffers itself
            report = self._follow_stream(report, x, raw)
        return report

    def _follow_stream(self, report: StepReport, x: np.ndarray, raw: RawRows | None
                       ) -> StepReport:
        """Add the batch to the graph kernel's reservoir and refit the kernel when
        :func:`~streamkm.cluster._kernel_refresh.refresh_reason` says so."""
        reservoir = self.__dict__.get("_reservoir")
        if reservoir is None:  # a model fitted by fit(X) starts its reservoir streaming
            reservoir = self._reservoir = RowReservoir(
                RESERVOIR_ROWS, x[:0], None if raw is None else raw[:0])
        skipped = x.shape[0] - min(x.shape[0], RESERVOIR_ROWS)
        reservoir.add(x[skipped:], None if raw is None else raw[skipped:])
        reservoir.rows_since_fit += skipped
        reason = refresh_reason(reservoir, list(report.events), self.__dict__.get("_drift"),
                                x, report.labels)
        if reason is None:
            return report
        # the cluster of two groups an input-split refit is compared with split
        split = self._drift.input_split(x, report.labels) if reason == "input_split" else None
        events = self._refresh_kernel(reason, split_cluster=split)
        return dataclasses.replace(report, events=report.events + tuple(events))

    def _refresh_kernel(self, reason: str, new_rows: np.ndarray | None = None,
                        split_cluster: int | None = None) -> list[dict[str, Any]]:
        """Refit the graph kernel on the reservoir and move the centers and the drift
        windows into its feature space, where drift handling reviews every cluster once;
        the ``kernel_refreshed`` event and the splits it led to (``split_cluster``: the
        cluster of two groups an input-split refit compares its candidates with split)."""
        events = refresh_model_kernel(self, reason, new_rows, split_cluster)
        self._forget_rebuilt(events)
        return events

    def _learn(self, x: np.ndarray, raw: RawRows | None, weights: np.ndarray | None
               ) -> StepReport:
        """The step on prepared rows (:meth:`KernelSpec.prepare`)."""
        x_sq = sq_norms(x)
        diag = self._kernel_spec.diagonal(x)
        update = not self._monitor.converged
        ids = self._position_ids()
        screen = self._novelty_screen()
        outcome = self._centers.step(
            x, x_sq, diag, learning_rate=self.learning_rate, counts=self.counts_, update=update,
            raw=raw, rng=self._rng, screen=screen,
            **({} if weights is None else {"sample_weight": weights}),
        )
        drift = self.__dict__.get("_drift")
        pushed = [(screen.buffers, self._members_distances(x, diag, outcome))]
        if screen.neighbours:  # base scores of support rows exist only with outlier_alpha
            pushed.append((screen.score_buffers, screen.scores))
        for buffers, values in pushed:
            buffers.push(outcome.labels, values if drift is None else capped_distances(
                outcome.labels, values, screen.outliers, buffers, self.outlier_alpha or 0.0))
        self.counts_ += outcome.batch_counts
        self.n_steps_ += 1
        improvement = None
        if outcome.objective_after is not None:
            improvement = outcome.objective_before - outcome.objective_after
        self.batch_objective_ = outcome.objective_before
        if update:
            self.improvement_ = improvement
        event = self._monitor.observe(outcome.objective_before, improvement)
        events: list[dict[str, Any]] = [
            {**pending, "step": self.n_steps_}
            for pending in self.__dict__.pop("_pending_events", ())]
        if event is not None:
            events.append({"event": event, "step": self.n_steps_,
                           "objective": float(outcome.objective_before)})
        if drift is None:
            cluster_ids = outcome.labels
        else:
            cluster_ids = drift.cluster_ids[outcome.labels]
            drift_events, self.counts_ = drift.after_step(
                step=self.n_steps_, labels=outcome.labels,
                sq_distances=outcome.min_sq_distances, x=x, raw=raw, centers=self._centers,
                counts=self.counts_, kernel=self._kernel_spec, outliers=screen.outliers,
                buffers=screen.buffers, alpha=self.outlier_alpha,
                learn_tail=self._tail_learner(screen.score_buffers))
            if drift.active and event != "converged" and self._monitor.wake():
                event = "woke"
                events.append({"event": "woke", "step": self.n_steps_,
                               "objective": float(outcome.objective_before), "cause": "drift"})
            events += drift_events
        return StepReport(
            labels=outcome.labels, sq_distances=outcome.min_sq_distances,
            objective=outcome.objective_before, improvement=improvement, updated=update,
            step=self.n_steps_, cluster_ids=cluster_ids, events=tuple(events),
            novelty=screen.novelty, outliers=screen.outliers,
            **confidence_fields(outcome.second_labels, outcome.second_sq_distances,
                                outcome.min_sq_distances, ids),
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
        if self._kernel_spec.kind.fitted:
            self._resketch_graph(transform)
            return
        rows = check_array(transform(self._centers.raw), name="transform(raw)")
        rows = rows.astype(self._dtype, copy=False)
        drift = self.__dict__.get("_drift")
        if drift is not None:
            spreads_before = drift.window_spreads(self._centers, self._kernel_spec)
        before = self._novelty_scale()
        self._centers.reproject(rows)
        self._rescale_novelty(before)
        self.n_features_in_ = int(rows.shape[1])
        self.__dict__.pop("feature_names_in_", None)
        if drift is not None:
            drift.reproject(transform, self.n_features_in_, self._centers, self._kernel_spec,
                            spreads_before)

    def _resketch_graph(self, transform: Callable[[RawRows], np.ndarray]) -> None:
        """A graph kernel follows a new sketch: refit on the reservoir's raw rows in it."""
        reservoir = self.__dict__.get("_reservoir")
        if reservoir is None or reservoir.raw is None or reservoir.rows.shape[0] < 2:
            raise NotFittedError(
                f"kernel {self._kernel_spec.name!r} is refitted on recent raw rows at a "
                "re-sketch: step the model with raw=... first"
            )
        rows = check_array(transform(reservoir.raw), name="transform(raw)")
        rows = rows.astype(self._dtype, copy=False)
        self._refresh_kernel("resketch", rows)
        self.n_features_in_ = int(rows.shape[1])
        self.__dict__.pop("feature_names_in_", None)

    # ------------------------------------------------------------------ inference
    def _check_input(self, X: Any) -> np.ndarray:
        if self.__dict__.get("_rows_checked_by_fit", False):
            return X  # rows of the X that fit has validated (names already checked)
        x = self._validate_X(X, reset=False)
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

    def _sq_distances(self, X: Any) -> np.ndarray:
        self._check_fitted()
        x = self._kernel_spec.prepare(self._check_input(X))
        return self._chunked_distances(self._centers, x)

    def transform(self, X: Any) -> np.ndarray:
        """Squared kernel distances ||phi(x) - C_j||^2, shape (n_samples, n_clusters).

        A DataFrame with ``set_output(transform="pandas")``.
        """
        return self._sq_distances(X)

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the mean squared kernel distance of the rows of X to their nearest center.

        Comparable only between models with the same kernel and width: across ``gamma``
        values or kernels the distances live in different feature spaces (a wider rbf
        kernel always scores higher), so model selection over those needs its own
        ``scoring`` (e.g. in ``GridSearchCV``).
        """
        return -float(self._sq_distances(X).min(axis=1).mean(dtype=np.float64))

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
    def kernel_(self) -> KernelSpec:
        """The kernel the model uses, parameters resolved (with ``gamma="auto"``: the
        median-width kernel, the anchor-graph kernel or the level-set kernel, see
        :func:`streamkm.kernels.build_kernel` and ``auto_decision_``)."""
        self._check_fitted()
        return self._kernel_spec

    @property
    def cluster_centers_(self) -> np.ndarray:
        self._check_fitted()
        if not self._kernel_spec.explicit_features:
            raise AttributeError(
                f"cluster_centers_ exists only for kernels with explicit features (linear, "
                f"heat), not {self.kernel!r}: kernel centers are implicit (convex "
                "combinations of support rows)"
            )
        return self._centers.centers

    # ------------------------------------------------------------------ state
    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The fitted state as plain arrays and JSON-able metadata (no pickle).

        :meth:`from_state` rebuilds a model that predicts and keeps training bit-identically,
        random generator included. The arrays are a snapshot: later learning does not
        change them, and changing them does not change the model.
        """
        self._check_fitted()
        return model_state(self)

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> MiniBatchKernelKMeans:
        """Rebuild a model from :meth:`get_state` output."""
        return model_from_state(cls, arrays, meta)

    def save(self, path: str | Path) -> None:
        """Write the state to one ``.npz`` file (atomic; no pickle)."""
        arrays, meta = self.get_state()
        write_npz_atomic(path, arrays, meta)

    @classmethod
    def load(cls, path: str | Path) -> MiniBatchKernelKMeans:
        """Read a model written by :meth:`save` (verifying its SHA-256 digests)."""
        arrays, meta = read_npz(path)
        return cls.from_state(arrays, meta)
