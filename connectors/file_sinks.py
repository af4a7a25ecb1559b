"""JSON-lines file sinks: assignments, lifecycle events, dead letters.

Each sink appends one JSON object per line to a file and counts the bytes it wrote. Its
position is that byte count; :meth:`JsonLinesFileSink.restore` truncates the file back to a
checkpointed length, which makes file sinks exactly-once together with the service's
checkpoints.
"""

from __future__ import annotations

import base64
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

    Parameters
    ----------
    path : path
        The file; created (with its folder) if missing. Existing content is kept.
    buffer_bytes : int
        Size of the write buffer; :meth:`flush` empties it.
    """

    def __init__(self, path: str | os.PathLike[str], *, buffer_bytes: int = 1 << 20) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fh = open(self.path, "ab", buffering=buffer_bytes)  # noqa: SIM115
        if created:
            fsync_dir(self.path.parent)
        self._bytes = self._fh.seek(0, os.SEEK_END)

    def position(self) -> dict[str, Any]:
        """``{"path", "bytes"}``: the file length including buffered entries."""
        return {"path": str(self.path), "bytes": self._bytes}

    def flush(self) -> None:
        """Hand buffered lines to the operating system."""
        self._fh.flush()

    def sync(self) -> dict[str, Any]:
        """Flush and fsync; return the position."""
        self._fh.flush()
        os.fsync(self._fh.fileno())
        return self.position()

    def restore(self, position: dict[str, Any] | None) -> None:
        """Truncate the file back to ``position["bytes"]`` (``None``: keep everything)."""
        if position is None:
            return
        target = int(position["bytes"])
        self._fh.flush()
        size = os.fstat(self._fh.fileno()).st_size
        if size > target:
            os.ftruncate(self._fh.fileno(), target)
            os.fsync(self._fh.fileno())
            log_event(_log, "info", "sink_truncated", path=str(self.path),
                      from_bytes=size, to_bytes=target)
        elif size < target:
            log_event(_log, "warning", "sink_shorter_than_checkpoint", path=str(self.path),
                      bytes=size, checkpoint_bytes=target)
        self._bytes = self._fh.seek(0, os.SEEK_END)

    def close(self) -> None:
        """Flush and close the file."""
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()

    def _write(self, data: bytes) -> None:
        self._fh.write(data)
        self._bytes += len(data)

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
