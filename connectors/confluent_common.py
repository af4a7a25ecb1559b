"""Pieces of the confluent-kafka (librdkafka) client shared by its source and sinks.

``[kafka] client = "confluent"`` runs the single-process Kafka source and sinks on
confluent-kafka (the ``streamkm[confluent]`` extra) instead of kafka-python. The settings of
``[kafka]`` and ``[source]`` are translated to librdkafka's properties here
(:func:`common_properties`); ``[kafka.consumer]`` / ``[kafka.producer]`` then pass
librdkafka properties through (``"fetch.min.bytes"``, ...; unknown names are errors).

librdkafka connects in its own threads; whether a client holds a broker connection is read
from its statistics (``statistics.interval.ms``, :class:`BrokerStates`), so the
``streamkm_kafka_broker_connected{client}`` gauge and the health checks work as with
kafka-python.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from streamkm.exceptions import ConfigError

from .kafka_common import CONFIG_FAILURE, RETRY_FAILURE, silence_kafka_python_logs

__all__ = ["import_confluent", "confluent_failure", "common_properties", "check_properties",
           "BrokerStates", "STATS_INTERVAL_MS", "MISSING_EXTRA"]

#: How often librdkafka reports its statistics (the broker connection state).
STATS_INTERVAL_MS = 1000
MISSING_EXTRA = ("kafka.client = 'confluent' needs the confluent-kafka package: install "
                 "streamkm with its confluent extra (pip install 'streamkm[confluent]'), or "
                 "set kafka.client = 'kafka-python'")


def import_confluent() -> Any:
    """The ``confluent_kafka`` module.

    Raises
    ------
    ConfigError
        confluent-kafka is not installed (naming the extra that installs it).
    """
    try:
        import confluent_kafka
    except ImportError as exc:
        raise ConfigError(MISSING_EXTRA) from exc
    return confluent_kafka


def confluent_failure(exc: BaseException) -> str | None:
    """What creating a confluent-kafka client raising ``exc`` means (see
    :class:`~streamkm_connectors.kafka_common.LazyKafkaClient`): an unknown or invalid
    property is a settings error, any other ``KafkaException`` (e.g. no broker answered
    ``init_transactions`` in time) is retried."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, (KafkaException, ValueError)):
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError):
            if error.code() == KafkaError._INVALID_ARG:
                return CONFIG_FAILURE
            return RETRY_FAILURE
        if isinstance(exc, ValueError) or "configuration property" in str(exc):
            return CONFIG_FAILURE
        return RETRY_FAILURE
    if isinstance(exc, OSError):
        return RETRY_FAILURE
    return None


def common_properties(kafka: Any) -> dict[str, Any]:
    """librdkafka properties of the ``[kafka]`` section common to consumer and producer."""
    props: dict[str, Any] = {
        "bootstrap.servers": ",".join(kafka.bootstrap_servers),
        "client.id": kafka.client_id,
        "security.protocol": kafka.security_protocol.lower(),
        "socket.timeout.ms": kafka.request_timeout_ms,
        "socket.connection.setup.timeout.ms": max(kafka.bootstrap_timeout_ms, 1000),
        "reconnect.backoff.ms": kafka.reconnect_backoff_ms,
        "reconnect.backoff.max.ms": max(kafka.reconnect_backoff_max_ms,
                                        kafka.reconnect_backoff_ms),
        "ssl.endpoint.identification.algorithm": "https" if kafka.ssl_check_hostname else "none",
        "statistics.interval.ms": STATS_INTERVAL_MS,
        "logger": silence_kafka_python_logs("librdkafka"),
    }
    if kafka.sasl_mechanism is not None:
        props["sasl.mechanism"] = kafka.sasl_mechanism
    if kafka.sasl_plain_username is not None:
        props["sasl.username"] = kafka.sasl_plain_username
    if kafka.sasl_plain_password is not None:
        props["sasl.password"] = kafka.sasl_plain_password.get_secret_value()
    if kafka.ssl_password is not None:
        props["ssl.key.password"] = kafka.ssl_password.get_secret_value()
    for name, prop in (("ssl_cafile", "ssl.ca.location"),
                       ("ssl_certfile", "ssl.certificate.location"),
                       ("ssl_keyfile", "ssl.key.location"),
                       ("ssl_crlfile", "ssl.crl.location")):
        path = getattr(kafka, name)
        if path is not None:
            props[prop] = str(path)
    if kafka.api_version is not None:
        props["api.version.request"] = False
        props["broker.version.fallback"] = kafka.api_version
    return props


def check_properties(role: str, properties: dict[str, Any]) -> None:
    """Raise ``ValueError`` for a property of ``[kafka.<role>]`` that librdkafka's ``role``
    (``"consumer"`` or ``"producer"``) client refuses (unknown name or invalid value).

    The check creates a client that connects to nothing and closes it at once."""
    if not properties:
        return
    strategy = str(properties.get("partition.assignment.strategy", ""))
    if role == "consumer" and "cooperative" in strategy:
        raise ValueError(f"kafka.consumer.partition.assignment.strategy = {strategy!r}: the "
                         f"source assigns whole (eager) assignments; use range or roundrobin")
    ck = import_confluent()
    conf = {**{k: v for k, v in properties.items()}, "log_level": 0}
    try:
        if role == "consumer":
            client = ck.Consumer({"group.id": "streamkm-config-check", **conf})
            client.close()
        else:
            ck.Producer(conf)
    except (ck.KafkaException, ValueError, TypeError) as exc:
        # the value is not quoted: a mistyped key may hold a secret
        raise ValueError(f"kafka.{role}: librdkafka refuses the settings "
                         f"{sorted(properties)}: {exc}") from None


class BrokerStates:
    """The broker connection state of one librdkafka client, from its statistics.

    Pass :meth:`on_stats` as the client's ``stats_cb``; :meth:`metrics` answers like a
    kafka-python client's ``metrics()`` (``{group: {"connection-count": n}}``), so
    :func:`~streamkm_connectors.kafka_common.broker_connected` reads both clients alike.
    """

    def __init__(self, metric_group: str) -> None:
        self.metric_group = metric_group
        self._lock = threading.Lock()
        self._up = 0

    def on_stats(self, stats_json: str) -> None:
        """librdkafka's statistics: count the brokers whose connection is up."""
        try:
            brokers = json.loads(stats_json).get("brokers", {})
        except ValueError:
            return
        up = sum(1 for broker in brokers.values() if broker.get("state") == "UP")
        with self._lock:
            self._up = up

    def set_down(self) -> None:
        """Every connection is known to be down (``_ALL_BROKERS_DOWN``)."""
        with self._lock:
            self._up = 0

    def metrics(self) -> dict[str, dict[str, float]]:
        """``{metric_group: {"connection-count": brokers up}}``."""
        with self._lock:
            return {self.metric_group: {"connection-count": float(self._up)}}
