"""streamkm as a River clusterer: learn from dicts one at a time, inside River pipelines.

Needs River (``pip install streamkm[river]``). :class:`KernelKMeans` follows River's
``base.Clusterer`` conventions (``learn_one(x)`` / ``predict_one(x)`` on feature dicts,
``learn_many`` / ``predict_many`` on pandas DataFrames, ``clone``, ``repr``) on top of the
mini-batch engine :class:`streamkm.MiniBatchKernelKMeans`: rows are buffered until
``batch_size`` of them have arrived, then the engine takes one step on them.

Examples
--------
Three clusters in a stream of dicts, standardised online, scored prequentially (each row is
predicted before it is learnt) against the true groups with River's adjusted Rand index:

>>> import numpy as np
>>> from river import evaluate, metrics, preprocessing
>>> import streamkm.river
>>> rng = np.random.default_rng(0)
>>> groups = rng.integers(3, size=3000)
>>> centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
>>> rows = centers[groups] + rng.normal(size=(3000, 2))
>>> stream = [({"a": float(r[0]), "b": float(r[1])}, int(g)) for r, g in zip(rows, groups)]
>>> model = preprocessing.StandardScaler() | streamkm.river.KernelKMeans(
...     n_clusters=3, batch_size=100, seed=0)
>>> score = evaluate.progressive_val_score(stream, model, metrics.AdjustedRand())
>>> score.get() > 0.9
True
>>> model["KernelKMeans"].n_steps
30
"""

from __future__ import annotations

import inspect
import math
from numbers import Integral
from typing import Any

import numpy as np
from river import base
from sklearn.base import clone

from streamkm.cluster import MiniBatchKernelKMeans
from streamkm.exceptions import ParameterError, ValidationError

__all__ = ["KernelKMeans"]


#: The one name the adapter changes: River calls every estimator's seed ``seed``.
RIVER_NAMES = {"random_state": "seed"}


def _adapter_signature() -> inspect.Signature:
    """The engine's ``__init__`` signature (``self`` first), same defaults and kinds,
    under the adapter's names."""
    engine = inspect.signature(MiniBatchKernelKMeans.__init__).parameters.values()
    return inspect.Signature([p.replace(name=RIVER_NAMES.get(p.name, p.name)) for p in engine])


def _feature_order(names: Any) -> list[Any]:
    """A fixed column order for feature names, whatever order the dicts list them in."""
    return sorted(names, key=lambda name: (type(name).__name__, str(name)))


