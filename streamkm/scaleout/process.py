"""One process of a scale-out group: a worker, and the merge leader while elected.

Worker loop: read its partitions (the input consumer group), batch and decode, assign every
record with the current global model version, write assignments and dead letters, and send
one update per partition range to the updates topic. On every assignment of a partition the
worker first sends a fence and waits for a model version in which that fence owns the
partition; it then reads from the version's watermark. Leader (while holding partition 0 of
the coordination group): apply the updates topic in order, publish versions.

Broker outages: nothing blocks on the broker and nothing raises. Fences, updates and model
versions are sent asynchronously; the producer retries them while the broker is away. A
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

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from streamkm.decoding import RejectReason
from streamkm.exceptions import ConfigError, ParameterError, StateError
from streamkm.scaleout.backoff import Backoff
from streamkm.scaleout.compress import subsample_per_cluster
from streamkm.scaleout.leader import MergeLeader, ModelVersion
from streamkm.scaleout.messages import Fence, ModelUpdate, decode_message, encode_message
from streamkm.scaleout.metrics import ScaleoutMetrics
from streamkm.service.batcher import Batch, Batcher
from streamkm.service.config import ServiceConfig
from streamkm.service.logs import log_event
from streamkm.service.metrics import MetricsServer, ServiceMetrics, start_metrics_server
from streamkm.service.preflight import metrics_bind_error
from streamkm.service.runtime import ServiceStatus
from streamkm.service.wiring import build_decoder, build_model, build_sinks, build_source
from streamkm.state_io import fsync_dir

__all__ = ["ScaleoutService"]

_log = logging.getLogger("streamkm.scaleout")
WORKER_STATE_FILE = "scaleout-worker.json"
#: ``client`` label of ``streamkm_kafka_broker_connected`` for the scale-out clients.
BROKER_CLIENT = "scaleout"


def _transport_errors() -> tuple[type[BaseException], ...]:
    from kafka.errors import KafkaError

    return (KafkaError, OSError)


def _config_error(exc: BaseException) -> None:
    """Raise a :class:`ConfigError` for invalid client settings (never retried)."""
    from kafka.errors import KafkaConfigurationError

    if isinstance(exc, KafkaConfigurationError):
        raise ConfigError(f"invalid Kafka client settings for scale-out mode: {exc}") from exc


class _Publication:
    """A model version handed to the publisher, not acknowledged yet."""

    def __init__(self, version: int, futures: list[Any], started: float, size: int) -> None:
        self.version = version
        self.futures = futures
        self.started = started
        self.size = size

    @property
    def done(self) -> bool:
        return all(f.is_done for f in self.futures)

    def error(self) -> BaseException | None:
        return next((f.exception for f in self.futures if f.failed()), None)


class ScaleoutService:
    """A scale-out process (same lifecycle as :class:`streamkm.service.runtime.Service`).

    Parameters
    ----------
    config : ServiceConfig
        With ``scaleout.enabled`` and a Kafka source.
    registry : CollectorRegistry, optional
        Where metrics go.
    serve_metrics : bool, optional
        Start the HTTP endpoint; defaults to ``config.metrics.enabled``.
    """

    def __init__(self, config: ServiceConfig, *, registry: CollectorRegistry | None = None,
                 serve_metrics: bool | None = None) -> None:
        if not config.scaleout.enabled or config.source.kind != "kafka":
            raise ParameterError("ScaleoutService needs scaleout.enabled = true and a Kafka "
                                 f"source, got enabled={config.scaleout.enabled!r} "
                                 f"source.kind={config.source.kind!r}")
        self.config = config
        self.metrics = ServiceMetrics(registry)
        self.metrics.init_reasons([r.value for r in RejectReason])
        sc = config.scaleout
        self.member = sc.member_id or f"{socket.gethostname()}-{os.getpid()}"
        self.scaleout_metrics = ScaleoutMetrics(self.metrics.registry, self.member)
        self._serve_metrics = config.metrics.enabled if serve_metrics is None else serve_metrics
        self._stop = threading.Event()
        self.status = ServiceStatus(clusters=config.model.n_clusters)
        self.metrics_server: MetricsServer | None = None
        self._rng = np.random.default_rng(uuid.uuid4().int & (2**63 - 1))
        # global model as adopted from the model topic
        self.model: Any = None
        self.model_version = -1
        self._latest_version_data: tuple[int, bytes] | None = None
        self._adopted_ledger: Any = None
        # worker partition state
        self._parts: dict[str, Any] = {}
        self._active: dict[str, int] = {}  # partition -> next offset to send (sent_upto)
        self._tokens: dict[str, str] = {}
        self._pending: dict[str, str] = {}  # partition -> fence token awaiting confirmation
        self._to_fence: list[str] = []
        # outcomes of asynchronous sends, appended by the producer's IO thread:
        # (kind, partition, token, offset or exception)
        self._send_results: deque[tuple[str, str, str, Any]] = deque()
        self._unassigned: deque[Batch] = deque()
        self._adopted_version: ModelVersion | None = None
        self.last_sent_version = -1
        # leader state
        self.leader: MergeLeader | None = None
        self._updates_reader: Any = None
        self._publisher: Any = None
        self._since_publish = 0
        self._publish_due = False
        self._last_publish = time.monotonic()
        self._published: deque[int] = deque(maxlen=4096)
        self._publishing: _Publication | None = None
        # broker outages: retry delays and the connection state
        backoff_s = max(float(config.kafka.reconnect_backoff_ms), 100.0) / 1000.0
        max_backoff_s = max(float(config.kafka.reconnect_backoff_max_ms) / 1000.0, backoff_s)
        self._fence_backoff = Backoff(backoff_s, max_backoff_s)
        self._leader_backoff = Backoff(backoff_s, max_backoff_s)
        self._publish_backoff = Backoff(backoff_s, max_backoff_s)
        self._broker_connected: bool | None = None
        self._broker_lock = threading.Lock()
        self._prober: threading.Thread | None = None
        self._updates: Any = None
        self._model_reader: Any = None
        self._election: Any = None
        self._source: Any = None
        self._sinks: Any = None
        self.stats: dict[str, float] = {"leader_apply_seconds": 0.0, "leader_updates": 0,
                                        "leader_rows": 0, "leader_publish_seconds": 0.0,
                                        "versions_published": 0, "worker_assign_seconds": 0.0,
                                        "worker_records": 0, "worker_encode_seconds": 0.0}
        self._last_checkpoint = time.monotonic()
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self) -> None:
        """Ask :meth:`run` to finish the current batch and return."""
        self._stop.set()

    def _settings(self) -> dict[str, Any]:
        cfg = self.config
        return {**cfg.kafka.client_settings(), **cfg.kafka.consumer}

    def start(self) -> None:
        """Create the sinks, source and metrics; then (retrying with backoff while the broker
        is away) the topics and clients, and adopt the latest model version."""
        from streamkm_connectors.scaleout_kafka import LeaderElection

        cfg, sc = self.config, self.config.scaleout
        self._decoder = build_decoder(cfg.decoding)
        self._sinks = build_sinks(cfg.sinks, kafka=cfg.kafka, metrics=self.metrics)
        src = cfg.source
        self._source = build_source(src, kafka=cfg.kafka, metrics=self.metrics)
        self._batcher = Batcher(
            {}, self._decoder, dim=cfg.decoding.dim, batch_size=cfg.batching.batch_size,
            max_wait_s=cfg.batching.max_wait_ms / 1000.0,
            poll_interval_s=src.poll_interval_ms / 1000.0, dtype=np.dtype(cfg.decoding.dtype))
        previous = self._read_worker_state()
        self.metrics.kafka.broker_connected.labels(client=BROKER_CLIENT).set(0)
        if self._serve_metrics:
            try:
                self.metrics_server = start_metrics_server(
                    self.metrics.registry, cfg.metrics.address, cfg.metrics.port)
            except OSError as exc:  # one line naming the key and the fix (preflight.py)
                raise metrics_bind_error(cfg.metrics.address, cfg.metrics.port, exc) from None
            log_event(_log, "info", "metrics_listening", url=self.metrics_server.url,
                      address=cfg.metrics.address, port=self.metrics_server.port)
        self._started = True
        if not self._connect():
            return  # stop requested before the broker answered
        self._election = LeaderElection(
            {**self._settings(), "session_timeout_ms": src.session_timeout_ms,
             "heartbeat_interval_ms": src.heartbeat_interval_ms,
             "max_poll_interval_ms": src.max_poll_interval_ms},
            sc.coordination_topic, f"{src.group_id}-leader")
        self._source.start(_WorkerHooks(self))
        self._prober = threading.Thread(target=self._probe_loop, name="streamkm-broker-probe",
                                        daemon=True)
        self._prober.start()
        log_event(_log, "info", "scaleout_started", member=self.member,
                  model_version=self.model_version, previous_state=previous)

    def _connect(self) -> bool:
        """Create the topics, the updates producer and the model reader, and read the model
        topic to its end; retried with backoff until done (True) or a stop is requested
        (False)."""
        from streamkm_connectors.scaleout_kafka import ModelReader, UpdatesProducer, ensure_topics

        cfg, sc = self.config, self.config.scaleout
        client = cfg.kafka.client_settings()
        backoff = Backoff(self._fence_backoff.initial_s, self._fence_backoff.max_s)
        topics_ready = not sc.create_topics
        while not self._stop.is_set():
            try:
                if not topics_ready:
                    ensure_topics(client, {sc.updates_topic: {}, sc.coordination_topic: {},
                                           sc.model_topic: {"cleanup.policy": "compact"}})
                    topics_ready = True
                if self._updates is None:
                    self._updates = UpdatesProducer({**client, **cfg.kafka.producer},
                                                    sc.updates_topic,
                                                    max_request_bytes=sc.max_update_bytes)
                if self._model_reader is None:
                    fetch = max(sc.model_chunk_bytes, sc.max_update_bytes) + (64 << 10)
                    self._model_reader = ModelReader(self._settings(), sc.model_topic,
                                                     max_fetch_bytes=fetch,
                                                     on_version=self._on_version)
                self._model_reader.read_to_end(timeout_s=sc.fence_timeout_ms / 1000.0)
            except (*_transport_errors(), StateError) as exc:
                _config_error(exc)
                delay = backoff.failed()
                log_event(_log, "warning", "kafka_connect_failed", client=BROKER_CLIENT,
                          error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3),
                          attempts=backoff.failures)
                self._set_broker_connected(False)
                self._stop.wait(delay)
                continue
            self._set_broker_connected(True)
            self._adopt_latest()
            return True
        return False

    def run(self) -> ServiceStatus:
        """Work (and lead while elected) until a stop is requested; then close."""
        if not self._started:
            self.start()
        try:
            while not self._stop.is_set():
                self._tick()
                batch = self._batcher.collect(min_valid=1, wait=self._wait)
                self._update_lag()
                if batch is not None and batch.n_read:
                    self._process(batch)
                self._maybe_checkpoint()
        except BaseException:
            self.close(graceful=False)
            raise
        self.close()
        return self.status

    def close(self, *, graceful: bool = True) -> None:
        """Flush the updates, publish a last version if leading, leave the groups.

        While the broker is away the flushes give up after their timeouts (logged); what
        was not delivered is re-read by the partitions' next owners from the watermarks."""
        if not self._started:
            return
        self._started = False
        if self._prober is not None:
            self._prober.join(timeout=5)
        try:
            if graceful and self._updates is not None:
                try:
                    self._updates.flush(timeout_s=30)
                    if self.leader is not None:
                        self._leader_round(drain=True)
                        self._publish_final()
                    self._write_worker_state()
                except (*_transport_errors(), StateError) as exc:
                    log_event(_log, "warning", "scaleout_close_incomplete",
                              error=f"{type(exc).__name__}: {exc}")
        finally:
            for part in self._parts.values():
                part.close()
            for closing in (self._source, self._election, self._updates_reader,
                            self._publisher, self._model_reader, self._updates, self._sinks):
                if closing is not None:
                    closing.close()
            if self.metrics_server is not None:
                self.metrics_server.close()
            log_event(_log, "info", "scaleout_stats", member=self.member,
                      **{k: round(v, 6) for k, v in self.stats.items()})
            log_event(_log, "info", "service_stopped", member=self.member,
                      records_accepted=self.status.records_accepted,
                      records_rejected=self.status.records_rejected)

    # ------------------------------------------------------------------ housekeeping

    def _wait(self, seconds: float) -> bool:
        self._tick()
        self._source.poll(seconds)
        return self._stop.is_set()

    def _tick(self) -> None:
        if self._election.is_leader and self.leader is None:
            if self._leader_backoff.ready():
                self._try_become_leader()
        elif not self._election.is_leader and self.leader is not None:
            self._step_down()
        if self.leader is not None:
            self._leader_round()
        self._model_reader.poll(0.0)
        self._adopt_latest()
        self._handle_send_results()
        if self._to_fence:
            self._send_fences()

    def _update_lag(self) -> None:
        """``streamkm_source_lag`` of every partition being read (messages between the next
        offset and the high watermark), as in single-process Kafka mode."""
        for key, part in self._parts.items():
            lag = part.lag()
            if lag is not None:
                self.metrics.source_lag.labels(partition=key).set(lag)

    def _set_broker_connected(self, connected: bool) -> None:
        """Record the scale-out clients' connection state; log and export transitions."""
        with self._broker_lock:
            if connected == self._broker_connected:
                return
            previous, self._broker_connected = self._broker_connected, connected
            if connected:
                log_event(_log, "info", "kafka_broker_connected", client=BROKER_CLIENT)
            elif previous is not None:
                log_event(_log, "warning", "kafka_broker_unavailable", client=BROKER_CLIENT)
            self.metrics.kafka.broker_connected.labels(client=BROKER_CLIENT).set(
                1 if connected else 0)

    def _probe_loop(self, every_s: float = 1.0) -> None:
        """Connected = the updates producer and the model reader both hold a broker
        connection (their own ``connection-count`` metrics). Probed every second on its own
        thread, so the state stays current while the loop waits on a sink flush."""
        while self._started and not self._stop.wait(every_s):
            try:
                self._set_broker_connected(self._updates.connected()
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
                self._set_broker_connected(False)
                log_event(_log, "warning", "scaleout_fence_send_failed", partition=key,
                          error=f"{type(detail).__name__}: {detail}",
                          retry_in_s=round(delay, 3))
            elif kind == "update_failed":
                if self._tokens.get(key) != token:
                    continue  # this generation is already over
                refence.add(key)
                self._set_broker_connected(False)
                log_event(_log, "warning", "scaleout_update_send_failed_refencing",
                          partition=key, error=f"{type(detail).__name__}: {detail}")
        if refence:
            for key in sorted(refence):
                self._drop_partition(key)
                self._to_fence.append(key)
            self._rebuild_parts()

    # ------------------------------------------------------------------ model versions

    def _on_version(self, version: int, data: bytes) -> None:
        self._latest_version_data = (version, data)

    def _adopt_latest(self) -> None:
        latest = self._latest_version_data
        if latest is None or latest[0] <= self.model_version:
            return
        self._latest_version_data = None
        version = ModelVersion.from_bytes(latest[1])
        self.model = version.build_model()
        self.model_version = version.version
        self._adopted_version = version
        self._adopted_ledger = version.ledger
        sm = self.scaleout_metrics
        sm.model_version.set(self.model_version)
        if self.leader is None:
            sm.model_versions_behind.set(0)
        if self.model is not None:
            self.status.step = int(self.model.n_steps_)
            self.status.clusters = int(self.model.n_clusters_)
            self.metrics.model_steps.set(self.status.step)
            self.metrics.clusters.set(self.status.clusters)
        self._confirm_fences(version)
        if self.model is not None and self._unassigned:
            while self._unassigned:
                batch = self._unassigned.popleft()
                cluster_ids, mind, assigned_version, _ = self._assign(batch.X)
                self._write_assignments(batch, cluster_ids, mind, assigned_version)
                self.status.objective = float(mind.mean())
                self.metrics.batch_objective.set(self.status.objective)

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

    # ------------------------------------------------------------------ partitions

    def _on_assigned(self, keys: list[str]) -> None:
        self._to_fence.extend(k for k in keys if k not in self._to_fence)

    def _on_revoked(self, keys: list[str], *, lost: bool) -> None:
        revoked = sorted(set(keys) & (set(self._active) | set(self._pending)
                                      | set(self._to_fence)))
        for key in keys:
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
        part = self._parts.pop(key, None)
        if part is not None:
            part.close()
        try:
            self.metrics.source_lag.remove(key)
        except KeyError:
            pass

    def _rebuild_parts(self) -> None:
        """Rebuild every active partition at its next offset to send; the batch being
        collected is dropped."""
        from streamkm_connectors.kafka_common import split_part_key

        for key in list(self._parts):
            self._parts.pop(key).close()
        for key, offset in list(self._active.items()):
            topic, number = split_part_key(key)
            try:
                self._parts[key] = self._source.build_part(
                    key, {"version": 1, "topic": topic, "partition": number, "offset": offset})
            except ParameterError:  # revoked meanwhile
                self._active.pop(key, None)
                self._tokens.pop(key, None)
        self._batcher.set_parts(dict(self._parts))

    def _send_fences(self) -> None:
        """Send a fence with a fresh token for every partition waiting for one (without
        waiting for the acknowledgements; see :meth:`_handle_send_results`)."""
        if not self._fence_backoff.ready():
            return
        from kafka.errors import KafkaTimeoutError

        keys, self._to_fence = sorted(set(self._to_fence)), []
        for i, key in enumerate(keys):
            if key in self._active:  # re-assigned without a revocation: new generation
                self._drop_partition(key)
            token = uuid.uuid4().hex
            try:
                future = self._updates.send(encode_message(Fence(key, token, self.member)))
            except (KafkaTimeoutError, OSError) as exc:  # not queued (metadata, buffer)
                self._to_fence.extend(keys[i:])
                delay = self._fence_backoff.failed()
                self._set_broker_connected(False)
                log_event(_log, "warning", "scaleout_fence_send_failed", partitions=keys[i:],
                          error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))
                break
            self._pending[key] = token
            results = self._send_results
            future.add_callback(lambda md, key=key, token=token: results.append(
                ("fence_sent", key, token, int(md.offset))))
            future.add_errback(lambda exc, key=key, token=token: results.append(
                ("fence_failed", key, token, exc)))
            self.scaleout_metrics.fences_sent.inc()
        if keys:
            self._rebuild_parts()

    # ------------------------------------------------------------------ worker

    def _assign(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """(cluster ids, squared distances, model version, positions) under the adopted
        model."""
        dist = self.model.transform(x)
        labels = np.argmin(dist, axis=1).astype(np.int64)
        mind = dist[np.arange(x.shape[0]), labels]
        return self.model.cluster_ids_[labels], mind, self.model_version, labels

    def _process(self, batch: Batch) -> None:
        t0 = time.perf_counter()
        x = batch.X
        n = batch.n_valid
        if self.model is not None and n:
            cluster_ids, mind, version, labels = self._assign(x)
            k, cap = int(self.model.n_clusters_), int(self.model.tau)
        else:
            cluster_ids = mind = None
            version, labels = self.model_version, np.zeros(n, dtype=np.int64)
            k, cap = 1, int(self.config.model.n_clusters * (self.config.model.tau or 200))
        t1 = time.perf_counter()
        from kafka.errors import KafkaTimeoutError
        from streamkm_connectors.kafka_common import part_key

        row_parts = np.array([part_key(r.position["topic"], r.position["partition"])
                              for r in batch.records], dtype=object)
        for key, snapshot in sorted(batch.positions.items()):
            start = self._active.get(key)
            end = snapshot.get("offset")
            if start is None or end is None or end <= start:
                continue
            idx = np.flatnonzero(row_parts == key) if n else np.empty(0, dtype=np.int64)
            rows, mult = subsample_per_cluster(labels[idx], k, cap, self._rng)
            chosen = idx[rows]
            update = ModelUpdate(
                partition=key, start=start, end=int(end), token=self._tokens[key],
                worker=self.member, model_version=version,
                rows=np.ascontiguousarray(x[chosen]), multiplicities=mult,
                objective_sum=float(mind[idx].sum()) if mind is not None else 0.0)
            token = self._tokens[key]
            try:
                future = self._updates.send(encode_message(update))
            except (KafkaTimeoutError, OSError) as exc:  # not queued: re-fence
                self._send_results.append(("update_failed", key, token, exc))
                continue
            future.add_errback(lambda exc, key=key, token=token: self._send_results.append(
                ("update_failed", key, token, exc)))
            self._active[key] = int(end)
            self.scaleout_metrics.updates_sent.inc()
            self.last_sent_version = version
        t2 = time.perf_counter()
        self.stats["worker_assign_seconds"] += t1 - t0
        self.stats["worker_encode_seconds"] += t2 - t1
        self.stats["worker_records"] += n
        if cluster_ids is None:
            if n:  # assigned as soon as the first model version arrives
                self._unassigned.append(batch)
        else:
            self._write_assignments(batch, cluster_ids, mind, version)
            self.status.objective = float(mind.mean())
            self.metrics.batch_objective.set(self.status.objective)
        self._write_rejections(batch)
        self.metrics.batch_processing_seconds.observe(time.perf_counter() - t0)

    def _write_assignments(self, batch: Batch, cluster_ids: np.ndarray, mind: np.ndarray,
                           version: int) -> None:
        sink = self._sinks.assignments
        if sink is None:
            return
        if hasattr(sink, "write_record_assignments"):
            sink.write_record_assignments(batch.records, batch.ids, cluster_ids, mind, version)
        else:
            sink.write_assignments(batch.ids, cluster_ids, mind, version)
        sink.flush()

    def _write_rejections(self, batch: Batch) -> None:
        sinks, m = self._sinks, self.metrics
        tally: dict[str, int] = {}
        for rejection in batch.rejections:
            reason = getattr(rejection.reason, "value", str(rejection.reason))
            sinks.dead_letter.write_dead_letter(rejection.record.value, reason,
                                                rejection.detail, rejection.record.position)
            tally[reason] = tally.get(reason, 0) + 1
        self.status.count_batch(batch, tally, m)
        sinks.dead_letter.flush()

    # ------------------------------------------------------------------ leader

    def _try_become_leader(self) -> None:
        """Take the leader role; on a broker error undo it and retry after a backoff."""
        try:
            self._become_leader()
        except (*_transport_errors(), StateError) as exc:
            _config_error(exc)
            self.leader = None
            self._close_leader_clients()
            delay = self._leader_backoff.failed()
            self._set_broker_connected(False)
            log_event(_log, "warning", "scaleout_leader_start_failed", member=self.member,
                      error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))
            return
        self._leader_backoff.succeeded()

    def _become_leader(self) -> None:
        from streamkm_connectors.scaleout_kafka import ModelPublisher, UpdatesReader

        sc = self.config.scaleout
        self._model_reader.read_to_end(timeout_s=sc.fence_timeout_ms / 1000.0)
        self._adopt_latest()
        start = self._adopted_version
        cfg = self.config
        leader = MergeLeader(
            lambda: build_model(cfg.model, cfg.batching.batch_size, cfg.drift.estimator_drift()),
            init_records=cfg.batching.batch_size, start=start, member=self.member)
        fetch = max(sc.model_chunk_bytes, sc.max_update_bytes) + (64 << 10)
        self._updates_reader = UpdatesReader(self._settings(), sc.updates_topic,
                                             leader.applied_offset + 1,
                                             max_fetch_bytes=fetch)
        self._publisher = ModelPublisher({**cfg.kafka.client_settings(), **cfg.kafka.producer},
                                         sc.model_topic, chunk_bytes=sc.model_chunk_bytes)
        self.leader = leader
        self._since_publish = 0
        self._publish_due = False
        self._publishing = None
        self._publish_backoff.succeeded()
        self.scaleout_metrics.leader.set(1)
        self.scaleout_metrics.leader_changes.inc()
        log_event(_log, "info", "scaleout_leader_elected", member=self.member,
                  version=self.leader.version, applied_offset=self.leader.applied_offset)

    def _close_leader_clients(self) -> None:
        self._publishing = None
        for name in ("_updates_reader", "_publisher"):
            client = getattr(self, name)
            setattr(self, name, None)
            if client is not None:
                try:
                    client.close()
                except Exception as exc:  # noqa: BLE001 - closing must not fail the process
                    log_event(_log, "warning", "scaleout_client_close_failed", client=name,
                              error=repr(exc))

    def _step_down(self) -> None:
        log_event(_log, "warning", "scaleout_leader_stepped_down", member=self.member,
                  version=None if self.leader is None else self.leader.version)
        self.leader = None
        self._close_leader_clients()
        sm = self.scaleout_metrics
        sm.leader.set(0)
        sm.leader_changes.inc()
        sm.updates_lag.set(0)  # leader-only gauges: no stale leader values on a worker
        sm.model_versions_behind.set(0)

    def _leader_round(self, *, drain: bool = False) -> None:
        assert self.leader is not None and self._updates_reader is not None
        sc, sm = self.config.scaleout, self.scaleout_metrics
        self._check_publication()
        while True:
            messages = self._updates_reader.poll(0.0 if not drain else 0.2,
                                                 sc.max_updates_per_round)
            for offset, data in messages:
                t0 = time.perf_counter()
                try:
                    message = decode_message(data)
                except StateError as exc:
                    self.leader.skip_corrupt(offset)
                    sm.updates_dropped.labels(reason="corrupt").inc()
                    log_event(_log, "error", "scaleout_update_corrupt", offset=offset,
                              error=str(exc))
                    continue
                outcome = self.leader.apply(message, offset)
                seconds = time.perf_counter() - t0
                if outcome.verdict == "skipped":
                    continue
                self._since_publish += 1
                if outcome.verdict == "fence":
                    self._publish_due = True
                elif outcome.verdict in ("applied", "buffered"):
                    sm.updates_applied.inc()
                    sm.leader_apply_seconds.observe(seconds)
                    self.stats["leader_apply_seconds"] += seconds
                    self.stats["leader_updates"] += 1
                    self.stats["leader_rows"] += int(message.rows.shape[0])  # type: ignore[union-attr]
                    behind = sum(1 for v in self._published
                                 if v > message.model_version)  # type: ignore[union-attr]
                    sm.model_versions_behind.set(behind)
                    if outcome.report is not None:
                        self._write_leader_events(outcome.report)
                else:
                    sm.updates_dropped.labels(reason=outcome.verdict).inc()
                    log_event(_log, "info", "scaleout_update_dropped", reason=outcome.verdict,
                              offset=offset, partition=getattr(message, "partition", None))
            lag = self._updates_reader.lag()
            if lag is not None:
                sm.updates_lag.set(lag)
            if not drain or not messages:
                break
        due = (self._publish_due or self._since_publish >= sc.publish_every_updates
               or (self._since_publish and (time.monotonic() - self._last_publish)
                   >= sc.publish_interval_ms / 1000.0))
        if due:
            self._publish()

    def _write_leader_events(self, report: Any) -> None:
        for event in report.events:
            kind = event["event"]
            if kind == "split":
                self.metrics.cluster_splits.inc()
            elif kind == "merge":
                self.metrics.cluster_merges.inc()
            elif kind in ("converged", "woke"):
                self.metrics.model_transitions.labels(kind=kind).inc()
            if self._sinks.events is not None:
                self._sinks.events.write_event({**event, "leader": self.member})
            log_event(_log, "info", "scaleout_model_event", **event)

    def _publish(self) -> None:
        """Hand the current version to the publisher (one publication in flight at a time;
        acknowledged in :meth:`_check_publication`, retried with backoff when it failed)."""
        if self.leader is None or self._publisher is None or self._publishing is not None:
            return
        if not self._publish_backoff.ready():
            return
        from kafka.errors import KafkaTimeoutError

        t0 = time.perf_counter()
        state = self.leader.snapshot()
        data = state.to_bytes()
        try:
            futures = self._publisher.send_version(state.version, data)
        except (KafkaTimeoutError, OSError) as exc:
            self._publication_failed(state.version, exc)
            return
        self._publishing = _Publication(state.version, futures, t0, len(data))
        self._since_publish = 0
        self._publish_due = False
        self._last_publish = time.monotonic()

    def _check_publication(self) -> None:
        """Account for the publication in flight once every chunk is acknowledged/failed."""
        pub = self._publishing
        if pub is None or not pub.done:
            return
        self._publishing = None
        error = pub.error()
        if error is not None:
            self._publication_failed(pub.version, error)
            return
        self._publish_backoff.succeeded()
        seconds = time.perf_counter() - pub.started
        self._published.append(pub.version)
        self.stats["leader_publish_seconds"] += seconds
        self.stats["versions_published"] += 1
        self.scaleout_metrics.versions_published.inc()
        self.scaleout_metrics.leader_publish_seconds.observe(seconds)
        log_event(_log, "debug", "scaleout_version_published", version=pub.version,
                  bytes=pub.size, chunks=len(pub.futures), seconds=round(seconds, 6))

    def _publication_failed(self, version: int, exc: BaseException) -> None:
        """A version did not reach the model topic: publish again (the newest state, which
        includes it) after a backoff. A torn version is ignored by the readers."""
        self._publish_due = True
        delay = self._publish_backoff.failed()
        self._set_broker_connected(False)
        log_event(_log, "warning", "scaleout_publish_failed", version=version,
                  error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))

    def _publish_final(self) -> None:
        """At a graceful stop: wait for the publication in flight, publish the final state
        and wait for it."""
        timeout = self.config.scaleout.fence_timeout_ms / 1000.0
        if self._publishing is not None:
            self._publisher.flush(timeout)
            self._check_publication()
        self._publishing = None
        self._publish_backoff.succeeded()
        self._publish()
        if self._publishing is not None:
            self._publisher.flush(timeout)
            self._check_publication()

    # ------------------------------------------------------------------ worker state

    def _state_path(self) -> Path:
        return Path(self.config.checkpoint.dir) / WORKER_STATE_FILE

    def _read_worker_state(self) -> dict[str, Any] | None:
        try:
            return json.loads(self._state_path().read_text())
        except (OSError, ValueError):
            return None

    def _write_worker_state(self) -> None:
        """Informational checkpoint: input positions and the model versions used and sent
        (the leader's watermarks are the source of truth)."""
        t0 = time.perf_counter()
        path = self._state_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        for sink in self._sinks.named().values():
            sink.sync()
        state = {"member": self.member, "positions": dict(self._active),
                 "model_version": self.model_version,
                 "last_sent_model_version": self.last_sent_version,
                 "records_read": self.status.records_read,
                 "records_accepted": self.status.records_accepted,
                 "written_unix": time.time()}
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(state, sort_keys=True))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
        seconds = time.perf_counter() - t0
        m = self.metrics
        m.checkpoint_duration_seconds.observe(seconds)
        m.checkpoints.inc()
        m.checkpoint_last_success_timestamp_seconds.set(time.time())
        self.status.checkpoints += 1
        self.status.checkpoint_seconds += seconds

    def _maybe_checkpoint(self) -> None:
        every = self.config.checkpoint.every_seconds or 30.0
        if time.monotonic() - self._last_checkpoint < every:
            return
        self._last_checkpoint = time.monotonic()
        if self._broker_connected is False:
            return  # syncing the Kafka sinks would block until the broker is back
        try:
            self._write_worker_state()
        except OSError as exc:  # SinkError: outputs not acknowledged; retried next time
            self.metrics.checkpoint_failures.inc()
            log_event(_log, "warning", "checkpoint_failed", reason="interval",
                      error=f"{type(exc).__name__}: {exc}")
            return
        if self._adopted_ledger is not None:  # broker offsets for lag tooling only
            self._source.commit({k: {"offset": self._adopted_ledger.watermark(k)}
                                 for k in self._active})


class _WorkerHooks:
    """The assignment listener of the input consumer group."""

    def __init__(self, service: ScaleoutService) -> None:
        self._service = service

    def on_assigned(self, part_keys: list[str]) -> None:
        self._service._on_assigned(part_keys)

    def on_revoked(self, part_keys: list[str], *, lost: bool) -> None:
        self._service._on_revoked(part_keys, lost=lost)
