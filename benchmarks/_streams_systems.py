"""The clusterers of ``bench_streams.py`` behind one prequential interface.

Each system takes a window of rows, returns the clusters it assigns them with the model as
it was before the window, then learns the window. Only that call is timed; River's rows are
turned into dicts before it (River's input format, not the learner's work).
"""

from __future__ import annotations

import abc
import pickle
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from sklearn.cluster import MiniBatchKMeans

from streamkm import MiniBatchKernelKMeans


@dataclass(frozen=True)
class StreamFacts:
    """What a system may know about a stream before it starts: the number of clusters to
    start with, the window size and the rows of the first window (a River radius rule)."""

    n_clusters: int
    window: int
    first_window: np.ndarray


class System(abc.ABC):
    """A clusterer on windows: ``step(x, rows)`` predicts then learns; ``x`` is the window
    as an array, ``rows`` the same rows as dicts (built outside the timed call)."""

    name = ""
    uses_dicts = False

    @abc.abstractmethod
    def step(self, x: np.ndarray, rows: list[dict[int, float]] | None) -> np.ndarray | None:
        """Labels predicted for the window before learning it (None for the first window)."""

    def model_clusters(self) -> int | None:
        """The number of clusters the model holds now, where it has such a number."""
        return None

    def state_bytes(self) -> int:
        """The size of the model's state in bytes."""
        return len(pickle.dumps(self.model, protocol=pickle.HIGHEST_PROTOCOL))


class StreamkmSystem(System):
    """:class:`streamkm.MiniBatchKernelKMeans`, one ``step`` per window. A step assigns the
    window with the centers before its update: those assignments are the prediction (as
    stable cluster ids, which is what a stream is told). The first step starts the model
    from the window and assigns it with the new centers (not a prediction)."""

    def __init__(self, name: str, **params: Any) -> None:
        self.name = name
        self.params = params
        self.model: MiniBatchKernelKMeans | None = None

    def start(self, facts: StreamFacts) -> None:
        self.model = MiniBatchKernelKMeans(facts.n_clusters, random_state=0, **self.params)

    def step(self, x: np.ndarray, rows: Any) -> np.ndarray | None:
        started = self.model.is_fitted()
        report = self.model.step(x)
        return report.cluster_ids if started else None

    def model_clusters(self) -> int | None:
        return int(self.model.n_clusters_)

    def state_bytes(self) -> int:
        arrays, meta = self.model.get_state()
        return int(sum(a.nbytes for a in arrays.values())) + len(repr(meta))

    def setting(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.params.items()) or "defaults"


class SklearnSystem(System):
    """scikit-learn's :class:`~sklearn.cluster.MiniBatchKMeans`: ``predict`` then
    ``partial_fit`` per window (the first window is learnt only)."""

    name = "sklearn MiniBatchKMeans"

    def start(self, facts: StreamFacts) -> None:
        self.model = MiniBatchKMeans(n_clusters=facts.n_clusters, random_state=0)
        self.started = False

    def step(self, x: np.ndarray, rows: Any) -> np.ndarray | None:
        labels = self.model.predict(x) if self.started else None
        self.model.partial_fit(x)
        self.started = True
        return labels

    def model_clusters(self) -> int | None:
        return int(self.model.n_clusters)

    def setting(self) -> str:
        return "n_clusters=k, random_state=0"


class RiverSystem(System):
    """A ``river.cluster`` clusterer: ``predict_one`` on every row of the window, then
    ``learn_one`` on every row (River's own per-record interface)."""

    uses_dicts = True

    def __init__(self, name: str, make: Callable[[StreamFacts], Any],
                 describe: Callable[[StreamFacts], str], count: str | None) -> None:
        self.name = name
        self.make = make
        self.describe = describe
        self.count = count

    def start(self, facts: StreamFacts) -> None:
        self.model = self.make(facts)
        self.started = False
        self._setting = self.describe(facts)

    def step(self, x: np.ndarray, rows: list[dict[int, float]]) -> np.ndarray | None:
        labels = None
        if self.started:
            predict = self.model.predict_one
            labels = np.fromiter((predict(r) for r in rows), dtype=np.int64, count=len(rows))
        learn = self.model.learn_one
        for r in rows:
            learn(r)
        self.started = True
        return labels

    def model_clusters(self) -> int | None:
        # DBSTREAM's public n_clusters re-clusters; its private count is the one the last
        # prediction used, so reading it moves no work out of the timed call.
        if self.count is None:
            return None
        return int(getattr(self.model, self.count))

    def setting(self) -> str:
        return self._setting


