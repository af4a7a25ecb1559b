"""The service loop: read, decode, batch, step the model, write sinks, checkpoint.

Exactly-once model updates come from one rule: a checkpoint holds the model together with
the source positions right after the last batch the model has seen and the sink lengths
right after that batch's output. A restart restores the model, truncates the file sinks
to those lengths and resumes every partition from its position, so each valid record
affects the model once whatever crashes happen between checkpoints.

A :class:`~streamkm.sources.DynamicSource` (a Kafka consumer group) changes its partitions
at run time. Its assignment hooks run only while the service polls it, never during a
batch: on revocation the batch being collected is dropped, the partitions that stay are
rebuilt from their last processed snapshots, a checkpoint is written (revoked partitions
marked released) and committed before the partitions are given up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter as TallyCounter
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from streamkm.decoding import RejectReason
from streamkm.exceptions import CheckpointError
from streamkm.service.batcher import Batch, Batcher
from streamkm.service.checkpoint import CheckpointStore
from streamkm.service.config import ServiceConfig, config_hash
from streamkm.service.config_diff import check_against_checkpoint
from streamkm.service.config_view import flatten_config
from streamkm.service.logs import log_event
from streamkm.service.metrics import MetricsServer, ServiceMetrics, start_metrics_server
from streamkm.service.preflight import metrics_bind_error
from streamkm.service.sketching import ServiceSketching
from streamkm.service.wiring import (
    ServiceSinks,
    build_decoder,
    build_model,
    build_sinks,
    build_source,
)
from streamkm.sinks import RecordAssignmentSink
from streamkm.sources import RELEASED, DynamicSource, Source, SourcePartition

__all__ = ["Service", "ServiceStatus"]

_log = logging.getLogger("streamkm.service")


@dataclass
class ServiceStatus:
    """A snapshot of the service's progress (for status lines and tests)."""

    records_read: int = 0
    records_accepted: int = 0
    records_rejected: int = 0
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    step: int = 0
    objective: float | None = None
    converged: bool = False
    clusters: int = 0
    cluster_splits: int = 0
    cluster_merges: int = 0
    cluster_events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=100))
    checkpoints: int = 0
    read_seconds: float = 0.0
    decode_seconds: float = 0.0
    model_seconds: float = 0.0
    sink_seconds: float = 0.0
    checkpoint_seconds: float = 0.0

    def count_batch(self, batch: Batch, rejected: dict[str, int], metrics: ServiceMetrics
                    ) -> None:
        """Add a processed batch to the status and the metrics.

        ``rejected`` holds the batch's dead-lettered records by reason.
        """
        for reason, n in rejected.items():
            metrics.records_rejected.labels(reason=reason).inc(n)
            self.rejected_by_reason[reason] = self.rejected_by_reason.get(reason, 0) + n
        self.records_rejected += len(batch.rejections)
        self.records_read += batch.n_read
        self.records_accepted += batch.n_valid
        self.batches += 1
        metrics.records_read.inc(batch.n_read)
        metrics.records_accepted.inc(batch.n_valid)
        metrics.batches.inc()


