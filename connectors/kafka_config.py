"""The configuration of the Kafka connector: the ``[source]`` table of ``kind = "kafka"``
(a consumer group), the ``[sinks]`` table of ``kind = "kafka"`` (topics), the ``[kafka]``
section (connection and client settings, shared by the source, the sinks and the scale-out
transport), what exactly-once outputs need across those sections, and the hooks the core
asks about the kinds (:class:`streamkm.registry.KindHooks`).

Importing this module does not import kafka-python.
"""

from __future__ import annotations

import socket
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from streamkm.config.secrets import mask_value
from streamkm.config.sections import ConfigPath, Section, SinksSection, SourceSection
from streamkm.registry import KindHooks

__all__ = ["KafkaSourceConfig", "KafkaSinksConfig", "KafkaConfig", "MANAGED_CLIENT_KEYS",
           "CONFLUENT_MANAGED_PROPERTIES",
           "check_transactions", "unreachable_brokers", "retry_backoff_s",
           "KAFKA_SOURCE_HOOKS", "KAFKA_SINKS_HOOKS"]


class KafkaSourceConfig(SourceSection):
    """A Kafka consumer group (``kind = "kafka"``); connection settings are in ``[kafka]``."""

    kind: Literal["kafka"]
    topics: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    pattern: str | None = Field(default=None, min_length=1)
    group_id: str = Field(default="streamkm", min_length=1)
    group_instance_id: str | None = Field(default=None, min_length=1)
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    session_timeout_ms: int = Field(default=6000, gt=0)
    heartbeat_interval_ms: int = Field(default=1000, gt=0)
    max_poll_interval_ms: int = Field(default=30000, gt=0)
    max_poll_records: int = Field(default=2000, gt=0)
    max_record_bytes: int = Field(default=1 << 20, gt=0)
    max_buffered_records: int = Field(default=10000, gt=0)
    poll_interval_ms: float = Field(default=100.0, gt=0)
    commit_timeout_ms: int = Field(default=10000, gt=0)

    @model_validator(mode="after")
    def _topics_or_pattern(self) -> KafkaSourceConfig:
        if bool(self.topics) == (self.pattern is not None):
            raise ValueError(
                f"set exactly one of source.topics (got {self.topics!r}) and source.pattern "
                f"(got {self.pattern!r})")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"source.heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be below "
                f"source.session_timeout_ms ({self.session_timeout_ms})")
        return self


class KafkaSinksConfig(SinksSection):
    """Kafka topics (``kind = "kafka"``): ``assignments_topic`` / ``events_topic`` may be
    disabled with ``""``; the model goes to ``model_topic`` or, as with any sinks kind, to
    the file ``model``."""

    MODEL_SINK_KEYS: ClassVar[tuple[str, ...]] = ("model", "model_topic")
    SHOWN_EMPTY: ClassVar[tuple[str, ...]] = ("assignments_topic", "events_topic", "model")

    kind: Literal["kafka"]
    assignments_topic: str | None = "streamkm-assignments"
    events_topic: str | None = "streamkm-events"
    dead_letter_topic: str = Field(default="streamkm-dead-letter", min_length=1)
    flush_timeout_ms: int = Field(default=30000, gt=0)
    model_topic: str | None = Field(default=None, min_length=1)


#: Keys of ``[kafka.consumer]`` / ``[kafka.producer]`` that streamkm sets itself.
MANAGED_CLIENT_KEYS = frozenset({
    "bootstrap_servers", "group_id", "enable_auto_commit", "key_deserializer",
    "value_deserializer", "key_serializer", "value_serializer", "default_offset_commit_callback",
    "kafka_client", "selector", "metric_reporters", "ssl_context", "sasl_oauth_token_provider",
})
#: librdkafka properties of ``[kafka.consumer]`` / ``[kafka.producer]`` that streamkm sets
#: itself (with ``client = "confluent"``).
CONFLUENT_MANAGED_PROPERTIES = frozenset({
    "bootstrap.servers", "metadata.broker.list", "group.id", "group.instance.id",
    "enable.auto.commit", "enable.auto.offset.store", "transactional.id", "stats_cb",
    "error_cb", "on_commit", "on_delivery", "logger", "statistics.interval.ms",
    "oauth_cb", "throttle_cb",
})
#: Keys of ``[kafka]`` that only exactly-once outputs (``transactional_id``) use.
_TRANSACTION_KEYS = ("transaction_timeout_ms", "transaction_check_interval_ms")


