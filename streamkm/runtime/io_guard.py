"""Riding out a file system that refuses writes: pause, retry with backoff, resume.

The runtime writes a batch's outputs and its checkpoints through :meth:`IoGuard.run`. When
an attempt raises :class:`~streamkm.exceptions.StorageError` (disk full, quota, read-only,
I/O error: a fault of the device, never of a record), the guard takes back what the attempt
wrote (``undo``), counts ``streamkm_io_errors_total{target}``, sets ``streamkm_io_stalled``
to 1 and logs one ``io_stalled`` warning; then it waits (capped exponential backoff) and
runs the whole attempt again. Nothing else happens meanwhile: no record is read, the source
positions stay where the last processed batch left them. The first attempt that succeeds
sets the gauge back to 0 and logs one ``io_resumed``. A stop request ends the wait:
:meth:`IoGuard.run` returns ``False`` and the caller gives the attempt up.

:attr:`IoGuard.health` (``Runtime.io_health``) is the state for readiness checks: ``ok``
and a one-line ``detail``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from streamkm.exceptions import StorageError
from streamkm.logs import log_event
from streamkm.runtime.metrics import ServiceMetrics

__all__ = ["IoGuard", "IoHealth", "INITIAL_BACKOFF_S", "MAX_BACKOFF_S"]

_log = logging.getLogger("streamkm.service")

#: First wait after a refused write, doubled after every failed attempt up to the cap.
INITIAL_BACKOFF_S = 0.05
MAX_BACKOFF_S = 2.0


@dataclass(frozen=True)
class IoHealth:
    """Whether the process can write its outputs and checkpoints (an immutable snapshot,
    safe to read from any thread).

    Attributes
    ----------
    ok : bool
        ``False`` while stalled on a refused write.
    detail : str
        One line for people: what fails and since when, or that writes succeed.
    target : str or None
        What could not be written (``assignments``, ``events``, ``dead_letter``,
        ``checkpoint``) while stalled.
    error : str or None
        The last error while stalled (``ENOSPC: ...``).
    since : float or None
        Unix time the stall began.
    failed_attempts : int
        Attempts refused in the current stall.
    """

    ok: bool = True
    detail: str = "outputs and checkpoints are being written"
    target: str | None = None
    error: str | None = None
    since: float | None = None
    failed_attempts: int = 0


class IoGuard:
    """Runs write attempts until they succeed or a stop is requested.

    Parameters
    ----------
    metrics : ServiceMetrics
        Receives ``io_errors`` and ``io_stalled``.
    wait : callable
        ``wait(seconds) -> bool``: sleep unless a stop is requested; ``True`` once it is
        (``Runtime.wait_stop``).
    initial_backoff_s, max_backoff_s : float
        First wait and its cap (doubled after every failed attempt).
    """

    def __init__(self, metrics: ServiceMetrics, wait: Callable[[float], bool], *,
                 initial_backoff_s: float = INITIAL_BACKOFF_S,
                 max_backoff_s: float = MAX_BACKOFF_S) -> None:
        self.metrics = metrics
        self._wait = wait
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self._health = IoHealth()
        metrics.io_stalled.set(0)

    @property
    def health(self) -> IoHealth:
        """The current state (a snapshot)."""
        return self._health

    @property
    def stalled(self) -> bool:
        """True while a write keeps being refused."""
        return not self._health.ok

    def run(self, attempt: Callable[[], object], *,
            undo: Callable[[], None] | None = None) -> bool:
        """Run ``attempt`` until it does not raise :class:`StorageError`.

        ``undo`` is called after every refused attempt (take back partial writes; its own
        ``OSError`` is ignored: the next attempt starts by undoing again). Other exceptions
        propagate. Returns ``True`` once an attempt succeeded, ``False`` if a stop was
        requested while waiting (the last attempt was refused and undone).
        """
        delay = self.initial_backoff_s
        while True:
            try:
                attempt()
            except StorageError as exc:
                if undo is not None:
                    try:
                        undo()
                    except OSError:
                        pass
                self._refused(exc, delay)
                if self._wait(delay):
                    return False
                delay = min(delay * 2.0, self.max_backoff_s)
                continue
            self._succeeded()
            return True

    def _refused(self, exc: StorageError, delay: float) -> None:
        self.metrics.io_errors.labels(target=exc.target).inc()
        previous = self._health
        error = f"{exc.errno_name}: {exc.strerror}"
        since = previous.since if previous.since is not None else time.time()
        self._health = IoHealth(
            ok=False, target=exc.target, error=error, since=since,
            failed_attempts=previous.failed_attempts + 1,
            detail=f"cannot write {exc.target} ({error}); ingestion paused since "
                   f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(since))}, retrying")
        if previous.ok:
            self.metrics.io_stalled.set(1)
            log_event(_log, "warning", "io_stalled", target=exc.target,
                      errno=exc.errno_name, error=str(exc), retry_in_s=round(delay, 3))

    def _succeeded(self) -> None:
        previous = self._health
        if previous.ok:
            return
        self._health = IoHealth()
        self.metrics.io_stalled.set(0)
        log_event(_log, "info", "io_resumed", target=previous.target,
                  stalled_seconds=round(time.time() - (previous.since or time.time()), 3),
                  failed_attempts=previous.failed_attempts)
