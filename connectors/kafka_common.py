"""Pieces shared by the Kafka source and sinks: records, partition keys, lazy clients.

kafka-python clients are created lazily and re-created on failure with exponential
backoff (:class:`LazyKafkaClient`), so a service can start before its broker is
reachable. Once created, a client reconnects by itself; whether it currently holds a
broker connection is read from its own metrics (:func:`broker_connected`) and exported as
``streamkm_kafka_broker_connected{client}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streamkm.exceptions import ConfigError, ParameterError
from streamkm.logs import log_event
from streamkm.sources import RawRecord

__all__ = ["KafkaRecord", "part_key", "split_part_key", "LazyKafkaClient", "broker_connected",
           "silence_kafka_python_logs", "kafka_python_failure", "CONFIG_FAILURE",
           "RETRY_FAILURE"]

_log = logging.getLogger("streamkm.kafka")
ClientT = TypeVar("ClientT")


@dataclass(frozen=True, slots=True)
class KafkaRecord(RawRecord):
    """A :class:`~streamkm.sources.RawRecord` read from Kafka, with the message's raw key
    and headers (copied onto its assignment).

    Attributes
    ----------
    raw_key : bytes or None
        The message key as sent (``RawRecord.key`` holds it decoded as UTF-8).
    headers : tuple of (str, bytes)
        The message headers, in order.
    """

    raw_key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


def check_client_settings(role: str, settings: dict[str, Any]) -> None:
    """Raise ``ValueError`` for a key of ``settings`` that kafka-python's ``role``
    (``"consumer"`` or ``"producer"``) client does not know."""
    from kafka import KafkaConsumer, KafkaProducer

    known = (KafkaConsumer if role == "consumer" else KafkaProducer).DEFAULT_CONFIG
    for key, value in settings.items():
        if key not in known:
            # the value is not quoted: a mistyped key may hold a secret
            raise ValueError(f"unknown kafka-python {role} setting {key!r}")


def part_key(topic: str, partition: int) -> str:
    """The service's partition key of a Kafka partition: ``"<topic>:<partition>"``."""
    return f"{topic}:{partition}"


def split_part_key(key: str) -> tuple[str, int]:
    """``(topic, partition)`` of a key made by :func:`part_key`.

    Raises
    ------
    ParameterError
        ``key`` is not ``"<topic>:<partition number>"``.
    """
    topic, sep, number = key.rpartition(":")
    if not sep or not topic or not number.isdigit():
        raise ParameterError(f"not a Kafka partition key ('<topic>:<partition>'): {key!r}")
    return topic, int(number)


def silence_kafka_python_logs(name: str = "kafka") -> logging.Logger:
    """Keep a Kafka client's own (plain-text, very chatty during outages) log lines off
    stderr unless the application configured its logger (``kafka`` for kafka-python,
    ``librdkafka`` for confluent-kafka); streamkm logs its own ``kafka_*`` events instead.
    Returns that logger."""
    logger = logging.getLogger(name)
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return logger


def broker_connected(client: Any, metric_group: str) -> bool:
    """True if a kafka-python client holds at least one broker connection (its own
    ``connection-count`` metric)."""
    try:
        group = client.metrics().get(metric_group, {})
    except Exception:  # noqa: BLE001 - a metrics read must never break the service
        return False
    return float(group.get("connection-count", 0.0) or 0.0) > 0


#: :func:`kafka_python_failure` of an error in the client's settings (not retried).
CONFIG_FAILURE = "config"
#: :func:`kafka_python_failure` of a transport failure (retried with backoff).
RETRY_FAILURE = "retry"


def kafka_python_failure(exc: BaseException) -> str | None:
    """What creating a kafka-python client raising ``exc`` means: :data:`CONFIG_FAILURE`
    (``KafkaConfigurationError``), :data:`RETRY_FAILURE` (``KafkaError``, ``OSError``), or
    ``None`` (a bug: raised as it is)."""
    from kafka.errors import KafkaConfigurationError, KafkaError

    if isinstance(exc, KafkaConfigurationError):
        return CONFIG_FAILURE
    if isinstance(exc, (KafkaError, OSError)):
        return RETRY_FAILURE
    return None