class KafkaConfig(Section):
    """Connection to the Kafka cluster, shared by the Kafka source, the Kafka sinks and the
    scale-out transport.

    ``client`` picks the client library of the single-process source and sinks:
    ``"kafka-python"`` (the default) or ``"confluent"`` (confluent-kafka on librdkafka, the
    ``streamkm[confluent]`` extra; scale-out always runs on kafka-python). ``consumer`` and
    ``producer`` pass any other setting of that client through: kafka-python's
    ``KafkaConsumer`` / ``KafkaProducer`` keyword arguments, or librdkafka properties
    (``"fetch.min.bytes"``) with ``client = "confluent"``; unknown names are errors.
    """

    client: Literal["kafka-python", "confluent"] = "kafka-python"
    bootstrap_servers: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: ["127.0.0.1:9092"], min_length=1)
    client_id: str = Field(default="streamkm", min_length=1)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
                            "GSSAPI"] | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: SecretStr | None = None
    ssl_cafile: ConfigPath | None = None
    ssl_certfile: ConfigPath | None = None
    ssl_keyfile: ConfigPath | None = None
    ssl_crlfile: ConfigPath | None = None
    ssl_password: SecretStr | None = None
    ssl_check_hostname: bool = True
    api_version: str | None = Field(default=None, pattern=r"^\d+(\.\d+){1,2}$")
    request_timeout_ms: int = Field(default=30000, gt=0)
    bootstrap_timeout_ms: int = Field(default=5000, gt=0)
    reconnect_backoff_ms: int = Field(default=50, gt=0)
    reconnect_backoff_max_ms: int = Field(default=5000, gt=0)
    #: Exactly-once Kafka outputs (docs/service.md, Kafka): unique per process, stable across
    #: its restarts (a restart fences the previous incarnation's producer).
    transactional_id: str | None = Field(default=None, min_length=1)
    transaction_timeout_ms: int = Field(default=60000, gt=0)
    #: While no transaction commits, how often the producer checks with the transaction
    #: coordinator that it was not fenced (connectors/kafka_sinks.py).
    transaction_check_interval_ms: int = Field(default=5000, gt=0)
    consumer: dict[str, Any] = Field(default_factory=dict)
    producer: dict[str, Any] = Field(default_factory=dict)

    @field_validator("consumer", "producer")
    @classmethod
    def _known_client_settings(cls, value: dict[str, Any], info: Any) -> dict[str, Any]:
        if not value:
            return value
        confluent = info.data.get("client") == "confluent"
        managed = CONFLUENT_MANAGED_PROPERTIES if confluent else MANAGED_CLIENT_KEYS
        for key in value:
            if key in managed or key in cls.model_fields:
                shown = mask_value(key, value[key])
                raise ValueError(f"kafka.{info.field_name}.{key} = {shown!r} is set by "
                                 f"streamkm or in [kafka]/[source], not here")
        if confluent:
            from .confluent_common import check_properties  # imports confluent-kafka

            check_properties(info.field_name, value)
        else:
            from .kafka_common import check_client_settings  # imports kafka-python

            check_client_settings(info.field_name, value)
        return value

    @field_validator("client")
    @classmethod
    def _client_installed(cls, value: str) -> str:
        if value == "confluent":
            from .confluent_common import MISSING_EXTRA

            try:
                import confluent_kafka  # noqa: F401
            except ImportError:
                raise ValueError(MISSING_EXTRA) from None
        return value

    @model_validator(mode="after")
    def _sasl_complete(self) -> KafkaConfig:
        if self.security_protocol.startswith("SASL_"):
            if self.sasl_mechanism is None:
                raise ValueError(f"kafka.sasl_mechanism is required with "
                                 f"kafka.security_protocol = {self.security_protocol!r}")
            if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and (
                    self.sasl_plain_username is None or self.sasl_plain_password is None):
                raise ValueError(f"kafka.sasl_plain_username and kafka.sasl_plain_password "
                                 f"are required with kafka.sasl_mechanism = "
                                 f"{self.sasl_mechanism!r}")
        return self

    def client_settings(self) -> dict[str, Any]:
        """Keyword arguments common to kafka-python's consumer and producer."""
        settings: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap_servers), "client_id": self.client_id,
            "security_protocol": self.security_protocol,
            "ssl_check_hostname": self.ssl_check_hostname,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": self.bootstrap_timeout_ms,
            "reconnect_backoff_ms": self.reconnect_backoff_ms,
            "reconnect_backoff_max_ms": self.reconnect_backoff_max_ms,
        }
        if self.sasl_mechanism is not None:
            settings["sasl_mechanism"] = self.sasl_mechanism
        if self.sasl_plain_username is not None:
            settings["sasl_plain_username"] = self.sasl_plain_username
        for name in ("sasl_plain_password", "ssl_password"):
            secret = getattr(self, name)
            if secret is not None:
                settings[name] = secret.get_secret_value()
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_crlfile"):
            path = getattr(self, name)
            if path is not None:
                settings[name] = str(path)
        if self.api_version is not None:
            settings["api_version"] = tuple(int(p) for p in self.api_version.split("."))
        return settings


