"""Process metrics on the service's registry, and ``_created`` series left out only where
streamkm serves the registry (an embedding application's own exposition is unchanged)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client import generate_latest

from streamkm.runtime.http import HttpRequest, metrics_handler
from streamkm.runtime.metrics import ServiceMetrics

pytestmark = pytest.mark.unit


def names(text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line and not line.startswith("#")}


def served(registry: CollectorRegistry) -> str:
    handler = metrics_handler(registry)
    return handler(HttpRequest("GET", "/metrics", {}, {})).body.decode()


def test_private_registry_gets_process_and_platform_metrics() -> None:
    metrics = ServiceMetrics()
    exported = names(served(metrics.registry))
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total",
            "process_start_time_seconds", "process_open_fds", "python_info"} <= exported


def test_an_application_registry_that_has_them_keeps_its_own() -> None:
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    ServiceMetrics(registry)  # no "Duplicated timeseries"
    text = generate_latest(registry).decode()
    assert text.count("\nprocess_resident_memory_bytes ") == 1
    assert text.count("\npython_info{") == 1


def test_created_series_are_left_out_only_where_streamkm_serves() -> None:
    metrics = ServiceMetrics()
    metrics.records_read.inc(3)
    metrics.batch_processing_seconds.observe(0.01)
    ours = served(metrics.registry)
    assert "streamkm_records_read_total 3.0" in ours
    assert "streamkm_batch_processing_seconds_count 1.0" in ours
    assert not [n for n in names(ours) if n.endswith("_created")]
    openmetrics = metrics_handler(metrics.registry)(HttpRequest(
        "GET", "/metrics", {}, {"accept": "application/openmetrics-text"})).body.decode()
    assert "streamkm_records_read_total 3.0" in openmetrics and "_created" not in openmetrics
    # the application's own exposition of the same registry is untouched (no global switch)
    assert "streamkm_records_read_created" in generate_latest(metrics.registry).decode()


def test_lag_families_appear_with_the_units_the_source_reports() -> None:
    metrics = ServiceMetrics()
    assert "streamkm_source_lag" not in served(metrics.registry)
    metrics.source_lag("bytes").labels(partition="/data/a.jsonl").set(120)
    text = served(metrics.registry)
    assert 'streamkm_source_lag_bytes{partition="/data/a.jsonl"} 120.0' in text
    assert "streamkm_source_lag_records" not in text
    metrics.remove_source_lag("/data/a.jsonl")
    assert "streamkm_source_lag_bytes{" not in served(metrics.registry)
    with pytest.raises(ValueError, match="'messages'"):
        metrics.source_lag("messages")
