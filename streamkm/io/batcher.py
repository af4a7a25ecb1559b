"""The batcher: pulls raw records from the partitions, decodes them, forms mini-batches.

A batch closes when it holds ``batch_size`` valid records or when ``max_wait`` has passed
since it opened, whichever comes first (but never with fewer valid records than
``min_valid``, which is ``n_clusters`` until the model is initialised). Partitions are
visited in a fixed round-robin order (sorted keys, a pointer that is part of the
checkpoint) and each visit asks for an equal share of what the batch still needs among the
partitions left in the round, so that for input already on disk the batch boundaries are
the same on every run, and buffered input fills a batch in one round. A round's records
(one share from every partition) are decoded together, in one call.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkm.io.decoding_sparse import stack_batch_rows
from streamkm.io.sources import RawRecord, SourcePartition

__all__ = ["Batch", "Batcher", "record_id_from_position"]


@dataclass
class Batch:
    """One mini-batch of decoded records plus what was rejected while forming it.

    Attributes
    ----------
    X : ndarray or scipy CSR matrix of shape (n_valid, dim)
        The valid records, in read order (CSR for a sparse record format).
    ids : list
        Their ids (the record's id field, or ``<file>:<offset>`` derived from the position).
    rejections : list
        The decoder's ``Rejection`` objects (reason, detail, raw record).
    n_read : int
        Raw records read for this batch (valid + rejected).
    positions : dict
        Snapshot of every partition right after the last record of this batch.
    next_part : int
        Round-robin pointer to store with ``positions``.
    records : list
        The accepted raw records, aligned with ``ids`` (their keys and headers).
    """

    X: np.ndarray
    ids: list[Any]
    rejections: list[Any]
    n_read: int
    positions: dict[str, dict[str, Any]]
    next_part: int
    decode_seconds: float = 0.0
    read_seconds: float = 0.0
    records: list[RawRecord] = field(default_factory=list)

    @property
    def n_valid(self) -> int:
        """Number of valid records."""
        return int(self.X.shape[0])


def record_id_from_position(position: dict[str, Any]) -> str:
    """An id for a record without one: ``<file or partition>:<offset>``."""
    where = position.get("file", position.get("partition"))
    offset = position.get("offset")
    if where is not None and offset is not None:
        return f"{where}:{offset}"
    return json.dumps(position, sort_keys=True, separators=(",", ":"))


class Batcher:
    """Forms mini-batches from a fixed, ordered set of partitions.

    Parameters
    ----------
    parts : dict of str to SourcePartition
        The partitions; visited in sorted key order.
    decoder : RecordDecoder
        Turns raw records into ``(X, ids, accepted, rejections)`` via ``decode_many``.
    dim : int
        Feature count (shape of an empty batch).
    batch_size : int
        Valid records per full batch.
    max_wait_s : float
        Seconds after which a non-empty batch is closed anyway.
    poll_interval_s : float
        Sleep between polls when no partition had anything new.
    next_part : int
        Round-robin pointer restored from a checkpoint.
    dtype : numpy dtype
        dtype of ``X``.
    """

    def __init__(self, parts: dict[str, SourcePartition], decoder: Any, *, dim: int,
                 batch_size: int, max_wait_s: float, poll_interval_s: float,
                 next_part: int = 0, dtype: Any = np.float64) -> None:
        self.keys = sorted(parts)
        self.parts = parts
        self.decoder = decoder
        self.dim = dim
        self.batch_size = batch_size
        self.max_wait_s = max_wait_s
        self.poll_interval_s = poll_interval_s
        self.next_part = next_part % len(self.keys) if self.keys else 0
        self.dtype = dtype
        self.generation = 0
        #: ``(valid rows so far, rows it closes at)`` of the batch being collected, readable
        #: from any thread (a status line); ``(0, 0)`` between two batches.
        self.filling: tuple[int, int] = (0, 0)

    def set_parts(self, parts: dict[str, SourcePartition]) -> None:
        """Replace the partitions (a dynamic source's assignment changed).

        A batch being collected is dropped: :meth:`collect` returns ``None`` for it. The
        caller rebuilds the partitions that stay from their last processed snapshots.
        """
        self.keys = sorted(parts)
        self.parts = parts
        self.next_part = 0
        self.generation += 1

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Snapshots of all partitions."""
        return {key: self.parts[key].snapshot() for key in self.keys}

    @staticmethod
    def _read(part: SourcePartition, quantum: int) -> list[RawRecord]:
        # Keep asking until the quantum is met or the partition has nothing more, so the
        # split of a batch between partitions does not depend on read-chunk boundaries.
        records = part.next_batch(quantum)
        while records and len(records) < quantum:
            more = part.next_batch(quantum - len(records))
            if not more:
                break
            records.extend(more)
        return records

    def collect(self, *, min_valid: int, wait: Callable[[float], bool],
                max_wait_s: float | None = None, size: int | None = None) -> Batch | None:
        """Read until a batch is complete.

        Parameters
        ----------
        min_valid : int
            Fewest valid records a batch may close with (``n_clusters`` before the model
            is initialised, else 1). A batch with rejected records only closes at the
            deadline so that its dead letters and positions are committed.
        wait : callable
            ``wait(seconds)`` sleeps up to ``seconds`` and returns ``True`` if the service
            should stop (e.g. ``threading.Event.wait``).
        max_wait_s : float, optional
            This batch's deadline instead of :attr:`max_wait_s` (the model's first batch
            waits longer to fill).
        size : int, optional
            Valid records this batch closes at instead of :attr:`batch_size` (the model's
            first batch is larger).

        Returns
        -------
        Batch or None
            ``None`` when the deadline passed with nothing read at all. When a stop is
            requested the batch is returned as it is (possibly short; the caller decides
            whether it can be processed).
        """
        deadline = time.monotonic() + (self.max_wait_s if max_wait_s is None else max_wait_s)
        full = self.batch_size if size is None else size
        generation = self.generation
        chunks: list[np.ndarray] = []
        ids: list[Any] = []
        accepted_records: list[RawRecord] = []
        rejections: list[Any] = []
        n_valid = n_read = 0
        read_seconds = decode_seconds = 0.0
        n_parts = len(self.keys)
        while True:
            # One round: a share from every partition, then one decode of all of it.
            records: list[RawRecord] = []
            t0 = time.perf_counter()
            for visited in range(n_parts):
                need = full - n_valid - len(records)
                if need <= 0:
                    break
                key = self.keys[self.next_part]
                self.next_part = (self.next_part + 1) % n_parts
                # an equal share of what is still needed among the partitions left in this
                # round: a partition with less leaves the rest to the others, so buffered
                # input fills a batch in one round (one decode)
                records.extend(self._read(self.parts[key],
                                          math.ceil(need / (n_parts - visited))))
            t1 = time.perf_counter()
            read_seconds += t1 - t0
            progressed = bool(records)
            if records:
                n_read += len(records)
                X, rec_ids, accepted, rejected = self.decoder.decode_many(records)
                decode_seconds += time.perf_counter() - t1
                if len(accepted):
                    chunks.append(X)
                    ids.extend(i if i is not None else record_id_from_position(r.position)
                               for i, r in zip(rec_ids, accepted))
                    n_valid += len(accepted)
                    accepted_records.extend(accepted)
                    self.filling = (n_valid, full)
                rejections.extend(rejected)
            if n_valid >= full:
                break
            if time.monotonic() >= deadline:
                if n_valid >= max(min_valid, 1) or (n_valid == 0 and rejections):
                    break
                if n_read == 0:
                    self.filling = (0, 0)
                    return None
            if not progressed:
                stop = wait(self.poll_interval_s)
                if self.generation != generation:
                    self.filling = (0, 0)
                    return None  # the partitions changed while waiting: drop this batch
                if stop:
                    break
        self.filling = (0, 0)
        X = stack_batch_rows(chunks, self.dim, self.dtype)
        return Batch(X=X, ids=ids, rejections=rejections, n_read=n_read,
                     positions=self.snapshot(), next_part=self.next_part,
                     decode_seconds=decode_seconds, read_seconds=read_seconds,
                     records=accepted_records)
