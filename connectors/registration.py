"""Registers the built-in connectors with streamkm's registry (the ``builtin`` entry point of
the ``streamkm.connectors`` group in ``pyproject.toml``).

Each kind registers its factory with the model of its ``[source]`` or ``[sinks]`` table and
its hooks (``file_config.py``, ``kafka_config.py``); the Kafka connector adds the ``[kafka]``
section with the check of what exactly-once outputs need. A factory receives its section,
the whole loaded configuration and the process's metrics.

Importing this module does not import kafka-python (nor confluent-kafka): each factory
imports its connector when it is called.
"""

from __future__ import annotations

from typing import Any

from streamkm import registry
from streamkm.sinks import SinkSet
from streamkm.sources import LAG_BYTES, LAG_RECORDS, Source

from .file_config import FILE_SINKS_HOOKS, FILE_SOURCE_HOOKS, FileSinksConfig, FileSourceConfig
from .kafka_config import (
    KAFKA_SINKS_HOOKS,
    KAFKA_SOURCE_HOOKS,
    KafkaConfig,
    KafkaSinksConfig,
    KafkaSourceConfig,
    check_transactions,
    retry_backoff_s,
)

__all__ = ["register"]


def file_source(section: Any, config: Any, metrics: Any) -> Source:
    """The file tailer of a ``[source] kind = "file"`` section."""
    from .file_tailer import FileTailSource

    return FileTailSource(
        [str(p) for p in section.paths], framing=section.framing,
        record_size=section.record_size, max_record_bytes=section.max_record_bytes,
        start_at=section.start_at, poll_interval_s=section.poll_interval_ms / 1000.0,
        blocks=section.read_blocks)


def kafka_source(section: Any, config: Any, metrics: Any) -> Source:
    """The consumer group of a ``[source] kind = "kafka"`` section, on the client of
    ``[kafka] client``."""
    from .kafka_metrics import kafka_metrics

    if config.kafka.client == "confluent":
        from .confluent_source import confluent_source_from_config

        return confluent_source_from_config(section, config.kafka, kafka_metrics(metrics))
    from .kafka_source import kafka_source_from_config

    return kafka_source_from_config(section, config.kafka, kafka_metrics(metrics))


def file_sinks(section: Any, config: Any, metrics: Any) -> SinkSet:
    """JSON-lines file sinks of a ``[sinks] kind = "file"`` section."""
    from .file_sinks import AssignmentFileSink, DeadLetterFileSink, EventFileSink

    return SinkSet(
        assignments=AssignmentFileSink(section.assignments) if section.assignments else None,
        events=EventFileSink(section.events) if section.events else None,
        dead_letter=DeadLetterFileSink(section.dead_letter,
                                       max_raw_bytes=section.dead_letter_max_raw_bytes),
        model=_model_file(section))


def _model_file(section: Any) -> Any:
    """The model file sink of ``[sinks] model`` (any sinks kind), or ``None``."""
    from .file_sinks import ModelFileSink

    return ModelFileSink(section.model) if section.model else None


def kafka_sinks(section: Any, config: Any, metrics: Any) -> SinkSet:
    """Kafka topic sinks of a ``[sinks] kind = "kafka"`` section."""
    from .kafka_metrics import kafka_metrics
    from .kafka_sinks import kafka_sinks_from_config

    assignments, events, dead_letter, model, transaction = kafka_sinks_from_config(
        section, config.kafka, kafka_metrics(metrics))
    return SinkSet(assignments=assignments, events=events, dead_letter=dead_letter,
                   model=model if model is not None else _model_file(section),
                   transaction=transaction)


def kafka_scaleout(config: Any, metrics: Any) -> Any:
    """The Kafka transport of scale-out mode."""
    from .scaleout_kafka import KafkaScaleoutTransport

    return KafkaScaleoutTransport(config)


def broker_connected(metrics: Any) -> Any:
    """``streamkm_kafka_broker_connected{client}`` of the process (the scale-out link's
    connection state)."""
    from .kafka_metrics import broker_connected_gauge

    return broker_connected_gauge(metrics)


def register() -> None:
    """Register the file and Kafka sources and sinks and the Kafka scale-out transport."""
    registry.register_source("file", file_source, section=FileSourceConfig,
                             lag_unit=LAG_BYTES, hooks=FILE_SOURCE_HOOKS)
    registry.register_source("kafka", kafka_source, section=KafkaSourceConfig,
                             lag_unit=LAG_RECORDS, hooks=KAFKA_SOURCE_HOOKS)
    registry.register_sinks("file", file_sinks, section=FileSinksConfig, hooks=FILE_SINKS_HOOKS)
    registry.register_sinks("kafka", kafka_sinks, section=KafkaSinksConfig,
                            hooks=KAFKA_SINKS_HOOKS)
    registry.register_config_section("kafka", KafkaConfig, check=check_transactions)
    registry.register_scaleout_transport("kafka", kafka_scaleout, retry_backoff=retry_backoff_s,
                                         connection_gauge=broker_connected)
