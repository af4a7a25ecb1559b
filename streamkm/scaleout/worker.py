"""The scale-out learner: one member of a group learning one global model.

Worker: assign every record with the current global model version, send one update per
partition range to the updates topic once the batch's assignments and dead letters are
acknowledged (the watermark then never passes a record whose outputs could be lost). On
every assignment of a partition the worker first sends a fence and waits for a model
version in which that fence owns the partition; it then reads from the version's
watermark. While elected it also holds the merge-leader role (:mod:`.leader_role`).

Broker outages: nothing blocks on the broker and nothing raises. Fences, updates and model
versions are sent asynchronously; the transport retries them while the broker is away. A
send that fails (outcome unknown: the message may or may not be in the topic) is never
re-sent as is: the partition is re-fenced with a fresh token and re-read from the watermark
of the version that confirms the fence, so a late copy is dropped (``duplicate`` before the
fence, ``stale_generation`` after it) and nothing is applied twice or lost
(:mod:`.fencing`). Failed fences and publications are retried with exponential backoff;
starting, electing a leader and reading the model topic are retried the same way
(:mod:`.link`).

See ``docs/scaleout.md`` for the guarantees, failure modes and limits.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import deque
from typing import Any

import numpy as np

from streamkm._core.sparse import is_sparse
from streamkm.cluster import MiniBatchKernelKMeans
from streamkm.config.schema import ServiceConfig
from streamkm.exceptions import StateError
from streamkm.io import registry
from streamkm.io.batcher import Batch
from streamkm.io.checkpoint import Checkpoint
from streamkm.io.sinks import AssignmentNovelty
from streamkm.logs import log_event
from streamkm.runtime.learner import CheckpointContent, Learned, LearnerHost
from streamkm.scaleout.backoff import Backoff
from streamkm.scaleout.fencing import PartitionFences, PreparedUpdate
from streamkm.scaleout.leader import ModelVersion
from streamkm.scaleout.leader_role import LeaderRole
from streamkm.scaleout.link import BrokerLink
from streamkm.scaleout.metrics import ScaleoutMetrics
from streamkm.scaleout.transport import ScaleoutTransport
from streamkm.sketch import SketchedKernelKMeans


__all__ = ["ScaleoutWorker"]

_log = logging.getLogger("streamkm.scaleout")

#: After this long without the acknowledgements of a batch's outputs, wait for them.
_DELIVERY_WAIT_S = 1.0


class ScaleoutWorker:
    """The :class:`~streamkm.runtime.learner.Learner` of a scale-out member.

    Parameters
    ----------
    config : ServiceConfig
        With ``scaleout.enabled``.
    transport : ScaleoutTransport, optional
        The broker clients; by default the one registered for ``source.kind``.
    """

    #: A worker checkpoints once it reached the broker and processed something.
    checkpoints_at_start = False
    #: Stepped on the runtime's thread: ``tick`` adopts new global versions of the model.
    overlaps_ingest = False

    def __init__(self, config: ServiceConfig, transport: ScaleoutTransport | None = None
                 ) -> None:
        self.config = config
        sc = config.scaleout
        self.member = sc.member_id or f"{socket.gethostname()}-{os.getpid()}"
        self.transport = transport
        self._rng = np.random.default_rng(uuid.uuid4().int & (2**63 - 1))
        # the global model as adopted from the model topic
        self.model: MiniBatchKernelKMeans | SketchedKernelKMeans | None = None
        self.model_version = -1
        self._latest_version_data: tuple[int, bytes] | None = None
        self._adopted_version: ModelVersion | None = None
        self._sketch_epoch: int | None = None
        self.last_sent_version = -1
        self._unassigned: deque[Batch] = deque()
        # (sinks' delivery mark, since, model version, updates) of the batches whose
        # outputs are not delivered yet, oldest first
        self._unsent: deque[tuple[dict[str, Any], float, int, list[PreparedUpdate]]] = deque()
        self._prepared: tuple[int, list[PreparedUpdate]] = (-1, [])  # the batch in process
        self.leader: LeaderRole | None = None
        backoff_s, max_backoff_s = registry.scaleout_retry_backoff(config)
        self.fences = PartitionFences(self.member, Backoff(backoff_s, max_backoff_s))
        self._leader_backoff = Backoff(backoff_s, max_backoff_s)
        # (election changes, time) of a step-down for being cut off or fenced
        self._barred: tuple[int, float] | None = None
        self._publish_backoff = Backoff(backoff_s, max_backoff_s)
        self._delivery_backoff = Backoff(backoff_s, max_backoff_s)
        self._previous: dict[str, Any] | None = None
        self.stats: dict[str, float] = dict.fromkeys(
            ("leader_apply_seconds", "leader_updates", "leader_rows", "leader_publish_seconds",
             "versions_published", "worker_assign_seconds", "worker_records",
             "worker_encode_seconds"), 0.0)
        # set by attach(): the runtime, its scale-out metrics and the broker clients
        self.runtime: LearnerHost
        self.metrics: ScaleoutMetrics
        self.link: BrokerLink

    # ------------------------------------------------------------------ lifecycle

    def attach(self, runtime: LearnerHost) -> None:
        self.runtime = runtime
        self.metrics = ScaleoutMetrics(runtime.metrics.registry, self.member)
        gauge = registry.scaleout_connection_gauge(self.config.source.kind, runtime.metrics)
        self.link = BrokerLink(self.config.scaleout, gauge, self.fences.backoff)

    def open(self, checkpoint: Checkpoint | None) -> None:
        if self.transport is None:
            factory = registry.scaleout_transport_factory(self.config.source.kind)
            self.transport = factory(self.config, self.runtime.metrics)
        if checkpoint is not None:
            self._previous = checkpoint.meta.get("scaleout")

    def connect(self) -> bool:
        """Reach the broker (retried; False if a stop came first) and adopt the newest
        model version."""
        assert self.transport is not None
        if not self.link.connect(self.transport, self._on_version, self.runtime.wait_stop):
            return False
        self._adopt_latest()
        log_event(_log, "info", "scaleout_started", member=self.member,
                  model_version=self.model_version, previous_state=self._previous)
        return True

    def finish(self) -> bool:
        """Flush the updates and, if leading, apply what is left and publish a last version.
        While the broker is away the flushes give up after their timeouts (logged, False);
        what was not delivered is re-read by the partitions' next owners."""
        if self.link.updates is None:
            return False
        try:
            self._send_delivered(wait=True)
            self.link.updates.flush(timeout_s=30)
            if self.leader is not None:
                self.leader.round(drain=True)
                self.leader.publish_final()
        except (OSError, StateError) as exc:
            log_event(_log, "warning", "scaleout_close_incomplete",
                      error=f"{type(exc).__name__}: {exc}")
            return False
        return True

    def release(self) -> None:
        if self.leader is not None:
            self.leader.close()
        self.link.close()
        log_event(_log, "info", "scaleout_stats", member=self.member,
                  **{k: round(v, 6) for k, v in self.stats.items()})

    # ------------------------------------------------------------------ housekeeping

    def tick(self) -> None:
        election = self.link.election
        elected = election is not None and election.is_leader
        leader = self.leader
        if leader is not None:
            reason = self._reason_to_step_down(elected, leader)
            if reason is not None:
                leader.step_down(reason)
                self.leader = None
                if reason != "not_elected" and election is not None:
                    self._barred = (election.changes, time.monotonic())
        elif elected and self._may_lead() and self._leader_backoff.ready():
            self._try_become_leader()
        if self.leader is not None:
            self.leader.round()
        if self.link.model_reader is not None:
            self.link.model_reader.poll(0.0)
        self._adopt_latest()
        self._handle_send_results()
        self._send_delivered()
        if self.fences.to_fence:
            self._send_fences()

    def _broker_down(self) -> None:
        self.link.set_connected(False)

    def _handle_send_results(self) -> None:
        """Re-fence the partitions whose fence or update send failed (see
        :meth:`PartitionFences.outcomes`)."""
        refence, failed = self.fences.outcomes()
        if failed:
            self._broker_down()
        if refence:
            for key in refence:
                self._drop_partition(key)
            self.fences.to_fence.extend(refence)
            self._rebuild_parts()

    # ------------------------------------------------------------------ leader role

    def _may_lead(self) -> bool:
        """False while the broker is unreachable, and after a step-down for being cut off or
        fenced until the leader group moved the role (a member that was evicted still
        believes it holds the partition until it talks to the group again: claiming then
        would take the role back from its successor) or the broker has been reachable for a
        session timeout since (the group did not move it: this member still leads)."""
        if self.link.connected is False:
            return False
        if self._barred is None:
            return True
        changes, since = self._barred
        election = self.link.election
        session_s = self.config.source.session_timeout_ms / 1000.0
        if (election is not None and election.changes != changes) or (
                time.monotonic() - since > session_s
                and self.link.reachable_for() > session_s):
            self._barred = None
            return True
        return False

    def _reason_to_step_down(self, elected: bool, leader: LeaderRole) -> str | None:
        """Why the leader role must be given up now (None: keep it). A rebalance that leaves
        this member the leader group's partition keeps the role (no step-down, no re-read)."""
        if not elected:
            return "not_elected"
        if leader.fenced:
            return "fenced"
        cut_off_s = self.config.source.session_timeout_ms / 1000.0
        if self.link.unreachable_for() > cut_off_s:
            return "cut_off"  # the leader group has evicted this member by now
        return None

    def _try_become_leader(self) -> None:
        """Take the leader role from the newest version; on a broker error retry after a
        backoff."""
        try:
            self.link.read_model_to_end()
            self._adopt_latest()
            self.leader = LeaderRole(
                self.config, self.runtime, self.metrics, self.member, self.stats,
                self._adopted_version, self.transport, self._publish_backoff,
                self._broker_down, claims=self.link.updates)
        except (OSError, StateError) as exc:
            delay = self._leader_backoff.failed()
            self._broker_down()
            log_event(_log, "warning", "scaleout_leader_start_failed", member=self.member,
                      error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))
            return
        self._leader_backoff.succeeded()

    # ------------------------------------------------------------------ model versions

    def _on_version(self, version: int, data: bytes) -> None:
        self._latest_version_data = (version, data)

    def _adopt_latest(self) -> None:
        latest = self._latest_version_data
        if latest is None or latest[0] <= self.model_version:
            return
        self._latest_version_data = None
        version = ModelVersion.from_bytes(latest[1])
        previous = self.model_version
        self.model = version.build_model()
        self.model_version = version.version
        self._adopted_version = version
        self.metrics.model_version.set(self.model_version)
        self._announce(version, previous)
        if self.leader is None:
            self.metrics.model_versions_behind.set(0)
        self.refresh_status()
        self._confirm_fences(version)
        if self.model is not None and self._unassigned:  # held until the first version
            self._write_held()

    def _write_held(self) -> None:
        """Write the assignments of the batches held until the first model version, as one
        attempt paused and retried while the file system refuses it (nothing is read
        meanwhile). A stop during the wait gives them up (logged): their updates are sent
        already, so they are lost like those of a member killed before adopting a model
        (docs/scaleout.md)."""
        held = list(self._unassigned)
        if self.runtime.write_assignments([(b, self._assign(b.X)[0]) for b in held]):
            self._unassigned.clear()
            return
        log_event(_log, "warning", "scaleout_held_assignments_given_up", member=self.member,
                  batches=len(held), records=sum(b.n_valid for b in held),
                  model_version=self.model_version, error=self.runtime.io_health.error)

    def _announce(self, version: ModelVersion, previous: int) -> None:
        """Log the split / merge events the leader made since the version adopted before
        (written to the events sink once, by the leader) and the sketch epoch change; from
        now on every assignment of this member uses the new stable ids and sketch."""
        news = [e for e in version.cluster_events if int(e["version"]) > previous]
        if news:
            log_event(_log, "info", "scaleout_clusters_changed", member=self.member,
                      model_version=version.version, events=news,
                      cluster_ids=[int(i) for i in self._engine().cluster_ids_])
        epoch = version.sketch_epoch
        if epoch is not None and epoch != self._sketch_epoch:
            if self._sketch_epoch is not None:
                log_event(_log, "info", "scaleout_sketch_adopted", member=self.member,
                          model_version=version.version, sketch_epoch=epoch,
                          previous_epoch=self._sketch_epoch)
            self._sketch_epoch = epoch
            self.runtime.metrics.sketch_epoch.set(epoch)

    def _confirm_fences(self, version: ModelVersion) -> None:
        confirmed = self.fences.confirm(version.ledger)
        if not confirmed:
            return
        active = self.fences.active
        log_event(_log, "info", "partitions_assigned", partitions=confirmed,
                  owned=sorted(active), model_version=version.version,
                  watermarks={k: active[k] for k in confirmed})
        self._rebuild_parts()

    def refresh_status(self) -> None:
        model = self.model
        if model is None:
            self.runtime.set_model_gauges(step=0, converged=False,
                                          clusters=self.config.model.n_clusters)
        else:
            self.runtime.set_model_gauges(step=int(model.n_steps_),
                                          converged=bool(model.converged_),
                                          clusters=int(model.n_clusters_))

    # ------------------------------------------------------------------ partitions

    def on_assigned(self, part_keys: list[str]) -> None:
        self.fences.request(part_keys)

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        revoked = sorted(set(part_keys) & self.fences.known())
        for key in part_keys:
            self._drop_partition(key)
        self._rebuild_parts()
        log_event(_log, "warning" if lost else "info", "partitions_revoked",
                  partitions=revoked, lost=lost)

    def _drop_partition(self, key: str) -> None:
        self.fences.drop(key)
        self.runtime.drop_part(key)

    def _rebuild_parts(self) -> None:
        """Read every owned partition from its next offset to send."""
        assert self.transport is not None
        resume = self.transport.resume_state
        gone = self.runtime.read_parts({key: resume(key, offset)
                                        for key, offset in self.fences.active.items()})
        for key in gone:  # revoked meanwhile
            self.fences.drop(key)

    def _send_fences(self) -> None:
        """Fence every partition waiting for it (a re-assigned owned one gets a new
        generation)."""
        keys = self.fences.take_to_fence()
        for key in keys:
            if key in self.fences.active:
                self._drop_partition(key)
        assert self.link.updates is not None
        sent, error = self.fences.send(keys, self.link.updates)
        self.metrics.fences_sent.inc(sent)
        if error is not None:
            self._broker_down()
        if keys:
            self._rebuild_parts()

    # ------------------------------------------------------------------ batches

    def min_valid(self) -> int:
        return 1

    def initialising(self) -> bool:
        return False  # the group's model comes from the merge leader, not from a batch

    def accepts(self, batch: Batch) -> bool:
        return True

    def _engine(self) -> MiniBatchKernelKMeans:
        """The adopted model's engine (inside the sketch pipeline with sketching)."""
        model = self.model
        assert model is not None
        return model.model_ if isinstance(model, SketchedKernelKMeans) else model

    def _assign(self, x: Any) -> tuple[Learned, np.ndarray, np.ndarray | None]:
        """The batch's clusters, squared distances and novelty fields under the adopted
        model (stable ids, the version's sketch, its novelty buffers), the rows' cluster
        positions and, with sketching, the rows' sketch (what the updates carry)."""
        model = self.model
        assert model is not None
        features = None
        if isinstance(model, SketchedKernelKMeans):
            features = model.sketch(x)
            rows = features
        else:
            rows = x.toarray() if is_sparse(x) else x
        engine = self._engine()
        dist = engine.transform(rows)
        fields = engine.novelty_fields(dist, rows)
        labels, mind = fields["labels"], fields["sq_distances"]
        novelty = AssignmentNovelty(fields["novelty"], fields["outliers"],
                                    fields["second_cluster_ids"],
                                    np.asarray(fields["margins"], dtype=np.float64))
        return Learned(cluster_ids=engine.cluster_ids_[labels], sq_distances=mind,
                       step=self.model_version, novelty=novelty,
                       objective=float(mind.mean())), labels, features

    def learn(self, batch: Batch) -> Learned:
        """Assign the batch (or hold it until the first model version) and prepare one
        update per partition range it covers; :meth:`processed` sends them once the batch's
        outputs are delivered."""
        t0 = time.perf_counter()
        n, model = batch.n_valid, self.model
        features, epoch = None, 0
        if model is not None and n:
            learned, labels, features = self._assign(batch.X)
            engine = self._engine()
            k, cap = int(engine.n_clusters_), int(engine.tau)
            epoch = int(getattr(model, "sketch_epoch_", 0))
        else:  # raw rows, no sketch yet: the leader initialises the model (and sketch)
            learned, labels = Learned(), np.zeros(n, dtype=np.int64)
            k, cap = 1, int(self.config.model.n_clusters * (self.config.model.tau or 200))
        t1 = time.perf_counter()
        assert self.transport is not None
        row_parts = [self.transport.part_key(r.position) for r in batch.records]
        prepared = self.fences.prepare_updates(batch, row_parts, labels, learned.sq_distances,
                                               k, cap, self.model_version, self._rng,
                                               features=features, sketch_epoch=epoch)
        self._prepared = (self.model_version, prepared)
        self.stats["worker_assign_seconds"] += t1 - t0
        self.stats["worker_encode_seconds"] += time.perf_counter() - t1
        self.stats["worker_records"] += n
        if model is None and n:  # assigned as soon as the first model version arrives
            self._unassigned.append(batch)
        return learned

    def processed(self, batch: Batch) -> None:
        """The batch's outputs are written and flushed: its updates are sent once they are
        delivered (:meth:`_send_delivered`). A batch whose outputs were given up never gets
        here: its updates are dropped and the partitions' next owners re-read it."""
        version, prepared = self._prepared
        self._prepared = (version, [])
        if prepared:
            assert self.runtime.sinks is not None
            self._unsent.append((self.runtime.sinks.delivery_mark(), time.monotonic(),
                                 version, prepared))
        self._send_delivered()

    def _send_delivered(self, *, wait: bool = False) -> bool:
        """Send, in order, the updates of the batches whose outputs are delivered (a Kafka
        sink's acknowledgements), without waiting for the others: a batch's range moves
        past the watermark only once its outputs survive this process. Once the oldest has
        waited ``_DELIVERY_WAIT_S`` (a send failed or the broker is away) or with ``wait``,
        wait for the sinks (retried with backoff); if this process dies meanwhile, the
        partitions' next owners re-read those batches. Not while the broker is known to be
        away (the sinks would block until it is back). Returns whether nothing is left."""
        unsent = self._unsent
        if not unsent:
            return True
        sinks = self.runtime.sinks
        assert sinks is not None
        while unsent and sinks.delivered(unsent[0][0]):
            self._send_prepared(*unsent.popleft()[2:])
        if not unsent:
            return True
        overdue = time.monotonic() - unsent[0][1] > _DELIVERY_WAIT_S
        if not (wait or overdue and self._delivery_backoff.ready()
                and self.link.connected is True):  # else the wait blocks until it is back
            return False
        try:
            sinks.await_delivery()
        except OSError as exc:  # SinkError, StorageError
            delay = self._delivery_backoff.failed()
            log_event(_log, "warning", "scaleout_outputs_undelivered", member=self.member,
                      batches_waiting=len(unsent), error=f"{type(exc).__name__}: {exc}",
                      retry_in_s=round(delay, 3))
            return False
        self._delivery_backoff.succeeded()
        while unsent:
            self._send_prepared(*unsent.popleft()[2:])
        return True

    def _send_prepared(self, version: int, prepared: list[PreparedUpdate]) -> None:
        assert self.link.updates is not None
        sent = self.fences.send_prepared(prepared, self.link.updates)
        if sent:
            self.metrics.updates_sent.inc(sent)
            self.last_sent_version = version

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_content(self) -> CheckpointContent | None:
        """Informational: input positions and the model versions used and sent (the
        leader's watermarks are the source of truth). ``None`` until the broker was reached
        and while it is away: syncing Kafka sinks would block until it is back."""
        if self.link.connected is not True or self.transport is None:
            return None
        positions = {key: self.transport.resume_state(key, offset)
                     for key, offset in self.fences.active.items()}
        return CheckpointContent(positions=positions, extra={"scaleout": {
            "member": self.member, "model_version": self.model_version,
            "last_sent_model_version": self.last_sent_version}})

    def checkpointed(self, content: CheckpointContent) -> None:
        """Commit the adopted version's watermarks to the input group (for lag tooling)."""
        runtime = self.runtime
        if self._adopted_version is not None and runtime.dynamic is not None:
            ledger = self._adopted_version.ledger
            runtime.dynamic.commit({k: {"offset": ledger.watermark(k)}
                                    for k in self.fences.active})
