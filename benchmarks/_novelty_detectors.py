"""The novelty detectors of ``bench_novelty.py`` behind one prequential interface.

``start(first)`` learns the first window (nothing is scored before it); ``score_then_learn(x)``
returns the anomaly scores of a window (higher = more unusual) from the model as it was
before the window, then learns the window.

* streamkm: :class:`streamkm.MiniBatchKernelKMeans` with ``outlier_alpha`` set, one
  ``step`` per window; the score is ``-log(report.novelty)`` (the novelty is a conformal
  p-value, small = unusual). The same step's squared kernel distance to the assigned
  center is kept as a second score (the raw distance the novelty is calibrated from) and
  its ``report.outliers`` as the flags.
* IsolationForest and LocalOutlierFactor(novelty=True): fitted on the first window, then
  refitted after every window on a sliding window of the latest ``memory`` records (the
  window just scored included); the score is ``-score_samples``.
* River's HalfSpaceTrees: ``score_one`` then ``learn_one`` record by record. It needs
  features in [0, 1]: each feature is scaled by the minimum and maximum of the first window
  (what the stream has shown when the detector starts); later values outside [0, 1] are
  passed as they are (a tree sends them to the outer side of its splits).
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
from sklearn.ensemble import IsolationForest
from sklearn.neighbors import LocalOutlierFactor

from streamkm import MiniBatchKernelKMeans


class Detector(abc.ABC):
    """A detector on windows of a stream."""

    name = ""

    @abc.abstractmethod
    def start(self, first: np.ndarray) -> None:
        """Learn the first window (a fresh model)."""

    @abc.abstractmethod
    def score_then_learn(self, x: np.ndarray) -> np.ndarray:
        """Anomaly scores of ``x`` before learning it, higher = more unusual."""

    def setting(self) -> str:
        """The parameters, as the tables print them."""
        return ""


class StreamkmDetector(Detector):
    """streamkm's novelty score from ``step``; ``distances`` and ``flags`` hold the same
    step's squared distances and outlier flags."""

    name = "streamkm"

    def __init__(self, n_clusters: int, *, seed: int = 0, **params: Any) -> None:
        self.n_clusters = n_clusters
        self.seed = seed
        self.params = {"outlier_alpha": 0.01, "outliers": "exclude", **params}
        self.model: MiniBatchKernelKMeans | None = None
        self.distances = np.zeros(0)
        self.flags = np.zeros(0, dtype=bool)
        self.events: list[dict] = []

    def start(self, first: np.ndarray) -> None:
        self.model = MiniBatchKernelKMeans(self.n_clusters, random_state=self.seed,
                                           **self.params)
        self.events = []
        self._step(first)

    def _step(self, x: np.ndarray) -> Any:
        report = self.model.step(x)
        self.events.extend(report.events)
        return report

    def score_then_learn(self, x: np.ndarray) -> np.ndarray:
        report = self._step(x)
        self.distances = np.asarray(report.sq_distances, dtype=np.float64)
        self.flags = np.asarray(report.outliers, dtype=bool)
        return -np.log(np.asarray(report.novelty, dtype=np.float64))

    def setting(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in
                         {"n_clusters": self.n_clusters, **self.params}.items())


class RefittedDetector(Detector):
    """A scikit-learn detector refitted after every window on the latest ``memory``
    records."""

    def __init__(self, memory: int, seed: int = 0) -> None:
        self.memory = memory
        self.seed = seed
        self.seen = np.zeros((0, 0))
        self.model: Any = None

    @abc.abstractmethod
    def _new_model(self, n_rows: int) -> Any:
        """A fresh unfitted detector for ``n_rows`` training rows."""

    def _fit(self) -> None:
        self.model = self._new_model(self.seen.shape[0]).fit(self.seen)

    def start(self, first: np.ndarray) -> None:
        self.seen = first[-self.memory:]
        self._fit()

    def score_then_learn(self, x: np.ndarray) -> np.ndarray:
        scores = -self.model.score_samples(x)
        self.seen = np.vstack([self.seen, x])[-self.memory:]
        self._fit()
        return scores


class IsolationForestDetector(RefittedDetector):
    """scikit-learn's IsolationForest, 100 trees, refitted on the sliding window."""

    name = "IsolationForest"

    def _new_model(self, n_rows: int) -> Any:
        return IsolationForest(n_estimators=100, random_state=self.seed)

    def setting(self) -> str:
        return f"n_estimators=100, refit on the latest {self.memory} records"


class LOFDetector(RefittedDetector):
    """scikit-learn's LocalOutlierFactor(novelty=True), 20 neighbours (fewer when the
    training window is smaller), refitted on the sliding window."""

    name = "LOF"

    def _new_model(self, n_rows: int) -> Any:
        return LocalOutlierFactor(n_neighbors=min(20, n_rows - 1), novelty=True)

    def setting(self) -> str:
        return f"novelty=True, n_neighbors=20, refit on the latest {self.memory} records"


class HalfSpaceTreesDetector(Detector):
    """River's HalfSpaceTrees, record by record, on min-max scaled features."""

    name = "HalfSpaceTrees"

    def __init__(self, window: int, seed: int = 0) -> None:
        self.window = window
        self.seed = seed
        self.lo = np.zeros(0)
        self.span = np.ones(0)
        self.model: Any = None

    def _rows(self, x: np.ndarray) -> list[dict[int, float]]:
        return [dict(enumerate(r)) for r in ((x - self.lo) / self.span).tolist()]

    def start(self, first: np.ndarray) -> None:
        from river.anomaly import HalfSpaceTrees

        self.lo = first.min(axis=0)
        span = first.max(axis=0) - self.lo
        self.span = np.where(span > 0, span, 1.0)
        self.model = HalfSpaceTrees(n_trees=10, height=8, window_size=self.window,
                                    seed=self.seed)
        for row in self._rows(first):
            self.model.learn_one(row)

    def score_then_learn(self, x: np.ndarray) -> np.ndarray:
        scores = np.empty(x.shape[0])
        for i, row in enumerate(self._rows(x)):
            scores[i] = self.model.score_one(row)
            self.model.learn_one(row)
        return scores

    def setting(self) -> str:
        return (f"n_trees=10, height=8, window_size={self.window}, "
                "min-max of the first window")


def all_detectors(n_clusters: int, window: int, memory: int, seed: int = 0,
                  streamkm_params: dict[str, Any] | None = None) -> list[Detector]:
    """streamkm, IsolationForest, LOF and HalfSpaceTrees for one data set."""
    return [StreamkmDetector(n_clusters, seed=seed, **(streamkm_params or {})),
            IsolationForestDetector(memory, seed), LOFDetector(memory, seed),
            HalfSpaceTreesDetector(window, seed)]
