"""The runtime shell: one loop for a single process and for a scale-out member.

Read, decode, batch, hand the batch to the learner, write assignments, events and dead
letters, count, checkpoint on the configured cadence; serve ``/metrics``, ``/healthz`` and
``/readyz`` (:mod:`streamkm.runtime.health`; and whatever routes other features add) and
export the source lag. What "learning" means is the
:class:`~streamkm.runtime.learner.Learner` strategy's business.

Lifecycle: :meth:`Runtime.start`, then :meth:`Runtime.run` until :meth:`Runtime.request_stop`
(a signal handler or another thread); ``run`` finishes the current batch, writes a final
checkpoint and closes everything.

With ``[batching] overlap = true`` and a learner that allows it
(``overlaps_ingest``), the learner steps batch N on the ``streamkm-step`` thread
(:mod:`streamkm.runtime.stepping`) while the loop reads, frames and decodes batch N+1; a
Kafka source fetches meanwhile without blocking. Once N+1 is collected the loop takes N's
step, submits N+1 and writes N's outputs while N+1 steps (a step that finished while the
loop waited for input has its outputs written right away). Outputs and positions follow
each other in batch order as in the serial loop, and a checkpoint is only written with no
step in flight and holds the model after the last written batch: when one is due after N,
N's outputs and the checkpoint come before N+1 is submitted. The model's first batch is stepped on the loop's thread (the next batch's
size depends on it). A partition change finishes the step in flight first
(:class:`~streamkm.runtime.stepping.SettlingListener`); an error of the step is raised on
the loop's thread as if the loop had stepped.

A batch's outputs and the periodic checkpoints are written through an
:class:`~streamkm.runtime.io_guard.IoGuard`: when the file system refuses a write, ingestion
pauses and the batch's output is retried whole (after taking back what the failed attempt
wrote) until it succeeds; a stop requested meanwhile gives the batch up without a final
checkpoint, so the next start resumes from the last checkpoint (the model never keeps a
batch whose outputs are not written). Writes a learner makes outside a batch (a scale-out
worker's held assignments, the merge leader's events) take the same path
(:meth:`Runtime.write_guarded`). ``Runtime.io_health`` tells readiness checks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from streamkm._core.threads import available_cpus
from streamkm.io.resume_point import read_resume_point, resume_point_path, write_resume_point
from streamkm.config.diff import check_against_checkpoint
from streamkm.config.preflight import metrics_bind_error
from streamkm.config.schema import ServiceConfig, config_hash
from streamkm.exceptions import CheckpointError, ParameterError, StateError, StorageError
from streamkm.io.batcher import Batch, Batcher
from streamkm.io.checkpoint import Checkpoint, CheckpointStore
from streamkm.io.decoding import RejectReason
from streamkm.io.sinks import SinkSet
from streamkm.io.sources import DynamicSource, Source, SourcePartition
from streamkm.logs import log_event
from streamkm.runtime.health import HealthChecks, install_health
from streamkm.runtime.http import HttpRouter, HttpServer, metrics_handler, start_http_server
from streamkm.runtime.io_guard import IoGuard, IoHealth
from streamkm.runtime.learner import CheckpointContent, Learned, Learner, RuntimeHook
from streamkm.runtime.metrics import ServiceMetrics
from streamkm.runtime.status import ServiceStatus
from streamkm.runtime.stepping import SettlingListener, Stepper
from streamkm.runtime.wiring import (
    build_decoder,
    build_sinks,
    build_source,
    source_poll_interval_s,
)

__all__ = ["Runtime"]

_log = logging.getLogger("streamkm.service")

#: Lifecycle events kept in the status's recent cluster changes (and counted there).
CLUSTER_EVENTS = ("split", "merge", "born", "retired")


class Runtime:
    """One streamkm process running a learner strategy.

    Parameters
    ----------
    config : ServiceConfig
        Validated configuration (paths already absolute).
    learner : Learner
        What the process does with its batches (local model, scale-out worker).
    registry : CollectorRegistry, optional
        Where metrics go (a private registry by default).
    source : Source, optional
        Overrides the configured source (embedding, tests).
    serve_metrics : bool, optional
        Start the HTTP listener; defaults to ``config.metrics.enabled``.

    Attributes
    ----------
    status : ServiceStatus
        Progress counters.
    metrics : ServiceMetrics
        The process's Prometheus metrics.
    router : HttpRouter
        The HTTP routes (``/metrics``, ``/healthz``, ``/readyz``); add routes before
        :meth:`start`.
    health : HealthChecks
        Liveness clock and readiness checks (register more with ``health.register``).
    http_server : HttpServer or None
        The listener once started (``metrics_server`` is the same object).
    """

    def __init__(self, config: ServiceConfig, learner: Learner, *,
                 registry: CollectorRegistry | None = None, source: Source | None = None,
                 serve_metrics: bool | None = None, reset_model: bool = False,
                 resume_from_outputs: bool = False) -> None:
        self.config = config
        self.learner = learner
        #: ``streamkm run --reset-model``: start a fresh model over the latest checkpoint's
        #: input and output positions (set ``model_was_reset`` once the learner did so).
        self.reset_model = reset_model
        self.model_was_reset = False
        #: ``streamkm run --on-existing-output=resume``: without a checkpoint, start a fresh
        #: model from the resume point beside the outputs (:mod:`streamkm.io.resume_point`).
        self.resume_from_outputs = resume_from_outputs
        self.resume_point = (None if config.scaleout.enabled
                             else resume_point_path(config.sinks))
        self.metrics = ServiceMetrics(registry)
        self.metrics.init_reasons([r.value for r in RejectReason])
        self.metrics.outlier_alpha.set(config.model.outlier_alpha or 0.0)
        self.status = ServiceStatus(clusters=config.model.n_clusters)
        self.config_hash = config_hash(config)
        self.router = HttpRouter()
        self.router.add("/metrics", metrics_handler(self.metrics.registry))
        self.http_server: HttpServer | None = None
        self.hooks: list[RuntimeHook] = []
        self.last_checkpoint_error: str | None = None
        self.health: HealthChecks = install_health(self)
        self.parts: dict[str, SourcePartition] = {}
        self.source: Source | None = source
        self.dynamic: DynamicSource | None = None
        self.sinks: SinkSet | None = None
        self.store: CheckpointStore | None = None
        self.batcher: Batcher | None = None
        self._serve_metrics = config.metrics.enabled if serve_metrics is None else serve_metrics
        self._stop = threading.Event()
        self._batches_since_checkpoint = 0
        self._last_checkpoint_time = time.monotonic()
        self._dirty = False
        self._started = False
        #: Pauses and retries writes the file system refuses (see :attr:`io_health`).
        self.io_guard = IoGuard(self.metrics, self.wait_stop)
        self._batch_given_up = False  # stop requested while its outputs were refused
        #: Steps batches on their own thread while the next is read (``[batching] overlap``).
        self._stepper: Stepper[Batch, Learned] | None = None
        self._rebalance_error: BaseException | None = None
        self.health.register("outputs", self._check_outputs)
        learner.attach(self)

    @property
    def metrics_server(self) -> HttpServer | None:
        """The HTTP listener (``url`` is the scrape URL)."""
        return self.http_server

    @property
    def io_health(self) -> IoHealth:
        """Whether outputs and checkpoints can be written (``ok``, ``detail``): ``ok`` is
        ``False`` while ingestion is paused on a refused write."""
        return self.io_guard.health

    def _check_outputs(self) -> tuple[bool, str]:
        """Readiness check ``outputs``: not paused on a write the file system refuses."""
        health = self.io_health
        return health.ok, health.detail

    @property
    def model(self) -> Any:
        """The learner's current model (``None`` before it has one). With ``[batching]
        overlap`` the next batch may be stepping while hooks run: read attributes that a
        step replaces whole (the kernel, counters), or use :meth:`quiet_model`."""
        return self.learner.model  # type: ignore[attr-defined]

    def quiet_model(self) -> Any:
        """:attr:`model` once no step is running: waits for a batch stepping on the step
        thread (its outputs are written later, as usual). For a consistent read of the
        model's arrays from a hook, e.g. to serialise it."""
        if self._stepper is not None and self._stepper.busy:
            self._stepper.wait()
        return self.model

    def add_hook(self, hook: RuntimeHook) -> None:
        """Have ``hook`` observe this runtime."""
        self.hooks.append(hook)

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        """Ask :meth:`run` to finish the current batch, checkpoint and return."""
        self._stop.set()

    def wait_stop(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` unless a stop is requested; True once it is."""
        self.health.beat()  # waiting (to retry, for input) is progress, not a stall
        return self._stop.wait(seconds)

    @property
    def stop_requested(self) -> bool:
        """True once :meth:`request_stop` was called."""
        return self._stop.is_set()

    def start(self) -> None:
        """Build the parts, restore the latest checkpoint, listen, connect the learner."""
        cfg = self.config
        self.store = CheckpointStore(
            cfg.checkpoint.dir, keep=cfg.checkpoint.keep,
            on_corrupt=lambda _p, _e: self.metrics.checkpoint_corrupt.inc())
        checkpoint = self.store.load_latest()
        resumed = False
        if checkpoint is not None:
            # Refuses (ConfigError) a model-defining change unless --reset-model; logs the rest.
            check_against_checkpoint(cfg, checkpoint.meta, str(checkpoint.path),
                                     reset_model=self.reset_model)
        elif self.resume_from_outputs and self.resume_point is not None:
            checkpoint, resumed = self._read_resume_point(self.resume_point), True
        self.sinks = build_sinks(cfg, metrics=self.metrics)
        if self.source is None:
            self.source = build_source(cfg, metrics=self.metrics)
        if isinstance(self.source, DynamicSource):
            self.dynamic = self.source
        self.batcher = Batcher(
            {}, build_decoder(cfg.decoding), dim=cfg.decoding.dim,
            batch_size=cfg.batching.batch_size, max_wait_s=cfg.batching.max_wait_ms / 1000.0,
            poll_interval_s=source_poll_interval_s(cfg.source),
            dtype=np.dtype(cfg.decoding.dtype))
        if checkpoint is not None:
            self._restore(checkpoint)
        self.learner.open(checkpoint)
        self.learner.refresh_status()
        if self._serve_metrics:
            try:
                self.http_server = start_http_server(self.router, cfg.metrics.address,
                                                     cfg.metrics.port)
            except OSError as exc:  # one line naming the key and the fix (preflight.py)
                self._started = True  # so that close() releases what was opened above
                self.close(final_checkpoint=False)
                raise metrics_bind_error(cfg.metrics.address, cfg.metrics.port, exc) from None
            log_event(_log, "info", "metrics_listening", url=self.http_server.url,
                      address=cfg.metrics.address, port=self.http_server.port)
        self._started = True
        if (checkpoint is None or self.model_was_reset or resumed) \
                and self.learner.checkpoints_at_start:
            # Outputs are only accountable once a checkpoint records their lengths: a
            # service that cannot write its first one must not write any.
            reason = ("model_reset" if self.model_was_reset
                      else "resumed" if resumed else "initial")
            if not self.checkpoint(reason=reason):
                self.close(final_checkpoint=False)
                raise CheckpointError(
                    f"cannot write the {reason} checkpoint in {str(cfg.checkpoint.dir)!r} "
                    f"(see the checkpoint_failed log line): nothing was processed; make "
                    f"[checkpoint] dir writable and start again")
        if not self.learner.connect():
            return  # stop requested before the learner could connect
        overlap = cfg.batching.overlap
        if overlap == "auto":
            overlap = available_cpus() >= 2
        if overlap and getattr(self.learner, "overlaps_ingest", False):
            self._stepper = Stepper(self.learner.learn)
        if self.dynamic is not None:
            self.dynamic.start(SettlingListener(self.learner, self._settle_for_rebalance))
        log_event(_log, "info", "service_started", partitions=sorted(self.parts),
                  step=self.status.step, restored=checkpoint is not None,
                  checkpoint=str(checkpoint.path) if checkpoint else None)
        for hook in self.hooks:
            hook.on_started(self)

    @staticmethod
    def _read_resume_point(path: Path) -> Checkpoint:
        try:
            point = read_resume_point(path)
        except StateError as exc:
            raise CheckpointError(f"cannot resume from the outputs: {exc}") from None
        log_event(_log, "warning", "resumed_from_outputs", path=str(path),
                  sequence=point.sequence, positions=point.positions,
                  sink_positions=point.sink_positions)
        return point

    def _restore(self, checkpoint: Checkpoint) -> None:
        self.status.restore_counters(checkpoint.counters)
        # Checkpoint age is measured from the restored checkpoint, not from the epoch.
        self.metrics.checkpoint_last_success_timestamp_seconds.set(
            float(checkpoint.meta.get("created_unix", time.time())))
        log_event(_log, "info", "checkpoint_restored", path=str(checkpoint.path),
                  sequence=checkpoint.sequence, positions=checkpoint.positions,
                  sink_positions=checkpoint.sink_positions)

    def restore_sinks(self, checkpoint: Checkpoint) -> None:
        """Bring every sink back to its position in ``checkpoint`` (a file sink truncates
        what was written after it); a sink whose path changed is left alone."""
        assert self.sinks is not None
        for name, sink in self.sinks.named().items():
            saved = checkpoint.sink_positions.get(name)
            current = sink.position()
            if saved is not None and saved.get("path") != current.get("path"):
                log_event(_log, "warning", "sink_path_changed", sink=name,
                          checkpoint_path=saved.get("path"), path=current.get("path"))
                continue
            sink.restore(saved)

    def run(self) -> ServiceStatus:
        """Process batches until a stop is requested; then checkpoint and close."""
        if not self._started:
            self.start()
        assert self.batcher is not None and self.sinks is not None
        first, min_valid = True, 1
        try:
            while not self._stop.is_set():
                self.health.beat()
                self.learner.tick()
                if not self.stepping:  # else as for the batch stepping: the model is started
                    first, min_valid = self.learner.initialising(), self.learner.min_valid()
                batching = self.config.batching
                batch = self.batcher.collect(
                    min_valid=min_valid, wait=self._wait,
                    max_wait_s=batching.first_batch_wait_s if first else None,
                    size=self.config.first_batch if first else None)
                self._update_lag()
                accepted = (batch is not None and batch.n_read and not self._batch_given_up
                            and self.learner.accepts(batch))
                overlapped = None
                if accepted and self.stepping and not self._checkpoint_due(1):
                    # the step in flight is taken, this batch submitted, then the taken
                    # one's outputs written while this one steps
                    assert batch is not None
                    self._hand_over(batch)
                else:
                    self.settle()  # the batch stepped meanwhile: its outputs come first
                    if accepted and self._stepper is not None and not first:
                        overlapped = batch  # stepped while the next one is collected
                    elif accepted:
                        assert batch is not None
                        self.process(batch)
                self._maybe_checkpoint()
                self.sinks.check_transaction(self.source)  # fenced while idle: raises
                if overlapped is not None and self._stepper is not None:
                    self._stepper.submit(overlapped)
                if self.dynamic is not None:
                    self._poll(0.0)  # stay in the group; rebalance between batches
            self.settle()
        except BaseException:
            # The model may be ahead of the committed positions: no final checkpoint.
            self.close(final_checkpoint=False)
            raise
        self.close()
        return self.status

    def close(self, *, final_checkpoint: bool = True) -> None:
        """Let the learner finish, write the final checkpoint (if anything changed) and
        release everything."""
        if not self._started:
            return
        self._started = False
        try:
            if final_checkpoint and not self._batch_given_up:
                self.settle()  # a batch still stepping is written before the checkpoint
            if self._batch_given_up:
                # The model learned a batch whose outputs were never written: checkpointing
                # it would lose them. The next start resumes from the last checkpoint instead.
                final_checkpoint = False
                log_event(_log, "warning", "stopped_while_stalled", step=self.status.step,
                          target=self.io_health.target, error=self.io_health.error)
            if final_checkpoint and self.learner.finish():
                for hook in self.hooks:
                    hook.on_finishing(self)
                if self._dirty:
                    self.checkpoint(reason="shutdown")
        finally:
            if self._stepper is not None:  # a step not written is dropped with its batch
                self._stepper.close()
                self._stepper = None
            self.close_parts()
            self.learner.release()
            for closing in (self.dynamic, self.sinks, self.http_server):
                if closing is not None:
                    closing.close()
            log_event(_log, "info", "service_stopped", step=self.status.step,
                      records_accepted=self.status.records_accepted,
                      records_rejected=self.status.records_rejected)
            for hook in self.hooks:
                hook.on_stopped(self)

    # ------------------------------------------------------------------ partitions

    def _wait(self, seconds: float) -> bool:
        self.health.beat()
        self.learner.tick()
        if self.stepping:
            return self._wait_stepping(seconds)
        if self.dynamic is None:
            return self._stop.wait(seconds)
        self._poll(seconds)
        return self._stop.is_set()

    def _poll(self, seconds: float) -> int | None:
        """Poll the dynamic source; an error that finishing a step in one of its rebalance
        callbacks met is raised here, on the loop's thread (the client would only log it)."""
        assert self.dynamic is not None
        fetched = self.dynamic.poll(seconds)
        error, self._rebalance_error = self._rebalance_error, None
        if error is not None:
            raise error
        return fetched

    def _wait_stepping(self, seconds: float) -> bool:
        """Wait for input while a batch steps: a dynamic source polls without blocking (the
        fetch of the next records overlaps the step); when nothing came, wait up to
        ``seconds`` for the step. A finished step's outputs are written right away."""
        stepper = self._stepper
        assert stepper is not None
        fetched = self._poll(0.0) if self.dynamic is not None else None
        if not fetched:
            stepper.wait(seconds)
        if stepper.done:
            self.settle()
        return self._stop.is_set()

    def close_parts(self) -> None:
        """Close every partition being read (the batcher keeps them until
        :meth:`use_parts`)."""
        for part in self.parts.values():
            part.close()
        self.parts = {}

    def use_parts(self, parts: dict[str, SourcePartition]) -> None:
        """Read ``parts`` from now on; the batch being collected is dropped."""
        assert self.batcher is not None
        self.parts = dict(parts)
        self.batcher.set_parts(dict(parts))

    def read_parts(self, states: dict[str, dict[str, Any] | None]) -> list[str]:
        """Close the partitions being read and read ``states``' instead, each from its
        snapshot (``None``: fresh); returns the keys the source refused (revoked
        meanwhile). The batch being collected is dropped."""
        assert self.source is not None
        self.close_parts()
        parts, gone = {}, []
        for key, state in states.items():
            try:
                parts[key] = self.source.build_part(key, state)
            except ParameterError:
                gone.append(key)
        self.use_parts(parts)
        return gone

    def drop_part(self, key: str) -> None:
        """Stop reading partition ``key`` (given up) and exporting its lag."""
        part = self.parts.pop(key, None)
        if part is not None:
            part.close()
        self.metrics.remove_source_lag(key)

    def _update_lag(self) -> None:
        for key, part in self.parts.items():
            lag = part.lag()
            if lag is not None:
                self.metrics.source_lag(part.lag_unit).labels(partition=key).set(lag)

    # ------------------------------------------------------------------ batches

    @property
    def stepping(self) -> bool:
        """A batch was handed to the step thread and its outputs are not written yet."""
        return self._stepper is not None and self._stepper.busy

    def settle(self) -> None:
        """Finish the batch on the step thread, if any: wait for its step, then write its
        outputs as :meth:`process` does. The step's exception is raised here. After a batch
        was given up (a stop while its outputs were refused) the step is dropped: no output
        may follow the missing ones, and no checkpoint holds either."""
        if not self.stepping:
            return
        assert self._stepper is not None
        if self._batch_given_up:
            self._stepper.discard()
            return
        stepped = self._stepper.take()
        self._write_learned(stepped.batch, stepped.result, stepped.seconds)

    def _hand_over(self, batch: Batch) -> None:
        """Take the finished step of the batch in flight, submit ``batch`` to the step
        thread, then write the taken batch's outputs while ``batch`` steps. The status is
        refreshed from the model before the hand-over, so it describes the model after the
        taken batch; hooks then run beside the next step (see :meth:`quiet_model`)."""
        assert self._stepper is not None
        stepped = self._stepper.take()
        self.learner.refresh_status()
        self._stepper.submit(batch)
        self._write_learned(stepped.batch, stepped.result, stepped.seconds, refresh=False)

    def _settle_for_rebalance(self) -> bool:
        """Before a partition change: finish the batch in flight. ``False`` if its step or
        its outputs failed: the error is raised by :meth:`_poll` on the loop's thread once
        the source's poll returns (a Kafka client only logs what its callbacks raise)."""
        try:
            self.settle()
        except BaseException as exc:
            self._rebalance_error = exc
            return False
        return True

    def process(self, batch: Batch) -> None:
        """Hand ``batch`` to the learner and write its assignments, events and dead letters
        (paused and retried while the file system refuses them)."""
        t0 = time.perf_counter()
        learned = self.learner.learn(batch)
        self._write_learned(batch, learned, time.perf_counter() - t0)

    def _write_learned(self, batch: Batch, learned: Learned, step_seconds: float, *,
                       refresh: bool = True) -> None:
        """The rest of :meth:`process` once the learner stepped ``batch`` (in
        ``step_seconds``): write, count, hand the positions over, refresh the status from
        the model (unless ``refresh`` is false: the caller did, before the next step
        started), tell the hooks."""
        assert self.sinks is not None
        t_sinks = time.perf_counter()
        self.status.model_seconds += step_seconds
        events = [dict(event) for event in learned.events]
        self.sinks.begin_batch(batch.records, batch.rejections)
        rejected = self._write_batch_outputs(batch, learned, events)
        if rejected is None:  # stop requested while stalled: the batch is given up
            self._batch_given_up = True
            return
        self._set_objective(learned)
        self._count_events(events)
        self.status.sink_seconds += time.perf_counter() - t_sinks
        self.status.count_batch(batch, rejected, self.metrics)
        self.learner.processed(batch)
        self._batches_since_checkpoint += 1
        self._dirty = True
        if refresh:
            self.learner.refresh_status()
        self.metrics.batch_processing_seconds.observe(
            step_seconds + time.perf_counter() - t_sinks)
        if rejected:
            log_event(_log, "debug", "records_rejected", count=sum(rejected.values()),
                      reasons=rejected)
        for hook in self.hooks:
            hook.on_batch(self, batch, learned)

    def _write_batch_outputs(self, batch: Batch, learned: Learned,
                             events: list[dict[str, Any]]) -> dict[str, int] | None:
        """Write and flush every output of one batch as one retried attempt; the dead
        letters written by reason, or ``None`` if a stop came while the writes were
        refused (then nothing of the batch stays in the files)."""
        sinks = self.sinks
        assert sinks is not None
        rejected: dict[str, int] = {}

        def write() -> None:
            for entry in learned.side_events:
                sinks.write_event(entry)
            failed = self._write_assignment_rows(batch, learned)
            for entry in events:
                sinks.write_event(entry)
            rejected.clear()
            rejected.update(sinks.write_dead_letters([*batch.rejections, *failed]))

        if self.write_guarded(write):
            return rejected
        return None

    def write_guarded(self, write: Callable[[], object]) -> bool:
        """Run ``write`` (entries to the sinks) and flush the sinks, as one attempt through
        :attr:`io_guard`: while the file system refuses it, what the attempt wrote is taken
        back, the caller (and so ingestion) waits with backoff and the attempt is run again
        whole. ``False`` if a stop came while refused: then nothing of it stays in the
        files."""
        sinks = self.sinks
        assert sinks is not None
        marks = sinks.positions()

        def attempt() -> None:
            sinks.rollback(marks)  # what a refused attempt left behind
            write()
            sinks.flush()

        return self.io_guard.run(attempt, undo=lambda: sinks.rollback(marks))

    def _write_assignment_rows(self, batch: Batch, learned: Learned) -> list[Any]:
        """Write the batch's assignments; the ``output_error`` rejections of rows the sink
        could not write (record-level errors)."""
        assert self.sinks is not None
        if learned.cluster_ids is None:
            return []
        assert learned.step is not None
        return self.sinks.write_assignments(batch.records, batch.ids, learned.cluster_ids,
                                            learned.sq_distances, learned.step,
                                            learned.novelty)

    def _set_objective(self, learned: Learned) -> None:
        """The batch objective and outlier figures of a batch whose outputs are written."""
        if learned.objective is not None:
            self.status.objective = float(learned.objective)
            self.metrics.batch_objective.set(learned.objective)
        if learned.novelty is not None and len(learned.novelty.outliers):
            flagged = int(learned.novelty.outliers.sum())
            self.metrics.outliers.inc(flagged)
            self.metrics.outlier_ratio.set(flagged / len(learned.novelty.outliers))

    def write_assignments(self, assigned: list[tuple[Batch, Learned]]) -> bool:
        """Write the assignments of batches learned earlier (a learner that held them),
        through :meth:`write_guarded`; a row the sink cannot write is dead-lettered
        (``output_error``) and counted once written; the objective becomes the last
        batch's. ``False`` if a stop came while the file system refused them (nothing of
        them is in the files, nothing counted)."""
        sinks = self.sinks
        assert sinks is not None
        rejected: Counter[str] = Counter()

        def write() -> None:
            rejected.clear()
            for batch, learned in assigned:
                failed = self._write_assignment_rows(batch, learned)
                if failed:
                    rejected.update(sinks.write_dead_letters(failed))

        if not self.write_guarded(write):
            return False
        if rejected:
            self.status.count_rejected(dict(rejected), self.metrics)
        for _batch, learned in assigned:
            self._set_objective(learned)
        return True

    def record_events(self, events: tuple[dict[str, Any], ...] | list[dict[str, Any]],
                      *, side_events: list[dict[str, Any]] | None = None,
                      **extra: Any) -> bool:
        """Write ``side_events`` (as they are; hooks see them) and lifecycle events
        (``converged``, ``woke``, ``split``, ``merge``; ``extra`` fields added) through
        :meth:`write_guarded`, then count and log the lifecycle events. ``False`` if a stop
        came while the file system refused them (nothing written, nothing counted)."""
        sinks = self.sinks
        assert sinks is not None
        side = list(side_events or [])
        entries = [{**event, **extra} for event in events]
        if not side and not entries:
            return True

        def write() -> None:
            for entry in (*side, *entries):
                sinks.write_event(entry)

        if not self.write_guarded(write):
            return False
        for entry in side:
            for hook in self.hooks:
                hook.on_event(self, entry)
        self._count_events(entries)
        return True

    def _count_events(self, entries: list[dict[str, Any]]) -> None:
        """Count, log and report written lifecycle events."""
        m = self.metrics
        for entry in entries:
            kind = entry["event"]
            if kind in ("converged", "woke"):
                m.model_transitions.labels(kind=kind).inc()
            elif kind == "split":
                m.cluster_splits.inc()
                self.status.cluster_splits += 1
            elif kind == "merge":
                m.cluster_merges.inc()
                self.status.cluster_merges += 1
            elif kind == "born":
                m.cluster_births.inc()
                self.status.cluster_births += 1
            elif kind == "retired":
                m.cluster_retirements.inc()
                self.status.cluster_retirements += 1
            if kind in CLUSTER_EVENTS:
                self.status.cluster_events.append(dict(entry))
            name = "model_" + kind if kind in ("converged", "woke") else "cluster_" + kind
            log_event(_log, "info", name, **{k: v for k, v in entry.items() if k != "event"})
            for hook in self.hooks:
                hook.on_event(self, entry)

    def set_model_gauges(self, *, step: int, converged: bool, clusters: int) -> None:
        """Status and gauges of the model this process uses now."""
        self.status.step, self.status.converged, self.status.clusters = step, converged, clusters
        self.metrics.model_steps.set(step)
        self.metrics.model_converged.set(1 if converged else 0)
        self.metrics.clusters.set(clusters)

    # ------------------------------------------------------------------ checkpoints

    def mark_dirty(self) -> None:
        """Something a checkpoint should keep changed outside a batch."""
        self._dirty = True

    def _checkpoint_due(self, more_batches: int = 0) -> str | None:
        """Why a checkpoint is due once ``more_batches`` more batches are written
        (``"batches"`` or ``"interval"``), or ``None``."""
        cfg = self.config.checkpoint
        if cfg.every_batches is not None and (
                self._batches_since_checkpoint + more_batches >= cfg.every_batches):
            return "batches"
        if (cfg.every_seconds is not None
                and time.monotonic() - self._last_checkpoint_time >= cfg.every_seconds):
            return "interval"
        return None

    def _maybe_checkpoint(self) -> None:
        if not self._dirty:
            return
        reason = self._checkpoint_due()
        if reason is not None:
            # A refused write pauses ingestion until the checkpoint is written (or a stop).
            self.io_guard.run(lambda: self._checkpoint_once(reason))

    def _write_resume_point(self, checkpoint: Path, content: CheckpointContent,
                            sink_positions: dict[str, Any]) -> None:
        """Copy the checkpoint's positions beside the outputs; a refused write is logged
        (the previous resume point, an older consistent state, stays)."""
        if self.resume_point is None:
            return
        try:
            write_resume_point(
                self.resume_point, sequence=int(checkpoint.stem.rsplit("-", 1)[1]),
                created_unix=time.time(), positions=content.positions,
                sink_positions=sink_positions, counters=self.status.counters(),
                batcher=content.extra.get("batcher", {}))
        except OSError as exc:
            log_event(_log, "warning", "resume_point_failed", path=str(self.resume_point),
                      error=str(exc))

    def checkpoint(self, *, reason: str = "manual") -> bool:
        """Sync the sinks and write one checkpoint of the learner's state; ``False`` (logged,
        counted) on failure or when the learner cannot checkpoint now."""
        try:
            return self._checkpoint_once(reason)
        except StorageError as exc:
            log_event(_log, "error", "checkpoint_failed", reason=reason, error=str(exc))
            return False

    def _checkpoint_once(self, reason: str) -> bool:
        """:meth:`checkpoint`, raising :class:`StorageError` (counted, not logged) when the
        file system refuses the sinks' sync or the checkpoint file."""
        assert self.store is not None and self.sinks is not None
        self.settle()  # a checkpoint holds no step in flight: the model after written batches
        if self._batch_given_up:  # the model holds a batch whose outputs are not written
            return False
        content = self.learner.checkpoint_content()
        if content is None:
            self._last_checkpoint_time = time.monotonic()
            return False
        t0 = time.perf_counter()
        m = self.metrics
        try:
            sink_positions = self.sinks.sync()
            # Transactional outputs are committed with the positions before the checkpoint
            # that holds them: a crash in between replays records whose outputs exist
            # (suppressed, see streamkm.io.sinks), never loses outputs.
            self.sinks.commit(content.positions, self.source)
            path = self.store.write(
                model_arrays=content.model_arrays, model_meta=content.model_meta,
                positions=content.positions, sink_positions=sink_positions,
                counters=self.status.counters(), config_hash=self.config_hash,
                extra=content.extra, **content.sketch)
        except (CheckpointError, OSError) as exc:
            m.checkpoint_failures.inc()
            self.last_checkpoint_error = str(exc)
            self._last_checkpoint_time = time.monotonic()
            for hook in self.hooks:
                hook.on_checkpoint(self, reason, False)
            if isinstance(exc, StorageError):
                raise
            log_event(_log, "error", "checkpoint_failed", reason=reason, error=str(exc))
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
        self._write_resume_point(path, content, sink_positions)
        self.learner.checkpointed(content)
        for hook in self.hooks:
            hook.on_checkpoint(self, reason, True)
        return True
