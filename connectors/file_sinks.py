"""JSON-lines file sinks: assignments, lifecycle events, dead letters.

Each sink appends one JSON object per line to a file and counts the bytes it wrote. Its
position is that byte count; :meth:`JsonLinesFileSink.restore` truncates the file back to a
checkpointed length, which makes file sinks exactly-once together with the service's
checkpoints.
"""

from __future__ import annotations

import base64
import errno
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamkm.logs import log_event
from streamkm.state_io import fsync_dir

from ._json_out import assignments, encode, encode_lines

__all__ = ["JsonLinesFileSink", "AssignmentFileSink", "EventFileSink", "DeadLetterFileSink"]

_log = logging.getLogger("streamkm.sinks")


class JsonLinesFileSink:
    """Append-only JSON-lines file with a byte-count position.

    Entries are buffered in memory and appended by :meth:`flush` (also whenever the buffer
    passes ``buffer_bytes``). A write the file system refuses (full, read-only, I/O error)
    raises the ``OSError`` and leaves the file as it was before that flush: bytes a partial
    write put on disk are truncated away, the buffered entries are kept, so the file only
    ever holds whole lines and a later :meth:`flush` writes them. :meth:`rollback` drops
    everything after an earlier position (the runtime retries a batch's output whole).

    Parameters
    ----------
    path : path
        The file; created (with its folder) if missing. Existing content is kept.
    buffer_bytes : int
        Buffered bytes that trigger a flush.
    """

    def __init__(self, path: str | os.PathLike[str], *, buffer_bytes: int = 1 << 20) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                       | os.O_CLOEXEC, 0o644)
        if created:
            fsync_dir(self.path.parent)
        self._buffer_bytes = buffer_bytes
        self._pending = bytearray()  # entries not yet in the file
        self._disk = os.fstat(self._fd).st_size  # file length: whole lines only
        self._torn = False  # the file holds a partial write beyond _disk

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise OSError(errno.EBADF, f"sink {str(self.path)!r} is closed")
        return self._fd

    def position(self) -> dict[str, Any]:
        """``{"path", "bytes"}``: the file length including buffered entries."""
        return {"path": str(self.path), "bytes": self._disk + len(self._pending)}

    def flush(self) -> None:
        """Append the buffered entries to the file (visible to readers, not yet durable).

        Raises
        ------
        OSError
            The file system refused the write; the file is back at its length before this
            call (whole lines only) and the entries stay buffered.
        """
        fd = self.fd
        if self._torn:  # a failed flush could not truncate its partial write
            os.ftruncate(fd, self._disk)
            self._torn = False
        if not self._pending:
            return
        written = 0
        try:
            with memoryview(self._pending) as view:
                while written < len(view):
                    written += os.write(fd, view[written:])
        except OSError as exc:
            if written:
                try:
                    os.ftruncate(fd, self._disk)
                except OSError:
                    self._torn = True
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        self._disk += written
        self._pending.clear()

    def sync(self) -> dict[str, Any]:
        """Flush and fsync; return the position."""
        self.flush()
        os.fsync(self.fd)
        return self.position()

    def rollback(self, position: dict[str, Any]) -> None:
        """Drop every entry after ``position`` (an earlier :meth:`position` of this run):
        from the buffer, and from the file if already flushed."""
        target = int(position["bytes"])
        if target >= self._disk:
            del self._pending[target - self._disk:]
            return
        self._pending.clear()
        os.ftruncate(self.fd, target)
        self._disk = target
        self._torn = False

    def restore(self, position: dict[str, Any] | None) -> None:
        """Truncate the file back to ``position["bytes"]`` (``None``: keep everything)."""
        if position is None:
            return
        target = int(position["bytes"])
        self.flush()
        size = os.fstat(self.fd).st_size
        if size > target:
            os.ftruncate(self.fd, target)
            os.fsync(self.fd)
            log_event(_log, "info", "sink_truncated", path=str(self.path),
                      from_bytes=size, to_bytes=target)
        elif size < target:
            log_event(_log, "warning", "sink_shorter_than_checkpoint", path=str(self.path),
                      bytes=size, checkpoint_bytes=target)
        self._disk = os.fstat(self.fd).st_size

    def close(self) -> None:
        """Flush and close the file; entries that cannot be flushed are dropped (logged):
        they lie after the last checkpoint, which a restart resumes from."""
        if self._fd is None:
            return
        try:
            self.flush()
        except OSError as exc:
            log_event(_log, "warning", "sink_unflushed_at_close", path=str(self.path),
                      dropped_bytes=len(self._pending), error=str(exc))
        finally:
            os.close(self._fd)
            self._fd = None
            self._pending.clear()

    def _write(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= self._buffer_bytes:
            self.flush()

    def write_entry(self, entry: dict[str, Any]) -> None:
        """Append one JSON object as a line (non-finite floats as ``null``)."""
        self._write(encode(entry) + b"\n")


class AssignmentFileSink(JsonLinesFileSink):
    """Lines ``{"id", "cluster", "distance", "sq_distance", "step"}``, one per accepted
    record (``distance`` is the kernel distance to the cluster's center, ``sq_distance`` its
    square), as in the Kafka assignments."""

    def write_assignments(self, ids: list[Any], clusters: Any, sq_distances: Any,
                          step: int) -> None:
        """Append the assignments of one batch."""
        self._write(encode_lines(assignments(ids, clusters, sq_distances, step)))


class EventFileSink(JsonLinesFileSink):
    """Lifecycle events, one JSON object per line (a ``"time"`` field is added)."""

    def write_event(self, event: dict[str, Any]) -> None:
        """Append one event."""
        self.write_entry({"time": round(time.time(), 6), **event})


class DeadLetterFileSink(JsonLinesFileSink):
    """The quarantine file: rejected raw records with the reason, detail and position.

    The raw record is stored as text (``"raw"``) if it is valid UTF-8, else as base64
    (``"raw_base64"``); at most ``max_raw_bytes`` of it (``"raw_truncated": true`` then).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_raw_bytes: int = 65536,
                 buffer_bytes: int = 1 << 20) -> None:
        super().__init__(path, buffer_bytes=buffer_bytes)
        self.max_raw_bytes = max_raw_bytes

    def write_dead_letter(self, raw: bytes, reason: str, detail: str,
                          position: dict[str, Any]) -> None:
        """Append one rejected record."""
        kept = raw[: self.max_raw_bytes]
        entry: dict[str, Any] = {"time": round(time.time(), 6), "reason": reason,
                                 "detail": detail, "position": position}
        try:
            entry["raw"] = kept.decode("utf-8")
        except UnicodeDecodeError:
            entry["raw_base64"] = base64.b64encode(kept).decode("ascii")
        entry["raw_bytes"] = len(raw)
        if len(kept) < len(raw):
            entry["raw_truncated"] = True
        self.write_entry(entry)
