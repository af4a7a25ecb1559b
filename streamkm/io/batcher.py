"""The batcher: pulls raw records from the partitions, decodes them, forms mini-batches.

A batch closes when it holds ``batch_size`` valid records or when ``max_wait`` has passed
since it opened, whichever comes first (but never with fewer valid records than
``min_valid``, which is ``n_clusters`` until the model is initialised). Partitions are
visited in a fixed round-robin order (sorted keys, a pointer that is part of the
checkpoint) and each visit asks for an equal share of what the batch still needs among the
partitions left in the round, so that for input already on disk the batch boundaries are
the same on every run, and buffered input fills a batch in one round. A round's records
(one share from every partition) are decoded together: a partition that offers blocks
(the file tailer, see :mod:`streamkm.io.blocks`) hands over a few buffers with record
offsets, each decoded in one call into a float array; the records of other partitions go
to the decoder's ``decode_many`` together. No object is built per accepted record of a
block until a sink asks for it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkm.io.blocks import RecordBlock, RecordRows, Segment, count_records
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
    records : sequence of RawRecord
        The accepted raw records, aligned with ``ids`` (their keys and headers): a
        :class:`~streamkm.io.blocks.RecordRows`, which builds a record of a block only
        when it is asked for.
    """

    X: np.ndarray
    ids: list[Any]
    rejections: list[Any]
    n_read: int
    positions: dict[str, dict[str, Any]]
    next_part: int
    decode_seconds: float = 0.0
    read_seconds: float = 0.0
    records: Sequence[RawRecord] = field(default_factory=list)

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
    blocks : bool
        Read a partition that offers blocks (``reads_blocks``, ``next_blocks``) block by
        block, and decode each block in one call (``decoder.decode_block``); False reads
        every partition record by record.
    """

    def __init__(self, parts: dict[str, SourcePartition], decoder: Any, *, dim: int,
                 batch_size: int, max_wait_s: float, poll_interval_s: float,
                 next_part: int = 0, dtype: Any = np.float64, blocks: bool = True) -> None:
        self.keys = sorted(parts)
        self.parts = parts
        self.decoder = decoder
        self.dim = dim
        self.batch_size = batch_size
        self.max_wait_s = max_wait_s
        self.poll_interval_s = poll_interval_s
        self.next_part = next_part % len(self.keys) if self.keys else 0
        self.dtype = dtype
        self.blocks = blocks and hasattr(decoder, "decode_block")
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

    def _read_any(self, part: SourcePartition, quantum: int) -> list[RecordBlock | RawRecord]:
        """Up to ``quantum`` records of ``part``: as blocks if it offers them (and the
        batcher uses them), else one by one."""
        if not (self.blocks and getattr(part, "reads_blocks", False)):
            return list(self._read(part, quantum))
        next_blocks = part.next_blocks  # type: ignore[attr-defined]
        items = next_blocks(quantum)
        got = count_records(items)
        while items and got < quantum:
            more = next_blocks(quantum - got)
            if not more:
                break
            items.extend(more)
            got += count_records(more)
        return items

    def _decode(self, items: list[RecordBlock | RawRecord]
                ) -> list[tuple[Any, list[Any], Segment, list[Any]]]:
        """Decode a round's items in order: runs of single records with ``decode_many``,
        blocks with ``decode_block``; ``(X, ids, accepted segment, rejections)`` each."""
        out: list[tuple[Any, list[Any], Segment, list[Any]]] = []
        singles: list[RawRecord] = []
        for item in [*items, None]:
            if isinstance(item, RawRecord):
                singles.append(item)
                continue
            if singles:
                X, rec_ids, accepted, rejected = self.decoder.decode_many(singles)
                rec_ids = [i if i is not None else record_id_from_position(r.position)
                           for i, r in zip(rec_ids, accepted)]
                out.append((X, rec_ids, list(accepted), rejected))
                singles = []
            if item is not None:
                X, rec_ids, rows, rejected = self.decoder.decode_block(item)
                out.append((X, rec_ids, (item, rows), rejected))
        return out

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
        segments: list[Segment] = []
        rejections: list[Any] = []
        n_valid = n_read = 0
        read_seconds = decode_seconds = 0.0
        n_parts = len(self.keys)
        while True:
            # One round: a share from every partition, then its records decoded in order
            # (the per-record ones in one call, each block in one call).
            items: list[RecordBlock | RawRecord] = []
            n_round = 0
            t0 = time.perf_counter()
            for visited in range(n_parts):
                need = full - n_valid - n_round
                if need <= 0:
                    break
                key = self.keys[self.next_part]
                self.next_part = (self.next_part + 1) % n_parts
                # an equal share of what is still needed among the partitions left in this
                # round: a partition with less leaves the rest to the others, so buffered
                # input fills a batch in one round (one decode)
                got = self._read_any(self.parts[key], math.ceil(need / (n_parts - visited)))
                items.extend(got)
                n_round += count_records(got)
            t1 = time.perf_counter()
            read_seconds += t1 - t0
            progressed = bool(items)
            if items:
                n_read += n_round
                for X, rec_ids, accepted, rejected in self._decode(items):
                    if rec_ids:
                        chunks.append(X)
                        ids.extend(rec_ids)
                        n_valid += len(rec_ids)
                        segments.append(accepted)
                    rejections.extend(rejected)
                decode_seconds += time.perf_counter() - t1
                self.filling = (n_valid, full)
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
                     records=RecordRows(segments))
