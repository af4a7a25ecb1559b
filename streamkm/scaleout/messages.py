"""Messages of the updates topic: model updates (worker -> leader), partition fences and
leader claims.

Both are encoded as the bytes of one ``.npz`` with JSON metadata and per-array SHA-256
(:func:`streamkm._core.state_io.encode_npz_bytes`; no pickle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkm._core.raw_rows import raw_from_arrays, raw_to_arrays
from streamkm._core.sparse import is_sparse
from streamkm._core.state_io import decode_npz_bytes, encode_npz_bytes
from streamkm.exceptions import StateError

__all__ = ["ModelUpdate", "Fence", "LeaderClaim", "encode_message", "decode_message", "MESSAGE_FORMAT"]

MESSAGE_FORMAT = "streamkm.scaleout.message"
MESSAGE_VERSION = 1


@dataclass(frozen=True)
class ModelUpdate:
    """A worker's mini-batch update for one input partition's offset range [start, end).

    Attributes
    ----------
    partition : str
        Input partition key ``"<topic>:<partition>"``.
    start, end : int
        The offset range the update covers (valid and rejected records alike).
    token : str
        The fence token of the worker's ownership of the partition (its generation).
    worker : str
        Member id of the sender.
    model_version : int
        Version of the global model the rows were assigned with (-1: no model yet).
    sketch_epoch : int
        Sketch epoch of that model (0 without sketching); the epoch ``rows`` are projected
        with when ``raw`` is given. One update never mixes epochs: it is built from one batch,
        assigned and projected with one model version.
    rows : ndarray of shape (m, d) or CSR matrix
        A per-cluster subsample of the valid rows (at most ``tau`` per cluster): the records
        themselves (dense, or CSR for sparse records), or, when ``raw`` is given, their sketch.
    multiplicities : ndarray of shape (m,), int64
        Records each row stands for; they sum to the valid records of the range.
    raw : ndarray or CSR matrix of shape (m, D), optional
        With sketching: the raw records of ``rows`` (the engine keeps its support rows' raw
        versions, the leader's re-sketch reservoir samples them, and the leader re-projects
        them when ``sketch_epoch`` is no longer current).
    objective_sum : float
        Sum over the range's valid records of the squared distance to the assigned center
        under ``model_version`` (0 without a model).
    """

    partition: str
    start: int
    end: int
    token: str
    worker: str
    model_version: int
    rows: np.ndarray
    multiplicities: np.ndarray
    sketch_epoch: int = 0
    objective_sum: float = 0.0
    raw: Any = None

    @property
    def n_records(self) -> int:
        """Valid records the update stands for."""
        return int(self.multiplicities.sum())


@dataclass(frozen=True)
class Fence:
    """A worker took ``partition`` over: updates with another token are stale from here."""

    partition: str
    token: str
    worker: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaderClaim:
    """A member elected by the leader group claims the leader role.

    Accepted (in the updates topic's order) iff ``after_epoch`` is the current leader epoch:
    a compare-and-set on the topic, so of two members claiming from the same state only the
    first wins, and a leader that applies another member's accepted claim is fenced (see
    :meth:`streamkm.scaleout.leader.MergeLeader.apply`).

    Attributes
    ----------
    member : str
        Member id of the claimant.
    token : str
        Unique per claim (the claimant recognises its own claim by it).
    after_epoch : int
        The leader epoch the claimant last applied.
    """

    member: str
    token: str
    after_epoch: int


Message = ModelUpdate | Fence | LeaderClaim


def encode_message(message: Message) -> bytes:
    """The message as bytes (npz + JSON metadata)."""
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any]
    if isinstance(message, Fence):
        meta = {"kind": "fence", "partition": message.partition, "token": message.token,
                "worker": message.worker}
    elif isinstance(message, LeaderClaim):
        meta = {"kind": "claim", "member": message.member, "token": message.token,
                "after_epoch": int(message.after_epoch)}
    else:
        mult = np.asarray(message.multiplicities, dtype=np.int64)
        rows = message.rows if is_sparse(message.rows) else np.ascontiguousarray(message.rows)
        raw = message.raw
        if rows.ndim != 2 or rows.shape[0] != mult.shape[0] or (
                raw is not None and raw.shape[0] != mult.shape[0]):
            raise StateError(f"update rows {rows.shape!r} (raw "
                             f"{None if raw is None else raw.shape!r}) do not match "
                             f"multiplicities {mult.shape!r}")
        meta = {"kind": "update", "partition": message.partition, "start": int(message.start),
                "end": int(message.end), "token": message.token, "worker": message.worker,
                "model_version": int(message.model_version),
                "sketch_epoch": int(message.sketch_epoch),
                "objective_sum": float(message.objective_sum)}
        arrays = {**raw_to_arrays(rows, "rows"), "multiplicities": mult}
        if raw is not None:
            arrays.update(raw_to_arrays(raw, "raw"))
    meta.update(format=MESSAGE_FORMAT, format_version=MESSAGE_VERSION)
    return encode_npz_bytes(arrays, meta)


def decode_message(data: bytes) -> Message:
    """Parse bytes made by :func:`encode_message`.

    Raises
    ------
    StateError
        Not a message of this format, corrupt, or inconsistent.
    """
    arrays, meta = decode_npz_bytes(data, where="scale-out message")
    if meta.get("format") != MESSAGE_FORMAT or meta.get("format_version") != MESSAGE_VERSION:
        raise StateError(f"not a {MESSAGE_FORMAT} v{MESSAGE_VERSION} message: "
                         f"format={meta.get('format')!r} version={meta.get('format_version')!r}")
    try:
        if meta["kind"] == "fence":
            return Fence(partition=str(meta["partition"]), token=str(meta["token"]),
                         worker=str(meta["worker"]))
        if meta["kind"] == "claim":
            return LeaderClaim(member=str(meta["member"]), token=str(meta["token"]),
                               after_epoch=int(meta["after_epoch"]))
        if meta["kind"] != "update":
            raise StateError(f"unknown scale-out message kind {meta['kind']!r}")
        update = ModelUpdate(
            partition=str(meta["partition"]), start=int(meta["start"]), end=int(meta["end"]),
            token=str(meta["token"]), worker=str(meta["worker"]),
            model_version=int(meta["model_version"]), rows=raw_from_arrays(arrays, "rows"),
            multiplicities=arrays["multiplicities"].astype(np.int64),
            sketch_epoch=int(meta["sketch_epoch"]), objective_sum=float(meta["objective_sum"]),
            raw=raw_from_arrays(arrays, "raw"))
    except (KeyError, ValueError) as exc:
        raise StateError(f"scale-out message lacks or mangles {exc.args[0]!r}") from None
    if update.rows is None:
        raise StateError(f"scale-out update for {update.partition!r} has no rows")
    if update.raw is not None and update.raw.shape[0] != update.rows.shape[0]:
        raise StateError(f"inconsistent update for {update.partition!r}: "
                         f"{update.rows.shape[0]} rows, {update.raw.shape[0]} raw rows")
    if update.end < update.start or update.rows.shape[0] != update.multiplicities.shape[0] or (
            update.multiplicities.size and update.multiplicities.min() < 1):
        raise StateError(f"inconsistent update for {update.partition!r}: range "
                         f"[{update.start}, {update.end}), {update.rows.shape[0]} rows, "
                         f"{update.multiplicities.shape[0]} multiplicities")
    return update