class KernelKMeans(base.Clusterer):
    """Streaming kernel k-means for River: :class:`streamkm.MiniBatchKernelKMeans` on dicts.

    ``learn_one`` copies the row into a buffer; every ``batch_size`` rows the engine takes
    one mini-batch step on the buffer (the first step initialises it from that batch). The
    features are fixed at the first step: the sorted names seen in the first batch. Later a
    missing feature counts as 0 (River's convention for sparse dicts) and a feature never
    seen in the first batch is ignored.

    ``predict_one`` returns 0 until the first step (River's convention for a clusterer
    that has no clusters yet), then the index of the nearest center in kernel feature
    space. The memory used is bounded: at most ``batch_size`` buffered rows plus the
    engine's centers (``tau`` support rows each).

    Parameters
    ----------
    **params
        Every parameter of :class:`streamkm.MiniBatchKernelKMeans`, with its name, default
        and checks (``n_clusters`` may be given by position), except that its
        ``random_state`` is called ``seed`` here, as in River (:data:`RIVER_NAMES`). The
        ones that matter most here: ``batch_size`` (default 1024) is the rows buffered per
        step and must be at least ``n_clusters``; the first batch is the engine's
        initialisation sample, where ``gamma="auto"`` chooses the kernel (given at least
        max(500, 20 k) distinct rows; see the engine).

    Attributes
    ----------
    engine : streamkm.MiniBatchKernelKMeans or None
        The mini-batch engine, None before the first step. Its ``save`` writes a
        pickle-free checkpoint.
    n_steps : int
        Mini-batch steps taken.
    features : list or None
        The feature names, in the engine's column order, once fixed.

    Examples
    --------
    >>> from streamkm.river import KernelKMeans
    >>> model = KernelKMeans(n_clusters=2, batch_size=4, seed=0)
    >>> rows = [{"x": 0.0}, {"x": 0.2}, {"x": 5.0}, {"x": 5.1}]
    >>> model.predict_one({"x": 0.1})  # no step yet
    0
    >>> for row in rows:
    ...     model.learn_one(row)
    >>> model.n_steps
    1
    >>> model.predict_one({"x": 0.1}) != model.predict_one({"x": 4.9})
    True
    """

    def __init__(self, *args: Any, **params: Any) -> None:
        try:
            bound = _SIGNATURE.bind(self, *args, **params)
        except TypeError as exc:
            raise ParameterError(f"{type(self).__name__}: {exc}") from None
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)
        self._template = MiniBatchKernelKMeans.from_params(self._engine_params())
        batch_size, n_clusters = self.batch_size, self.n_clusters
        if isinstance(batch_size, Integral) and batch_size < n_clusters:
            raise ParameterError(
                f"batch_size={batch_size!r} must be >= n_clusters={n_clusters!r}: the first "
                "batch initialises the clusters"
            )
        self._buffer: list[dict[Any, float]] = []
        self._engine: MiniBatchKernelKMeans | None = None
        self._features: list[Any] | None = None

    def _engine_params(self) -> dict[str, Any]:
        return {name: getattr(self, RIVER_NAMES.get(name, name))
                for name in MiniBatchKernelKMeans._get_param_names()}

    @classmethod
    def _unit_test_params(cls) -> Any:
        yield {"n_clusters": 2, "batch_size": 16, "seed": 1}
        yield {"n_clusters": 3, "kernel": "linear", "batch_size": 8}

    @property
    def engine(self) -> MiniBatchKernelKMeans | None:
        return self._engine

    @property
    def n_steps(self) -> int:
        return 0 if self._engine is None else int(self._engine.n_steps_)

    @property
    def features(self) -> list[Any] | None:
        return None if self._features is None else list(self._features)

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: dict[Any, Any]) -> None:
        """Buffer the row ``x``; a full buffer is one step of the engine."""
        self._buffer.append(_numeric_copy(x))
        if len(self._buffer) >= self.batch_size:
            self._step()

    def learn_many(self, X: Any) -> None:
        """Learn the rows of the DataFrame ``X`` in order (NaN counts as a missing feature);
        the same as ``learn_one`` on each row."""
        for row in X.to_dict(orient="records"):
            self.learn_one({k: v for k, v in row.items() if not _is_nan(v)})

    def _step(self) -> None:
        if self._features is None:
            self._features = _feature_order({name for row in self._buffer for name in row})
        batch = self._matrix(self._buffer)
        if self._engine is None:
            self._engine = clone(self._template)
        self._engine.partial_fit(batch)
        self._buffer = []

    def _matrix(self, rows: list[dict[Any, float]]) -> np.ndarray:
        assert self._features is not None
        return np.array([[row.get(name, 0.0) for name in self._features] for row in rows],
                        dtype=np.float64).reshape(len(rows), len(self._features))

    # ------------------------------------------------------------------ inference
    def predict_one(self, x: dict[Any, Any]) -> int:
        """Index of the nearest cluster of ``x``; 0 before the first step."""
        if self._engine is None:
            return 0
        return int(self._engine.predict(self._matrix([_numeric_copy(x)]))[0])

    def score_one(self, x: dict[Any, Any]) -> float:
        """How unusual ``x`` is, River's anomaly-score convention (higher is more unusual):
        1 minus the engine's novelty (:meth:`MiniBatchKernelKMeans.score_samples`), in
        [0, 1); 0.0 before the first step and while the model holds fewer than 20 recent
        members in all (a cluster with fewer is scored against all clusters' members
        pooled). Learns nothing."""
        if self._engine is None:
            return 0.0
        return 1.0 - float(self._engine.score_samples(self._matrix([_numeric_copy(x)]))[0])

    def predict_many(self, X: Any) -> Any:
        """Cluster of each row of the DataFrame ``X`` (a pandas Series on its index); all 0
        before the first step. Missing columns and NaN count as 0."""
        import pandas as pd

        if self._engine is None:
            return pd.Series(np.zeros(len(X), dtype=np.int64), index=X.index)
        assert self._features is not None
        values = X.reindex(columns=self._features).to_numpy(dtype=np.float64, na_value=0.0)
        labels = self._engine.predict(values) if len(X) else np.empty(0, dtype=np.int64)
        return pd.Series(labels, index=X.index)


_SIGNATURE = _adapter_signature()  # with ``self``: what River and help() read
KernelKMeans.__init__.__signature__ = _SIGNATURE  # type: ignore[attr-defined]


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _numeric_copy(x: dict[Any, Any]) -> dict[Any, float]:
    """A copy of the row with float values, or a ValidationError naming the bad feature."""
    out: dict[Any, float] = {}
    for name, value in x.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number):
            raise ValidationError(
                f"feature {name!r} must be a finite number, got {value!r}"
            )
        out[name] = number
    return out
