"""The merge-leader role of a scale-out member (held while it owns the leader group's
partition 0): apply the updates topic in order, publish model versions.

Taking the role, the member sends a :class:`~streamkm.scaleout.messages.LeaderClaim` to the
updates topic and publishes nothing until it applied its own claim as accepted (a rejected
claim -- another claim was accepted since the state it started from -- is sent again from the
new epoch). Once confirmed, applying another member's accepted claim fences it
(:attr:`LeaderRole.fenced`): it publishes nothing more and the worker gives the role up.

Publications are asynchronous, one in flight at a time; a failed one is retried (the newest
state, which includes it) with exponential backoff. A torn version is ignored by readers.

The events of an applied update (split, merge, converged, re-sketch) are written once, by the
leader, through the runtime's :class:`~streamkm.runtime.io_guard.IoGuard`: while the file
system refuses them the member pauses and retries the write (not the update).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkm.config.schema import ServiceConfig
from streamkm.exceptions import StateError
from streamkm.logs import log_event
from streamkm.runtime.sketching import ServiceSketching
from streamkm.runtime.wiring import build_model
from streamkm.scaleout.backoff import Backoff
from streamkm.scaleout.leader import MergeLeader, ModelVersion
from streamkm.scaleout.messages import LeaderClaim, decode_message, encode_message
from streamkm.scaleout.metrics import ScaleoutMetrics
from streamkm.scaleout.transport import (
    ModelPublisher,
    ScaleoutTransport,
    SendFuture,
    UpdatesReader,
    UpdatesSender,
)

if TYPE_CHECKING:
    from streamkm.runtime.learner import LearnerHost

__all__ = ["LeaderRole", "Publication"]

_log = logging.getLogger("streamkm.scaleout")


class Publication:
    """A model version handed to the publisher, not acknowledged yet."""

    def __init__(self, version: int, futures: list[SendFuture], started: float,
                 size: int) -> None:
        self.version = version
        self.futures = futures
        self.started = started
        self.size = size

    @property
    def done(self) -> bool:
        return all(f.is_done for f in self.futures)

    def error(self) -> BaseException | None:
        return next((f.exception for f in self.futures if f.failed()), None)


class LeaderRole:
    """The leader's model, its updates reader and its model publisher.

    Parameters
    ----------
    config : ServiceConfig
        ``[scaleout]`` publication cadence, ``[model]`` of the global model.
    runtime : LearnerHost
        Where model events are counted, written and logged.
    metrics : ScaleoutMetrics
        Leader gauges and counters.
    member : str
        This process's member id.
    stats : dict
        Shared time/volume totals (``leader_*``, ``versions_published``), logged at exit.
    start : ModelVersion or None
        The version to continue from (the newest adopted one).
    transport : ScaleoutTransport or None
        Builds the updates reader and the publisher (``None``: the caller sets
        :attr:`updates_reader` and :attr:`publisher`, as tests do).
    backoff : Backoff
        Delay between failed publications.
    on_broker_down : callable
        Called when a publication failed (the broker looks unreachable).
    claims : UpdatesSender, optional
        Where the leader claims go (the updates topic). ``None``: no claim, the role is
        confirmed from the start (a single leader, as in tests).
    """

    def __init__(self, config: ServiceConfig, runtime: LearnerHost, metrics: ScaleoutMetrics,
                 member: str, stats: dict[str, float], start: ModelVersion | None,
                 transport: ScaleoutTransport | None, backoff: Backoff,
                 on_broker_down: Callable[[], None], *,
                 claims: UpdatesSender | None = None) -> None:
        self.config = config.scaleout
        self._runtime = runtime
        self._metrics = metrics
        self.member = member
        self.stats = stats
        cfg = config
        sketching = ServiceSketching(cfg, runtime.metrics)
        self.leader = MergeLeader(
            lambda: sketching.wrap(build_model(cfg.model, cfg.batching.batch_size,
                                               cfg.drift.policy)),
            init_records=max(cfg.batching.batch_size, sketching.min_first_batch), start=start,
            member=member, stepper=lambda model, x, w, f: sketching.step(
                model, x, sample_weight=w, features=f))
        self.updates_reader: UpdatesReader | None = None
        self.publisher: ModelPublisher | None = None
        self.backoff = backoff
        self._on_broker_down = on_broker_down
        self.since_publish = 0
        self.publish_due = False
        self.last_publish = time.monotonic()
        self.published: deque[int] = deque(maxlen=4096)
        self.publishing: Publication | None = None
        self._claims = claims
        self._claim_tokens: list[str] = []
        self._claim_failed = False
        self.confirmed = claims is None
        self.fenced = False
        #: A stop came while the events of an applied update were refused: nothing more is
        #: applied or published.
        self.given_up = False
        if transport is not None:
            try:
                self.updates_reader = transport.updates_reader(self.leader.applied_offset + 1)
                self.publisher = transport.model_publisher()
            except BaseException:
                self.close()
                raise
        self.backoff.succeeded()
        metrics.leader.set(1)
        metrics.leader_changes.inc()
        log_event(_log, "info", "scaleout_leader_elected", member=member,
                  version=self.version, applied_offset=self.leader.applied_offset,
                  epoch=self.leader.leadership.epoch)
        if claims is not None:
            self._claim()

    @property
    def version(self) -> int:
        return self.leader.version

    def _claim(self) -> None:
        """Claim the role from the epoch applied so far (asynchronous; a failed send is
        claimed again at the next round)."""
        assert self._claims is not None
        token = uuid.uuid4().hex
        self._claim_failed = False
        try:
            future = self._claims.send(encode_message(LeaderClaim(
                self.member, token, self.leader.leadership.epoch)))
        except OSError as exc:  # TransportError: not queued
            self._claim_send_failed(exc)
            return
        self._claim_tokens.append(token)
        future.add_errback(self._claim_send_failed)

    def _claim_send_failed(self, exc: BaseException) -> None:
        self._claim_failed = True
        log_event(_log, "warning", "scaleout_leader_claim_failed", member=self.member,
                  error=f"{type(exc).__name__}: {exc}")

    def _on_claim(self, claim: LeaderClaim, accepted: bool) -> None:
        ours = claim.token in self._claim_tokens
        if accepted:
            self.publish_due = True
        if ours and accepted:
            self.confirmed = True
            log_event(_log, "info", "scaleout_leader_confirmed", member=self.member,
                      epoch=self.leader.leadership.epoch, version=self.version)
        elif ours and claim.token == self._claim_tokens[-1] and not self.confirmed:
            self._claim()  # another claim was accepted after the state this one started from
        elif accepted and self.confirmed:
            self.confirmed = False
            self.fenced = True
            log_event(_log, "warning", "scaleout_leader_fenced", member=self.member,
                      by=claim.member, epoch=self.leader.leadership.epoch, version=self.version)

    def round(self, *, drain: bool = False) -> None:
        """Apply what arrived on the updates topic (everything, when ``drain``), then publish
        if due (``publish_every_updates``, ``publish_interval_ms`` or a fence)."""
        assert self.updates_reader is not None
        sc, sm = self.config, self._metrics
        self.check_publication()
        if self.given_up:
            return
        if self._claim_failed and not self.confirmed and self.backoff.ready():
            self._claim()
        while True:
            messages = self.updates_reader.poll(0.0 if not drain else 0.2,
                                                sc.max_updates_per_round)
            for offset, data in messages:
                self._apply(offset, data)
                if self.fenced or self.given_up:
                    return
            lag = self.updates_reader.lag()
            if lag is not None:
                sm.updates_lag.set(lag)
            if not drain or not messages:
                break
        due = (self.publish_due or self.since_publish >= sc.publish_every_updates
               or (self.since_publish and (time.monotonic() - self.last_publish)
                   >= sc.publish_interval_ms / 1000.0))
        if due:
            self.publish()

    def _apply(self, offset: int, data: bytes) -> None:
        sm = self._metrics
        t0 = time.perf_counter()
        try:
            message = decode_message(data)
        except StateError as exc:
            self.leader.skip_corrupt(offset)
            sm.updates_dropped.labels(reason="corrupt").inc()
            log_event(_log, "error", "scaleout_update_corrupt", offset=offset, error=str(exc))
            return
        outcome = self.leader.apply(message, offset)
        seconds = time.perf_counter() - t0
        if outcome.verdict == "skipped":
            return
        self.since_publish += 1
        if isinstance(message, LeaderClaim):
            self._on_claim(message, outcome.verdict == "claim")
            return
        if outcome.verdict == "fence":
            self.publish_due = True
        elif outcome.verdict in ("applied", "buffered"):
            sm.updates_applied.inc()
            sm.leader_apply_seconds.observe(seconds)
            self.stats["leader_apply_seconds"] += seconds
            self.stats["leader_updates"] += 1
            self.stats["leader_rows"] += int(message.rows.shape[0])  # type: ignore[union-attr]
            behind = sum(1 for v in self.published
                         if v > message.model_version)  # type: ignore[union-attr]
            sm.model_versions_behind.set(behind)
            if outcome.reprojected:
                sm.updates_reprojected.inc()
            events = outcome.report.events if outcome.report is not None else ()
            self._record(list(outcome.side_events), list(events))
        else:
            sm.updates_dropped.labels(reason=outcome.verdict).inc()
            log_event(_log, "info", "scaleout_update_dropped", reason=outcome.verdict,
                      offset=offset, partition=message.partition)

    def _record(self, side_events: list[dict[str, Any]],
                events: list[dict[str, Any]]) -> None:
        """Write the events of the update just applied, once, by the leader: re-sketches
        and lifecycle events (split, merge, converged, ...), with ``leader`` and
        ``version``. The update stays applied; only the write is retried while the file
        system refuses it (nothing is applied, read or published meanwhile). A stop during
        the wait gives the role's output up: it publishes nothing more (the versions would
        hold changes whose events are not written), so the next leader applies these
        updates again from the last published version and writes their events."""
        if not side_events and not events:
            return
        extra = {"leader": self.member, "version": self.version}
        if self._runtime.record_events(events, side_events=[{**e, **extra}
                                                            for e in side_events], **extra):
            return
        self.given_up = True
        health = self._runtime.io_health
        log_event(_log, "warning", "scaleout_leader_events_given_up", member=self.member,
                  version=self.version, events=[*side_events, *events],
                  last_published=self.published[-1] if self.published else None,
                  error=health.error)

    def publish(self) -> None:
        """Hand the current version to the publisher (one publication in flight at a time;
        acknowledged in :meth:`check_publication`, retried with backoff when it failed).
        Nothing is published before the role is confirmed, once it is fenced or once it
        gave up writing an update's events (:meth:`_record`)."""
        if (self.publisher is None or self.publishing is not None or not self.confirmed
                or self.given_up or not self.backoff.ready()):
            return
        t0 = time.perf_counter()
        state = self.leader.snapshot()
        data = state.to_bytes()
        try:
            futures = self.publisher.send_version(state.version, data)
        except OSError as exc:  # TransportError: not queued
            self._failed(state.version, exc)
            return
        self.publishing = Publication(state.version, futures, t0, len(data))
        self.since_publish = 0
        self.publish_due = False
        self.last_publish = time.monotonic()

    def check_publication(self) -> None:
        """Account for the publication in flight once every chunk is acknowledged/failed."""
        pub = self.publishing
        if pub is None or not pub.done:
            return
        self.publishing = None
        error = pub.error()
        if error is not None:
            self._failed(pub.version, error)
            return
        self.backoff.succeeded()
        seconds = time.perf_counter() - pub.started
        self.published.append(pub.version)
        self.stats["leader_publish_seconds"] += seconds
        self.stats["versions_published"] += 1
        self._metrics.versions_published.inc()
        self._metrics.leader_publish_seconds.observe(seconds)
        log_event(_log, "debug", "scaleout_version_published", version=pub.version,
                  bytes=pub.size, chunks=len(pub.futures), seconds=round(seconds, 6))

    def _failed(self, version: int, exc: BaseException) -> None:
        """A version did not reach the model topic: publish again (the newest state, which
        includes it) after a backoff."""
        self.publish_due = True
        delay = self.backoff.failed()
        self._on_broker_down()
        log_event(_log, "warning", "scaleout_publish_failed", version=version,
                  error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))

    def publish_final(self) -> None:
        """At a graceful stop: wait for the publication in flight, publish the final state
        and wait for it."""
        assert self.publisher is not None
        timeout = self.config.fence_timeout_ms / 1000.0
        if self.publishing is not None:
            self.publisher.flush(timeout)
            self.check_publication()
        self.publishing = None
        self.backoff.succeeded()
        self.publish()
        if self.publishing is not None:
            self.publisher.flush(timeout)
            self.check_publication()

    def step_down(self, reason: str) -> None:
        """Give the role up (``reason``: ``not_elected``, ``fenced``, ``cut_off``): close the
        clients, zero the leader-only gauges (no stale leader values on a worker)."""
        log_event(_log, "warning", "scaleout_leader_stepped_down", member=self.member,
                  version=self.version, reason=reason)
        self.close()
        sm = self._metrics
        sm.leader.set(0)
        sm.leader_changes.inc()
        sm.updates_lag.set(0)
        sm.model_versions_behind.set(0)

    def close(self) -> None:
        """Close the reader and the publisher (never raises)."""
        self.publishing = None
        for name, client in (("updates_reader", self.updates_reader),
                             ("publisher", self.publisher)):
            if client is None:
                continue
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 - closing must not fail the process
                log_event(_log, "warning", "scaleout_client_close_failed", client=name,
                          error=repr(exc))
        self.updates_reader = self.publisher = None
