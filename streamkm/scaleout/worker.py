"""The scale-out learner: one member of a group learning one global model.

Worker: assign every record with the current global model version, send one update per
partition range to the updates topic. On every assignment of a partition the worker first
sends a fence and waits for a model version in which that fence owns the partition; it then
reads from the version's watermark. While elected it also holds the merge-leader role
(:mod:`.leader_role`).

Broker outages: nothing blocks on the broker and nothing raises. Fences, updates and model
versions are sent asynchronously; the transport retries them while the broker is away. A
send that fails (outcome unknown: the message may or may not be in the topic) is never
re-sent as is: the partition is re-fenced with a fresh token and re-read from the watermark
of the version that confirms the fence, so a late copy is dropped (``duplicate`` before the
fence, ``stale_generation`` after it) and nothing is applied twice or lost. Failed fences and
publications are retried with exponential backoff; starting, electing a leader and reading
the model topic are retried the same way. State ``streamkm_kafka_broker_connected
{client="scaleout"}``, log events ``kafka_broker_unavailable`` / ``kafka_broker_connected``.

See ``docs/scaleout.md`` for the guarantees, failure modes and limits.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkm import registry
from streamkm.cluster import MiniBatchKernelKMeans
from streamkm.exceptions import ParameterError, StateError
from streamkm.logs import log_event
from streamkm.runtime.learner import CheckpointContent, Learned
from streamkm.scaleout.backoff import Backoff
from streamkm.scaleout.compress import subsample_per_cluster
from streamkm.scaleout.leader import ModelVersion
from streamkm.scaleout.leader_role import LeaderRole
from streamkm.scaleout.messages import Fence, ModelUpdate, encode_message
from streamkm.scaleout.metrics import ScaleoutMetrics
from streamkm.scaleout.transport import LeaderElection, ModelReader, ScaleoutTransport, UpdatesSender
from streamkm.service.batcher import Batch
from streamkm.service.checkpoint import Checkpoint
from streamkm.service.config import ServiceConfig

if TYPE_CHECKING:
    from streamkm.runtime.shell import Runtime

__all__ = ["ScaleoutWorker", "BROKER_CLIENT"]

_log = logging.getLogger("streamkm.scaleout")
#: ``client`` label of ``streamkm_kafka_broker_connected`` for the scale-out clients.
BROKER_CLIENT = "scaleout"


class ScaleoutWorker:
    """The :class:`~streamkm.runtime.learner.Learner` of a scale-out member.

    Parameters
    ----------
    config : ServiceConfig
        With ``scaleout.enabled``.
    transport : ScaleoutTransport, optional
        The broker clients; by default the one registered for ``source.kind``.
    """

    def __init__(self, config: ServiceConfig, transport: ScaleoutTransport | None = None
                 ) -> None:
        self.config = config
        sc = config.scaleout
        self.member = sc.member_id or f"{socket.gethostname()}-{os.getpid()}"
        self.transport = transport
        self._rng = np.random.default_rng(uuid.uuid4().int & (2**63 - 1))
        # the global model as adopted from the model topic
        self.model: MiniBatchKernelKMeans | None = None
        self.model_version = -1
        self._latest_version_data: tuple[int, bytes] | None = None
        self._adopted_version: ModelVersion | None = None
        self.last_sent_version = -1
        # partitions: next offset to send, fence tokens (confirmed, pending), to fence
        self._active: dict[str, int] = {}
        self._tokens: dict[str, str] = {}
        self._pending: dict[str, str] = {}
        self._to_fence: list[str] = []
        # outcomes of asynchronous sends, appended by the transport's IO thread:
        # (kind, partition, token, offset or exception)
        self._send_results: deque[tuple[str, str, str, Any]] = deque()
        self._unassigned: deque[Batch] = deque()
        self.leader: LeaderRole | None = None
        backoff_s = max(float(config.kafka.reconnect_backoff_ms), 100.0) / 1000.0
        max_backoff_s = max(float(config.kafka.reconnect_backoff_max_ms) / 1000.0, backoff_s)
        self._fence_backoff = Backoff(backoff_s, max_backoff_s)
        self._leader_backoff = Backoff(backoff_s, max_backoff_s)
        self._publish_backoff = Backoff(backoff_s, max_backoff_s)
        self._broker_connected: bool | None = None
        self._broker_lock = threading.Lock()
        self._prober: threading.Thread | None = None
        self._updates: UpdatesSender | None = None
        self._model_reader: ModelReader | None = None
        self._election: LeaderElection | None = None
        self._previous: dict[str, Any] | None = None
        self.stats: dict[str, float] = {"leader_apply_seconds": 0.0, "leader_updates": 0,
                                        "leader_rows": 0, "leader_publish_seconds": 0.0,
                                        "versions_published": 0, "worker_assign_seconds": 0.0,
                                        "worker_records": 0, "worker_encode_seconds": 0.0}
        self._runtime: Runtime | None = None
        self.metrics: ScaleoutMetrics | None = None

    @property
    def runtime(self) -> Runtime:
        assert self._runtime is not None, "ScaleoutWorker.attach was not called"
        return self._runtime

    # ------------------------------------------------------------------ lifecycle

    def attach(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self.metrics = ScaleoutMetrics(runtime.metrics.registry, self.member)
        runtime.metrics.kafka.broker_connected.labels(client=BROKER_CLIENT).set(0)

    def open(self, checkpoint: Checkpoint | None) -> None:
        if self.transport is None:
            factory = registry.scaleout_transport_factory(self.config.source.kind)
            self.transport = factory(self.config, self.runtime.metrics)
        if checkpoint is not None:
            self._previous = checkpoint.meta.get("scaleout")

    def connect(self) -> bool:
        """Create the topics, the updates sender and the model reader, read the model topic
        to its end (retried with backoff until done, False if a stop came first); then join
        the leader election."""
        transport, runtime, sc = self.transport, self.runtime, self.config.scaleout
        assert transport is not None
        backoff = Backoff(self._fence_backoff.initial_s, self._fence_backoff.max_s)
        topics_ready = not sc.create_topics
        while not runtime.stop_requested:
            try:
                if not topics_ready:
                    transport.ensure_topics()
                    topics_ready = True
                if self._updates is None:
                    self._updates = transport.updates_sender()
                if self._model_reader is None:
                    self._model_reader = transport.model_reader(self._on_version)
                self._model_reader.read_to_end(timeout_s=sc.fence_timeout_ms / 1000.0)
            except (OSError, StateError) as exc:  # TransportError, or not read to the end
                delay = backoff.failed()
                log_event(_log, "warning", "kafka_connect_failed", client=BROKER_CLIENT,
                          error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3),
                          attempts=backoff.failures)
                self.set_broker_connected(False)
                runtime.wait_stop(delay)
                continue
            self.set_broker_connected(True)
            self._adopt_latest()
            self._election = transport.leader_election()
            self._prober = threading.Thread(target=self._probe_loop,
                                            name="streamkm-broker-probe", daemon=True)
            self._prober.start()
            log_event(_log, "info", "scaleout_started", member=self.member,
                      model_version=self.model_version, previous_state=self._previous)
            return True
        return False

    def finish(self) -> bool:
        """Flush the updates and, if leading, apply what is left and publish a last version.
        While the broker is away the flushes give up after their timeouts (logged, False);
        what was not delivered is re-read by the partitions' next owners."""
        if self._updates is None:
            return False
        try:
            self._updates.flush(timeout_s=30)
            if self.leader is not None:
                self.leader.round(drain=True)
                self.leader.publish_final()
        except (OSError, StateError) as exc:
            log_event(_log, "warning", "scaleout_close_incomplete",
                      error=f"{type(exc).__name__}: {exc}")
            return False
        return True

    def release(self) -> None:
        if self._prober is not None:
            self._prober.join(timeout=5)
        if self.leader is not None:
            self.leader.close()
        for closing in (self._election, self._model_reader, self._updates):
            if closing is not None:
                closing.close()
        log_event(_log, "info", "scaleout_stats", member=self.member,
                  **{k: round(v, 6) for k, v in self.stats.items()})

    # ------------------------------------------------------------------ housekeeping

    def tick(self) -> None:
        election = self._election
        if election is not None and election.is_leader and self.leader is None:
            if self._leader_backoff.ready():
                self._try_become_leader()
        elif election is not None and not election.is_leader and self.leader is not None:
            self._step_down()
        if self.leader is not None:
            self.leader.round()
        if self._model_reader is not None:
            self._model_reader.poll(0.0)
        self._adopt_latest()
        self._handle_send_results()
        if self._to_fence:
            self._send_fences()

    def set_broker_connected(self, connected: bool) -> None:
        """Record the scale-out clients' connection state; log and export transitions."""
        with self._broker_lock:
            if connected == self._broker_connected:
                return
            previous, self._broker_connected = self._broker_connected, connected
            if connected:
                log_event(_log, "info", "kafka_broker_connected", client=BROKER_CLIENT)
            elif previous is not None:
                log_event(_log, "warning", "kafka_broker_unavailable", client=BROKER_CLIENT)
            self.runtime.metrics.kafka.broker_connected.labels(client=BROKER_CLIENT).set(
                1 if connected else 0)

    def _probe_loop(self, every_s: float = 1.0) -> None:
        """Connected = the updates sender and the model reader both hold a broker
        connection. Probed every second on its own thread, so the state stays current while
        the loop waits on a sink flush."""
        assert self._updates is not None and self._model_reader is not None
        while not self.runtime.wait_stop(every_s):
            try:
                self.set_broker_connected(self._updates.connected()
                                          and self._model_reader.connected())
            except Exception as exc:  # noqa: BLE001 - a probe must never end the process
                log_event(_log, "warning", "scaleout_probe_failed", error=repr(exc))

    def _handle_send_results(self) -> None:
        """Act on the outcomes of asynchronous fence and update sends.

        A failed send's outcome is unknown (the broker may have written it before the
        connection broke), so it is never re-sent as is: the partition is re-fenced with a
        fresh token. A late copy is then either before the fence (applied once, or dropped
        as ``duplicate``) or after it (``stale_generation``), and the new generation reads
        from the watermark of the version confirming the fence."""
        refence: set[str] = set()
        while self._send_results:
            kind, key, token, detail = self._send_results.popleft()
            if kind == "fence_sent":
                self._fence_backoff.succeeded()
                log_event(_log, "info", "scaleout_fence_sent", partition=key, offset=detail)
            elif kind == "fence_failed":
                if self._pending.get(key) != token:
                    continue  # superseded, revoked or confirmed meanwhile
                self._pending.pop(key)
                refence.add(key)
                delay = self._fence_backoff.failed()
                self.set_broker_connected(False)
                log_event(_log, "warning", "scaleout_fence_send_failed", partition=key,
                          error=f"{type(detail).__name__}: {detail}",
                          retry_in_s=round(delay, 3))
            elif kind == "update_failed":
                if self._tokens.get(key) != token:
                    continue  # this generation is already over
                refence.add(key)
                self.set_broker_connected(False)
                log_event(_log, "warning", "scaleout_update_send_failed_refencing",
                          partition=key, error=f"{type(detail).__name__}: {detail}")
        if refence:
            for key in sorted(refence):
                self._drop_partition(key)
                self._to_fence.append(key)
            self._rebuild_parts()

    # ------------------------------------------------------------------ leader role

    def _try_become_leader(self) -> None:
        """Take the leader role; on a broker error undo it and retry after a backoff."""
        assert self._model_reader is not None and self.metrics is not None
        try:
            self._model_reader.read_to_end(
                timeout_s=self.config.scaleout.fence_timeout_ms / 1000.0)
            self._adopt_latest()
            self.leader = LeaderRole(
                self.config, self.runtime, self.metrics, self.member, self.stats,
                self._adopted_version, self.transport, self._publish_backoff,
                lambda: self.set_broker_connected(False))
        except (OSError, StateError) as exc:
            self.leader = None
            delay = self._leader_backoff.failed()
            self.set_broker_connected(False)
            log_event(_log, "warning", "scaleout_leader_start_failed", member=self.member,
                      error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))
            return
        self._leader_backoff.succeeded()
        self.metrics.leader.set(1)
        self.metrics.leader_changes.inc()
        log_event(_log, "info", "scaleout_leader_elected", member=self.member,
                  version=self.leader.version,
                  applied_offset=self.leader.leader.applied_offset)

    def _step_down(self) -> None:
        assert self.metrics is not None
        log_event(_log, "warning", "scaleout_leader_stepped_down", member=self.member,
                  version=None if self.leader is None else self.leader.version)
        if self.leader is not None:
            self.leader.close()
        self.leader = None
        sm = self.metrics
        sm.leader.set(0)
        sm.leader_changes.inc()
        sm.updates_lag.set(0)  # leader-only gauges: no stale leader values on a worker
        sm.model_versions_behind.set(0)

    # ------------------------------------------------------------------ model versions

    def _on_version(self, version: int, data: bytes) -> None:
        self._latest_version_data = (version, data)

    def _adopt_latest(self) -> None:
        latest = self._latest_version_data
        if latest is None or latest[0] <= self.model_version:
            return
        assert self.metrics is not None
        self._latest_version_data = None
        version = ModelVersion.from_bytes(latest[1])
        self.model = version.build_model()
        self.model_version = version.version
        self._adopted_version = version
        self.metrics.model_version.set(self.model_version)
        if self.leader is None:
            self.metrics.model_versions_behind.set(0)
        self.refresh_status()
        self._confirm_fences(version)
        runtime = self.runtime
        if self.model is not None and self._unassigned:
            while self._unassigned:
                batch = self._unassigned.popleft()
                runtime.write_assignments(batch, self._assign(batch.X)[0])
            assert runtime.sinks is not None
            runtime.sinks.flush()

    def _confirm_fences(self, version: ModelVersion) -> None:
        confirmed = [k for k, token in self._pending.items()
                     if version.ledger.owners.get(k) == token]
        if not confirmed:
            return
        for key in confirmed:
            self._tokens[key] = self._pending.pop(key)
            self._active[key] = version.ledger.watermark(key)
        log_event(_log, "info", "partitions_assigned", partitions=sorted(confirmed),
                  owned=sorted(self._active), model_version=version.version,
                  watermarks={k: self._active[k] for k in confirmed})
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
        self._to_fence.extend(k for k in part_keys if k not in self._to_fence)

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        revoked = sorted(set(part_keys) & (set(self._active) | set(self._pending)
                                           | set(self._to_fence)))
        for key in part_keys:
            self._drop_partition(key)
        self._rebuild_parts()
        log_event(_log, "warning" if lost else "info", "partitions_revoked",
                  partitions=revoked, lost=lost)

    def _drop_partition(self, key: str) -> None:
        self._active.pop(key, None)
        self._tokens.pop(key, None)
        self._pending.pop(key, None)
        if key in self._to_fence:
            self._to_fence.remove(key)
        part = self.runtime.parts.pop(key, None)
        if part is not None:
            part.close()
        self.runtime.forget_partition(key)

    def _rebuild_parts(self) -> None:
        """Rebuild every active partition at its next offset to send; the batch being
        collected is dropped."""
        runtime, transport = self.runtime, self.transport
        assert runtime.source is not None and transport is not None
        runtime.close_parts()
        parts = {}
        for key, offset in list(self._active.items()):
            try:
                parts[key] = runtime.source.build_part(key, transport.resume_state(key, offset))
            except ParameterError:  # revoked meanwhile
                self._active.pop(key, None)
                self._tokens.pop(key, None)
        runtime.use_parts(parts)

    def _send_fences(self) -> None:
        """Send a fence with a fresh token for every partition waiting for one (without
        waiting for the acknowledgements; see :meth:`_handle_send_results`)."""
        if not self._fence_backoff.ready():
            return
        assert self._updates is not None and self.metrics is not None
        keys, self._to_fence = sorted(set(self._to_fence)), []
        for i, key in enumerate(keys):
            if key in self._active:  # re-assigned without a revocation: new generation
                self._drop_partition(key)
            token = uuid.uuid4().hex
            try:
                future = self._updates.send(encode_message(Fence(key, token, self.member)))
            except OSError as exc:  # TransportError: not queued (metadata, buffer)
                self._to_fence.extend(keys[i:])
                delay = self._fence_backoff.failed()
                self.set_broker_connected(False)
                log_event(_log, "warning", "scaleout_fence_send_failed", partitions=keys[i:],
                          error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))
                break
            self._pending[key] = token
            results = self._send_results
            future.add_callback(lambda md, key=key, token=token: results.append(
                ("fence_sent", key, token, int(md.offset))))
            future.add_errback(lambda exc, key=key, token=token: results.append(
                ("fence_failed", key, token, exc)))
            self.metrics.fences_sent.inc()
        if keys:
            self._rebuild_parts()

    # ------------------------------------------------------------------ batches

    def min_valid(self) -> int:
        return 1

    def accepts(self, batch: Batch) -> bool:
        return True

    def _assign(self, x: np.ndarray) -> tuple[Learned, np.ndarray]:
        """The batch's clusters and squared distances under the adopted model, and the
        rows' cluster positions."""
        assert self.model is not None
        dist = self.model.transform(x)
        labels = np.argmin(dist, axis=1).astype(np.int64)
        mind = dist[np.arange(x.shape[0]), labels]
        return Learned(cluster_ids=self.model.cluster_ids_[labels], sq_distances=mind,
                       step=self.model_version, objective=float(mind.mean())), labels

    def learn(self, batch: Batch) -> Learned:
        """Assign the batch (or hold it until the first model version) and send one update
        per partition range it covers."""
        t0 = time.perf_counter()
        n, model = batch.n_valid, self.model
        if model is not None and n:
            learned, labels = self._assign(batch.X)
            k, cap = int(model.n_clusters_), int(model.tau)
        else:
            learned, labels = Learned(), np.zeros(n, dtype=np.int64)
            k, cap = 1, int(self.config.model.n_clusters * (self.config.model.tau or 200))
        t1 = time.perf_counter()
        self._send_updates(batch, labels, k, cap, learned.sq_distances)
        self.stats["worker_assign_seconds"] += t1 - t0
        self.stats["worker_encode_seconds"] += time.perf_counter() - t1
        self.stats["worker_records"] += n
        if model is None and n:  # assigned as soon as the first model version arrives
            self._unassigned.append(batch)
        return learned

    def _send_updates(self, batch: Batch, labels: np.ndarray, k: int, cap: int,
                      sq_distances: np.ndarray | None) -> None:
        """One update per partition whose range the batch advanced (rows subsampled per
        cluster); a send that is not queued re-fences the partition."""
        assert self._updates is not None and self.transport is not None
        assert self.metrics is not None
        n, x = batch.n_valid, batch.X
        row_parts = np.array([self.transport.part_key(r.position) for r in batch.records],
                             dtype=object)
        for key, snapshot in sorted(batch.positions.items()):
            start = self._active.get(key)
            end = snapshot.get("offset")
            if start is None or end is None or end <= start:
                continue
            idx = np.flatnonzero(row_parts == key) if n else np.empty(0, dtype=np.int64)
            rows, mult = subsample_per_cluster(labels[idx], k, cap, self._rng)
            chosen = idx[rows]
            token = self._tokens[key]
            update = ModelUpdate(
                partition=key, start=start, end=int(end), token=token, worker=self.member,
                model_version=self.model_version, rows=np.ascontiguousarray(x[chosen]),
                multiplicities=mult,
                objective_sum=float(sq_distances[idx].sum()) if sq_distances is not None
                else 0.0)
            try:
                future = self._updates.send(encode_message(update))
            except OSError as exc:  # TransportError: not queued, re-fence
                self._send_results.append(("update_failed", key, token, exc))
                continue
            future.add_errback(lambda exc, key=key, token=token: self._send_results.append(
                ("update_failed", key, token, exc)))
            self._active[key] = int(end)
            self.metrics.updates_sent.inc()
            self.last_sent_version = self.model_version

    def processed(self, batch: Batch) -> None:
        """Nothing to do: the updates carry the positions."""

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_content(self) -> CheckpointContent | None:
        """Informational: input positions and the model versions used and sent (the
        leader's watermarks are the source of truth). ``None`` until the broker was reached
        and while it is away: syncing Kafka sinks would block until it is back."""
        if self._broker_connected is not True or self.transport is None:
            return None
        positions = {key: self.transport.resume_state(key, offset)
                     for key, offset in self._active.items()}
        return CheckpointContent(positions=positions, extra={"scaleout": {
            "member": self.member, "model_version": self.model_version,
            "last_sent_model_version": self.last_sent_version}})

    def checkpointed(self, content: CheckpointContent) -> None:
        """Commit the adopted version's watermarks to the input group (for lag tooling)."""
        runtime = self.runtime
        if self._adopted_version is not None and runtime.dynamic is not None:
            ledger = self._adopted_version.ledger
            runtime.dynamic.commit({k: {"offset": ledger.watermark(k)} for k in self._active})
