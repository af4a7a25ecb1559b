"""Builds the service's parts (source, decoder, sinks, model) from the configuration.

The file tailer, the Kafka source and the sinks live in ``streamkm_connectors``; they are
imported here, at call time, so that the core package never imports the connectors at
import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm.decoding import RecordDecoder
from streamkm.exceptions import ConfigError, ParameterError
from streamkm.service.config import (
    DecodingConfig,
    KafkaConfig,
    KafkaSourceConfig,
    ModelConfig,
    SinksConfig,
    SourceConfig,
)
from streamkm.sinks import AssignmentSink, DeadLetterSink, EventSink
from streamkm.sources import Source

__all__ = ["ServiceSinks", "build_source", "build_decoder", "build_sinks", "build_model"]


@dataclass
class ServiceSinks:
    """The three sinks of the service (assignments and events may be disabled)."""

    assignments: AssignmentSink | None
    events: EventSink | None
    dead_letter: DeadLetterSink

    def named(self) -> dict[str, Any]:
        """The enabled sinks by name (the keys of ``sink_positions`` in checkpoints)."""
        sinks = {"assignments": self.assignments, "events": self.events,
                 "dead_letter": self.dead_letter}
        return {name: sink for name, sink in sinks.items() if sink is not None}

    def close(self) -> None:
        """Close every sink."""
        for sink in self.named().values():
            sink.close()


def build_source(config: SourceConfig | KafkaSourceConfig, *, kafka: KafkaConfig | None = None,
                 metrics: Any = None) -> Source:
    """The configured source: the file tailer, or a Kafka consumer group (which uses the
    ``kafka`` connection settings and reports to ``metrics.kafka``)."""
    if isinstance(config, KafkaSourceConfig):
        from streamkm_connectors.kafka_source import kafka_source_from_config

        return kafka_source_from_config(config, kafka or KafkaConfig(),
                                        metrics.kafka if metrics is not None else None)
    from streamkm_connectors.file_tailer import FileTailSource

    return FileTailSource(
        [str(p) for p in config.paths], framing=config.framing,
        record_size=config.record_size, max_record_bytes=config.max_record_bytes,
        start_at=config.start_at, poll_interval_s=config.poll_interval_ms / 1000.0,
    )


def build_decoder(config: DecodingConfig) -> RecordDecoder:
    """The configured record decoder."""
    try:
        return RecordDecoder(
            format=config.format, dim=config.dim, id_field=config.id_field,
            x_field=config.x_field, indices_field=config.indices_field,
            values_field=config.values_field, csv_header=config.csv_header,
            csv_id_column=config.csv_id_column, max_abs_value=config.max_abs_value,
            dtype=np.dtype(config.dtype),
        )
    except ParameterError as exc:
        raise ConfigError(f"invalid [decoding] configuration: {exc}") from None


def build_sinks(config: SinksConfig, *, kafka: KafkaConfig | None = None,
                metrics: Any = None) -> ServiceSinks:
    """The configured sinks: JSON-lines files, or Kafka topics (``kind = "kafka"``)."""
    if config.kind == "kafka":
        from streamkm_connectors.kafka_sinks import kafka_sinks_from_config

        assignments, events, dead_letter = kafka_sinks_from_config(
            config, kafka or KafkaConfig(), metrics.kafka if metrics is not None else None)
        return ServiceSinks(assignments=assignments, events=events, dead_letter=dead_letter)
    from streamkm_connectors.file_sinks import (
        AssignmentFileSink,
        DeadLetterFileSink,
        EventFileSink,
    )

    return ServiceSinks(
        assignments=AssignmentFileSink(config.assignments) if config.assignments else None,
        events=EventFileSink(config.events) if config.events else None,
        dead_letter=DeadLetterFileSink(config.dead_letter,
                                       max_raw_bytes=config.dead_letter_max_raw_bytes),
    )


def build_model(config: ModelConfig, batch_size: int,
                drift: dict[str, Any] | None = None) -> Any:
    """A fresh, unfitted :class:`streamkm.MiniBatchKernelKMeans`.

    ``drift``: the estimator's drift parameter (``DriftConfig.estimator_drift()``).

    Raises
    ------
    ConfigError
        The estimator refuses a ``[model]`` or ``[drift]`` parameter.
    """
    from streamkm import MiniBatchKernelKMeans

    params = config.estimator_params()
    if drift is not None:
        params["drift"] = drift
    try:
        model = MiniBatchKernelKMeans(batch_size=batch_size, **params)
        validate = getattr(model, "_validate_params", None)
        if validate is not None:
            validate()
        return model
    except (ParameterError, TypeError, ValueError) as exc:
        raise ConfigError(f"invalid [model] configuration {params!r}: {exc}") from None
