"""Liveness and readiness of a runtime: ``GET /healthz`` and ``GET /readyz``.

``/healthz`` (liveness) answers 200 while the runtime's loop keeps turning: the loop beats
(:meth:`HealthChecks.beat`) on every iteration and every poll interval while it waits for
input, and the answer is 503 once the last beat is older than :func:`stall_after_s` of the
configuration. Before the first beat (start-up: restoring the checkpoint, writing the first
one) the limit is the longer :data:`START_ALLOWANCE_FACTOR` x that threshold. A restart is the remedy for a 503 here (Kubernetes ``livenessProbe``; under systemd the
same check feeds the unit's watchdog, :mod:`streamkm.runtime.watchdog`).

``/readyz`` (readiness) answers 200 when every registered check passes: ``runtime``
(started, not stopping), ``model`` (loaded or restored; in scale-out mode: a model version
adopted), ``source`` (partitions open, every input they found readable; a source with
:class:`~streamkm.io.sources.ReportsReadiness` must say it is ready, e.g. a Kafka consumer
connected and in its group) and ``checkpoint`` (the last checkpoint attempt succeeded).
Features add checks with :meth:`HealthChecks.register`. A 503 here means "not doing its
job right now, may recover by itself" (Kubernetes ``readinessProbe``; no restart).

Both bodies are JSON::

    {"status": "ok", "loop_age_s": 0.02, "stall_after_s": 60.0, "uptime_s": 12.5}
    {"status": "not_ready", "checks": {"source": {"ok": false, "detail": "..."}, ...}}
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from streamkm.config.schema import ServiceConfig
from streamkm.io.sources import ReportsReadiness
from streamkm.logs import log_event
from streamkm.runtime.http import HttpRequest, HttpResponse, HttpRouter, json_response
from streamkm.runtime.learner import RuntimeHook, RuntimeHost
from streamkm.runtime.pauses import PauseClock
from streamkm.runtime.watchdog import SystemdWatchdog


__all__ = ["HealthChecks", "Check", "stall_after_s", "install_health", "unreadable_inputs",
           "HEALTHZ_PATH", "READYZ_PATH"]

_log = logging.getLogger("streamkm.service")

HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"
#: A readiness check: ``(ok, detail)``; ``detail`` says what was seen, in words.
Check = Callable[[], tuple[bool, str]]
#: The floor of the stall threshold, in seconds.
MIN_STALL_S = 60.0
#: Start-up (before the loop's first beat) may take this many stall thresholds.
START_ALLOWANCE_FACTOR = 5.0


def stall_after_s(config: ServiceConfig) -> float:
    """Seconds without a loop iteration after which ``/healthz`` reports the loop stuck.

    The loop legitimately blocks for one batch's collection (``batching.max_wait_ms``; the
    model's first batch ``first_batch_wait_ms``), a sink flush waiting for acknowledgements
    (for a sinks kind with ``sinks.flush_timeout_ms``, Kafka's) and, for a source kind with
    ``max_poll_interval_ms`` (a Kafka consumer group), up to that (beyond it the group
    evicts the consumer anyway). The threshold is the largest of 60 s, 10 x
    ``max_wait_ms``, 2 x ``first_batch_wait_ms``, 2 x ``flush_timeout_ms`` and
    ``max_poll_interval_ms``: 60 s with the defaults.
    """
    candidates = [MIN_STALL_S, 10 * config.batching.max_wait_ms / 1000.0,
                  2 * config.batching.first_batch_wait_s]
    flush_ms = getattr(config.sinks, "flush_timeout_ms", None)
    if flush_ms is not None:
        candidates.append(2 * float(flush_ms) / 1000.0)
    max_poll_ms = getattr(config.source, "max_poll_interval_ms", None)
    if max_poll_ms is not None:
        candidates.append(float(max_poll_ms) / 1000.0)
    return max(candidates)


def unreadable_inputs(parts: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{"path", "errno", "error"}]``: the inputs the partitions found but cannot read
    (partitions that report it: :attr:`FileTailPartition.unreadable`), sorted by path."""
    found: dict[str, dict[str, Any]] = {}
    for part in list(parts.values()):
        for path, problem in dict(getattr(part, "unreadable", None) or {}).items():
            found[path] = {"path": path, **problem}
    return [found[path] for path in sorted(found)]


class HealthChecks:
    """The liveness clock and the named readiness checks of one runtime.

    Parameters
    ----------
    stall_after_s : float
        Liveness fails once the last :meth:`beat` is older than this.
    clock : callable, default=time.monotonic
        The time source (seconds).

    Examples
    --------
    >>> health = HealthChecks(stall_after_s=60.0)
    >>> health.register("disk", lambda: (True, "42 GiB free"))
    >>> health.readiness()
    (True, {'status': 'ready', 'checks': {'disk': {'ok': True, 'detail': '42 GiB free'}}})

    Attributes
    ----------
    watchdog : SystemdWatchdog or None
        The systemd watchdog fed by :meth:`liveness` (set by :func:`install_health`).
    """

    def __init__(self, stall_after_s: float, *, clock: Callable[[], float] = time.monotonic,
                 pauses: PauseClock | None = None,
                 on_stall: Callable[[float, str], None] | None = None) -> None:
        self.stall_after_s = float(stall_after_s)
        self._clock = clock
        self.pauses = pauses
        self._on_stall = on_stall
        self._born = clock()
        self._last_beat = self._born
        self._paused_at_beat = self._paused()
        self._turning = False  # no beat yet: starting up
        self._checks: dict[str, Check] = {}
        self._lock = threading.Lock()
        self.watchdog: SystemdWatchdog | None = None

    def _paused(self) -> float:
        return 0.0 if self.pauses is None else self.pauses.paused_total()

    def _loop_age(self, now: float) -> tuple[float, float]:
        """``(age, paused)``: seconds since the last beat the process was running, and the
        seconds of that interval it was paused."""
        age = max(now - self._last_beat, 0.0)
        paused = min(max(self._paused() - self._paused_at_beat, 0.0), age)
        return age - paused, paused

    def beat(self) -> None:
        """The loop made progress (called from the loop's thread); a gap since the previous
        beat longer than :attr:`stall_after_s` (pauses of the process left out) is reported
        to ``on_stall`` as ``loop_blocked``."""
        now = self._clock()
        if self._turning and self._on_stall is not None:
            age, _paused = self._loop_age(now)
            if age > self.stall_after_s:
                self._on_stall(age, "loop_blocked")
        self._paused_at_beat = self._paused()
        self._last_beat = now
        self._turning = True

    def register(self, name: str, check: Check) -> None:
        """Add readiness check ``name`` (a name registered again keeps the last check)."""
        with self._lock:
            self._checks[name] = check

    @property
    def names(self) -> list[str]:
        """The registered readiness checks, in registration order."""
        with self._lock:
            return list(self._checks)

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        """``(alive, body)``: alive while the last beat is at most :attr:`stall_after_s` old
        (before the first beat: start-up, :data:`START_ALLOWANCE_FACTOR` times that), not
        counting the time the whole process was paused (:attr:`pauses`; then ``paused_s``
        in the body says how long)."""
        now = self._clock()
        age, paused = self._loop_age(now)
        turning = self._turning
        limit = self.stall_after_s * (1.0 if turning else START_ALLOWANCE_FACTOR)
        body: dict[str, Any] = {"loop_age_s": round(age, 3), "stall_after_s": self.stall_after_s,
                                "uptime_s": round(now - self._born, 3)}
        if round(paused, 3):
            body["paused_s"] = round(paused, 3)
        if age <= limit:
            return True, {"status": "ok" if turning else "starting", **body}
        what = "the runtime loop has not turned" if turning else "the start has not finished"
        return False, {"status": "stuck", **body,
                       "reason": f"{what} for {age:.1f} s (limit {limit:g} s)"}

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """``(ready, body)``: ready when every check passes; a check that raises fails with
        the exception as its detail."""
        with self._lock:
            checks = list(self._checks.items())
        results: dict[str, dict[str, Any]] = {}
        for name, check in checks:
            try:
                ok, detail = check()
            except Exception as exc:  # noqa: BLE001 - a broken check is a failed check
                ok, detail = False, f"check failed: {type(exc).__name__}: {exc}"
            results[name] = {"ok": bool(ok), "detail": str(detail)}
        ready = all(r["ok"] for r in results.values())
        return ready, {"status": "ready" if ready else "not_ready", "checks": results}

    def install(self, router: HttpRouter) -> None:
        """Serve :data:`HEALTHZ_PATH` and :data:`READYZ_PATH` on ``router``."""
        router.add(HEALTHZ_PATH, self._serve(self.liveness))
        router.add(READYZ_PATH, self._serve(self.readiness))

    @staticmethod
    def _serve(probe: Callable[[], tuple[bool, dict[str, Any]]]
               ) -> Callable[[HttpRequest], HttpResponse]:
        def handle(request: HttpRequest) -> HttpResponse:
            ok, body = probe()
            return json_response(200 if ok else 503, body)

        return handle


class _RuntimeState(RuntimeHook):
    """The runtime's default readiness checks, fed by its hook calls."""

    def __init__(self, runtime: RuntimeHost, watchdog: SystemdWatchdog) -> None:
        self.runtime = runtime
        self.watchdog = watchdog
        self.started = False
        self.stopped = False
        self.checkpoint: tuple[bool, str, float] | None = None  # ok, reason, when (monotonic)

    def on_started(self, runtime: RuntimeHost) -> None:
        self.started = True
        if runtime.health.pauses is not None:
            runtime.health.pauses.start()

    def on_stopped(self, runtime: RuntimeHost) -> None:
        self.stopped = True
        self.watchdog.stop()
        if runtime.health.pauses is not None:
            runtime.health.pauses.stop()

    def on_checkpoint(self, runtime: RuntimeHost, reason: str, ok: bool) -> None:
        self.checkpoint = (ok, reason, time.monotonic())

    def check_runtime(self) -> tuple[bool, str]:
        if self.stopped:
            return False, "stopped"
        if self.runtime.stop_requested:
            return False, "stopping (finishing the batch, writing the final checkpoint)"
        if not self.started:
            return False, "starting"
        return True, "running"

    def check_model(self) -> tuple[bool, str]:
        status = self.runtime.status
        if self.runtime.model is None:
            return False, "no model yet"
        return True, f"model at step {status.step}, {status.clusters} clusters" + (
            ", converged" if status.converged else "")

    def check_source(self) -> tuple[bool, str]:
        runtime = self.runtime
        if runtime.source is None or runtime.batcher is None:
            return False, "source not opened yet"
        if isinstance(runtime.source, ReportsReadiness):
            return runtime.source.readiness()
        parts = sorted(runtime.parts)
        if not parts:
            return False, "no source partition open"
        unreadable = unreadable_inputs(runtime.parts)
        if unreadable:
            return False, "cannot read " + ", ".join(
                f"{i['path']!r}: {i['errno'] or 'not a file'} ({i['error']})"
                for i in unreadable)
        return True, f"{len(parts)} partition(s) open, positions known: {', '.join(parts)}"

    def check_checkpoint(self) -> tuple[bool, str]:
        directory = str(self.runtime.config.checkpoint.dir)
        if self.checkpoint is None:
            if os.access(directory, os.W_OK):
                return True, f"no checkpoint attempted yet; {directory!r} is writable"
            return False, f"no checkpoint attempted yet and {directory!r} is not writable"
        ok, reason, when = self.checkpoint
        ago = time.monotonic() - when
        if ok:
            return True, f"last checkpoint ({reason}) written {ago:.1f} s ago in {directory!r}"
        error = getattr(self.runtime, "last_checkpoint_error", None) or "see checkpoint_failed"
        return False, (f"last checkpoint ({reason}) failed {ago:.1f} s ago in {directory!r}: "
                       f"{error}")


def install_health(runtime: RuntimeHost) -> HealthChecks:
    """The health checks of ``runtime``: liveness clock (with a :class:`PauseClock` running
    while the runtime is started; each stall is counted in ``streamkm_loop_stalls_total``,
    added to the status and logged as ``loop_stalled``), the default readiness checks
    (``runtime``, ``model``, ``source``, ``checkpoint``), the two routes and, under a
    systemd unit with ``WatchdogSec=``, the watchdog pings."""
    def stalled(seconds: float, cause: str) -> None:
        runtime.metrics.loop_stalls.labels(cause=cause).inc()
        runtime.metrics.loop_stalled_seconds.labels(cause=cause).inc(seconds)
        runtime.status.count_stall(seconds)
        log_event(_log, "warning", "loop_stalled", cause=cause, seconds=round(seconds, 3))

    pauses = PauseClock(on_pause=lambda seconds: stalled(seconds, "process_paused"))
    health = HealthChecks(stall_after_s(runtime.config), pauses=pauses, on_stall=stalled)
    health.watchdog = SystemdWatchdog(health.liveness)
    health.watchdog.start()
    state = _RuntimeState(runtime, health.watchdog)
    runtime.add_hook(state)
    health.register("runtime", state.check_runtime)
    health.register("model", state.check_model)
    health.register("source", state.check_source)
    health.register("checkpoint", state.check_checkpoint)
    health.install(runtime.router)
    return health
