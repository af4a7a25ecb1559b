"""Prometheus metrics of the service, on an injectable :class:`CollectorRegistry`.

Every metric is documented in ``docs/metrics.md``. Labels are bounded: ``reason`` takes the
values of :class:`streamkm.io.decoding.RejectReason`, ``kind`` is ``converged`` or ``woke``,
``warning`` one of the names in :mod:`streamkm.app.warnings_monitor`,
``partition`` is one of the source's partitions (a fixed list per process), ``target`` one of
:data:`IO_TARGETS`.

The registry also gets prometheus_client's process collector (``process_*``: memory, CPU,
open files, start time) and platform collector (``python_info``), unless it already has them
(an application's registry that carries them, like prometheus_client's default ``REGISTRY``).
``_created`` series are left out by the service's ``/metrics`` handler
(:func:`streamkm.runtime.http.metrics_handler`), not by
``prometheus_client.disable_created_metrics()``, which is process-wide and would change the
metrics of an application embedding streamkm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)

from streamkm._version import __version__
from streamkm.exceptions import ParameterError
from streamkm.io.sources import LAG_BYTES, LAG_RECORDS

__all__ = ["ServiceMetrics", "IO_TARGETS", "STALL_CAUSES"]

#: Values of the ``target`` label of ``streamkm_io_errors_total``: the output files and the
#: checkpoint folder.
IO_TARGETS = ("assignments", "events", "dead_letter", "checkpoint")
#: The ``cause`` label of ``streamkm_loop_stalls_total`` (see streamkm.runtime.pauses).
STALL_CAUSES = ("process_paused", "loop_blocked")

_BATCH_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                          2.5, 5.0, 10.0)
_LAG_HELP = {
    LAG_BYTES: "Bytes not yet read, per file source partition (path or pattern), a trailing "
               "incomplete line included.",
    LAG_RECORDS: "Messages not yet read, per Kafka source partition (high watermark minus the "
                 "next offset).",
}
_CHECKPOINT_SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                               5.0, 10.0, 30.0)


class ServiceMetrics:
    """All metrics of one service process.

    Parameters
    ----------
    registry : CollectorRegistry, optional
        Where the metrics are registered; a fresh private registry when omitted (tests and
        embedding applications pass their own).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.records_read = Counter(
            "streamkm_records_read", "Raw records read from the source.", registry=r)
        self.records_accepted = Counter(
            "streamkm_records_accepted", "Records decoded, validated and given to the model.",
            registry=r)
        self.records_rejected = Counter(
            "streamkm_records_rejected", "Records sent to the dead-letter sink, by reason.",
            ["reason"], registry=r)
        self.batches = Counter(
            "streamkm_batches", "Mini-batches processed.", registry=r)
        self.batch_processing_seconds = Histogram(
            "streamkm_batch_processing_seconds",
            "Wall time to process one batch (model step and sink writes), in seconds.",
            buckets=_BATCH_SECONDS_BUCKETS, registry=r)
        self.batch_objective = Gauge(
            "streamkm_batch_objective",
            "Mean squared kernel distance of the last batch to its centers, before the update.",
            registry=r)
        self.model_converged = Gauge(
            "streamkm_model_converged", "1 while the model is converged (assign only), else 0.",
            registry=r)
        self.model_transitions = Counter(
            "streamkm_model_transitions", "Model state changes, by kind (converged, woke).",
            ["kind"], registry=r)
        self.model_steps = Gauge(
            "streamkm_model_steps", "Mini-batch steps the model has taken (its version).",
            registry=r)
        self.clusters = Gauge(
            "streamkm_clusters", "Number of clusters in the model.", registry=r)
        self.cluster_records = Gauge(
            "streamkm_cluster_records",
            "Records assigned to each current cluster (stable id) over the last 10 batches; "
            "series of clusters that no longer exist are removed.", ["cluster"], registry=r)
        self.cluster_splits = Counter(
            "streamkm_cluster_splits",
            "Clusters split in two by drift handling (re-bisection of a drifting cluster).",
            registry=r)
        self.cluster_merges = Counter(
            "streamkm_cluster_merges",
            "Pairs of clusters merged by drift handling (smallest Ward cost).", registry=r)
        self.cluster_births = Counter(
            "streamkm_cluster_births",
            "Clusters born from pooled outliers that formed a compact group (drift handling "
            "with outlier_alpha set).", registry=r)
        self.cluster_retirements = Counter(
            "streamkm_cluster_retirements",
            "Clusters retired by drift handling after drift.retire_after batches without "
            "records.", registry=r)
        self.outliers = Counter(
            "streamkm_outliers",
            "Records flagged as outliers (novelty score at most model.outlier_alpha).",
            registry=r)
        self.outlier_ratio = Gauge(
            "streamkm_outlier_ratio",
            "Share of the last scored batch's records flagged as outliers (0 while "
            "model.outlier_alpha is unset).", registry=r)
        self.outlier_alpha = Gauge(
            "streamkm_outlier_alpha",
            "The configured outlier flag level model.outlier_alpha (0 when unset: nothing "
            "is flagged).", registry=r)
        self._source_lag: dict[str, Gauge] = {}
        self.checkpoint_duration_seconds = Histogram(
            "streamkm_checkpoint_duration_seconds",
            "Wall time to write one checkpoint (sink fsync included), in seconds.",
            buckets=_CHECKPOINT_SECONDS_BUCKETS, registry=r)
        self.checkpoint_last_success_timestamp_seconds = Gauge(
            "streamkm_checkpoint_last_success_timestamp_seconds",
            "Unix time of the last successful checkpoint.", registry=r)
        self.checkpoints = Counter(
            "streamkm_checkpoints", "Checkpoints written successfully.", registry=r)
        self.checkpoint_failures = Counter(
            "streamkm_checkpoint_failures", "Checkpoint writes that failed.", registry=r)
        self.checkpoint_corrupt = Counter(
            "streamkm_checkpoint_corrupt",
            "Checkpoint files found unreadable or corrupt at restore (skipped for an older one).",
            registry=r)
        self.sketch_epoch = Gauge(
            "streamkm_sketch_epoch",
            "Re-sketches of the feature sketch since the model was created (0 = first sketch; "
            "0 without sketching).", registry=r)
        self.resketches = Counter(
            "streamkm_resketches", "Re-sketches done by this process, by trigger "
            "(schedule, drift).", ["trigger"], registry=r)
        self.resketch_seconds = Histogram(
            "streamkm_resketch_seconds",
            "Wall time of one re-sketch (refit on the reservoir, re-projection of the support "
            "rows), in seconds.", buckets=_CHECKPOINT_SECONDS_BUCKETS, registry=r)
        for trigger in ("schedule", "drift"):
            self.resketches.labels(trigger=trigger)
        self.io_errors = Counter(
            "streamkm_io_errors",
            "Writes of an output file or a checkpoint refused by the file system (disk full, "
            "quota, read-only, I/O error), by target; every failed attempt counts.",
            ["target"], registry=r)
        for target in IO_TARGETS:
            self.io_errors.labels(target=target)
        self.io_stalled = Gauge(
            "streamkm_io_stalled",
            "1 while ingestion is paused because an output file or a checkpoint cannot be "
            "written (retried with backoff until it succeeds), else 0.", registry=r)
        self.warning_active = Gauge(
            "streamkm_warning_active",
            "1 while a warning about the service's input or configuration is active, by "
            "warning (source_no_files, reject_ratio_high, no_accepted_records, "
            "source_unreadable).", ["warning"], registry=r)
        self.loop_stalls = Counter(
            "streamkm_loop_stalls",
            "Stalls of the runtime loop, reported once over, by cause: process_paused (the "
            "whole process did not run: SIGSTOP, a frozen container or VM) or loop_blocked "
            "(the loop did not turn for longer than the liveness threshold).", ["cause"],
            registry=r)
        self.loop_stalled_seconds = Counter(
            "streamkm_loop_stalled_seconds",
            "Seconds the runtime loop was stalled, by cause (see streamkm_loop_stalls).",
            ["cause"], registry=r)
        for cause in STALL_CAUSES:
            self.loop_stalls.labels(cause=cause)
            self.loop_stalled_seconds.labels(cause=cause)
        self.model_publications = Counter(
            "streamkm_model_publications",
            "Models written to the model sink ([sinks] model / model_topic).", registry=r)
        self.model_publication_failures = Counter(
            "streamkm_model_publication_failures",
            "Models the model sink failed to write (retried at the next publication).",
            registry=r)
        self._groups: dict[str, Any] = {}
        self.build_info = Info(
            "streamkm_build", "Version of streamkm running.", registry=r)
        self.build_info.info({"version": __version__})
        for kind in ("converged", "woke"):
            self.model_transitions.labels(kind=kind)
        self._add_process_collectors()

    def _add_process_collectors(self) -> None:
        """prometheus_client's process and platform collectors, unless the registry has them
        (a registry only detects duplicates itself with ``auto_describe``: look first)."""
        present = {metric.name for metric in self.registry.collect()}
        for collector, name in ((ProcessCollector, "process_start_time_seconds"),
                                (PlatformCollector, "python_info")):
            if name in present:
                continue
            try:
                collector(registry=self.registry)
            except ValueError:  # "Duplicated timeseries": registered under other names
                pass

    def source_lag(self, unit: str) -> Gauge:
        """``streamkm_source_lag_<unit>{partition}`` (``unit``: a partition's ``lag_unit``,
        ``"bytes"`` or ``"records"``), registered on first use: a process exports only the
        families of the sources it reads."""
        gauge = self._source_lag.get(unit)
        if gauge is None:
            if unit not in _LAG_HELP:
                raise ParameterError(f"unknown source lag unit {unit!r}, expected one of "
                                     f"{sorted(_LAG_HELP)}")
            gauge = Gauge(f"streamkm_source_lag_{unit}", _LAG_HELP[unit], ["partition"],
                          registry=self.registry)
            self._source_lag[unit] = gauge
        return gauge

    def remove_source_lag(self, partition: str) -> None:
        """Stop exporting the lag of ``partition`` (given up, revoked)."""
        for gauge in self._source_lag.values():
            try:
                gauge.remove(partition)
            except KeyError:
                pass

    def group(self, name: str, factory: Callable[[CollectorRegistry], Any]) -> Any:
        """The metrics of a connector (or of another part that only some processes have),
        ``factory(registry)`` registered on first use under ``name``, the same object after:
        a process exports only the families of the clients it runs."""
        if name not in self._groups:
            self._groups[name] = factory(self.registry)
        return self._groups[name]

    def init_reasons(self, reasons: list[str]) -> None:
        """Create the ``reason`` series at 0 so rates work from the first rejection."""
        for reason in reasons:
            self.records_rejected.labels(reason=reason)
