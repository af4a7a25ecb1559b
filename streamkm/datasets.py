"""Generators of evolving streams for trying and benchmarking streaming clusterers.

:func:`make_drifting_stream` returns rows in arrival order, the true cluster of each row and
the schedule of what happens to the clusters: one cluster moves, one appears, one splits in
two, one (a ring) disappears and two merge, next to two interleaved half-moons that stay put.
Everything is a pure function of the arguments, so a seed gives the same stream on every
machine.

How a row is made: record ``i`` happens at time ``t = i / n_samples`` in [0, 1). It is drawn
from one of the *generators* present at ``t``, each with the same probability. A generator is
a shape in a 2-D plane (an upper or lower half-moon, a ring, or a round Gaussian blob with a
centre that may follow a path); the point gets Gaussian noise of standard deviation ``noise``.
With ``n_features > 2`` the plane is embedded by a seeded random orthonormal map and every
one of the ``n_features`` coordinates gets the noise, so distances between the shapes are
kept and the extra dimensions hold only noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._core.validation import (
    check_float,
    check_float_dtype,
    check_int,
    check_random_state,
)
from streamkm.exceptions import ParameterError

__all__ = ["StreamEvent", "make_drifting_stream"]

#: Radius of the half-moons and of the ring, in the plane's units.
_RADIUS = 2.0
#: Offset of each half of the splitting blob from its parent's centre once the split is done.
_SPLIT_OFFSET = 3.0
#: Offset of each merging blob from the merged centre before the merge starts.
_MERGE_OFFSET = 3.0
_MOONS_CENTER = (0.5, 0.25)  # of the unit moons: subtracted so the pair is centred on the origin
_RING_CENTER = (9.0, 5.0)
_SPLIT_CENTER = (9.0, -6.0)
_MOVE_PATH = ((-9.0, -6.0), (-9.0, 6.0))
_APPEAR_CENTER = (0.0, -7.0)
_MERGE_CENTER = (0.0, 7.0)

# The schedule, in fractions of the stream: (start, end) of each event.
_MOVE = (0.10, 0.40)
_APPEAR = 0.25
_SPLIT = (0.40, 0.50)
_DISAPPEAR = 0.60
_MERGE = (0.70, 0.80)


@dataclass(frozen=True)
class StreamEvent:
    """One scheduled change of the clusters of :func:`make_drifting_stream`.

    Attributes
    ----------
    kind : {"move", "appear", "disappear", "split", "merge"}
        What happens.
    start, end : int
        First record of the change and the record at which it is complete (equal for
        "appear" and "disappear", which are instantaneous).
    at : int
        First record labelled with ``labels_after``: the midpoint of a split or merge (the
        two halves are then half as far apart as when separated), ``start`` otherwise.
    labels_before, labels_after : tuple of int
        The clusters concerned before and after ``at`` (empty before an appearance, after a
        disappearance).
    description : str
        One sentence for a person.
    """

    kind: str
    start: int
    end: int
    at: int
    labels_before: tuple[int, ...]
    labels_after: tuple[int, ...]
    description: str


def _ramp(t: np.ndarray, start: float, end: float) -> np.ndarray:
    """0 before ``start``, 1 after ``end``, linear in between."""
    return np.clip((t - start) / (end - start), 0.0, 1.0)


@dataclass(frozen=True)
class _Generator:
    """A shape present on records [first, stop), labelled ``label`` before record
    ``relabel_at`` and ``label_after`` from then on."""

    shape: str  # "upper", "lower", "ring" or "blob"
    first: int
    stop: int
    label: int
    center: Any  # callable t -> (m, 2) centres, for blobs and the ring
    relabel_at: int | None = None
    label_after: int = -1


def _fixed(point: tuple[float, float]) -> Any:
    return lambda t: np.broadcast_to(np.asarray(point, dtype=np.float64), (t.shape[0], 2))


def _moving(a: tuple[float, float], b: tuple[float, float], start: float, end: float) -> Any:
    def center(t: np.ndarray) -> np.ndarray:
        r = _ramp(t, start, end)[:, None]
        return (1.0 - r) * np.asarray(a) + r * np.asarray(b)
    return center


def _record(fraction: float, n: int) -> int:
    """The first record at or after ``fraction`` of a stream of ``n`` records."""
    return int(round(fraction * n))


def _generators(n: int) -> list[_Generator]:
    s0, s1 = _SPLIT
    m0, m1 = _MERGE
    split_at, merge_at = _record((s0 + s1) / 2, n), _record((m0 + m1) / 2, n)
    up = np.array([0.0, _SPLIT_OFFSET])
    side = np.array([_MERGE_OFFSET, 0.0])
    split_c, merge_c = np.asarray(_SPLIT_CENTER), np.asarray(_MERGE_CENTER)
    ring_stop, appear, split, merge = (_record(_DISAPPEAR, n), _record(_APPEAR, n),
                                       _record(s0, n), _record(m1, n))
    return [
        _Generator("upper", 0, n, 0, None),
        _Generator("lower", 0, n, 1, None),
        _Generator("ring", 0, ring_stop, 2, _fixed(_RING_CENTER)),
        _Generator("blob", 0, n, 3, _moving(*_MOVE_PATH, *_MOVE)),
        _Generator("blob", 0, split, 4, _fixed(_SPLIT_CENTER)),
        _Generator("blob", split, n, 4, _moving(tuple(split_c), tuple(split_c + up), s0, s1),
                   relabel_at=split_at, label_after=5),
        _Generator("blob", split, n, 4, _moving(tuple(split_c), tuple(split_c - up), s0, s1),
                   relabel_at=split_at, label_after=6),
        _Generator("blob", appear, n, 7, _fixed(_APPEAR_CENTER)),
        _Generator("blob", 0, merge, 8, _moving(tuple(merge_c - side), tuple(merge_c), m0, m1)),
        _Generator("blob", 0, merge, 9, _moving(tuple(merge_c + side), tuple(merge_c), m0, m1),
                   relabel_at=merge_at, label_after=8),
        _Generator("blob", merge, n, 8, _fixed(_MERGE_CENTER)),
    ]


def _schedule(n: int) -> tuple[StreamEvent, ...]:
    def rec(fraction: float) -> int:
        return _record(fraction, n)

    s0, s1 = _SPLIT
    m0, m1 = _MERGE
    return (
        StreamEvent("move", rec(_MOVE[0]), rec(_MOVE[1]), rec(_MOVE[0]), (3,), (3,),
                    "blob 3 moves at constant speed from (-9, -6) to (-9, 6)"),
        StreamEvent("appear", rec(_APPEAR), rec(_APPEAR), rec(_APPEAR), (), (7,),
                    "blob 7 appears at (0, -7)"),
        StreamEvent("split", rec(s0), rec(s1), rec((s0 + s1) / 2), (4,), (5, 6),
                    "blob 4 at (9, -6) splits into blobs 5 and 6, which move apart to "
                    "(9, -3) and (9, -9)"),
        StreamEvent("disappear", rec(_DISAPPEAR), rec(_DISAPPEAR), rec(_DISAPPEAR), (2,), (),
                    "the ring 2 around (9, 5) disappears"),
        StreamEvent("merge", rec(m0), rec(m1), rec((m0 + m1) / 2), (8, 9), (8,),
                    "blobs 8 and 9 at (-3, 7) and (3, 7) move together and merge at (0, 7)"),
    )


def _shape_points(gen: _Generator, t: np.ndarray, rng: np.random.Generator,
                  cluster_std: float) -> np.ndarray:
    m = t.shape[0]
    if gen.shape in ("upper", "lower"):
        u = rng.uniform(0.0, math.pi, size=m)
        if gen.shape == "upper":
            pts = np.c_[np.cos(u), np.sin(u)]
        else:
            pts = np.c_[1.0 - np.cos(u), 0.5 - np.sin(u)]
        return _RADIUS * (pts - np.asarray(_MOONS_CENTER))
    if gen.shape == "ring":
        theta = rng.uniform(0.0, 2.0 * math.pi, size=m)
        return gen.center(t) + _RADIUS * np.c_[np.cos(theta), np.sin(theta)]
    return gen.center(t) + rng.normal(0.0, cluster_std, size=(m, 2))


def make_drifting_stream(
    n_samples: int = 40_000,
    *,
    n_features: int = 2,
    noise: float = 0.15,
    cluster_std: float = 0.5,
    random_state: Any = None,
    dtype: Any = np.float64,
) -> tuple[np.ndarray, np.ndarray, tuple[StreamEvent, ...]]:
    """An evolving stream with scheduled cluster events, its labels and its schedule.

    Ten cluster labels over time, in a plane (then embedded in ``n_features`` dimensions):
    0 and 1, two interleaved half-moons of radius 2 around the origin, present throughout
    (non-convex); 2, a ring of radius 2 around (9, 5) until 60% of the stream; 3, a blob that
    moves from (-9, -6) to (-9, 6) between 10% and 40%; 4, a blob at (9, -6) that splits
    between 40% and 50% into 5 and 6 (moving apart to (9, -3) and (9, -9)); 7, a blob at
    (0, -7) appearing at 25%; 8 and 9, blobs at (-3, 7) and (3, 7) that move together between
    70% and 80% and merge into 8. So 7 clusters at the start, 8 from 25%, 9 from the split's
    midpoint, 8 after the ring goes, 7 after the merge's midpoint.

    Parameters
    ----------
    n_samples : int, default=40_000
        Records in the stream (at least 1,000); the schedule scales with it (event times
        are fractions of the stream rounded to the nearest record).
    n_features : int, default=2
        Dimension of the rows (at least 2). Above 2 the plane is embedded by a random
        orthonormal map drawn from ``random_state`` and every coordinate gets the noise.
    noise : float, default=0.15
        Standard deviation of the Gaussian noise added to every coordinate (>= 0).
    cluster_std : float, default=0.5
        Standard deviation of each blob around its centre, per axis of the plane (> 0).
    random_state : int, numpy Generator or None
        Seed of every random draw.
    dtype : numpy float dtype, default=float64
        ``float64`` or ``float32``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Rows in arrival order.
    y : ndarray of shape (n_samples,), int64
        The true cluster of each row. During a split the two halves keep the parent's label
        until the event's midpoint ``at``; during a merge the two blobs keep their own labels
        until then.
    events : tuple of StreamEvent
        The schedule, in order: move, appear, split, disappear, merge, with record indices.

    Raises
    ------
    streamkm.ParameterError
        A bad argument, named with its value.

    Examples
    --------
    >>> import numpy as np
    >>> from streamkm.datasets import make_drifting_stream
    >>> X, y, events = make_drifting_stream(20_000, random_state=0)
    >>> X.shape, y.dtype.name
    ((20000, 2), 'int64')
    >>> [(e.kind, e.at) for e in events]
    [('move', 2000), ('appear', 5000), ('split', 9000), ('disappear', 12000), ('merge', 15000)]
    >>> split = events[2]
    >>> split.labels_before, split.labels_after
    ((4,), (5, 6))
    >>> sorted(np.unique(y[:5000]).tolist()), sorted(np.unique(y[-1000:]).tolist())
    ([0, 1, 2, 3, 4, 8, 9], [0, 1, 3, 5, 6, 7, 8])
    """
    n = check_int(n_samples, "n_samples", low=1000)
    d = check_int(n_features, "n_features", low=2)
    noise_sd = check_float(noise, "noise", low=0.0)
    std = check_float(cluster_std, "cluster_std", low=0.0, low_inclusive=False)
    out_dtype = check_float_dtype(dtype)
    rng = check_random_state(random_state)

    index = np.arange(n)
    t = index / n
    gens = _generators(n)
    present = np.stack([(index >= g.first) & (index < g.stop) for g in gens], axis=1)
    # Each record picks uniformly among the generators present at its time.
    choice = np.floor(rng.random(n) * present.sum(axis=1)).astype(np.int64)
    which = np.argmax(np.cumsum(present, axis=1) > choice[:, None], axis=1)

    plane = np.empty((n, 2))
    y = np.empty(n, dtype=np.int64)
    for g_index, gen in enumerate(gens):
        rows = np.flatnonzero(which == g_index)
        if rows.size == 0:
            continue
        plane[rows] = _shape_points(gen, t[rows], rng, std)
        if gen.relabel_at is None:
            y[rows] = gen.label
        else:
            y[rows] = np.where(rows < gen.relabel_at, gen.label, gen.label_after)

    if d == 2:
        X = plane
    else:
        basis, _ = np.linalg.qr(rng.normal(size=(d, 2)))
        X = plane @ basis.T
    X = X + rng.normal(0.0, noise_sd, size=X.shape) if noise_sd > 0 else X
    return np.ascontiguousarray(X, dtype=out_dtype), y, _schedule(n)
