"""The drift policy: every knob of drift detection, re-bisection and Ward merges in one place.

A :class:`DriftPolicy` is the ``drift`` parameter of
:class:`streamkm.MiniBatchKernelKMeans` (a plain dict with the same keys is accepted too, which
is how saved states and the service's ``[drift]`` section pass it). See ``docs/drift.md``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Callable

from streamkm._core.scalar_checks import check_choice, check_float, check_int
from streamkm.exceptions import StreamkmError, parameter_error

__all__ = ["DriftPolicy", "SEEDINGS"]

#: Where a bisection's starts come from (:func:`streamkm.drift.bisect.kernel_bisect`).
SEEDINGS: tuple[str, ...] = ("rtmm", "rscd", "frus")

#: What each field accepts on its own (the checks across fields are in ``__post_init__``).
_FIELD_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "reservoir_size": lambda v, name: check_int(v, name, low=2),
    "min_reservoir": lambda v, name: check_int(v, name, low=2),
    "smoothing": lambda v, name: check_float(v, name, low=0.0, high=1.0, low_inclusive=False),
    "warmup_batches": lambda v, name: check_int(v, name, low=1),
    "delta": lambda v, name: check_float(v, name, low=0.0),
    "threshold": lambda v, name: check_float(v, name, low=0.0, low_inclusive=False),
    "min_batch_rows": lambda v, name: check_int(v, name, low=1),
    "n_pairs": lambda v, name: check_int(v, name, low=1),
    "seeding": lambda v, name: check_choice(v, name, SEEDINGS),
    "max_iter": lambda v, name: check_int(v, name, low=1),
    "min_sse_reduction": lambda v, name: check_float(v, name, low=0.0, high=1.0),
    "min_side_fraction": lambda v, name: check_float(v, name, low=0.0, high=0.5),
    "cooldown_batches": lambda v, name: check_int(v, name, low=0),
    "max_rejections": lambda v, name: check_int(v, name, low=1),
    "k_min": lambda v, name: check_int(v, name, low=1),
    "k_max": lambda v, name: None if v is None else check_int(v, name, low=1),
    "merge_below": lambda v, name: None if v is None else check_float(v, name, low=0.0),
    "merge_every": lambda v, name: check_int(v, name, low=1),
    "max_splits_per_step": lambda v, name: check_int(v, name, low=1),
    "birth_rows": lambda v, name: check_int(v, name, low=2),
    "quarantine_batches": lambda v, name: check_int(v, name, low=1),
    "retire_after": lambda v, name: None if v is None else check_int(v, name, low=1),
}


@dataclass(frozen=True)
class DriftPolicy:
    """Parameters of per-cluster drift detection, re-bisection and Ward merges.

    Detection (per cluster, on the batches that give it at least ``min_batch_rows`` rows):
    x_t is the mean squared kernel distance of the cluster's rows to its center (before the
    update), e_t its exponentially weighted moving average (weight ``smoothing``). The
    reference level r is the mean of x_t over the first ``warmup_batches`` observed batches
    of the cluster. A one-sided Page-Hinkley / CUSUM statistic on the relative rise,
    g_t = max(0, g_{t-1} + e_t / r - 1 - ``delta``), raises an alarm when g_t > ``threshold``.

    Parameters
    ----------
    reservoir_size : int, default=256
        Rows of the most recent rows of each cluster kept for bisection (a bounded sliding
        window; when a batch brings more rows than fit, a uniform random subset is kept).
    min_reservoir : int, default=64
        Fewest reservoir rows needed to try a bisection.
    smoothing : float, default=0.3
        Weight of the newest batch in the spread's moving average, in (0, 1].
    warmup_batches : int, default=5
        Observed batches that set a cluster's reference level (after creation, a split or a
        merge).
    delta : float, default=0.1
        Relative rise of the spread tolerated without accumulating evidence.
    threshold : float, default=1.0
        Page-Hinkley alarm threshold on the accumulated relative rise.
    min_batch_rows : int, default=16
        A batch giving a cluster fewer rows does not update its spread (too noisy).
    n_pairs : int, default=20
        Initial starts tried by each bisection (kernel 2-means from each).
    seeding : {"rtmm", "rscd", "frus"}, default="rtmm"
        Where a bisection's starts come from (seed 003): distinct pairs of rows by RTMM or by
        collision detection (RSCD, same distribution, slower), or pairs of centers drawn
        uniformly in the window's feature range (FRUS). See
        :func:`~streamkm.drift.bisect.kernel_bisect`.
    max_iter : int, default=50
        Lloyd iterations per kernel 2-means run.
    min_sse_reduction : float, default=0.8
        A split is accepted only if it lowers the reservoir's kernel-space SSE by at least
        this fraction (1 - SSE_split / SSE_unsplit). Unimodal clusters stay below it (in
        input space about 0.32 for a round 2-D Gaussian blob, 0.64 for a 1-D one, 0.75 for
        a uniform segment, 0.4 for a ring); two Gaussian modes at distance D with per-axis
        standard deviation s in d dimensions reach it when D^2 / 4 >= 4 d s^2.
    min_side_fraction : float, default=0.1
        Each half of an accepted split holds at least this fraction of the reservoir.
    cooldown_batches : int, default=5
        Batches after a bisection attempt (accepted or not), a split or a merge during which
        the cluster is not bisected (again); its window of recent rows refreshes meanwhile.
    max_rejections : int, default=3
        Rejected bisections in a row after which the cluster's current spread becomes its
        new reference level (it broadened without becoming two modes).
    k_min : int, default=1
        Fewest clusters; a redundancy merge never goes below it.
    k_max : int or None, default=None
        Most clusters; after a split beyond it the pair of smallest Ward cost is merged.
        None means twice the initial ``n_clusters``.
    merge_below : float or None, default=None
        If set, also merge (while k > k_min) the pair of smallest Ward cost when it is
        redundant: when keeping the two apart saves less than this fraction of their merged
        SSE, cost / (cost + SSE_a + SSE_b) < merge_below (the same measure a split must
        reach ``min_sse_reduction`` in, so it must be below that: hysteresis). Ward sizes are
        the clusters' recent rows per batch, SSE_j = size_j * e_j (spread EWMA); clusters
        still warming up are not merged this way.
    merge_every : int, default=10
        Steps between two redundancy checks (each needs the k x k center inner products).
    max_splits_per_step : int, default=1
        Bisections tried per step (the most alarmed clusters first); bounds a step's cost.
    birth_rows : int, default=64
        Fewest pooled outliers (rows flagged at the estimator's ``outlier_alpha``) of one
        group that can become a new cluster; at most ``reservoir_size`` (the pool's
        capacity). See :mod:`streamkm.drift.birth` and docs/novelty.md.
    quarantine_batches : int, default=10
        Steps a flagged row stays in the outlier pool (the span over which a group of
        outliers can gather).
    retire_after : int or None, default=None
        A cluster that gets no rows for this many steps in a row is retired (never below
        ``k_min``); None never retires.
    """

    reservoir_size: int = 256
    min_reservoir: int = 64
    smoothing: float = 0.3
    warmup_batches: int = 5
    delta: float = 0.1
    threshold: float = 1.0
    min_batch_rows: int = 16
    n_pairs: int = 20
    seeding: str = "rtmm"
    max_iter: int = 50
    min_sse_reduction: float = 0.8
    min_side_fraction: float = 0.1
    cooldown_batches: int = 5
    max_rejections: int = 3
    k_min: int = 1
    k_max: int | None = None
    merge_below: float | None = None
    merge_every: int = 10
    max_splits_per_step: int = 1
    birth_rows: int = 64
    quarantine_batches: int = 10
    retire_after: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            self.check_field(f.name, getattr(self, f.name))
        if self.min_reservoir > self.reservoir_size:
            raise parameter_error(
                f"drift.min_reservoir ({self.min_reservoir!r}) must be <= "
                f"drift.reservoir_size ({self.reservoir_size!r})"
            )
        if self.birth_rows > self.reservoir_size:
            raise parameter_error(
                f"drift.birth_rows ({self.birth_rows!r}) must be <= "
                f"drift.reservoir_size ({self.reservoir_size!r})"
            )
        if self.k_max is not None and self.k_max < self.k_min:
            raise parameter_error(
                f"drift.k_max ({self.k_max!r}) must be >= drift.k_min ({self.k_min!r})"
            )
        if self.merge_below is not None and self.merge_below >= self.min_sse_reduction:
            raise parameter_error(
                f"drift.merge_below ({self.merge_below!r}) must be < "
                f"drift.min_sse_reduction ({self.min_sse_reduction!r}), or splits and "
                "merges would undo each other"
            )

    @staticmethod
    def check_field(name: str, value: Any) -> None:
        """Check one field's value on its own (the checks across fields need the policy).

        Raises
        ------
        ParameterError
            ``"drift.<name> must be ..., got <value>"``.
        """
        _FIELD_CHECKS[name](value, f"drift.{name}")

    @staticmethod
    def field_problem(name: str, value: Any) -> str | None:
        """What is wrong with one field's value on its own (``"drift.<name> must be ...,
        got <value>"``), or None."""
        try:
            DriftPolicy.check_field(name, value)
        except StreamkmError as exc:  # the checks raise ParameterError only
            return str(exc)
        return None

    @classmethod
    def from_param(cls, value: Any) -> DriftPolicy | None:
        """The policy given as the estimator's ``drift`` parameter.

        ``None`` or ``False`` -> None (drift handling off); ``True`` -> the defaults; a
        :class:`DriftPolicy` as is; a dict -> ``DriftPolicy(**value)`` (unknown keys raise
        :class:`~streamkm.exceptions.ParameterError` naming them).
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise parameter_error(
                    f"unknown drift parameter(s) {unknown!r}; known: {sorted(known)}"
                )
            return cls(**value)
        raise parameter_error(
            f"drift must be None, True, a DriftPolicy or a dict, got {value!r}"
        )

    def resolved_k_max(self, n_clusters: int) -> int:
        """``k_max``, or 2 * ``n_clusters`` when unset."""
        return 2 * int(n_clusters) if self.k_max is None else int(self.k_max)

    def problem_against(self, n_clusters: int) -> str | None:
        """Why the policy cannot drive a model of ``n_clusters`` clusters (not
        k_min <= n_clusters <= k_max), or None."""
        if not self.k_min <= n_clusters <= self.resolved_k_max(n_clusters):
            return (f"n_clusters={n_clusters!r} must lie in [drift.k_min, drift.k_max] = "
                    f"[{self.k_min!r}, {self.resolved_k_max(n_clusters)!r}]")
        return None

    def check_against(self, n_clusters: int) -> None:
        """Raise :class:`~streamkm.exceptions.ParameterError` unless
        k_min <= n_clusters <= k_max."""
        problem = self.problem_against(n_clusters)
        if problem is not None:
            raise parameter_error(problem)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the keys of the constructor)."""
        return asdict(self)