def neighbour_radius(x: np.ndarray, n_neighbors: int = 10) -> float:
    """Median distance from a row of ``x`` to its ``n_neighbors``-th nearest other row: the
    radius given to the density methods' tuned setting (DenStream's epsilon, DBSTREAM's
    clustering threshold), from the first window only."""
    sq = (x * x).sum(axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)
    np.fill_diagonal(d2, np.inf)
    kth = np.partition(d2, n_neighbors - 1, axis=1)[:, n_neighbors - 1]
    return float(np.sqrt(np.median(kth)))


def river_systems() -> list[RiverSystem]:
    """River's five clusterers, each with its documented defaults and with one setting
    for the stream (k, and a radius or time scale from the window)."""
    from river import cluster

    def r(f: StreamFacts) -> float:
        return round(neighbour_radius(f.first_window), 3)

    specs: list[tuple[str, Callable[[StreamFacts], Any], Callable[[StreamFacts], str],
                      str | None]] = [
        ("River KMeans", lambda f: cluster.KMeans(seed=0),
         lambda f: "defaults (n_clusters=5)", "n_clusters"),
        ("River KMeans (tuned)", lambda f: cluster.KMeans(n_clusters=f.n_clusters, seed=0),
         lambda f: f"n_clusters={f.n_clusters}", "n_clusters"),
        ("River STREAMKMeans", lambda f: cluster.STREAMKMeans(seed=0),
         lambda f: "defaults (n_clusters=2, chunk_size=10)", "n_clusters"),
        ("River STREAMKMeans (tuned)",
         lambda f: cluster.STREAMKMeans(chunk_size=100, n_clusters=f.n_clusters, seed=0),
         lambda f: f"n_clusters={f.n_clusters}, chunk_size=100", "n_clusters"),
        ("River CluStream", lambda f: cluster.CluStream(seed=0),
         lambda f: "defaults (n_macro_clusters=5)", "n_macro_clusters"),
        ("River CluStream (tuned)",
         lambda f: cluster.CluStream(n_macro_clusters=f.n_clusters, time_gap=f.window,
                                     time_window=4 * f.window, seed=0),
         lambda f: f"n_macro_clusters={f.n_clusters}, time_gap={f.window}, "
                   f"time_window={4 * f.window}", "n_macro_clusters"),
        ("River DenStream", lambda f: cluster.DenStream(),
         lambda f: "defaults (epsilon=0.02)", "n_clusters"),
        ("River DenStream (tuned)",
         lambda f: cluster.DenStream(epsilon=r(f), n_samples_init=f.window),
         lambda f: f"epsilon={r(f)}, n_samples_init={f.window}", "n_clusters"),
        ("River DBSTREAM", lambda f: cluster.DBSTREAM(),
         lambda f: "defaults (clustering_threshold=1.0)", "_n_clusters"),
        ("River DBSTREAM (tuned)",
         lambda f: cluster.DBSTREAM(clustering_threshold=r(f)),
         lambda f: f"clustering_threshold={r(f)}", "_n_clusters"),
    ]
    return [RiverSystem(name, make, describe, count) for name, make, describe, count in specs]


def all_systems(*, river: bool = True) -> list[System]:
    """streamkm's three modes, scikit-learn, and (with ``river``) River's clusterers."""
    out: list[System] = [
        StreamkmSystem("streamkm"),
        StreamkmSystem("streamkm drift", drift=True),
        StreamkmSystem("streamkm linear", kernel="linear"),
        SklearnSystem(),
    ]
    if river:
        out += river_systems()
    return out
