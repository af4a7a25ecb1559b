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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkm.exceptions import StateError
from streamkm.scaleout.ledger import DROP_REASONS, PartitionLedger, UpdateVerdict
from streamkm.scaleout.messages import Fence, LeaderClaim, Message
from streamkm.state_io import decode_npz_bytes, encode_npz_bytes

__all__ = ["MergeLeader", "ModelVersion", "ApplyOutcome", "Leadership", "VERSION_FORMAT"]

VERSION_FORMAT = "streamkm.scaleout.ModelVersion"
VERSION_FORMAT_VERSION = 1
_MODEL_PREFIX = "model__"


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


@dataclass
class ModelVersion:
    """One published state of the global model (see the module docstring).

    ``version`` is the number of updates-topic messages it reflects
    (``applied_offset + 1``): two versions with the same number are identical.
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

    @property
    def version(self) -> int:
        return self.applied_offset + 1

    def build_model(self) -> Any:
        """A fresh :class:`~streamkm.MiniBatchKernelKMeans` from the state (None if the model
        is not initialised yet)."""
        if self.model_arrays is None or self.model_meta is None:
            return None
        from streamkm import MiniBatchKernelKMeans

        return MiniBatchKernelKMeans.from_state(self.model_arrays, self.model_meta)

    def to_bytes(self) -> bytes:
        """Encode (npz + JSON; no pickle)."""
        arrays = {_MODEL_PREFIX + k: v for k, v in (self.model_arrays or {}).items()}
        if self.init_rows is not None:
            arrays["init_rows"] = self.init_rows
            arrays["init_multiplicities"] = np.asarray(self.init_multiplicities, np.int64)
        meta = {"format": VERSION_FORMAT, "format_version": VERSION_FORMAT_VERSION,
                "applied_offset": int(self.applied_offset), "version": self.version,
                "ledger": self.ledger.to_dict(), "model_meta": self.model_meta,
                "counters": self.counters, "leader": self.leader,
                "created_unix": self.created_unix, "leadership": self.leadership.to_dict()}
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
        try:
            return cls(applied_offset=int(meta["applied_offset"]),
                       ledger=PartitionLedger.from_dict(meta["ledger"]),
                       model_arrays=model_arrays if meta["model_meta"] is not None else None,
                       model_meta=meta["model_meta"], init_rows=arrays.get("init_rows"),
                       init_multiplicities=arrays.get("init_multiplicities"),
                       counters=dict(meta["counters"]), leader=str(meta["leader"]),
                       created_unix=float(meta["created_unix"]),
                       leadership=Leadership.from_dict(meta.get("leadership")))
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
    """

    def __init__(self, new_model: Callable[[], Any], *, init_records: int,
                 start: ModelVersion | None = None, member: str = "",
                 max_init_partitions: int = 8) -> None:
        self._new_model = new_model
        self.init_records = int(init_records)
        self.max_init_partitions = int(max_init_partitions)
        self.member = member
        self.model: Any = None
        self.ledger = PartitionLedger()
        self.applied_offset = -1
        self.leadership = Leadership()
        self._init_rows: list[np.ndarray] = []
        self._init_mult: list[np.ndarray] = []
        self.counters: dict[str, Any] = {"updates_applied": 0, "fences": 0,
                                         "records_applied": 0,
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
        if self.model is None:
            self._init_rows.append(np.asarray(message.rows))
            self._init_mult.append(np.asarray(message.multiplicities, np.int64))
            buffered_mult = np.concatenate(self._init_mult)
            fresh = self._new_model()
            partitions = min(max(1, len(self.ledger.owners)), self.max_init_partitions)
            if (int(buffered_mult.sum()) < self.init_records * partitions
                    or buffered_mult.shape[0] < int(fresh.n_clusters)):
                return ApplyOutcome("buffered", records=n)
            rows = np.concatenate(self._init_rows)
            self._init_rows, self._init_mult = [], []
            report = fresh.step(rows, sample_weight=buffered_mult)
            self.model = fresh
            return ApplyOutcome("applied", report, n)
        report = self.model.step(message.rows, sample_weight=message.multiplicities)
        return ApplyOutcome("applied", report, n)

    def skip_corrupt(self, offset: int) -> ApplyOutcome:
        """Count the undecodable message at ``offset`` as dropped and move past it."""
        if offset <= self.applied_offset:
            return ApplyOutcome("skipped")
        self.applied_offset = int(offset)
        self.counters["updates_dropped"]["corrupt"] += 1
        return ApplyOutcome("corrupt")

    def snapshot(self) -> ModelVersion:
        """The current state as a :class:`ModelVersion` (arrays are copies)."""
        arrays = meta = None
        if self.model is not None:
            state_arrays, meta = self.model.get_state()
            arrays = {k: np.array(v, copy=True) for k, v in state_arrays.items()}
        init_rows = init_mult = None
        if self._init_rows:
            init_rows = np.concatenate(self._init_rows)
            init_mult = np.concatenate(self._init_mult)
        return ModelVersion(applied_offset=self.applied_offset,
                            ledger=PartitionLedger.from_dict(self.ledger.to_dict()),
                            model_arrays=arrays, model_meta=meta, init_rows=init_rows,
                            init_multiplicities=init_mult,
                            counters={**self.counters,
                                      "updates_dropped": dict(self.counters["updates_dropped"])},
                            leader=self.member, created_unix=time.time(),
                            leadership=self.leadership)
