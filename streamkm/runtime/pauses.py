"""Telling a paused process from a stuck loop.

A process that was not running at all (``SIGSTOP``/``SIGCONT``, a frozen container or VM, a
suspended host) comes back with every clock moved on: its loop looks as if it had not turned
for the whole pause, although nothing in it was stuck. :class:`PauseClock` measures such
pauses with one criterion: a daemon thread asks to wake every ``interval_s``; when it wakes
more than ``min_pause_s`` late, the process did not run for the excess. An HTTP probe
answered right after ``SIGCONT``, before that thread has woken, already sees the pause:
:meth:`PauseClock.paused_total` counts the time since its last wake as paused once that is
overdue by more than ``min_pause_s``.

The liveness check subtracts the paused time from the loop's age
(:class:`streamkm.runtime.health.HealthChecks`), and every pause is reported after the fact
through ``on_pause`` (the ``loop_stalled`` event, ``streamkm_loop_stalls_total``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["PauseClock"]


class PauseClock:
    """Seconds the whole process was not running, measured by a waking thread.

    Parameters
    ----------
    interval_s : float
        How often the thread wakes.
    min_pause_s : float
        A wake later than this past its time counts as a pause (scheduling delays of a busy
        host stay below it).
    on_pause : callable, optional
        Called with the seconds of each pause, on the thread, once it is over.
    clock : callable, default=time.monotonic
        The time source (seconds; it must keep counting while the process is stopped,
        which ``time.monotonic`` does on Linux).

    Examples
    --------
    >>> now = [0.0]
    >>> pauses = PauseClock(interval_s=0.5, min_pause_s=1.0, clock=lambda: now[0])
    >>> now[0] = 10.5  # woke 10 s late
    >>> pauses.paused_total()
    10.0
    """

    def __init__(self, interval_s: float = 0.5, min_pause_s: float = 1.0, *,
                 on_pause: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = float(interval_s)
        self.min_pause_s = float(min_pause_s)
        self._on_pause = on_pause
        self._clock = clock
        self._lock = threading.Lock()
        self._last_wake = clock()
        self._recorded = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _overdue(self, now: float) -> float:
        late = now - self._last_wake - self.interval_s
        return late if late > self.min_pause_s else 0.0

    def paused_total(self) -> float:
        """Seconds paused since this clock was made, including a pause the thread has not
        woken from yet (safe from any thread)."""
        with self._lock:
            return self._recorded + self._overdue(self._clock())

    def wake(self) -> float:
        """One wake of the thread: record (and report) the pause it ends, if any; return
        its seconds (0 when on time)."""
        with self._lock:
            now = self._clock()
            paused = self._overdue(now)
            self._recorded += paused
            self._last_wake = now
        if paused and self._on_pause is not None:
            self._on_pause(paused)
        return paused

    def start(self) -> None:
        """Start the waking thread (a daemon)."""
        if self._thread is not None:
            return
        with self._lock:
            self._last_wake = self._clock()
        self._thread = threading.Thread(target=self._run, name="streamkm-pauses", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.wake()

    def stop(self) -> None:
        """Stop the thread."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
