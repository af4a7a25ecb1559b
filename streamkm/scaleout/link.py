"""A scale-out member's clients of the broker and whether the broker is reachable.

Starting is retried with backoff while the broker is away; the connection state is the
gauge the transport's connector registered (Kafka: ``streamkm_kafka_broker_connected``)
with the label ``client="scaleout"``, and the log events
``kafka_broker_unavailable`` / ``kafka_broker_connected`` on each transition, probed every
second on its own thread so it stays current while the loop waits on a sink flush. The
probe asks the broker (a request with a timeout of :data:`PROBE_TIMEOUT_S`) besides checking
the clients' connections: a silent cut keeps the connections open, so it is reported within
about ``1 + PROBE_TIMEOUT_S`` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from streamkm.config.schema import ScaleoutConfig
from streamkm.exceptions import StateError
from streamkm.logs import log_event
from streamkm.scaleout.backoff import Backoff
from streamkm.scaleout.transport import (
    BrokerProbe,
    LeaderElection,
    ModelReader,
    ScaleoutTransport,
    UpdatesSender,
)

__all__ = ["BrokerLink", "BROKER_CLIENT", "PROBE_TIMEOUT_S"]

_log = logging.getLogger("streamkm.scaleout")
#: ``client`` label of the connection gauge for the scale-out clients.
BROKER_CLIENT = "scaleout"
#: Longest wait for the broker's answer to a probe request.
PROBE_TIMEOUT_S = 3.0


class BrokerLink:
    """The updates sender, the model reader and the leader election of one member.

    Parameters
    ----------
    config : ScaleoutConfig
        Topics creation, ``fence_timeout_ms``.
    gauge : Gauge or None
        Receives the connection state (``client`` label); ``None``: not exported.
    backoff : Backoff
        Delays between attempts to start (a copy is used).
    """

    def __init__(self, config: ScaleoutConfig, gauge: Any, backoff: Backoff) -> None:
        self.config = config
        self._gauge = gauge.labels(client=BROKER_CLIENT) if gauge is not None else None
        self._backoff = backoff
        self.updates: UpdatesSender | None = None
        self.model_reader: ModelReader | None = None
        self.election: LeaderElection | None = None
        self.connected: bool | None = None
        self._down_since: float | None = None
        self._up_since: float | None = None
        self._lock = threading.Lock()
        self._prober: threading.Thread | None = None
        if self._gauge is not None:
            self._gauge.set(0)

    def connect(self, transport: ScaleoutTransport, on_version: Callable[[int, bytes], None],
                wait_stop: Callable[[float], bool]) -> bool:
        """Create the topics, the updates sender and the model reader and read the model
        topic to its end, retrying with backoff; then join the leader election and start
        probing. False if ``wait_stop`` reported a stop first."""
        backoff = Backoff(self._backoff.initial_s, self._backoff.max_s)
        topics_ready = not self.config.create_topics
        while True:
            try:
                if not topics_ready:
                    transport.ensure_topics()
                    topics_ready = True
                if self.updates is None:
                    self.updates = transport.updates_sender()
                if self.model_reader is None:
                    self.model_reader = transport.model_reader(on_version)
                self.read_model_to_end()
                break
            except (OSError, StateError) as exc:  # TransportError, or not read to the end
                delay = backoff.failed()
                log_event(_log, "warning", "kafka_connect_failed", client=BROKER_CLIENT,
                          error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3),
                          attempts=backoff.failures)
                self.set_connected(False)
                if wait_stop(delay):
                    return False
        self.set_connected(True)
        self.election = transport.leader_election()
        probe = transport.broker_probe(PROBE_TIMEOUT_S)
        self._prober = threading.Thread(target=self._probe_loop, args=(wait_stop, probe),
                                        name="streamkm-broker-probe", daemon=True)
        self._prober.start()
        return True

    def read_model_to_end(self) -> None:
        """Read the model topic to its end (:class:`StateError` if not done in time)."""
        assert self.model_reader is not None
        self.model_reader.read_to_end(timeout_s=self.config.fence_timeout_ms / 1000.0)

    def set_connected(self, connected: bool) -> None:
        """Record the connection state; log and export transitions."""
        with self._lock:
            if connected == self.connected:
                return
            previous, self.connected = self.connected, connected
            self._down_since = None if connected else time.monotonic()
            self._up_since = time.monotonic() if connected else None
            if connected:
                log_event(_log, "info", "kafka_broker_connected", client=BROKER_CLIENT)
            elif previous is not None:
                log_event(_log, "warning", "kafka_broker_unavailable", client=BROKER_CLIENT)
            if self._gauge is not None:
                self._gauge.set(1 if connected else 0)

    def unreachable_for(self) -> float:
        """Seconds since the broker was last seen reachable (0 while it is)."""
        since = self._down_since
        return 0.0 if since is None else time.monotonic() - since

    def reachable_for(self) -> float:
        """Seconds since the broker became reachable (0 while it is not)."""
        since = self._up_since
        return 0.0 if since is None else time.monotonic() - since

    def _probe_loop(self, wait_stop: Callable[[float], bool], probe: BrokerProbe,
                    every_s: float = 1.0) -> None:
        """Connected = the updates sender and the model reader both hold a connection and
        the broker answers the probe."""
        assert self.updates is not None and self.model_reader is not None
        try:
            while not wait_stop(every_s):
                try:
                    self.set_connected(self.updates.connected()
                                       and self.model_reader.connected()
                                       and probe.reachable())
                except Exception as exc:  # noqa: BLE001 - a probe must never end the process
                    log_event(_log, "warning", "scaleout_probe_failed", error=repr(exc))
        finally:
            probe.close()

    def close(self) -> None:
        """Stop probing (the stop is already requested) and close the clients."""
        if self._prober is not None:
            self._prober.join(timeout=5)
        for closing in (self.election, self.model_reader, self.updates):
            if closing is not None:
                closing.close()
