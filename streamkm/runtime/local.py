"""The local learner: one process steps its own model and checkpoints it exactly-once.

Exactly-once model updates come from one rule: a checkpoint holds the model together with
the source positions right after the last batch the model has seen and the sink lengths
right after that batch's output. A restart restores the model, truncates the file sinks
to those lengths and resumes every partition from its position, so each valid record
affects the model once whatever crashes happen between checkpoints.

A :class:`~streamkm.io.sources.DynamicSource` (a Kafka consumer group) changes its partitions
at run time. Its assignment hooks run only while the runtime polls it, never during a
batch (a batch still stepping on the step thread is finished and written first): on revocation the batch being collected is dropped, the partitions that stay are
rebuilt from their last processed snapshots, a checkpoint is written (revoked partitions
marked released) and committed before the partitions are given up.
"""

from __future__ import annotations

import logging
from typing import Any

from streamkm.config.schema import ServiceConfig
from streamkm.config.view import flatten_config
from streamkm.io.batcher import Batch
from streamkm.io.checkpoint import Checkpoint
from streamkm.io.sinks import AssignmentNovelty
from streamkm.io.sources import RELEASED
from streamkm.logs import log_event
from streamkm.model import StreamModel
from streamkm.runtime.learner import CheckpointContent, Learned, LearnerHost
from streamkm.runtime.sketching import ServiceSketching
from streamkm.runtime.wiring import build_model


__all__ = ["LocalLearner"]

_log = logging.getLogger("streamkm.service")


