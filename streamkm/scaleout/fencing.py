"""A worker's side of partition fencing: which input partitions it owns, under which fence
token, the updates it sends for them, and what became of its asynchronous sends.

A partition assigned to the worker is fenced (a fence with a fresh token on the updates
topic) and owned once a model version shows that token as the partition's owner; the worker
then reads it from the version's watermark. A send whose outcome is unknown is never re-sent
as is: the partition is re-fenced with a fresh token (see ``docs/scaleout.md``).
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamkm._core.sparse import is_sparse
from streamkm.io.batcher import Batch
from streamkm.logs import log_event
from streamkm.scaleout.backoff import Backoff
from streamkm.scaleout.compress import subsample_per_cluster
from streamkm.scaleout.ledger import PartitionLedger
from streamkm.scaleout.messages import Fence, ModelUpdate, encode_message
from streamkm.scaleout.transport import UpdatesSender

__all__ = ["PartitionFences", "PreparedUpdate"]

_log = logging.getLogger("streamkm.scaleout")


@dataclass(frozen=True)
class PreparedUpdate:
    """One encoded update, not sent yet: the partition, its fence token and the message."""

    partition: str
    token: str
    payload: bytes


class PartitionFences:
    """Fence state of one worker's partitions.

    Attributes
    ----------
    active : dict
        Owned partition -> next offset to send an update from.
    tokens : dict
        Owned partition -> its confirmed fence token.
    pending : dict
        Partition -> fence token sent, not confirmed by a model version yet.
    to_fence : list
        Partitions waiting for a fence to be sent.
    results : deque
        Outcomes of asynchronous sends, appended by the transport's IO thread:
        ``(kind, partition, token, offset or exception)``.
    backoff : Backoff
        Delay after a failed fence.
    """

    def __init__(self, member: str, backoff: Backoff) -> None:
        self.member = member
        self.backoff = backoff
        self.active: dict[str, int] = {}
        self.tokens: dict[str, str] = {}
        self.pending: dict[str, str] = {}
        self.to_fence: list[str] = []
        self.results: deque[tuple[str, str, str, Any]] = deque()

    def request(self, keys: list[str]) -> None:
        """``keys`` were assigned: fence them."""
        self.to_fence.extend(k for k in keys if k not in self.to_fence)

    def known(self) -> set[str]:
        """Partitions owned, being fenced or waiting for a fence."""
        return set(self.active) | set(self.pending) | set(self.to_fence)

    def drop(self, key: str) -> None:
        """Forget ``key`` (revoked, or a generation abandoned)."""
        self.active.pop(key, None)
        self.tokens.pop(key, None)
        self.pending.pop(key, None)
        if key in self.to_fence:
            self.to_fence.remove(key)

    def take_to_fence(self) -> list[str]:
        """The partitions to fence now (empty while backing off after a failure)."""
        if not self.backoff.ready():
            return []
        keys, self.to_fence = sorted(set(self.to_fence)), []
        return keys

    def send(self, keys: list[str], updates: UpdatesSender
             ) -> tuple[int, BaseException | None]:
        """Send a fence with a fresh token for each of ``keys`` (not waiting for the
        acknowledgements; see :meth:`outcomes`); returns how many were queued and the error
        of a send that was not (it and the rest go back to :attr:`to_fence`, backing off)."""
        for i, key in enumerate(keys):
            token = uuid.uuid4().hex
            try:
                future = updates.send(encode_message(Fence(key, token, self.member)))
            except OSError as exc:  # TransportError: not queued (metadata, buffer)
                self.to_fence.extend(keys[i:])
                delay = self.backoff.failed()
                log_event(_log, "warning", "scaleout_fence_send_failed", partitions=keys[i:],
                          error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay, 3))
                return i, exc
            self.pending[key] = token
            results = self.results
            future.add_callback(lambda md, key=key, token=token: results.append(
                ("fence_sent", key, token, int(md.offset))))
            future.add_errback(lambda exc, key=key, token=token: results.append(
                ("fence_failed", key, token, exc)))
        return len(keys), None

    def outcomes(self) -> tuple[list[str], bool]:
        """Act on the sends' outcomes: ``(partitions to re-fence, whether a send failed)``.

        A failed send's outcome is unknown (the broker may have written it before the
        connection broke), so the partition gets a new generation: a late copy is then either
        before the new fence (applied once, or dropped as ``duplicate``) or after it
        (``stale_generation``)."""
        refence: set[str] = set()
        failed = False
        while self.results:
            kind, key, token, detail = self.results.popleft()
            if kind == "fence_sent":
                self.backoff.succeeded()
                log_event(_log, "info", "scaleout_fence_sent", partition=key, offset=detail)
            elif kind == "fence_failed":
                if self.pending.get(key) != token:
                    continue  # superseded, revoked or confirmed meanwhile
                self.pending.pop(key)
                refence.add(key)
                failed = True
                delay = self.backoff.failed()
                log_event(_log, "warning", "scaleout_fence_send_failed", partition=key,
                          error=f"{type(detail).__name__}: {detail}",
                          retry_in_s=round(delay, 3))
            elif kind == "update_failed":
                if self.tokens.get(key) != token:
                    continue  # this generation is already over
                refence.add(key)
                failed = True
                log_event(_log, "warning", "scaleout_update_send_failed_refencing",
                          partition=key, error=f"{type(detail).__name__}: {detail}")
        return sorted(refence), failed

    def prepare_updates(self, batch: Batch, row_parts: list[str], labels: np.ndarray,
                        sq_distances: np.ndarray | None, k: int, cap: int, model_version: int,
                        rng: np.random.Generator, *, features: np.ndarray | None = None,
                        sketch_epoch: int = 0) -> list[PreparedUpdate]:
        """Encode one update per owned partition whose range ``batch`` advanced: its rows
        (``row_parts``: each row's partition) subsampled to ``cap`` per cluster of ``labels``
        (``k`` clusters) with multiplicities. The partition's next range starts after it;
        :meth:`send_prepared` sends them once the batch's outputs are delivered.

        ``features``: the batch's rows projected with sketch ``sketch_epoch`` (the epoch of
        ``model_version``): the update then carries them and the raw rows beside them, all
        of one epoch."""
        n, x = batch.n_valid, batch.X
        parts = np.array(row_parts, dtype=object)
        prepared = []
        for key, snapshot in sorted(batch.positions.items()):
            start, end = self.active.get(key), snapshot.get("offset")
            if start is None or end is None or end <= start:
                continue
            idx = np.flatnonzero(parts == key) if n else np.empty(0, dtype=np.int64)
            rows, mult = subsample_per_cluster(labels[idx], k, cap, rng)
            chosen = idx[rows]
            token = self.tokens[key]
            raw = x[chosen] if is_sparse(x) else np.ascontiguousarray(x[chosen])
            update = ModelUpdate(
                partition=key, start=start, end=int(end), token=token, worker=self.member,
                model_version=model_version,
                rows=raw if features is None else np.ascontiguousarray(features[chosen]),
                raw=None if features is None else raw, sketch_epoch=sketch_epoch,
                multiplicities=mult,
                objective_sum=0.0 if sq_distances is None else float(sq_distances[idx].sum()))
            prepared.append(PreparedUpdate(key, token, encode_message(update)))
            self.active[key] = int(end)
        return prepared

    def send_prepared(self, prepared: list[PreparedUpdate], updates: UpdatesSender) -> int:
        """Send the prepared updates, in order, whose partition generation is still current
        (a revoked or re-fenced partition is re-read from its watermark instead); returns how
        many were queued. A send that is not queued or fails later re-fences the partition
        (:meth:`outcomes`)."""
        sent = 0
        for update in prepared:
            key, token = update.partition, update.token
            if self.tokens.get(key) != token:
                continue
            try:
                future = updates.send(update.payload)
            except OSError as exc:  # TransportError: not queued, re-fence
                self.results.append(("update_failed", key, token, exc))
                continue
            future.add_errback(lambda exc, key=key, token=token: self.results.append(
                ("update_failed", key, token, exc)))
            sent += 1
        return sent

    def confirm(self, ledger: PartitionLedger) -> list[str]:
        """Own the pending partitions whose token ``ledger`` (of a model version) shows as
        owner, from its watermark; returns them."""
        confirmed = [k for k, token in self.pending.items() if ledger.owners.get(k) == token]
        for key in confirmed:
            self.tokens[key] = self.pending.pop(key)
            self.active[key] = ledger.watermark(key)
        return sorted(confirmed)
