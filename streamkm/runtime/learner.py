"""How a runtime learns: the :class:`Learner` strategy and what it hands back.

The :class:`~streamkm.runtime.Runtime` owns everything around the model (source, decoder,
batcher, sinks, status, metrics and HTTP, lag, dead letters, hooks, checkpoint cadence);
a learner owns the model and the partitions' ownership:

* :class:`~streamkm.runtime.local.LocalLearner` steps a model in this process and
  checkpoints it with the source positions (exactly-once).
* :class:`~streamkm.scaleout.worker.ScaleoutWorker` assigns with the group's global model,
  sends updates and leads the merge while elected (``docs/scaleout.md``).

A learner is also the :class:`~streamkm.io.sources.AssignmentListener` of a dynamic source.

Hooks and learners see the runtime through what they may use of it, :class:`RuntimeHost`
and :class:`LearnerHost`, never the concrete :class:`~streamkm.runtime.Runtime`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from streamkm.io.batcher import Batch, Batcher
from streamkm.io.checkpoint import Checkpoint

if TYPE_CHECKING:
    from streamkm.config.schema import ServiceConfig
    from streamkm.io.sinks import AssignmentNovelty, SinkSet
    from streamkm.io.sources import DynamicSource, Source, SourcePartition
    from streamkm.runtime.http import HttpRouter, HttpServer
    from streamkm.runtime.io_guard import IoHealth
    from streamkm.runtime.metrics import ServiceMetrics
    from streamkm.runtime.status import ServiceStatus

__all__ = ["Learner", "Learned", "CheckpointContent", "RuntimeHook", "RuntimeHost",
           "LearnerHost"]


@dataclass
class Learned:
    """What a learner made of one batch's accepted rows.

    ``cluster_ids`` / ``sq_distances`` / ``step`` are the assignments to write (``None``
    when they are written later, e.g. before a scale-out worker has a model, or the batch had
    no valid row; ``step`` is the model step or version they were made with); ``novelty``
    the rows' novelty fields written with them (``None``: not scored); ``objective``
    the batch objective; ``events`` the lifecycle events (``converged``, ``split``, ...) to
    count, write and log; ``side_events`` other entries for the events sink (re-sketches).
    """

    cluster_ids: np.ndarray | None = None
    sq_distances: np.ndarray | None = None
    step: int | None = None
    novelty: AssignmentNovelty | None = None
    objective: float | None = None
    events: tuple[dict[str, Any], ...] = ()
    side_events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class CheckpointContent:
    """What a learner puts in a checkpoint besides the sinks' positions and the counters."""

    positions: dict[str, Any]
    model_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    model_meta: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sketch: dict[str, Any] = field(default_factory=dict)


