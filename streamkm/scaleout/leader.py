"""The merge leader: applies updates in the updates topic's order, owns the global model.

Only the leader changes the model (steps, drift splits and merges), so cluster ids stay
global and stable. Its whole state -- model, partition ledger, the offset of the last
updates-topic message applied, records buffered before the model is initialised, counters
-- is one :class:`ModelVersion`; publishing it is the leader's checkpoint. Replaying the
updates topic from a version's ``applied_offset + 1`` is deterministic, so a new leader
that starts from any published version reaches the same states as the old one would have.

Leadership is part of that state too (:class:`Leadership`): the epoch counts the accepted
:class:`~streamkm.scaleout.messages.LeaderClaim` messages, and a leader publishes only while
the state it applied names it (its own claim accepted, no later one): a leader that was cut
off and replaced reads its successor's claim before it could publish anything newer, and
stops.

Stale updates (computed against an older model version) are re-assigned: the leader steps
its current model on the update's rows with their multiplicities, so nothing is dropped for
staleness and counts stay exact.

With sketching the global model is a :class:`~streamkm.sketch.SketchedKernelKMeans`: one
sketch, fitted on the first records and re-sketched by the leader alone (every
``resketch_every`` applied updates, and after a split or a wake for data-dependent sketches)
from its reservoir, which samples the raw rows the updates carry. The sketch, its epoch and
the reservoir are part of every version. An update projected with the current epoch is
stepped as is; one projected with an older epoch is re-projected from its raw rows (counted
as ``updates_reprojected``).

Drift splits and merges happen only here; each version lists the recent ones
(:attr:`ModelVersion.cluster_events`, with the version that made them) so members see them
with the model that uses the new stable ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkm._core.raw_rows import raw_from_arrays, raw_to_arrays, stack_rows
from streamkm._core.sparse import is_sparse
from streamkm._core.state_io import decode_npz_bytes, encode_npz_bytes
from streamkm.exceptions import StateError
from streamkm.scaleout.ledger import DROP_REASONS, PartitionLedger, UpdateVerdict
from streamkm.scaleout.messages import Fence, LeaderClaim, Message

__all__ = ["MergeLeader", "ModelVersion", "ApplyOutcome", "Leadership", "VERSION_FORMAT",
           "Stepper", "plain_step"]

VERSION_FORMAT = "streamkm.scaleout.ModelVersion"
VERSION_FORMAT_VERSION = 1
_MODEL_PREFIX = "model__"
_SKETCH_PREFIX = "sketch__"
#: Split / merge events a version keeps (the newest ones).
CLUSTER_EVENTS_KEPT = 64

#: ``stepper(model, X, sample_weight, features) -> (StepReport, side events)``: one step of
#: the global model (``features``: X already projected with the model's current sketch).
Stepper = Callable[[Any, Any, np.ndarray, Any], tuple[Any, list[dict[str, Any]]]]


def plain_step(model: Any, x: Any, sample_weight: np.ndarray, features: Any
               ) -> tuple[Any, list[dict[str, Any]]]:
    """Step an unsketched engine (sparse rows densified, ``features`` unused)."""
    if is_sparse(x):
        x = x.toarray()
    return model.step(x, sample_weight=sample_weight), []


@dataclass(frozen=True)
class Leadership:
    """Who leads, as applied from the updates topic: the member and claim token of the last
    accepted :class:`~streamkm.scaleout.messages.LeaderClaim`, and the number of accepted
    claims (the epoch; 0 before the first)."""

    epoch: int = 0
    member: str = ""
    token: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "member": self.member, "token": self.token}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Leadership:
        if not data:
            return cls()
        return cls(int(data["epoch"]), str(data["member"]), str(data["token"]))


@dataclass(frozen=True)
class ApplyOutcome:
    """What :meth:`MergeLeader.apply` did with one message."""

    verdict: str  # "fence", "claim", "claim_rejected", "applied", "buffered", "skipped"
    # or a drop reason
    report: Any = None  # the StepReport when the model stepped
    records: int = 0
    side_events: list[dict[str, Any]] = field(default_factory=list)  # re-sketches
    reprojected: bool = False  # an update of an older sketch epoch, re-projected


@dataclass
class ModelVersion:
    """One published state of the global model (see the module docstring).

    ``version`` is the number of updates-topic messages it reflects
    (``applied_offset + 1``): two versions with the same number are identical.
    ``model_arrays`` / ``model_meta`` are the engine's state; with sketching
    ``sketch_arrays`` / ``sketch_meta`` hold the sketch, its epoch and the re-sketch
    reservoir (:meth:`SketchedKernelKMeans.sketch_state`). ``cluster_events``: the newest
    split / merge events, each with the ``version`` that made it.
    """

    applied_offset: int
    ledger: PartitionLedger
    model_arrays: dict[str, np.ndarray] | None
    model_meta: dict[str, Any] | None
    init_rows: np.ndarray | None = None
    init_multiplicities: np.ndarray | None = None
    counters: dict[str, Any] = field(default_factory=dict)
    leader: str = ""
    created_unix: float = 0.0
    leadership: Leadership = field(default_factory=Leadership)
    sketch_arrays: dict[str, np.ndarray] | None = None
    sketch_meta: dict[str, Any] | None = None
    cluster_events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def version(self) -> int:
        return self.applied_offset + 1

    @property
    def sketch_epoch(self) -> int | None:
        """The sketch epoch of the model (None without sketching or before the model)."""
        return None if self.sketch_meta is None else int(self.sketch_meta["sketch_epoch"])

    def build_model(self) -> Any:
        """A fresh :class:`~streamkm.MiniBatchKernelKMeans` from the state, inside its
        :class:`~streamkm.sketch.SketchedKernelKMeans` with sketching (None if the model is
        not initialised yet)."""
        if self.model_arrays is None or self.model_meta is None:
            return None
        from streamkm.cluster import MiniBatchKernelKMeans

        engine = MiniBatchKernelKMeans.from_state(self.model_arrays, self.model_meta)
        if self.sketch_meta is None:
            return engine
        from streamkm.sketch import SketchedKernelKMeans

        return SketchedKernelKMeans.from_parts(engine, self.sketch_arrays or {},
                                               self.sketch_meta)

    def to_bytes(self) -> bytes:
        """Encode (npz + JSON; no pickle)."""
        arrays = {_MODEL_PREFIX + k: v for k, v in (self.model_arrays or {}).items()}
        arrays.update({_SKETCH_PREFIX + k: v for k, v in (self.sketch_arrays or {}).items()})
        if self.init_rows is not None:
            arrays.update(raw_to_arrays(self.init_rows, "init_rows"))
            arrays["init_multiplicities"] = np.asarray(self.init_multiplicities, np.int64)
        meta = {"format": VERSION_FORMAT, "format_version": VERSION_FORMAT_VERSION,
                "applied_offset": int(self.applied_offset), "version": self.version,
                "ledger": self.ledger.to_dict(), "model_meta": self.model_meta,
                "counters": self.counters, "leader": self.leader,
                "created_unix": self.created_unix, "leadership": self.leadership.to_dict(),
                "sketch_meta": self.sketch_meta, "sketch_epoch": self.sketch_epoch,
                "cluster_events": self.cluster_events}
        return encode_npz_bytes(arrays, meta)

    @classmethod
    def from_bytes(cls, data: bytes) -> ModelVersion:
        """Decode :meth:`to_bytes` output (digests verified)."""
        arrays, meta = decode_npz_bytes(data, where="model version")
        if meta.get("format") != VERSION_FORMAT or (
                meta.get("format_version") != VERSION_FORMAT_VERSION):
            raise StateError(f"not a {VERSION_FORMAT} v{VERSION_FORMAT_VERSION}: "
                             f"format={meta.get('format')!r} "
                             f"version={meta.get('format_version')!r}")
        model_arrays = {k[len(_MODEL_PREFIX):]: v for k, v in arrays.items()
                        if k.startswith(_MODEL_PREFIX)}
        sketch_arrays = {k[len(_SKETCH_PREFIX):]: v for k, v in arrays.items()
                         if k.startswith(_SKETCH_PREFIX)}
        try:
            sketch_meta = meta.get("sketch_meta")
            return cls(applied_offset=int(meta["applied_offset"]),
                       ledger=PartitionLedger.from_dict(meta["ledger"]),
                       model_arrays=model_arrays if meta["model_meta"] is not None else None,
                       model_meta=meta["model_meta"],
                       init_rows=raw_from_arrays(arrays, "init_rows"),
                       init_multiplicities=arrays.get("init_multiplicities"),
                       counters=dict(meta["counters"]), leader=str(meta["leader"]),
                       created_unix=float(meta["created_unix"]),
                       leadership=Leadership.from_dict(meta.get("leadership")),
                       sketch_arrays=sketch_arrays if sketch_meta is not None else None,
                       sketch_meta=sketch_meta,
                       cluster_events=list(meta.get("cluster_events") or []))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, StateError):
                raise
            raise StateError(f"malformed model version: {exc!r}") from None


class MergeLeader:
    """Applies update messages to the global model under the ledger's rules.

    Parameters
    ----------
    new_model : callable
        Returns a fresh, unfitted :class:`~streamkm.MiniBatchKernelKMeans` (the configured
        one).
    init_records : int
        Records per fenced partition buffered before the model is initialised on them (the
        batch size): the first model is seeded from every partition's data, not from the
        first partition's (partitions of a keyed topic rarely hold the same mix). At most
        ``max_init_partitions`` partitions count.
    start : ModelVersion, optional
        The published version to continue from (a new leader); a fresh state otherwise.
    member : str
        This leader's member id (recorded in the versions it publishes).
    stepper : Stepper, optional
        How the model steps on an update's rows (default :func:`plain_step`; with sketching
        ``ServiceSketching.step``, which also re-sketches).
    """

    def __init__(self, new_model: Callable[[], Any], *, init_records: int,
                 start: ModelVersion | None = None, member: str = "",
                 max_init_partitions: int = 8, stepper: Stepper = plain_step) -> None:
        self._new_model = new_model
        self._step = stepper
        self.cluster_events: list[dict[str, Any]] = []
        self.init_records = int(init_records)
        self.max_init_partitions = int(max_init_partitions)
        self.member = member
        self.model: Any = None
        self.ledger = PartitionLedger()
        self.applied_offset = -1
        self.leadership = Leadership()
        self._init_rows: list[Any] = []
        self._init_mult: list[np.ndarray] = []
        self.counters: dict[str, Any] = {"updates_applied": 0, "fences": 0,
                                         "records_applied": 0, "updates_reprojected": 0,
                                         "updates_dropped": {r: 0 for r in DROP_REASONS}}
        if start is not None:
            self.model = start.build_model()
            self.ledger = PartitionLedger.from_dict(start.ledger.to_dict())
            self.applied_offset = start.applied_offset
            self.leadership = start.leadership
            if start.init_rows is not None and start.init_rows.shape[0]:
                self._init_rows = [start.init_rows]
                self._init_mult = [np.asarray(start.init_multiplicities, np.int64)]
            self.counters.update(start.counters)
            self.cluster_events = list(start.cluster_events)
            self.counters["updates_dropped"] = {
                r: int(start.counters.get("updates_dropped", {}).get(r, 0)) for r in DROP_REASONS}

    @property
    def version(self) -> int:
        """Messages of the updates topic reflected in the model (``applied_offset + 1``)."""
        return self.applied_offset + 1

    def apply(self, message: Message, offset: int) -> ApplyOutcome:
        """Apply the updates-topic message at ``offset``.

        Messages at or below ``applied_offset`` are skipped (already reflected). A
        :class:`LeaderClaim` is accepted (verdict ``claim``) iff its ``after_epoch`` is the
        current epoch, else ``claim_rejected``.
        """
        if offset <= self.applied_offset:
            return ApplyOutcome("skipped")
        self.applied_offset = int(offset)
        if isinstance(message, LeaderClaim):
            if message.after_epoch != self.leadership.epoch:
                return ApplyOutcome("claim_rejected")
            self.leadership = Leadership(self.leadership.epoch + 1, message.member,
                                         message.token)
            return ApplyOutcome("claim")
        if isinstance(message, Fence):
            self.ledger.fence(message.partition, message.token)
            self.counters["fences"] += 1
            return ApplyOutcome("fence")
        verdict = self.ledger.judge(message.partition, message.token, message.start, message.end)
        if verdict is not UpdateVerdict.APPLY:
            self.counters["updates_dropped"][verdict.value] += 1
            return ApplyOutcome(verdict.value)
        self.ledger.advance(message.partition, message.end)
        self.counters["updates_applied"] += 1
        n = message.n_records
        self.counters["records_applied"] += n
        if n == 0:
            return ApplyOutcome("applied")
        raw = message.rows if message.raw is None else message.raw
        if self.model is None:
            self._init_rows.append(raw)
            self._init_mult.append(np.asarray(message.multiplicities, np.int64))
            buffered_mult = np.concatenate(self._init_mult)
            fresh = self._new_model()
            engine = fresh.model if hasattr(fresh, "sketcher") else fresh  # sketch pipeline
            partitions = min(max(1, len(self.ledger.owners)), self.max_init_partitions)
            if (int(buffered_mult.sum()) < self.init_records * partitions
                    or buffered_mult.shape[0] < int(engine.n_clusters)):
                return ApplyOutcome("buffered", records=n)
            rows = stack_rows(self._init_rows)
            self._init_rows, self._init_mult = [], []
            report, side = self._step(fresh, rows, buffered_mult, None)
            self.model = fresh
            return self._stepped(report, side, n, False)
        epoch = getattr(self.model, "sketch_epoch_", None)
        features = None
        if message.raw is not None and epoch is not None and message.sketch_epoch == epoch:
            features = message.rows
        reprojected = message.raw is not None and features is None
        if reprojected:
            self.counters["updates_reprojected"] += 1
        report, side = self._step(self.model, raw, message.multiplicities, features)
        return self._stepped(report, side, n, reprojected)

    def _stepped(self, report: Any, side: list[dict[str, Any]], n: int, reprojected: bool
                 ) -> ApplyOutcome:
        """Keep the step's split / merge events (with this version) for the versions."""
        for event in report.events:
            if event["event"] in ("split", "merge"):
                self.cluster_events.append({**event, "version": self.version})
        del self.cluster_events[:-CLUSTER_EVENTS_KEPT]
        return ApplyOutcome("applied", report, n, side, reprojected)

    def skip_corrupt(self, offset: int) -> ApplyOutcome:
        """Count the undecodable message at ``offset`` as dropped and move past it."""
        if offset <= self.applied_offset:
            return ApplyOutcome("skipped")
        self.applied_offset = int(offset)
        self.counters["updates_dropped"]["corrupt"] += 1
        return ApplyOutcome("corrupt")

    def snapshot(self) -> ModelVersion:
        """The current state as a :class:`ModelVersion` (arrays are copies)."""
        arrays = meta = sketch_arrays = sketch_meta = None
        if self.model is not None:
            parts = self.model.state_parts() if hasattr(self.model, "state_parts") else {
                "model": self.model.get_state()}
            state_arrays, meta = parts["model"]
            arrays = {k: np.array(v, copy=True) for k, v in state_arrays.items()}
            if "sketch" in parts:
                s_arrays, sketch_meta = parts["sketch"]
                sketch_arrays = {k: np.array(v, copy=True) for k, v in s_arrays.items()}
        init_rows = init_mult = None
        if self._init_rows:
            init_rows = stack_rows(self._init_rows)
            init_mult = np.concatenate(self._init_mult)
        return ModelVersion(applied_offset=self.applied_offset,
                            ledger=PartitionLedger.from_dict(self.ledger.to_dict()),
                            model_arrays=arrays, model_meta=meta, init_rows=init_rows,
                            init_multiplicities=init_mult,
                            counters={**self.counters,
                                      "updates_dropped": dict(self.counters["updates_dropped"])},
                            leader=self.member, created_unix=time.time(),
                            leadership=self.leadership, sketch_arrays=sketch_arrays,
                            sketch_meta=sketch_meta,
                            cluster_events=[dict(e) for e in self.cluster_events])
