"""The systemd watchdog, fed by the same liveness check as ``/healthz``.

Under a unit with ``WatchdogSec=`` systemd sets ``NOTIFY_SOCKET`` and ``WATCHDOG_USEC`` (and
``WATCHDOG_PID``) and restarts the service when it sends no ``WATCHDOG=1`` for that long.
:class:`SystemdWatchdog` sends one every half period, but only while
:meth:`HealthChecks.liveness <streamkm.runtime.health.HealthChecks.liveness>` says the loop
turns: a stuck loop (``/healthz`` 503) stops the pings and systemd restarts the process.
``STOPPING=1`` is sent when the runtime stops. Outside systemd nothing happens.

The protocol is one datagram per message on the ``AF_UNIX`` socket named by
``NOTIFY_SOCKET`` (an abstract socket when it starts with ``@``); see ``sd_notify(3)``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

from streamkm.logs import log_event

__all__ = ["SystemdWatchdog", "notify"]

_log = logging.getLogger("streamkm.service")


def notify(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``message`` (e.g. ``"WATCHDOG=1"``) to systemd; False when not under systemd
    (no ``NOTIFY_SOCKET``) or the send failed."""
    address = (os.environ if environ is None else environ).get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


class SystemdWatchdog:
    """Pings the systemd watchdog while ``alive()`` holds.

    Parameters
    ----------
    alive : callable
        Returns ``(ok, body)`` like :meth:`HealthChecks.liveness`.
    environ : mapping, optional
        Where ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID`` are read
        (``os.environ`` by default).

    Attributes
    ----------
    interval_s : float or None
        Seconds between pings (half of ``WATCHDOG_USEC``); ``None`` when the watchdog is
        not enabled for this process.
    """

    def __init__(self, alive: Callable[[], tuple[bool, dict[str, Any]]],
                 environ: Mapping[str, str] | None = None) -> None:
        self._alive = alive
        self._environ = dict(os.environ if environ is None else environ)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._silent = False
        self.interval_s = self._interval(self._environ)

    @staticmethod
    def _interval(environ: Mapping[str, str]) -> float | None:
        usec, pid = environ.get("WATCHDOG_USEC"), environ.get("WATCHDOG_PID")
        if not environ.get("NOTIFY_SOCKET") or not usec or not usec.isdigit() or int(usec) <= 0:
            return None
        if pid and pid.isdigit() and int(pid) != os.getpid():
            return None  # meant for another process (e.g. a wrapper script)
        return int(usec) / 2e6

    def start(self) -> None:
        """Start pinging (a daemon thread); nothing when the watchdog is not enabled."""
        if self.interval_s is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="streamkm-watchdog",
                                        daemon=True)
        self._thread.start()

    def ping(self) -> bool:
        """Send ``WATCHDOG=1`` if the loop is alive; True if sent."""
        ok, body = self._alive()
        if not ok:
            if not self._silent:
                log_event(_log, "error", "watchdog_withheld", reason=body.get("reason"))
            self._silent = True
            return False
        self._silent = False
        return notify("WATCHDOG=1", self._environ)

    def _run(self) -> None:
        assert self.interval_s is not None
        self.ping()
        while not self._stop.wait(self.interval_s):
            self.ping()

    def stop(self) -> None:
        """Stop pinging and tell systemd the service is stopping."""
        self._stop.set()
        if self.interval_s is not None:
            notify("STOPPING=1", self._environ)