class RuntimeHost(Protocol):
    """What a :class:`RuntimeHook` may use of the runtime it observes."""

    config: ServiceConfig
    metrics: ServiceMetrics
    status: ServiceStatus
    router: HttpRouter
    http_server: HttpServer | None
    source: Source | None
    batcher: Batcher | None
    sinks: SinkSet | None
    parts: dict[str, SourcePartition]

    @property
    def model(self) -> Any:
        """The model the learner assigns with now (``None`` before it has one)."""

    def quiet_model(self) -> Any:
        """:attr:`model` once no step is running (a consistent read of its arrays while the
        next batch may be stepping beside the hooks)."""

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was requested."""

    def add_hook(self, hook: RuntimeHook) -> None:
        """Observe the runtime with ``hook`` from now on."""


class LearnerHost(RuntimeHost, Protocol):
    """What a :class:`Learner` may use of the runtime it runs in: the hooks' view, the
    partitions it reads, the guarded writes and the checkpoint cadence."""

    reset_model: bool
    model_was_reset: bool
    dynamic: DynamicSource | None

    @property
    def io_health(self) -> IoHealth:
        """The state of the guarded writes (readiness)."""

    def wait_stop(self, seconds: float) -> bool:
        """Wait up to ``seconds``; ``True`` if a stop was requested."""

    def use_parts(self, parts: dict[str, SourcePartition]) -> None:
        """Read ``parts`` from now on."""

    def read_parts(self, states: dict[str, dict[str, Any] | None]) -> list[str]:
        """Read the partitions of ``states`` from their snapshots; the refused keys."""

    def drop_part(self, key: str) -> None:
        """Stop reading partition ``key``."""

    def restore_sinks(self, checkpoint: Checkpoint) -> None:
        """Take the sinks back to their positions in ``checkpoint``."""

    def mark_dirty(self) -> None:
        """Something a checkpoint should keep changed outside a batch."""

    def set_model_gauges(self, *, step: int, converged: bool, clusters: int) -> None:
        """Status and gauges of the model this process uses now."""

    def write_assignments(self, assigned: list[tuple[Batch, Learned]]) -> bool:
        """Write assignments made after their batch; ``False`` if a stop came first."""

    def record_events(self, events: tuple[dict[str, Any], ...] | list[dict[str, Any]],
                      *, side_events: list[dict[str, Any]] | None = None,
                      **extra: Any) -> bool:
        """Write, count and log events; ``False`` if a stop came first."""

    def checkpoint(self, *, reason: str = "manual") -> bool:
        """Write a checkpoint now; ``True`` if written."""


class Learner(Protocol):
    """The strategy a :class:`~streamkm.runtime.Runtime` runs (called from its thread only,
    except :meth:`learn` of a learner that ``overlaps_ingest``).

    ``model`` is the model the learner assigns with now (``None`` before it has one).
    """

    model: Any
    #: Whether a first start (or a model reset) must write a checkpoint before any batch.
    checkpoints_at_start: bool
    #: Whether :meth:`learn` may run on the step thread while the runtime's thread collects
    #: the next batch (``[batching] overlap``): then nothing else the runtime calls in the
    #: meantime (``tick``, the batcher's reads) touches the model, and once
    #: :meth:`initialising` is ``False``, :meth:`learn` leaves it and :meth:`min_valid` as
    #: they are. A learner without the attribute is stepped on the runtime's thread.
    overlaps_ingest: bool

    def attach(self, runtime: LearnerHost) -> None:
        """Called once by the runtime's constructor (register metrics, keep the runtime)."""
        ...

    def open(self, checkpoint: Checkpoint | None) -> None:
        """At start, once the runtime built its source, sinks and batcher: restore from the
        latest checkpoint (``None``: first start) and give the batcher its first partitions
        (static sources)."""
        ...

    def connect(self) -> bool:
        """Reach whatever the learner talks to (retrying); ``False`` if a stop was
        requested first. Called once the HTTP listener is up."""
        ...

    def tick(self) -> None:
        """Housekeeping between batches and while waiting for input."""
        ...

    def min_valid(self) -> int:
        """Fewest valid records a batch should collect (the first batch needs more)."""
        ...

    def initialising(self) -> bool:
        """Whether the next batch starts the model (it is larger and given longer to fill:
        ``batching.first_batch_size``, ``batching.first_batch_wait_ms``)."""
        ...

    def accepts(self, batch: Batch) -> bool:
        """Whether ``batch`` is processed (``False``: dropped, e.g. too small to start)."""
        ...

    def learn(self, batch: Batch) -> Learned:
        """Learn from / assign the batch's accepted rows (on the step thread when
        ``overlaps_ingest``)."""
        ...

    def processed(self, batch: Batch) -> None:
        """The batch's outputs are written and flushed: its positions are done."""
        ...

    def refresh_status(self) -> None:
        """Copy the model's counts into the runtime's status and gauges."""
        ...

    def checkpoint_content(self) -> CheckpointContent | None:
        """The state to checkpoint now, or ``None`` to skip (e.g. broker away)."""
        ...

    def checkpointed(self, content: CheckpointContent) -> None:
        """A checkpoint of ``content`` was written (commit offsets, ...)."""
        ...

    def finish(self) -> bool:
        """At a graceful stop, before the final checkpoint: flush what is in flight (publish
        a last version, ...). ``False`` if that could not complete (no final checkpoint)."""
        ...

    def release(self) -> None:
        """Close the learner's own clients (never raises)."""
        ...

    def on_assigned(self, part_keys: list[str]) -> None: ...

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None: ...


class RuntimeHook:
    """Observes a runtime; subclass and override what you need (every method does nothing
    here). Called on the runtime's thread; must not block.
    """

    def on_started(self, runtime: RuntimeHost) -> None:
        """The runtime is started (restored, listening, connected)."""

    def on_batch(self, runtime: RuntimeHost, batch: Batch, learned: Learned) -> None:
        """A batch was processed and its outputs flushed. With ``[batching] overlap`` the
        next batch may be stepping meanwhile: ``runtime.status`` describes the model after
        this batch; read the model's arrays through ``runtime.quiet_model()``."""

    def on_event(self, runtime: RuntimeHost, event: dict[str, Any]) -> None:
        """A lifecycle event was written (``converged``, ``split``, ``resketched``, ...)."""

    def on_checkpoint(self, runtime: RuntimeHost, reason: str, ok: bool) -> None:
        """A checkpoint was attempted (``ok``: written)."""

    def on_finishing(self, runtime: RuntimeHost) -> None:
        """A graceful stop: the last batch is processed, the final checkpoint comes next and
        the sinks are still open."""

    def on_stopped(self, runtime: RuntimeHost) -> None:
        """The runtime closed."""