class LocalLearner:
    """Steps a :class:`~streamkm.model.StreamModel` (the engine, or the sketch pipeline
    around it) on every batch and checkpoints it with the positions it has seen.

    Parameters
    ----------
    config : ServiceConfig
        ``[model]``, ``[drift]``, ``[sketch]`` and ``[batching]`` define the model.
    """

    checkpoints_at_start = True
    #: The step runs on its own thread while the next batch is read (``[batching] overlap``).
    overlaps_ingest = True

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self._config_snapshot = flatten_config(config)  # stored in checkpoints, secrets masked
        self.model: StreamModel | None = None
        self._sketching: ServiceSketching | None = None
        self._runtime: LearnerHost | None = None
        self._committed_positions: dict[str, Any] = {}
        self._committed_next_part = 0

    @property
    def runtime(self) -> LearnerHost:
        assert self._runtime is not None, "LocalLearner.attach was not called"
        return self._runtime

    # ------------------------------------------------------------------ lifecycle

    def attach(self, runtime: LearnerHost) -> None:
        self._runtime = runtime
        self._sketching = ServiceSketching(self.config, runtime.metrics)

    def open(self, checkpoint: Checkpoint | None) -> None:
        cfg, runtime = self.config, self.runtime
        assert self._sketching is not None
        self.model = self._sketching.wrap(build_model(cfg.model, cfg.batching.batch_size,
                                                      cfg.drift.policy))
        positions: dict[str, Any] = {}
        next_part = 0
        if checkpoint is not None:
            positions = checkpoint.positions
            next_part = int(checkpoint.meta.get("batcher", {}).get("next_part", 0))
            if runtime.reset_model:
                runtime.model_was_reset = True
                log_event(_log, "warning", "model_reset", checkpoint=str(checkpoint.path),
                          discarded_step=int((checkpoint.model_meta or {}).get("n_steps", 0)))
            elif checkpoint.model_meta is not None:
                self.model = self._sketching.restore(checkpoint)
            runtime.restore_sinks(checkpoint)
        batcher, source = runtime.batcher, runtime.source
        assert batcher is not None and source is not None
        if runtime.dynamic is None:
            runtime.use_parts({key: source.build_part(key, positions.get(key))
                               for key in source.list_parts()})
            batcher.next_part = next_part % len(batcher.keys) if batcher.keys else 0
            for key in sorted(set(positions) - set(runtime.parts)):
                log_event(_log, "warning", "checkpointed_partition_gone", partition=key)
        self._committed_positions = batcher.snapshot()
        if runtime.dynamic is not None:  # assigned later; keep every checkpointed position
            self._committed_positions = {**positions, **self._committed_positions}
        self._committed_next_part = batcher.next_part

    def connect(self) -> bool:
        return True

    def tick(self) -> None:
        """Nothing to do between batches."""

    def finish(self) -> bool:
        return True

    def release(self) -> None:
        """Nothing of its own to close."""

    # ------------------------------------------------------------------ batches

    def _ready(self) -> bool:
        return self.model is not None and self.model.is_fitted()

    def min_valid(self) -> int:
        assert self._sketching is not None
        return 1 if self._ready() else self._sketching.min_first_batch

    def initialising(self) -> bool:
        return not self._ready()

    def accepts(self, batch: Batch) -> bool:
        if batch.n_valid == 0 or self._ready():
            return True
        return batch.n_valid >= self.min_valid()

    def learn(self, batch: Batch) -> Learned:
        assert self._sketching is not None and self.model is not None
        if not batch.n_valid:
            return Learned()
        report, resketches = self._sketching.step(self.model, batch.X)
        # stable cluster ids (equal to the positions without drift handling)
        clusters = report.labels if report.cluster_ids is None else report.cluster_ids
        return Learned(cluster_ids=clusters, sq_distances=report.sq_distances,
                       step=report.step, novelty=AssignmentNovelty.from_report(report),
                       objective=float(report.objective),
                       events=report.events, side_events=resketches)

    def processed(self, batch: Batch) -> None:
        self._committed_positions = {**self._committed_positions, **batch.positions}
        self._committed_next_part = batch.next_part

    def refresh_status(self) -> None:
        assert self._sketching is not None and self.model is not None
        runtime, model = self.runtime, self.model
        if self._ready():
            runtime.set_model_gauges(step=int(model.n_steps_), converged=bool(model.converged_),
                                     clusters=int(model.n_clusters_))
            if runtime.status.objective is None:  # restored: the last batch's objective
                runtime.status.objective = float(model.batch_objective_)
                runtime.metrics.batch_objective.set(runtime.status.objective)
        else:
            runtime.set_model_gauges(step=0, converged=False, clusters=self.config.model.n_clusters)
        self._sketching.refresh_metrics(model)

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_content(self) -> CheckpointContent:
        assert self._sketching is not None and self.model is not None
        arrays, meta, sketch = self._sketching.state_parts(self.model)
        return CheckpointContent(
            positions=self._committed_positions, model_arrays=arrays, model_meta=meta,
            extra={"batcher": {"next_part": self._committed_next_part},
                   "config": self._config_snapshot}, sketch=sketch)

    def checkpointed(self, content: CheckpointContent) -> None:
        if self.runtime.dynamic is not None:
            self.runtime.dynamic.commit(content.positions)

    # ------------------------------------------------------------------ dynamic partitions

    def _rebuild_parts(self, keys: list[str]) -> None:
        """Read ``keys`` (new or staying) from their last processed snapshots."""
        self.runtime.read_parts({key: self._committed_positions.get(key) for key in keys})

    def on_assigned(self, part_keys: list[str]) -> None:
        owned = set(self.runtime.parts)
        new = sorted(set(part_keys) - owned)
        self._rebuild_parts(sorted(owned | set(new)))
        log_event(_log, "info", "partitions_assigned", partitions=new,
                  owned=sorted(self.runtime.parts))

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        runtime = self.runtime
        revoked = sorted(set(part_keys) & set(runtime.parts))
        for key in revoked:
            snapshot = self._committed_positions.get(key)
            if snapshot is not None:
                self._committed_positions[key] = {**snapshot, RELEASED: True}
            runtime.drop_part(key)
        self._rebuild_parts(sorted(set(runtime.parts) - set(revoked)))
        log_event(_log, "warning" if lost else "info", "partitions_revoked",
                  partitions=revoked, lost=lost)
        runtime.mark_dirty()
        runtime.checkpoint(reason="partitions_lost" if lost else "partitions_revoked")
