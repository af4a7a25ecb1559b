"""Builds the service's parts (source, decoder, sinks, model) from the configuration.

Sources and sinks come from the connector registered for their ``kind``
(:mod:`streamkm.io.registry`); the core never imports a connector.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm.config.schema import DecodingConfig, ModelConfig, ServiceConfig
from streamkm.drift.policy import DriftPolicy
from streamkm.exceptions import ConfigError, ParameterError
from streamkm.io import registry
from streamkm.io.decoding import RecordDecoder
from streamkm.io.sinks import SinkSet
from streamkm.io.sources import Source

#: How long the service waits for input when none is ready, for a ``[source]`` table
#: without a ``poll_interval_ms`` key of its own.
DEFAULT_POLL_INTERVAL_MS = 100.0

__all__ = ["DEFAULT_POLL_INTERVAL_MS", "source_poll_interval_s", "build_source", "build_decoder", "build_sinks", "build_model"]


def build_source(config: ServiceConfig, *, metrics: Any = None) -> Source:
    """The source of ``config.source.kind`` (the file tailer, a consumer group, ...), built
    by its registered factory from ``[source]``, the whole configuration (the connector's
    own sections) and ``metrics``."""
    return registry.source_factory(config.source.kind)(config.source, config, metrics)


def source_poll_interval_s(config: Any) -> float:
    """Seconds the service waits for input when none is ready: the ``[source]`` table's
    ``poll_interval_ms``, or :data:`DEFAULT_POLL_INTERVAL_MS` for a kind without that key."""
    return float(getattr(config, "poll_interval_ms", DEFAULT_POLL_INTERVAL_MS)) / 1000.0


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


def build_sinks(config: ServiceConfig, *, metrics: Any = None) -> SinkSet:
    """The sinks of ``config.sinks.kind`` (JSON-lines files, topics, ...), built by its
    registered factory from ``[sinks]``, the whole configuration and ``metrics``."""
    return registry.sinks_factory(config.sinks.kind)(config.sinks, config, metrics)


def build_model(config: ModelConfig, batch_size: int,
                drift: DriftPolicy | None = None) -> Any:
    """A fresh, unfitted :class:`streamkm.MiniBatchKernelKMeans`.

    ``drift``: the estimator's drift parameter (``DriftConfig.policy``).

    Raises
    ------
    ConfigError
        The estimator refuses a ``[model]`` or ``[drift]`` parameter.
    """
    from streamkm.cluster import MiniBatchKernelKMeans

    params = config.estimator_params()
    if drift is not None:
        params["drift"] = drift
    try:
        model = MiniBatchKernelKMeans(batch_size=batch_size, **params)
        model._validate_params()
        return model
    except (ParameterError, TypeError, ValueError) as exc:
        raise ConfigError(f"invalid [model] configuration {params!r}: {exc}") from None
