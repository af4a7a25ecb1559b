"""The Kafka connector's Prometheus metrics (``streamkm_kafka_*``), registered on the
service's registry the first time a Kafka client of the process asks for them."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["KafkaMetrics", "kafka_metrics", "broker_connected_gauge", "BROKER_CONNECTED"]

#: The broker connection gauge, shared by every broker client of a process (the Kafka
#: source's consumer, the sinks' producer, the scale-out link).
BROKER_CONNECTED = "streamkm_kafka_broker_connected"


def broker_connected_gauge(metrics: Any) -> Gauge:
    """``streamkm_kafka_broker_connected{client}`` on a
    :class:`~streamkm.runtime.metrics.ServiceMetrics`: 1 while a broker client holds a
    connection."""
    return metrics.group(BROKER_CONNECTED, lambda r: Gauge(
        BROKER_CONNECTED, "1 while the client holds at least one broker connection, else 0.",
        ["client"], registry=r))


def kafka_metrics(metrics: Any) -> KafkaMetrics | None:
    """The Kafka metrics of a :class:`~streamkm.runtime.metrics.ServiceMetrics` (one set per
    process), or ``None`` without one."""
    if metrics is None:
        return None
    broker_connected = broker_connected_gauge(metrics)
    return metrics.group("kafka", lambda r: KafkaMetrics(r, broker_connected))


class KafkaMetrics:
    """Metrics of the Kafka consumer and producers (``topic``/``partition`` labels are the
    partitions currently assigned; ``client`` is ``consumer`` or ``producer``)."""

    def __init__(self, registry: CollectorRegistry, broker_connected: Gauge) -> None:
        r = registry
        self.consumer_lag_records = Gauge(
            "streamkm_kafka_consumer_lag_records",
            "Messages not yet handed to the batcher, per assigned partition (high watermark "
            "minus next offset).", ["topic", "partition"], registry=r)
        self.commits = Counter(
            "streamkm_kafka_commits", "Offset commits to the broker that succeeded.", registry=r)
        self.commit_failures = Counter(
            "streamkm_kafka_commit_failures",
            "Offset commits that failed (retried with the next checkpoint).", registry=r)
        self.rebalances = Counter(
            "streamkm_kafka_rebalances",
            "Partition assignments received by this consumer (one per completed rebalance).",
            registry=r)
        self.backpressure = Counter(
            "streamkm_kafka_backpressure",
            "Kafka source polls that took fewer than max_poll_records records because the "
            "fullest partition buffer was near source.max_buffered_records.", registry=r)
        #: ``streamkm_kafka_broker_connected{client}``, shared with the scale-out link.
        self.broker_connected = broker_connected
