"""Blocks of records: one buffer and the records' offsets, instead of an object per record.

A source partition that can (the file tailer) hands the batcher :class:`RecordBlock` s: the
bytes it read and where each complete record starts and ends in them. No
:class:`~streamkm.io.sources.RawRecord` and no position dict exists for a record of a block
unless something asks for it (a rejected record for the dead-letter sink, a sink that wants
raw records): :meth:`RecordBlock.record` builds it then, equal to the one the per-record path
hands out. The partition's snapshot after a block is the position just after its last record,
as after the same records one by one.

:class:`RecordRows` is the accepted records of a batch as a sequence built from blocks and
lists of records: it materialises a record only when indexed or iterated.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from streamkm.io.rejection import safe_text
from streamkm.io.sources import RawRecord

__all__ = ["RecordBlock", "RecordRows", "any_replayed", "all_replayed", "count_records"]


@dataclass(frozen=True, slots=True)
class RecordBlock:
    """Complete records of one file: ``data[starts[i]:ends[i]]`` is record ``i``.

    Attributes
    ----------
    data : bytes
        The bytes read; ``data[0]`` is at file offset ``base``.
    starts, ends : ndarray of int64
        Start and end (exclusive, newline excluded) of every record in ``data``.
    base : int
        File offset of ``data[0]``.
    file : str
        Path of the file (the ``"file"`` of the records' positions).
    partition : str
        Partition key (the ``"partition"`` of the records' positions).
    record_size : int or None
        Bytes per record of fixed-size framing (records back to back), None for lines.
    """

    data: bytes
    starts: np.ndarray
    ends: np.ndarray
    base: int
    file: str
    partition: str
    record_size: int | None = None

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def offset(self, i: int) -> int:
        """File offset of record ``i``."""
        return self.base + int(self.starts[i])

    def position(self, i: int) -> dict[str, Any]:
        """Record ``i``'s position, as the per-record path gives it."""
        return {"partition": self.partition, "file": self.file, "offset": self.offset(i)}

    def record(self, i: int) -> RawRecord:
        """Record ``i`` as a :class:`RawRecord`."""
        return RawRecord(self.data[int(self.starts[i]):int(self.ends[i])], None,
                         self.position(i))

    def records(self, rows: Sequence[int] | np.ndarray | None = None) -> list[RawRecord]:
        """Records ``rows`` (all if None) as :class:`RawRecord` s."""
        indices = range(len(self)) if rows is None else rows
        return [self.record(int(i)) for i in indices]

    def position_ids(self, rows: np.ndarray | None = None) -> list[str]:
        """The ``"file:offset"`` ids of records ``rows`` (all if None), as
        :func:`~streamkm.io.rejection.position_id` derives them."""
        starts = self.starts if rows is None else self.starts[rows]
        prefix = safe_text(f"{self.file}:")
        base = self.base
        return [f"{prefix}{base + s}" for s in starts.tolist()]


#: One piece of a :class:`RecordRows`: a block and which of its records, or plain records.
Segment = tuple[RecordBlock, np.ndarray] | list[RawRecord]


class RecordRows(Sequence[RawRecord]):
    """The accepted records of a batch, in order, materialised on demand.

    Parameters
    ----------
    segments : list
        ``(block, rows)`` pairs (records ``rows`` of ``block``, an int array) and lists of
        :class:`RawRecord`, in read order.
    """

    __slots__ = ("_segments", "_bounds")

    def __init__(self, segments: list[Segment]) -> None:
        self._segments = [s for s in segments if len(s[1] if isinstance(s, tuple) else s)]
        sizes = [len(s[1]) if isinstance(s, tuple) else len(s) for s in self._segments]
        self._bounds = np.cumsum([0, *sizes], dtype=np.int64)

    def __len__(self) -> int:
        return int(self._bounds[-1])

    @overload
    def __getitem__(self, index: int) -> RawRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[RawRecord]: ...

    def __getitem__(self, index: int | slice) -> RawRecord | list[RawRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        i = int(index) + n if index < 0 else int(index)
        if not 0 <= i < n:
            raise IndexError(f"record index {index} out of range for {n} records")
        k = int(np.searchsorted(self._bounds, i, side="right")) - 1
        segment, j = self._segments[k], i - int(self._bounds[k])
        if isinstance(segment, tuple):
            return segment[0].record(int(segment[1][j]))
        return segment[j]

    def __iter__(self) -> Iterator[RawRecord]:
        for segment in self._segments:
            if isinstance(segment, tuple):
                block, rows = segment
                yield from block.records(rows)
            else:
                yield from segment

    def any_replayed(self) -> bool:
        """Whether some record is replayed (records of a block never are)."""
        return any(r.replayed for s in self._segments if not isinstance(s, tuple) for r in s)

    def all_replayed(self) -> bool:
        """Whether every record is replayed (False if empty or holding block records)."""
        if not self._segments or any(isinstance(s, tuple) for s in self._segments):
            return False
        return all(r.replayed for s in self._segments for r in s)


def any_replayed(records: Sequence[Any]) -> bool:
    """Whether some of ``records`` (a list or a :class:`RecordRows`) is replayed."""
    if isinstance(records, RecordRows):
        return records.any_replayed()
    return any(record.replayed for record in records)


def all_replayed(records: Sequence[Any]) -> bool:
    """Whether ``records`` is non-empty and every one is replayed."""
    if isinstance(records, RecordRows):
        return records.all_replayed()
    return bool(records) and all(record.replayed for record in records)


def count_records(items: Sequence[RecordBlock | RawRecord]) -> int:
    """Records in a list of blocks and single records."""
    return sum(len(item) if isinstance(item, RecordBlock) else 1 for item in items)
