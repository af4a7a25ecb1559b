"""Progress: a ``status`` log event every ``[status] interval_s`` seconds while a runtime runs.

Between ``service_started`` and ``service_stopped`` the service otherwise only logs what
changes (checkpoints, model events); the status event says how it is doing, also while it
waits for input (``"activity": "waiting for records"``, ``records_per_s`` 0) and while the
model's first batch fills (``"activity": "collecting the first batch"``,
``"first_batch_rows": [2000, 3072]``: rows so far and rows it closes at; otherwise ``null``)::

    {"event": "status", "activity": "clustering", "records_per_s": 2013.4,
     "records_read": 60400, "records_accepted": 60340, "records_rejected": 60,
     "rejected_by_reason": {"wrong_dimension": 60}, "lag": 0, "lag_unit": "bytes",
     "objective": 0.4132, "converged": true, "clusters": 4, "step": 118, "batches": 118,
     "last_checkpoint_age_s": 4.2, "last_checkpoint_step": 100, "warnings": [],
     "stalled_seconds": 0.0, "interval_s": 30.0}

``lag`` is the sum over the partitions of the unread input (the ``streamkm_source_lag*``
gauges: bytes for files, records for Kafka, as ``lag_unit`` says). ``last_checkpoint_*`` are
``null`` before the first checkpoint; ``warnings`` lists the active warnings
(:mod:`streamkm.app.warnings_monitor`); ``stalled_seconds`` is how long the loop was
stalled (the process paused, or the loop blocked past the liveness threshold) since the
previous status event, 0 normally (:mod:`streamkm.runtime.pauses`). On a terminal, ``streamkm run`` also rewrites a one-line
status (``--status``, :class:`streamkm.app.demo.StatusLine`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from streamkm.io import registry
from streamkm.logs import log_event
from streamkm.runtime.ticker import TickingHook

if TYPE_CHECKING:
    from streamkm.runtime.learner import RuntimeHost

__all__ = ["ProgressHook", "install_progress", "WAITING", "CLUSTERING", "FIRST_BATCH",
           "lag_and_warnings", "first_batch_progress", "first_batch_text"]

_log = logging.getLogger("streamkm.service")

WAITING = "waiting for records"
CLUSTERING = "clustering"
FIRST_BATCH = "collecting the first batch"
_LAG_FAMILY = "streamkm_source_lag"
_WARNING_FAMILY = "streamkm_warning_active"


def lag_and_warnings(runtime: RuntimeHost) -> tuple[float, list[str]]:
    """Unread input summed over the runtime's partitions, and the active warnings, read from
    its gauges (safe from any thread)."""
    total, warnings = 0.0, []
    for family in runtime.metrics.registry.collect():
        if family.name.startswith(_LAG_FAMILY):
            total += sum(s.value for s in family.samples)
        elif family.name == _WARNING_FAMILY:
            warnings += [s.labels["warning"] for s in family.samples if s.value == 1]
    return total, sorted(warnings)


def lag_unit(runtime: RuntimeHost) -> str:
    """What the reported lag counts: the unit of the open partitions, before any is open
    the one the source's connector registered for its kind."""
    for part in list(getattr(runtime, "parts", {}).values()):
        return str(part.lag_unit)
    return registry.source_lag_unit(runtime.config.source.kind)


def first_batch_progress(runtime: Any) -> tuple[int, int] | None:
    """``(rows collected, rows it closes at)`` while the model's first batch fills (records
    arrived, no model step yet), else ``None``. Safe from any thread."""
    batcher = getattr(runtime, "batcher", None)
    if batcher is None or runtime.status.step:
        return None
    rows, full = batcher.filling
    return (rows, full) if rows and full else None


def first_batch_text(rows: int, full: int) -> str:
    """``"collecting the first batch: 2,000 / 3,072 rows"``."""
    return f"{FIRST_BATCH}: {rows:,} / {full:,} rows"


class ProgressHook(TickingHook):
    """Logs the ``status`` event every ``interval_s`` seconds (see the module docstring).

    Parameters
    ----------
    interval_s : float
        Seconds between two status events (> 0).
    """

    def __init__(self, interval_s: float) -> None:
        super().__init__(interval_s, "streamkm-status")
        self._last_time = time.monotonic()
        self._last_read = 0
        self._checkpoint_time: float | None = None  # unix time
        self._checkpoint_step: int | None = None
        self._last_stalled = 0.0

    def on_started(self, runtime: RuntimeHost) -> None:
        self._last_time, self._last_read = time.monotonic(), runtime.status.records_read
        if self._checkpoint_time is None:  # restored: the checkpoint it came from
            restored = runtime.metrics.registry.get_sample_value(
                "streamkm_checkpoint_last_success_timestamp_seconds")
            if restored:
                self._checkpoint_time, self._checkpoint_step = restored, runtime.status.step
        super().on_started(runtime)

    def on_checkpoint(self, runtime: RuntimeHost, reason: str, ok: bool) -> None:
        if ok:
            self._checkpoint_time, self._checkpoint_step = time.time(), runtime.status.step

    def tick(self, runtime: RuntimeHost, now: float) -> None:
        log_event(_log, "info", "status", **self.fields(runtime, now))

    def fields(self, runtime: RuntimeHost, now: float) -> dict[str, Any]:
        """The status event's fields, with the rate since the previous call."""
        s = runtime.status
        read = s.records_read
        rate = (read - self._last_read) / max(now - self._last_time, 1e-9)
        self._last_time, self._last_read = now, read
        age = None if self._checkpoint_time is None else round(
            max(time.time() - self._checkpoint_time, 0.0), 1)
        lag, warnings = lag_and_warnings(runtime)
        stalled, self._last_stalled = (s.stalled_seconds - self._last_stalled,
                                       s.stalled_seconds)
        filling = first_batch_progress(runtime)
        activity = FIRST_BATCH if filling else CLUSTERING if rate > 0 else WAITING
        return {
            "activity": activity,
            "first_batch_rows": list(filling) if filling else None,
            "records_per_s": round(rate, 1),
            "records_read": read, "records_accepted": s.records_accepted,
            "records_rejected": s.records_rejected,
            "rejected_by_reason": {k: v for k, v in dict(s.rejected_by_reason).items() if v},
            "lag": lag,
            "lag_unit": lag_unit(runtime),
            "objective": s.objective, "converged": s.converged, "clusters": s.clusters,
            "step": s.step, "batches": s.batches,
            "last_checkpoint_age_s": age, "last_checkpoint_step": self._checkpoint_step,
            "warnings": warnings, "stalled_seconds": round(stalled, 3),
            "interval_s": self.period_s,
        }


def install_progress(runtime: RuntimeHost) -> None:
    """Have ``runtime`` log its status every ``[status] interval_s`` seconds (unless 0) and
    raise the ``[warnings]`` (:mod:`streamkm.app.warnings_monitor`)."""
    from streamkm.app.warnings_monitor import WarningsHook

    interval = runtime.config.status.interval_s
    if interval > 0:
        runtime.add_hook(ProgressHook(interval))
    runtime.add_hook(WarningsHook(runtime.config.warnings, runtime.config.source,
                                  runtime.metrics))