def check_transactions(config: Any) -> None:
    """What exactly-once outputs (``kafka.transactional_id``) need of the whole
    configuration: a Kafka source and Kafka sinks, no model topic, no scale-out; and the
    transaction keys set only with them. Also: scale-out runs on kafka-python only.

    Raises
    ------
    ValueError
        Naming the keys that cannot be combined.
    """
    kafka = config.kafka
    if kafka.client == "confluent" and config.scaleout.enabled:
        raise ValueError("kafka.client = 'confluent' is not supported with scaleout.enabled = "
                         "true: scale-out runs on kafka-python (its keep-leader assignor; "
                         "docs/scaleout.md); set kafka.client = 'kafka-python'")
    tid = kafka.transactional_id
    if tid is None:
        for key in _TRANSACTION_KEYS:
            value = getattr(kafka, key)
            if value != KafkaConfig.model_fields[key].default:  # set for nothing
                raise ValueError(f"kafka.{key} = {value!r} needs kafka.transactional_id")
        return
    if config.source.kind != "kafka" or config.sinks.kind != "kafka":
        raise ValueError(f"kafka.transactional_id = {tid!r} needs source.kind = 'kafka' and "
                         f"sinks.kind = 'kafka', got {config.source.kind!r} and "
                         f"{config.sinks.kind!r}")
    if config.sinks.model_topic is not None:
        raise ValueError(f"kafka.transactional_id = {tid!r} and sinks.model_topic = "
                         f"{config.sinks.model_topic!r} cannot be combined yet (a model is "
                         f"published outside the output transactions): use sinks.model "
                         f"(a file) for the model")
    if config.scaleout.enabled:
        raise ValueError(f"kafka.transactional_id = {tid!r} is not supported with "
                         f"scaleout.enabled = true (scale-out outputs: docs/scaleout.md)")


def _fix(key: str) -> str:
    section, _, name = key.partition(".")
    return f"set [{section}] {name} or STREAMKM_{section.upper()}__{name.upper()}"


def unreachable_brokers(config: Any, timeout_s: float) -> list[str]:
    """``[message]`` when none of ``kafka.bootstrap_servers`` accepts a TCP connection
    within ``timeout_s`` each (empty when one does)."""
    servers = config.kafka.bootstrap_servers
    unreachable = []
    for server in servers:
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or server, int(port or 9092)),
                                          timeout=timeout_s):
                return []
        except (OSError, ValueError) as exc:
            unreachable.append(f"{server} ({getattr(exc, 'strerror', None) or exc})")
    return [f"kafka.bootstrap_servers {servers!r}: no broker accepts a connection: "
            f"{', '.join(unreachable)}: start the broker or {_fix('kafka.bootstrap_servers')}"]


def retry_backoff_s(config: Any) -> tuple[float, float]:
    """``(initial_s, max_s)`` between a scale-out member's retries: the client's
    ``kafka.reconnect_backoff_ms`` (at least 0.1 s) up to ``reconnect_backoff_max_ms``."""
    initial = max(float(config.kafka.reconnect_backoff_ms), 100.0) / 1000.0
    return initial, max(float(config.kafka.reconnect_backoff_max_ms) / 1000.0, initial)


#: The Kafka source: re-read by resetting its group's offsets, not by streamkm.
KAFKA_SOURCE_HOOKS = KindHooks(
    start_over_refusal=lambda section: (
        "a Kafka source is re-read by resetting its consumer group's offsets "
        "(kafka-consumer-groups --reset-offsets --to-earliest), not by streamkm"),
    reachability=unreachable_brokers)
#: The Kafka sinks: what was written stays.
KAFKA_SINKS_HOOKS = KindHooks(
    start_over_refusal=lambda section: "Kafka outputs cannot be emptied: what was written "
                                       "to them stays",
    reachability=unreachable_brokers)