class Service:
    """One streamkm consumer process.

    Parameters
    ----------
    config : ServiceConfig
        Validated configuration (paths already absolute).
    registry : CollectorRegistry, optional
        Where metrics go (a private registry by default).
    source : Source, optional
        Overrides the configured source (embedding, tests).
    serve_metrics : bool, optional
        Start the HTTP endpoint; defaults to ``config.metrics.enabled``.
    reset_model : bool, optional
        Start a fresh model over the latest checkpoint's input and output positions
        (``streamkm run --reset-model``; see ``streamkm.service.config_diff``).

    Notes
    -----
    Use :meth:`start`, then :meth:`run` until :meth:`request_stop` is called (from a
    signal handler or another thread); :meth:`run` finishes the current batch, writes a
    final checkpoint and closes everything.
    """

    def __init__(self, config: ServiceConfig, *, registry: CollectorRegistry | None = None,
                 source: Source | None = None, serve_metrics: bool | None = None,
                 reset_model: bool = False) -> None:
        self.config = config
        self._reset_model = reset_model
        self._model_was_reset = False
        self._config_snapshot = flatten_config(config)  # stored in checkpoints, secrets masked
        self.metrics = ServiceMetrics(registry)
        self.metrics.init_reasons([r.value for r in RejectReason])
        self._sketching = ServiceSketching(config, self.metrics)
        self._source = source
        self._serve_metrics = config.metrics.enabled if serve_metrics is None else serve_metrics
        self._stop = threading.Event()
        self._config_hash = config_hash(config)
        self.status = ServiceStatus(clusters=config.model.n_clusters)
        self.metrics_server: MetricsServer | None = None
        self.model: Any = None
        self._parts: dict[str, SourcePartition] = {}
        self._active_source: Source | None = None
        self._dynamic: DynamicSource | None = None
        self._record_assignments = False
        self._sinks: ServiceSinks | None = None
        self._store: CheckpointStore | None = None
        self._batcher: Batcher | None = None
        self._committed_positions: dict[str, Any] = {}
        self._committed_next_part = 0
        self._batches_since_checkpoint = 0
        self._last_checkpoint_time = time.monotonic()
        self._dirty = False
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        """Ask :meth:`run` to finish the current batch, checkpoint and return."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once a stop was requested."""
        return self._stop.is_set()

    def start(self) -> None:
        """Open the checkpoint store, restore, seek the sources, open sinks and metrics."""
        cfg = self.config
        decoder = build_decoder(cfg.decoding)
        self.model = self._sketching.wrap(build_model(cfg.model, cfg.batching.batch_size,
                                                      cfg.drift.estimator_drift()))
        self._store = CheckpointStore(cfg.checkpoint.dir, keep=cfg.checkpoint.keep,
                                      on_corrupt=lambda _p, _e: self.metrics.checkpoint_corrupt.inc())
        checkpoint = self._store.load_latest()
        if checkpoint is not None:
            # Refuses (ConfigError) a model-defining change unless --reset-model; logs the rest.
            check_against_checkpoint(cfg, checkpoint.meta, str(checkpoint.path),
                                     reset_model=self._reset_model)
        self._sinks = build_sinks(cfg.sinks, kafka=cfg.kafka, metrics=self.metrics)
        self._record_assignments = isinstance(self._sinks.assignments, RecordAssignmentSink)
        source = self._source if self._source is not None else build_source(
            cfg.source, kafka=cfg.kafka, metrics=self.metrics)
        self._active_source = source
        if isinstance(source, DynamicSource):
            self._dynamic = source
        positions: dict[str, Any] = {}
        next_part = 0
        if checkpoint is not None:
            positions = checkpoint.positions
            next_part = int(checkpoint.meta.get("batcher", {}).get("next_part", 0))
            self._restore(checkpoint)
        if self._dynamic is None:
            for key in source.list_parts():
                self._parts[key] = source.build_part(key, positions.get(key))
            for key in sorted(set(positions) - set(self._parts)):
                log_event(_log, "warning", "checkpointed_partition_gone", partition=key)
        self._batcher = Batcher(
            self._parts, decoder, dim=cfg.decoding.dim, batch_size=cfg.batching.batch_size,
            max_wait_s=cfg.batching.max_wait_ms / 1000.0,
            poll_interval_s=cfg.source.poll_interval_ms / 1000.0, next_part=next_part,
            dtype=np.dtype(cfg.decoding.dtype))
        self._committed_positions = self._batcher.snapshot()
        if self._dynamic is not None:  # assigned later; keep every checkpointed position
            self._committed_positions = {**positions, **self._committed_positions}
        self._committed_next_part = self._batcher.next_part
        self._refresh_model_metrics()
        if self._serve_metrics:
            try:
                self.metrics_server = start_metrics_server(
                    self.metrics.registry, cfg.metrics.address, cfg.metrics.port)
            except OSError as exc:  # one line naming the key and the fix (preflight.py)
                self._started = True  # so that close() releases what was opened above
                self.close(final_checkpoint=False)
                raise metrics_bind_error(cfg.metrics.address, cfg.metrics.port, exc) from None
            log_event(_log, "info", "metrics_listening", url=self.metrics_server.url,
                      address=cfg.metrics.address, port=self.metrics_server.port)
        self._started = True
        if checkpoint is None or self._model_was_reset:
            # Outputs are only accountable once a checkpoint records their lengths: a
            # service that cannot write its first one must not write any (issue 13).
            reason = "model_reset" if self._model_was_reset else "initial"
            if not self.checkpoint(reason=reason):
                self.close(final_checkpoint=False)
                raise CheckpointError(
                    f"cannot write the {reason} checkpoint in {str(cfg.checkpoint.dir)!r} "
                    f"(see the checkpoint_failed log line): nothing was processed; make "
                    f"[checkpoint] dir writable and start again")
        if self._dynamic is not None:
            self._dynamic.start(_AssignmentHooks(self))
        log_event(_log, "info", "service_started", partitions=sorted(self._parts),
                  step=self.status.step, restored=checkpoint is not None,
                  checkpoint=str(checkpoint.path) if checkpoint else None)

    def _restore(self, checkpoint: Any) -> None:
        if self._reset_model:
            self._model_was_reset = True
            log_event(_log, "warning", "model_reset", checkpoint=str(checkpoint.path),
                      discarded_step=int((checkpoint.model_meta or {}).get("n_steps", 0)))
        elif checkpoint.model_meta is not None:
            self.model = self._sketching.restore(checkpoint)
        assert self._sinks is not None
        for name, sink in self._sinks.named().items():
            saved = checkpoint.sink_positions.get(name)
            current = sink.position()
            if saved is not None and saved.get("path") != current.get("path"):
                log_event(_log, "warning", "sink_path_changed", sink=name,
                          checkpoint_path=saved.get("path"), path=current.get("path"))
                continue
            sink.restore(saved)
        counters = checkpoint.counters
        self.status.records_read = int(counters.get("records_read", 0))
        self.status.records_accepted = int(counters.get("records_accepted", 0))
        self.status.rejected_by_reason = dict(counters.get("records_rejected_by_reason", {}))
        self.status.records_rejected = sum(self.status.rejected_by_reason.values())
        self.status.batches = int(counters.get("batches", 0))
        # Checkpoint age is measured from the restored checkpoint, not from the epoch.
        self.metrics.checkpoint_last_success_timestamp_seconds.set(
            float(checkpoint.meta.get("created_unix", time.time())))
        log_event(_log, "info", "checkpoint_restored", path=str(checkpoint.path),
                  sequence=checkpoint.sequence, positions=checkpoint.positions,
                  sink_positions=checkpoint.sink_positions)

    def run(self) -> ServiceStatus:
        """Process batches until a stop is requested; then checkpoint and close."""
        if not self._started:
            self.start()
        assert self._batcher is not None
        try:
            while not self._stop.is_set():
                min_valid = 1 if self._model_ready() else self._sketching.min_first_batch
                wait = self._stop.wait if self._dynamic is None else self._poll_dynamic
                batch = self._batcher.collect(min_valid=min_valid, wait=wait)
                self._update_lag()
                if batch is not None and self._can_process(batch):
                    self.process(batch)
                self._maybe_checkpoint()
                if self._dynamic is not None:
                    self._dynamic.poll(0.0)  # stay in the group; rebalance between batches
        except BaseException:
            # The model may be ahead of the committed positions: no final checkpoint.
            self.close(final_checkpoint=False)
            raise
        self.close()
        return self.status

    def close(self, *, final_checkpoint: bool = True) -> None:
        """Write the final checkpoint (if anything changed) and release everything."""
        if not self._started:
            return
        self._started = False
        try:
            if final_checkpoint and self._dirty:
                self.checkpoint(reason="shutdown")
        finally:
            for part in self._parts.values():
                part.close()
            if self._dynamic is not None:
                self._dynamic.close()
            if self._sinks is not None:
                self._sinks.close()
            if self.metrics_server is not None:
                self.metrics_server.close()
            log_event(_log, "info", "service_stopped", step=self.status.step,
                      records_accepted=self.status.records_accepted,
                      records_rejected=self.status.records_rejected)

    # ------------------------------------------------------------------ batches

    def _model_ready(self) -> bool:
        return int(getattr(self.model, "n_steps_", 0) or 0) > 0

    def _can_process(self, batch: Batch) -> bool:
        if batch.n_read == 0:
            return False
        if batch.n_valid == 0 or self._model_ready():
            return True
        return batch.n_valid >= self._sketching.min_first_batch

    def process(self, batch: Batch) -> None:
        """Step the model on ``batch`` and write its assignments, events and dead letters."""
        assert self._sinks is not None
        t0 = time.perf_counter()
        m = self.metrics
        self.status.read_seconds += batch.read_seconds
        self.status.decode_seconds += batch.decode_seconds
        t_sinks = t0
        if batch.n_valid:
            report, sketch_events = self._sketching.step(self.model, batch.X)
            for sketch_event in sketch_events:
                if self._sinks.events is not None:
                    self._sinks.events.write_event(sketch_event)
            t_sinks = time.perf_counter()
            self.status.model_seconds += t_sinks - t0
            # stable cluster ids (equal to the positions without drift handling)
            clusters = report.labels if report.cluster_ids is None else report.cluster_ids
            if self._record_assignments:
                self._sinks.assignments.write_record_assignments(  # type: ignore[union-attr]
                    batch.records, batch.ids, clusters, report.sq_distances, report.step)
            elif self._sinks.assignments is not None:
                self._sinks.assignments.write_assignments(
                    batch.ids, clusters, report.sq_distances, report.step)
            self.status.objective = float(report.objective)
            m.batch_objective.set(report.objective)
            self._write_model_events(report)
        tally: TallyCounter[str] = TallyCounter()
        for rejection in batch.rejections:
            reason = getattr(rejection.reason, "value", str(rejection.reason))
            record = rejection.record
            self._sinks.dead_letter.write_dead_letter(record.value, reason, rejection.detail,
                                                      record.position)
            tally[reason] += 1
        for sink in self._sinks.named().values():
            sink.flush()
        self.status.sink_seconds += time.perf_counter() - t_sinks
        self.status.count_batch(batch, tally, m)
        self._committed_positions = {**self._committed_positions, **batch.positions}
        self._committed_next_part = batch.next_part
        self._batches_since_checkpoint += 1
        self._dirty = True
        self._refresh_model_metrics()
        m.batch_processing_seconds.observe(time.perf_counter() - t0)
        if batch.rejections:
            log_event(_log, "debug", "records_rejected", count=len(batch.rejections),
                      reasons=dict(tally))

    def _write_model_events(self, report: Any) -> None:
        """Count, write and log the lifecycle events of one step (converged, woke, split,
        merge)."""
        assert self._sinks is not None
        m = self.metrics
        events = report.events
        if not events and report.event is not None:  # an engine without report.events
            events = ({"event": report.event, "step": int(report.step),
                       "objective": float(report.objective)},)
        for event in events:
            kind = event["event"]
            if kind in ("converged", "woke"):
                m.model_transitions.labels(kind=kind).inc()
            elif kind == "split":
                m.cluster_splits.inc()
                self.status.cluster_splits += 1
            elif kind == "merge":
                m.cluster_merges.inc()
                self.status.cluster_merges += 1
            if kind in ("split", "merge"):
                self.status.cluster_events.append(dict(event))
            if self._sinks.events is not None:
                self._sinks.events.write_event(dict(event))
            name = "model_" + kind if kind in ("converged", "woke") else "cluster_" + kind
            log_event(_log, "info", name, **{k: v for k, v in event.items() if k != "event"})

    def _refresh_model_metrics(self) -> None:
        m = self.metrics
        model = self.model
        self.status.step = int(getattr(model, "n_steps_", 0) or 0)
        self.status.converged = bool(getattr(model, "converged_", False))
        engine = getattr(model, "model_", model)
        self.status.clusters = (int(engine.n_clusters_) if self._model_ready()
                                else self.config.model.n_clusters)
        m.model_steps.set(self.status.step)
        m.model_converged.set(1 if self.status.converged else 0)
        m.clusters.set(self.status.clusters)
        self._sketching.refresh_metrics(model)
        objective = getattr(model, "batch_objective_", None)
        if objective is not None and self.status.objective is None:
            self.status.objective = float(objective)
            m.batch_objective.set(float(objective))

    def _update_lag(self) -> None:
        for key, part in self._parts.items():
            lag = part.lag()
            if lag is not None:
                self.metrics.source_lag.labels(partition=key).set(lag)

    # ------------------------------------------------------------------ dynamic partitions

    def _poll_dynamic(self, seconds: float) -> bool:
        assert self._dynamic is not None
        self._dynamic.poll(seconds)
        return self._stop.is_set()

    def _rebuild_parts(self, keys: list[str]) -> None:
        """Build ``keys`` (new or staying) from their last processed snapshots and give the
        batcher the new set; the batch being collected is dropped."""
        assert self._active_source is not None and self._batcher is not None
        for key in keys:
            old = self._parts.pop(key, None)
            if old is not None:
                old.close()
            self._parts[key] = self._active_source.build_part(
                key, self._committed_positions.get(key))
        self._batcher.set_parts(dict(self._parts))

    def _on_assigned(self, part_keys: list[str]) -> None:
        new = sorted(set(part_keys) - set(self._parts))
        self._rebuild_parts(sorted(set(self._parts) | set(new)))
        log_event(_log, "info", "partitions_assigned", partitions=new,
                  owned=sorted(self._parts))

    def _on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        revoked = sorted(set(part_keys) & set(self._parts))
        for key in revoked:
            self._parts.pop(key).close()
            snapshot = self._committed_positions.get(key)
            if snapshot is not None:
                self._committed_positions[key] = {**snapshot, RELEASED: True}
            try:
                self.metrics.source_lag.remove(key)
            except KeyError:
                pass
        self._rebuild_parts(sorted(self._parts))
        log_event(_log, "warning" if lost else "info", "partitions_revoked",
                  partitions=revoked, lost=lost)
        self._dirty = True
        self.checkpoint(reason="partitions_lost" if lost else "partitions_revoked")

    # ------------------------------------------------------------------ checkpoints

    def _maybe_checkpoint(self) -> None:
        if not self._dirty:
            return
        cfg = self.config.checkpoint
        due_batches = (cfg.every_batches is not None
                       and self._batches_since_checkpoint >= cfg.every_batches)
        due_time = (cfg.every_seconds is not None
                    and time.monotonic() - self._last_checkpoint_time >= cfg.every_seconds)
        if due_batches or due_time:
            self.checkpoint(reason="batches" if due_batches else "interval")

    def checkpoint(self, *, reason: str = "manual") -> bool:
        """Sync the sinks and write one checkpoint; ``False`` (logged, counted) on failure."""
        assert self._store is not None and self._sinks is not None
        t0 = time.perf_counter()
        m = self.metrics
        try:
            sink_positions = {name: sink.sync() for name, sink in self._sinks.named().items()}
            model_arrays, model_meta, sketch_state = self._sketching.state_parts(
                self.model, ready=self._model_ready())
            path = self._store.write(
                model_arrays=model_arrays, model_meta=model_meta,
                positions=self._committed_positions, sink_positions=sink_positions,
                counters=self._counters(), config_hash=self._config_hash,
                extra={"batcher": {"next_part": self._committed_next_part},
                       "config": self._config_snapshot}, **sketch_state)
        except (CheckpointError, OSError) as exc:
            m.checkpoint_failures.inc()
            log_event(_log, "error", "checkpoint_failed", reason=reason, error=str(exc))
            self._last_checkpoint_time = time.monotonic()
            return False
        seconds = time.perf_counter() - t0
        m.checkpoint_duration_seconds.observe(seconds)
        m.checkpoints.inc()
        m.checkpoint_last_success_timestamp_seconds.set(time.time())
        self.status.checkpoints += 1
        self.status.checkpoint_seconds += seconds
        self._batches_since_checkpoint = 0
        self._last_checkpoint_time = time.monotonic()
        self._dirty = False
        log_event(_log, "info", "checkpoint_written", path=str(path), reason=reason,
                  step=self.status.step, seconds=round(seconds, 6))
        if self._dynamic is not None:
            self._dynamic.commit(self._committed_positions)
        return True

    def _counters(self) -> dict[str, Any]:
        s = self.status
        return {"records_read": s.records_read, "records_accepted": s.records_accepted,
                "records_rejected": s.records_rejected,
                "records_rejected_by_reason": dict(s.rejected_by_reason),
                "batches": s.batches, "model_steps": s.step}


class _AssignmentHooks:
    """The :class:`~streamkm.sources.AssignmentListener` a dynamic source reports to."""

    def __init__(self, service: Service) -> None:
        self._service = service

    def on_assigned(self, part_keys: list[str]) -> None:
        self._service._on_assigned(part_keys)

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        self._service._on_revoked(part_keys, lost=lost)