class LazyKafkaClient(Generic[ClientT]):
    """Creates a Kafka client on demand, retrying with exponential backoff.

    Transport failures are retried; an error in the settings becomes a
    :class:`~streamkm.exceptions.ConfigError` (which is which: ``classify``).

    Parameters
    ----------
    name : str
        ``"consumer"`` or ``"producer"`` (log field and metric label).
    factory : callable
        Creates the client; may raise while no broker is reachable.
    backoff_s : float
        First retry delay; doubled after every failure up to ``max_backoff_s``.
    max_backoff_s : float
        Longest retry delay.
    on_connected_change : callable, optional
        Called with the new connection state (True/False) whenever it changes.
    classify : callable
        ``classify(exc)``: :data:`CONFIG_FAILURE`, :data:`RETRY_FAILURE` or ``None`` (raised
        as it is) for an error the factory raised; kafka-python's by default.
    """

    def __init__(self, name: str, factory: Callable[[], ClientT], *, backoff_s: float = 0.5,
                 max_backoff_s: float = 5.0,
                 on_connected_change: Callable[[bool], None] | None = None,
                 classify: Callable[[BaseException], str | None] = kafka_python_failure
                 ) -> None:
        self._classify = classify
        self.name = name
        self._factory = factory
        self._backoff_s = backoff_s
        self._max_backoff_s = max(max_backoff_s, backoff_s)
        self._delay_s = backoff_s
        self._next_attempt = 0.0
        self._on_change = on_connected_change
        self._connected: bool | None = None
        self._last_probe = 0.0
        self.client: ClientT | None = None
        self.failures = 0

    def get(self) -> ClientT | None:
        """The client, creating it if due; ``None`` while it cannot be created."""
        if self.client is not None:
            return self.client
        now = time.monotonic()
        if now < self._next_attempt:
            return None
        try:
            self.client = self._factory()
        except Exception as exc:
            failure = self._classify(exc)
            if failure == CONFIG_FAILURE:
                raise ConfigError(f"invalid Kafka {self.name} settings: {exc}") from exc
            if failure != RETRY_FAILURE:
                raise
            # broker unreachable: retried (and logged)
            self.failures += 1
            self._next_attempt = time.monotonic() + self._delay_s
            log_event(_log, "warning", "kafka_connect_failed", client=self.name,
                      error=f"{type(exc).__name__}: {exc}", retry_in_s=round(self._delay_s, 3),
                      attempts=self.failures)
            self._delay_s = min(self._delay_s * 2, self._max_backoff_s)
            self.set_connected(False)
            return None
        self._delay_s = self._backoff_s
        log_event(_log, "info", "kafka_client_created", client=self.name)
        return self.client

    def seconds_to_next_attempt(self) -> float:
        """How long until :meth:`get` will try again (0 if a client exists)."""
        if self.client is not None:
            return 0.0
        return max(0.0, self._next_attempt - time.monotonic())

    def probe(self, metric_group: str, every_s: float = 1.0) -> None:
        """Refresh the connection state from the client's metrics (at most every
        ``every_s`` seconds)."""
        now = time.monotonic()
        if self.client is None or now - self._last_probe < every_s:
            return
        self._last_probe = now
        self.set_connected(broker_connected(self.client, metric_group))

    def set_connected(self, connected: bool) -> None:
        """Record the connection state; log and report transitions."""
        if connected == self._connected:
            return
        previous, self._connected = self._connected, connected
        if connected:
            log_event(_log, "info", "kafka_broker_connected", client=self.name)
        elif previous is not None or self.failures:
            log_event(_log, "warning", "kafka_broker_unavailable", client=self.name)
        if self._on_change is not None:
            self._on_change(connected)

    @property
    def connected(self) -> bool:
        """The last known connection state."""
        return bool(self._connected)
