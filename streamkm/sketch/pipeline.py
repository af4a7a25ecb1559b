"""Sketcher + engine as one streaming estimator, with periodic and drift-triggered re-sketching.

:class:`SketchedKernelKMeans` maps every batch (dense or scipy CSR, never densified as a
whole) to r sketch dimensions and steps a :class:`~streamkm.MiniBatchKernelKMeans` on the
sketch, passing the raw rows along so the engine keeps the raw version of its support rows.
A re-sketch refits the sketcher on a reservoir of recent raw rows and lets the engine
re-project its support rows with the new sketch.
"""

from __future__ import annotations

import time
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import (
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import HasMethods, Interval

from streamkm._core.estimator import SparseInputMixin, StreamkmEstimator
from streamkm._core.sparse import is_sparse
from streamkm._core.sparse_input import check_sketch_input
from streamkm._core.state_io import read_npz, write_npz_atomic
from streamkm._version import __version__
from streamkm.exceptions import NotFittedError, StateError, ValidationError
from streamkm.sketch._base import STATE_FORMAT_VERSION, BaseSketcher
from streamkm.sketch.projection import RandomProjection
from streamkm.sketch.reservoir import RowReservoir
from streamkm.sketch.state import SKETCHER_TYPES, sketcher_from_state

__all__ = ["SketchedKernelKMeans", "SKETCH_STATE_FORMAT", "PIPELINE_STATE_FORMAT",
           "is_data_dependent"]

#: ``format`` of the sketch half of the state (what a service checkpoint stores as "sketch").
SKETCH_STATE_FORMAT = "streamkm.SketchState"
#: ``format`` of the whole pipeline state written by :meth:`SketchedKernelKMeans.save`.
PIPELINE_STATE_FORMAT = "streamkm.SketchedKernelKMeans"
_STATE_VERSION = 1
_SEED_BOUND = 2**63


def is_data_dependent(sketcher: BaseSketcher) -> bool:
    """True if the sketch is learnt from the data (SVD, leverage scores), False for the
    data-oblivious random projections."""
    return not isinstance(sketcher, RandomProjection)


def _derived_seed(seed: int, *words: int) -> int:
    return int(np.random.SeedSequence([seed, *words]).generate_state(1, np.uint64)[0]
               % _SEED_BOUND)


def _split_prefixed(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {name[len(prefix):]: a for name, a in arrays.items() if name.startswith(prefix)}


class SketchedKernelKMeans(SparseInputMixin, ClassNamePrefixFeaturesOutMixin, ClusterMixin,
                           TransformerMixin, StreamkmEstimator):
    """Streaming kernel k-means on sketched features, re-sketched as the stream changes.

    Each batch is sketched with ``sketcher_`` and given to ``model_.step`` together with its
    raw rows. The raw rows also feed a seeded reservoir sample (``reservoir_size`` rows);
    :meth:`resketch` refits a fresh copy of ``sketcher`` on that sample (or on rows you
    give) and makes the engine re-project its raw support rows, so the centers live in the
    new sketch space and cached kernel values are recomputed. ``sketch_epoch_`` counts the
    re-sketches.

    Re-sketch policy:

    - every ``resketch_every`` batches (any sketcher: for a random projection this draws a
      new random matrix, which only matters if you want to average out one unlucky draw;
      leave ``resketch_every=None`` for projections unless you want that);
    - on drift, when the caller says so with :meth:`notify_drift`: only data-dependent
      sketches (SVD, leverage scores) are refit, since a new random projection does not
      adapt to the data.

    Parameters
    ----------
    sketcher : BaseSketcher
        Unfitted template (:class:`~streamkm.sketch.RandomProjection`,
        :class:`~streamkm.sketch.ApproxSVD`, :class:`~streamkm.sketch.LeverageScoreSelector`).
        The first sketch is fitted on the first batch.
    model : MiniBatchKernelKMeans
        Unfitted engine template.
    resketch_every : int or None, default=None
        Re-sketch after every this many batches; None: only on request.
    reservoir_size : int, default=2048
        Rows of the uniform sample of the stream that re-sketches are fitted on.
    random_state : int or None, default=None
        Seed of the reservoir and of each re-sketch's sketcher (epoch e >= 1 uses a seed
        derived from this and e; epoch 0 keeps the template's integer ``random_state``).
        None draws one at the first batch; it is part of the state either way.

    Attributes
    ----------
    sketcher_ : BaseSketcher
        The current sketch.
    model_ : MiniBatchKernelKMeans
        The engine, fitted on sketched features.
    reservoir_ : RowReservoir
        The sample of raw rows.
    sketch_epoch_ : int
        Number of re-sketches so far (0 for the first sketch).
    n_batches_ : int
        Batches stepped.
    n_features_in_ : int
        Raw input dimension.
    raw_sparse_ : bool
        Raw rows are kept as CSR (the first batch was sparse) or dense.
    last_resketch_seconds_ : float or None
        Wall time of the latest re-sketch.
    labels_ : numpy.ndarray of shape (n_samples,), int64
        After :meth:`fit`: clusters of the fitted rows with the final sketch and centers.
        After :meth:`partial_fit`: clusters of the latest batch, assigned before its update.
    n_iter_ : int
        Engine steps of the latest :meth:`fit` (initial sample included).
    feature_names_in_ : numpy.ndarray of str
        Column names of a fitted DataFrame (not part of the saved state).

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm import MiniBatchKernelKMeans
    >>> from streamkm.sketch import RandomProjection, SketchedKernelKMeans
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 1, (150, 50)), rng.normal(6, 1, (150, 50))])
    >>> model = SketchedKernelKMeans(RandomProjection(n_components=8, random_state=0),
    ...                              MiniBatchKernelKMeans(2, batch_size=100, random_state=0),
    ...                              random_state=0).fit(X)
    >>> len(set(model.labels_[:150])), len(set(model.labels_[150:]))
    (1, 1)
    >>> model.sketcher_.n_components_, model.transform(X[:3]).shape
    (8, (3, 2))
    """

    _parameter_constraints: dict[str, list[Any]] = {
        "sketcher": [BaseSketcher],
        "model": [HasMethods(["step", "resketch"])],
        "resketch_every": [Interval(Integral, 1, None, closed="left"), None],
        "reservoir_size": [Interval(Integral, 1, None, closed="left")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(self, sketcher: BaseSketcher, model: Any, *, resketch_every: int | None = None,
                 reservoir_size: int = 2048, random_state: int | None = None) -> None:
        self.sketcher = sketcher
        self.model = model
        self.resketch_every = resketch_every
        self.reservoir_size = reservoir_size
        self.random_state = random_state

    # ------------------------------------------------------------------ set-up
    def _is_fitted(self) -> bool:
        return hasattr(self, "model_")

    def is_fitted(self) -> bool:
        """Whether a first batch fitted the sketch and initialised the engine."""
        return self._is_fitted()

    def __sklearn_is_fitted__(self) -> bool:
        return self._is_fitted()

    @property
    def _n_features_out(self) -> int:
        return self.model_.n_clusters_

    def _check_fitted(self) -> None:
        if not self._is_fitted():
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call partial_fit or fit first")

    def _reset(self) -> None:
        for name in ("model_", "sketcher_", "reservoir_", "seed_"):
            self.__dict__.pop(name, None)

    def _sketcher_for_epoch(self, epoch: int) -> BaseSketcher:
        params = self.sketcher.get_params()
        given = params.get("random_state")
        if epoch > 0 or not isinstance(given, (int, np.integer)) or isinstance(given, bool):
            params["random_state"] = _derived_seed(self.seed_, 1, epoch)
        return type(self.sketcher)(**params)

    def _start(self, x: Any) -> None:
        self._validate_params()
        self.seed_ = (int(self.random_state) if self.random_state is not None
                      else _derived_seed(int(np.random.SeedSequence().entropy % _SEED_BOUND)))
        self.raw_sparse_ = is_sparse(x)
        self.raw_dtype_ = np.dtype(x.dtype)
        sketcher = self._sketcher_for_epoch(0)
        sketcher.fit(x)
        self.sketcher_ = sketcher
        params = self.model.get_params()
        self.model_ = type(self.model)(**params)
        self.reservoir_ = RowReservoir(int(self.reservoir_size), _derived_seed(self.seed_, 0))
        self.sketch_epoch_ = 0
        self.n_batches_ = 0
        self.last_resketch_seconds_: float | None = None

    def _as_raw(self, X: Any) -> Any:
        """``X`` validated and converted to the kind (CSR or dense) and dtype of the raw rows."""
        if self.__dict__.get("_rows_checked_by_fit", False):
            return X  # rows of the X that fit has validated (names already checked)
        x = self._validate_X(X, reset=False, accept_sparse=True)
        if self.raw_sparse_ and not is_sparse(x):
            import scipy.sparse as sp

            x = sp.csr_matrix(x)
        elif not self.raw_sparse_ and is_sparse(x):
            x = x.toarray()
        if x.dtype != self.raw_dtype_:
            x = x.astype(self.raw_dtype_)
        return x

    # ------------------------------------------------------------------ learning
    def step(self, X: Any, *, sample_weight: Any = None, features: Any = None) -> Any:
        """Sketch the batch ``X``, step the engine on it, then apply the re-sketch policy.

        Parameters
        ----------
        X : array-like or scipy sparse matrix of shape (n_samples, n_features)
            One batch; the first one fits the first sketch and initialises the engine (it
            needs at least ``n_clusters`` rows, and for ``ApproxSVD`` at least
            ``n_components``).
        sample_weight : array-like of shape (n_samples,), optional
            Positive integer multiplicity of each row (see
            :meth:`MiniBatchKernelKMeans.step`); the reservoir is offered each row once.
        features : ndarray of shape (n_samples, n_components_), optional
            ``X`` already sketched with the current sketch (``sketcher_.transform(X)``,
            computed elsewhere, e.g. by a scale-out worker holding the same sketch epoch);
            ignored for the first batch.

        Returns
        -------
        StepReport
            The engine's report for this batch (labels and distances in the sketch the
            batch was assigned with). ``resketched_`` tells whether a re-sketch followed it.
        """
        if not self._is_fitted():
            x = X if self.__dict__.get("_rows_checked_by_fit", False) else self._validate_X(
                X, reset=True, accept_sparse=True)
            self._start(x)
            features = None
        else:
            x = self._as_raw(X)
        if features is None:
            features = self.sketcher_.transform(x)
        elif features.shape != (x.shape[0], self.sketcher_.n_components_):
            raise ValidationError(
                f"features must have shape {(x.shape[0], self.sketcher_.n_components_)!r} "
                f"(the rows of X in the current sketch), got {features.shape!r}")
        report = self.model_.step(features, raw=x, sample_weight=sample_weight)
        self.reservoir_.add(x)
        self.n_batches_ += 1
        self.resketched_ = False
        if self.resketch_every is not None and self.n_batches_ % int(self.resketch_every) == 0:
            self.resketch()
        return report

    def partial_fit(self, X: Any, y: Any = None) -> SketchedKernelKMeans:
        """One batch step (see :meth:`step`). Returns self; ``labels_`` are the batch's."""
        self.labels_ = self.step(X).labels
        return self

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, y: Any = None) -> SketchedKernelKMeans:
        """Fit from scratch on ``X``: an initial sample, then batches drawn with replacement.

        Mirrors :meth:`MiniBatchKernelKMeans.fit` (``init_size``, ``batch_size``,
        ``max_iter`` and early stop of the engine template); each batch goes through
        :meth:`step`, so the re-sketch policy applies.
        """
        x = self._validate_X(X, reset=True, accept_sparse=True)
        self._reset()
        seed = self.random_state if self.random_state is not None else None
        rng = np.random.default_rng(None if seed is None else [int(seed), 2])
        n = int(x.shape[0])
        params = self.model.get_params()
        init_size = min(n, params.get("init_size") or 3 * int(params["batch_size"]))
        self._rows_checked_by_fit = True
        try:
            self.step(x[np.sort(rng.choice(n, size=init_size, replace=False))])
            batch = min(int(params["batch_size"]), n)
            for _ in range(int(params["max_iter"])):
                self.step(x[rng.integers(n, size=batch)])
                if self.model_.converged_:
                    break
            self.labels_ = self.predict(x)
        finally:
            del self._rows_checked_by_fit
        self.n_iter_ = self.n_steps_
        return self

    def resketch(self, sample: Any = None) -> SketchedKernelKMeans:
        """Fit a new sketch and re-project the engine's support rows into it.

        Parameters
        ----------
        sample : array-like or scipy sparse matrix, optional
            Raw rows to fit the new sketch on; default: the reservoir of recent rows.

        Returns
        -------
        self
        """
        self._check_fitted()
        t0 = time.perf_counter()
        rows = self.reservoir_.rows() if sample is None else self._as_raw(sample)
        sketcher = self._sketcher_for_epoch(self.sketch_epoch_ + 1)
        sketcher.fit(rows)
        self.model_.resketch(sketcher.transform)
        self.sketcher_ = sketcher
        self.sketch_epoch_ += 1
        self.resketched_ = True
        self.last_resketch_seconds_ = time.perf_counter() - t0
        return self

    def notify_drift(self) -> bool:
        """Drift was detected (e.g. a cluster split or a woken model): re-sketch if the
        sketch is data-dependent. Returns whether it re-sketched."""
        self._check_fitted()
        if not is_data_dependent(self.sketcher_):
            return False
        self.resketch()
        return True

    # ------------------------------------------------------------------ inference
    def sketch(self, X: Any) -> np.ndarray:
        """The current sketch of ``X`` (dense, shape (n_samples, n_components))."""
        self._check_fitted()
        return self.sketcher_.transform(self._as_raw(X))

    def transform(self, X: Any) -> np.ndarray:
        """Squared kernel distances of the rows of ``X`` to every center (in the sketch)."""
        features = self.sketch(X)
        return self.model_.transform(features)

    def predict(self, X: Any) -> np.ndarray:
        """Index of the nearest center of each row (int64; -1 for flagged rows when the
        model's ``label_outliers`` is set)."""
        features = self.sketch(X)
        return self.model_.predict(features)

    def score_samples(self, X: Any) -> np.ndarray:
        """Novelty of each row of ``X`` in the sketch (see
        :meth:`MiniBatchKernelKMeans.score_samples`; higher is more typical)."""
        return self.model_.score_samples(self.sketch(X))

    def score(self, X: Any, y: Any = None) -> float:
        """Minus the mean squared kernel distance of the rows of ``X`` to their centers."""
        features = self.sketch(X)
        return self.model_.score(features)

    # engine attributes the service reads
    @property
    def n_clusters_(self) -> int:
        """Current number of clusters of the engine (``model.n_clusters`` is the setting)."""
        self._check_fitted()
        return int(self.model_.n_clusters_)

    @property
    def n_steps_(self) -> int:
        """Engine steps so far."""
        self._check_fitted()
        return int(self.model_.n_steps_)

    @property
    def converged_(self) -> bool:
        """Whether the engine is converged (assign only)."""
        self._check_fitted()
        return bool(self.model_.converged_)

    @property
    def batch_objective_(self) -> float:
        """The engine's objective on the latest batch."""
        self._check_fitted()
        return float(self.model_.batch_objective_)

    @property
    def counts_(self) -> np.ndarray:
        """Rows assigned to each cluster so far."""
        self._check_fitted()
        return self.model_.counts_

    # ------------------------------------------------------------------ state
    def sketch_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Everything but the engine: current sketch, reservoir, epoch, seeds (no pickle).

        Arrays are namespaced ``sketcher.*`` and ``reservoir.*``. A service checkpoint
        stores this next to the engine's own state.
        """
        self._check_fitted()
        s_arrays, s_meta = self.sketcher_.get_state()
        r_arrays, r_meta = self.reservoir_.get_state()
        template_params = self.sketcher.get_params()
        rs = template_params.get("random_state")
        if "random_state" in template_params and not isinstance(rs, (int, type(None))):
            template_params["random_state"] = None
        arrays = {f"sketcher.{k}": v for k, v in s_arrays.items()}
        arrays.update({f"reservoir.{k}": v for k, v in r_arrays.items()})
        meta = {
            "format": SKETCH_STATE_FORMAT, "format_version": _STATE_VERSION,
            "streamkm_version": __version__,
            "params": {"resketch_every": self.resketch_every,
                       "reservoir_size": int(self.reservoir_size),
                       "random_state": self.random_state},
            "template": {"sketcher": type(self.sketcher).__name__,
                         "params": template_params},
            "seed": int(self.seed_), "sketch_epoch": int(self.sketch_epoch_),
            "n_batches": int(self.n_batches_), "n_features_in": int(self.n_features_in_),
            "raw_sparse": bool(self.raw_sparse_), "raw_dtype": self.raw_dtype_.name,
            "last_resketch_seconds": self.last_resketch_seconds_,
            "sketcher": s_meta, "reservoir": r_meta,
        }
        return arrays, meta

    def state_parts(self) -> dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]]:
        """The engine's state (``"model"``) and the sketch's (``"sketch"``, see
        :meth:`sketch_state`), as a service checkpoint stores them."""
        return {"model": self.model_.get_state(), "sketch": self.sketch_state()}

    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The whole pipeline: ``model.*`` (engine) and ``sketch.*`` arrays plus metadata."""
        m_arrays, m_meta = self.model_.get_state() if self._is_fitted() else ({}, None)
        s_arrays, s_meta = self.sketch_state()
        arrays = {f"model.{k}": v for k, v in m_arrays.items()}
        arrays.update({f"sketch.{k}": v for k, v in s_arrays.items()})
        meta = {"format": PIPELINE_STATE_FORMAT, "format_version": _STATE_VERSION,
                "streamkm_version": __version__, "model": m_meta, "sketch": s_meta}
        return arrays, meta

    @classmethod
    def from_parts(cls, model: Any, sketch_arrays: dict[str, np.ndarray],
                   sketch_meta: dict[str, Any]) -> SketchedKernelKMeans:
        """Rebuild from a restored engine and the output of :meth:`sketch_state`.

        Raises
        ------
        StateError
            The sketch state is malformed or does not fit the engine.
        """
        if not isinstance(sketch_meta, dict) or sketch_meta.get("format") != SKETCH_STATE_FORMAT:
            raise StateError(f"not a {SKETCH_STATE_FORMAT} state: format="
                             f"{sketch_meta.get('format') if isinstance(sketch_meta, dict) else sketch_meta!r}")
        if sketch_meta.get("format_version") != _STATE_VERSION:
            raise StateError(f"unsupported sketch state format_version "
                             f"{sketch_meta.get('format_version')!r} (this streamkm reads "
                             f"{_STATE_VERSION})")
        try:
            template = sketch_meta["template"]
            if template.get("sketcher") not in SKETCHER_TYPES:
                raise StateError(f"unknown sketcher type {template.get('sketcher')!r} in state")
            template_sketcher = SKETCHER_TYPES[template["sketcher"]].from_state(
                {}, {"sketcher": template["sketcher"], "format_version": STATE_FORMAT_VERSION,
                     "params": template["params"], "fitted": False})
            template_model = type(model)(**model.get_params())
            params = sketch_meta["params"]
            obj = cls(template_sketcher, template_model, resketch_every=params["resketch_every"],
                      reservoir_size=params["reservoir_size"],
                      random_state=params["random_state"])
            obj._validate_params()
            obj.seed_ = int(sketch_meta["seed"])
            obj.sketch_epoch_ = int(sketch_meta["sketch_epoch"])
            obj.n_batches_ = int(sketch_meta["n_batches"])
            obj.n_features_in_ = int(sketch_meta["n_features_in"])
            obj.raw_sparse_ = bool(sketch_meta["raw_sparse"])
            obj.raw_dtype_ = np.dtype(sketch_meta["raw_dtype"])
            obj.last_resketch_seconds_ = sketch_meta["last_resketch_seconds"]
            obj.sketcher_ = sketcher_from_state(_split_prefixed(sketch_arrays, "sketcher."),
                                                sketch_meta["sketcher"])
            obj.reservoir_ = RowReservoir.from_state(
                _split_prefixed(sketch_arrays, "reservoir."), sketch_meta["reservoir"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, StateError):
                raise
            raise StateError(f"malformed {SKETCH_STATE_FORMAT} state: {exc!r}") from exc
        if obj.sketcher_.n_features_in_ != obj.n_features_in_:
            raise StateError(
                f"the saved sketch takes {obj.sketcher_.n_features_in_} features, the state "
                f"says {obj.n_features_in_}")
        if int(getattr(model, "n_features_in_", obj.sketcher_.n_components_)) != int(
                obj.sketcher_.n_components_):
            raise StateError(
                f"the engine works on {model.n_features_in_} features but the saved sketch "
                f"has {obj.sketcher_.n_components_} components")
        obj.model_ = model
        obj.resketched_ = False
        return obj

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray],
                   meta: dict[str, Any]) -> SketchedKernelKMeans:
        """Rebuild a pipeline from :meth:`get_state`: identical predictions, and continued
        training (re-sketches included) identical to the uninterrupted pipeline."""
        from streamkm.cluster import MiniBatchKernelKMeans

        if not isinstance(meta, dict) or meta.get("format") != PIPELINE_STATE_FORMAT:
            raise StateError(f"not a {PIPELINE_STATE_FORMAT} state")
        if meta.get("format_version") != _STATE_VERSION:
            raise StateError(f"unsupported {PIPELINE_STATE_FORMAT} format_version "
                             f"{meta.get('format_version')!r}")
        if meta.get("model") is None:
            raise StateError(f"{PIPELINE_STATE_FORMAT} state has no fitted engine")
        model = MiniBatchKernelKMeans.from_state(_split_prefixed(arrays, "model."), meta["model"])
        return cls.from_parts(model, _split_prefixed(arrays, "sketch."), meta["sketch"])

    def save(self, path: str | Path) -> None:
        """Write the state to one ``.npz`` file (atomic; no pickle)."""
        arrays, meta = self.get_state()
        write_npz_atomic(path, arrays, meta)

    @classmethod
    def load(cls, path: str | Path) -> SketchedKernelKMeans:
        """Read a pipeline written by :meth:`save` (verifying its SHA-256 digests)."""
        arrays, meta = read_npz(path)
        return cls.from_state(arrays, meta)
