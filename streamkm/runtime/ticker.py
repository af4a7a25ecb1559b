"""Hooks that act on a clock as well as on batches: a background thread per hook.

The runtime's loop may wait for input for a long time (no batch, no event); what must still
happen then (a status line saying so, a warning that no file matches) runs on a small daemon
thread started when the runtime is started and stopped when it stops.
"""

from __future__ import annotations

import logging
import threading
import time

from streamkm.logs import log_event
from streamkm.runtime.learner import RuntimeHook, RuntimeHost


__all__ = ["TickingHook"]

_log = logging.getLogger("streamkm.service")


class TickingHook(RuntimeHook):
    """A :class:`RuntimeHook` whose :meth:`tick` runs every ``period_s`` seconds on its own
    thread while the runtime is started (subclasses that override ``on_started`` /
    ``on_stopped`` call these).

    Parameters
    ----------
    period_s : float
        Seconds between two ticks.
    name : str
        The thread's name.
    """

    def __init__(self, period_s: float, name: str) -> None:
        self.period_s = period_s
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self, runtime: RuntimeHost, now: float) -> None:
        """Called every ``period_s`` seconds with ``time.monotonic()``; must not raise."""

    def on_started(self, runtime: RuntimeHost) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(runtime,), name=self._name,
                                        daemon=True)
        self._thread.start()

    def on_stopped(self, runtime: RuntimeHost) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None

    def _run(self, runtime: RuntimeHost) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.tick(runtime, time.monotonic())
            except Exception as exc:  # noqa: BLE001 - a report must never stop the service
                log_event(_log, "error", "hook_tick_failed", hook=self._name, error=repr(exc))
