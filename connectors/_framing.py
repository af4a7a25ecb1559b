"""Cutting one open file into records, with bounded memory.

A :class:`FramedReader` reads an open file descriptor from a start offset in chunks with
``os.pread`` and hands out complete records only: lines without their newline, or
fixed-size binary records. A last line without its newline (or a partial fixed record) is
held back until it is completed. A line longer than ``max_record_bytes`` is never held in
memory whole: once the buffer passes the limit the reader streams past the rest of the line
and emits one record with ``error="oversized"``, its first KiB (at most
``max_record_bytes + 1`` bytes, so it never depends on how the line was read) and its length.

``emitted_offset`` is the byte offset just after the last record handed out: the resume
position. Bytes read ahead of it are only a cache; a new reader from ``emitted_offset``
reads them again.

:meth:`FramedReader.read_blocks` hands out the same records as :meth:`FramedReader.read`,
but as :class:`~streamkm.io.blocks.RecordBlock` s (the buffer and the records' offsets in
it) with only framing errors (``oversized``) as single records: no object per record. When
a block needs more than one read, the next read asks for about as many bytes as the records
still wanted take (estimated from the records read so far), so a block is read in a few
large reads rather than many chunks.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np

from streamkm.io.blocks import RecordBlock
from streamkm.sources import ERROR_PREFIX_BYTES, OVERSIZED, TRUNCATED, RawRecord

#: Largest single read of :meth:`FramedReader.read_blocks` (bytes).
MAX_BLOCK_READ_BYTES = 1 << 20

__all__ = ["FramedReader"]


def _line_ends(buf: bytes, wanted: int) -> list[int]:
    """Indices of the first ``wanted`` newlines of ``buf``."""
    ends: list[int] = []
    find = buf.find
    nl = find(b"\n")
    while nl >= 0:
        ends.append(nl)
        if len(ends) == wanted:
            break
        nl = find(b"\n", nl + 1)
    return ends


class FramedReader:
    """Records from open file ``fd`` starting at ``offset``.

    Parameters
    ----------
    fd : int
        Open file descriptor (owned by the caller).
    path : str
        Path reported in the records' positions.
    partition : str
        Partition key reported in the records' positions.
    offset : int
        Byte offset of the first record to return.
    framing : {"lines", "fixed"}
        Newline-terminated lines, or records of ``record_size`` bytes.
    record_size : int or None
        Bytes per record for fixed framing.
    max_record_bytes : int
        Longest line handed out as data; longer lines become ``oversized`` records.
    chunk_bytes : int
        Bytes per read.
    """

    def __init__(self, fd: int, path: str, partition: str, offset: int, *,
                 framing: Literal["lines", "fixed"], record_size: int | None,
                 max_record_bytes: int, chunk_bytes: int) -> None:
        self.fd = fd
        self.path = path
        self.partition = partition
        self.framing = framing
        self.record_size = record_size
        self.max_record_bytes = max_record_bytes
        self.chunk_bytes = chunk_bytes
        self.emitted_offset = offset  # just after the last record handed out
        self._buf = b""  # bytes from emitted_offset (or the skip point) onwards
        self._read_offset = offset  # file offset of the end of _buf
        # While streaming past an oversized line: its start, its prefix, bytes skipped.
        self._skip_start: int | None = None
        self._skip_prefix = b""
        self._mean_line_bytes = 0.0  # of the last block cut: sizes the next reads
        # An oversized record keeps the same prefix however the line was read (streamed past
        # or found whole): at most a KiB, and never more than the limit plus one byte.
        self._prefix_bytes = min(ERROR_PREFIX_BYTES, max_record_bytes + 1)

    @property
    def read_offset(self) -> int:
        """File offset up to which bytes have been read (>= ``emitted_offset``)."""
        return self._read_offset

    def _position(self, offset: int) -> dict[str, object]:
        return {"partition": self.partition, "file": self.path, "offset": offset}

    def read(self, max_records: int) -> list[RawRecord]:
        """Up to ``max_records`` complete records; fewer means the file end was reached."""
        out: list[RawRecord] = []
        while len(out) < max_records:
            if self.framing == "lines":
                self._cut_lines(out, max_records)
            else:
                self._cut_fixed(out, max_records)
            if len(out) >= max_records:
                break
            data = os.pread(self.fd, self.chunk_bytes, self._read_offset)
            if not data:
                break
            self._read_offset += len(data)
            self._buf = self._buf + data if self._buf else data
        return out

    def read_blocks(self, max_records: int) -> list[RecordBlock | RawRecord]:
        """Up to ``max_records`` complete records as blocks (framing errors as single
        records), in file order; fewer means the file end was reached."""
        out: list[RecordBlock | RawRecord] = []
        n = 0
        if self.framing == "lines" and self._skip_start is None and (
                len(self._buf) < self._mean_line_bytes * max_records):
            self._read_more(max_records)  # one block rather than a short one, then the rest
        while n < max_records:
            cut = self._cut_block(out, max_records - n)
            n += cut
            if n >= max_records or (not cut and not self._read_more(max_records - n)):
                break
        return out

    def _read_more(self, wanted: int) -> bool:
        """Read what ``wanted`` more records probably take; False at the end of the file."""
        data = os.pread(self.fd, self._next_read_size(wanted), self._read_offset)
        if not data:
            return False
        self._read_offset += len(data)
        self._buf = self._buf + data if self._buf else data
        return True

    def _next_read_size(self, wanted: int) -> int:
        """Bytes to ask for: a chunk, or what ``wanted`` more records take (at the mean
        line size of the last block cut, plus an eighth), whichever is larger; at most
        :data:`MAX_BLOCK_READ_BYTES`."""
        if self.framing == "fixed":
            assert self.record_size is not None
            estimate = wanted * self.record_size - len(self._buf)
        else:
            estimate = int(self._mean_line_bytes * 1.125 * wanted) - len(self._buf)
        return max(self.chunk_bytes, min(estimate, MAX_BLOCK_READ_BYTES))

    def _cut_block(self, out: list[RecordBlock | RawRecord], max_records: int) -> int:
        """Cut up to ``max_records`` records from the buffer into ``out``: one block, then
        an oversized line (if one stops it); returns how many records were cut."""
        if self.framing == "fixed":
            return self._cut_fixed_block(out, max_records)
        single: list[RawRecord] = []
        if self._skip_start is not None:  # finishing a line already known to be too long
            self._cut_lines(single, 1)
            out.extend(single)
            if self._skip_start is not None:
                return len(single)
        buf = self._buf
        n_cut = len(single)
        wanted = max_records - n_cut
        if wanted <= 0 or not buf:
            return n_cut
        ends = np.array(_line_ends(buf, wanted), dtype=np.int64)
        if len(ends):
            starts = np.empty_like(ends)
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
            too_long = np.flatnonzero(ends - starts > self.max_record_bytes)
            if len(too_long):  # the block stops before it; it is cut as a single record
                ends, starts = ends[:too_long[0]], starts[:too_long[0]]
        if len(ends):
            base = self.emitted_offset
            out.append(RecordBlock(buf, starts, ends, base, self.path, self.partition))
            consumed = int(ends[-1]) + 1
            self._mean_line_bytes = consumed / len(ends)
            self._buf = buf[consumed:]
            self.emitted_offset = base + consumed
            n_cut += len(ends)
        if n_cut < max_records and self._buf:  # an oversized line, complete or not, is next
            single = []
            self._cut_lines(single, 1)
            out.extend(single)
            n_cut += len(single)
        return n_cut

    def _cut_fixed_block(self, out: list[RecordBlock | RawRecord], max_records: int) -> int:
        size = self.record_size
        assert size is not None
        buf = self._buf
        count = min(len(buf) // size, max_records)
        if not count:
            return 0
        starts = np.arange(0, count * size, size, dtype=np.int64)
        base = self.emitted_offset
        out.append(RecordBlock(buf, starts, starts + size, base, self.path, self.partition,
                               record_size=size))
        self._buf = buf[count * size:]
        self.emitted_offset = base + count * size
        return count

    def _cut_lines(self, out: list[RawRecord], max_records: int) -> None:
        buf = self._buf
        limit = self.max_record_bytes
        if self._skip_start is not None:  # streaming past an oversized line
            nl = buf.find(b"\n")
            if nl < 0:
                self._buf = b""
                return
            start = self._skip_start
            end = self._read_offset - len(buf) + nl  # offset of the newline
            out.append(self._oversized(start, end - start, self._skip_prefix))
            self._skip_start, self._skip_prefix = None, b""
            buf = buf[nl + 1:]
            self.emitted_offset = end + 1
        pos = 0
        base = self.emitted_offset
        position = self._position
        n = len(out)
        while n < max_records:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                break
            if nl - pos > limit:
                out.append(self._oversized(base + pos, nl - pos,
                                           buf[pos:pos + self._prefix_bytes]))
            else:
                out.append(RawRecord(buf[pos:nl], None, position(base + pos)))
            pos = nl + 1
            n += 1
        if pos:
            buf = buf[pos:]
            self.emitted_offset = base + pos
        if n < max_records and len(buf) > limit:  # an unfinished line already too long
            self._skip_start = self.emitted_offset
            self._skip_prefix = buf[:self._prefix_bytes]
            buf = b""
        self._buf = buf

    def _oversized(self, start: int, length: int, prefix: bytes) -> RawRecord:
        position = self._position(start)
        position["length"] = length
        return RawRecord(prefix, None, position, OVERSIZED)

    def _cut_fixed(self, out: list[RawRecord], max_records: int) -> None:
        size = self.record_size
        assert size is not None
        buf = self._buf
        count = min(len(buf) // size, max_records - len(out))
        if not count:
            return
        base = self.emitted_offset
        position = self._position
        out.extend(RawRecord(buf[i:i + size], None, position(base + i))
                   for i in range(0, count * size, size))
        self._buf = buf[count * size:]
        self.emitted_offset = base + count * size

    def flush_incomplete(self, file_size: int) -> RawRecord | None:
        """Give up on an incomplete last record that will never be completed (the file
        was rotated away): return it as a ``truncated`` (or ``oversized``) record and
        move ``emitted_offset`` to ``file_size``."""
        if file_size <= self.emitted_offset:
            return None
        if self._skip_start is not None:
            record = self._oversized(self._skip_start, file_size - self._skip_start,
                                     self._skip_prefix)
        else:
            prefix = os.pread(self.fd, min(ERROR_PREFIX_BYTES, file_size - self.emitted_offset),
                              self.emitted_offset)
            position = self._position(self.emitted_offset)
            position["length"] = file_size - self.emitted_offset
            record = RawRecord(prefix, None, position, TRUNCATED)
        self._skip_start, self._skip_prefix, self._buf = None, b"", b""
        self.emitted_offset = self._read_offset = file_size
        return record
