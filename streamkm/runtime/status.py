"""A snapshot of a process's progress (status lines, tests, HTTP pages)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from streamkm.io.batcher import Batch
from streamkm.io.rejection import RejectReason
from streamkm.runtime.metrics import ServiceMetrics

__all__ = ["ServiceStatus"]


@dataclass
class ServiceStatus:
    """Counts and timings of one process, updated by the runtime after every batch."""

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
    cluster_births: int = 0
    cluster_retirements: int = 0
    cluster_events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=100))
    checkpoints: int = 0
    read_seconds: float = 0.0
    decode_seconds: float = 0.0
    model_seconds: float = 0.0
    sink_seconds: float = 0.0
    checkpoint_seconds: float = 0.0
    loop_stalls: int = 0
    stalled_seconds: float = 0.0

    def count_batch(self, batch: Batch, rejected: dict[str, int], metrics: ServiceMetrics
                    ) -> None:
        """Add a processed batch to the status and the metrics.

        ``rejected`` holds the batch's dead-lettered records by reason: the decoder's
        rejections and the valid records whose assignment could not be written
        (``output_error``: learned by the model, yet counted as rejected, not accepted, so
        that read = accepted + rejected and accepted = assignments written).
        """
        self.count_rejected(rejected, metrics)
        accepted = batch.n_valid - rejected.get(RejectReason.OUTPUT_ERROR.value, 0)
        self.records_read += batch.n_read
        self.records_accepted += accepted
        self.batches += 1
        self.read_seconds += batch.read_seconds
        self.decode_seconds += batch.decode_seconds
        metrics.records_read.inc(batch.n_read)
        metrics.records_accepted.inc(accepted)
        metrics.batches.inc()

    def count_rejected(self, rejected: dict[str, int], metrics: ServiceMetrics) -> None:
        """Add dead-lettered records (by reason) to the status and the metrics."""
        for reason, n in rejected.items():
            metrics.records_rejected.labels(reason=reason).inc(n)
            self.rejected_by_reason[reason] = self.rejected_by_reason.get(reason, 0) + n
            self.records_rejected += n

    def count_stall(self, seconds: float) -> None:
        """Add one stall of the loop (a paused process, a blocked loop), once it is over."""
        self.loop_stalls += 1
        self.stalled_seconds += seconds

    def restore_counters(self, counters: dict[str, Any]) -> None:
        """Continue the counts saved in a checkpoint (see :meth:`counters`)."""
        self.records_read = int(counters.get("records_read", 0))
        self.records_accepted = int(counters.get("records_accepted", 0))
        self.rejected_by_reason = dict(counters.get("records_rejected_by_reason", {}))
        self.records_rejected = sum(self.rejected_by_reason.values())
        self.batches = int(counters.get("batches", 0))

    def counters(self) -> dict[str, Any]:
        """The counts a checkpoint keeps."""
        return {"records_read": self.records_read, "records_accepted": self.records_accepted,
                "records_rejected": self.records_rejected,
                "records_rejected_by_reason": dict(self.rejected_by_reason),
                "batches": self.batches, "model_steps": self.step}
