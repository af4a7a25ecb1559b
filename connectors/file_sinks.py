"""JSON-lines file sinks: assignments, lifecycle events, dead letters.

Each sink appends one JSON object per line to a file and counts the bytes it wrote. Its
position is that byte count; :meth:`JsonLinesFileSink.restore` truncates the file back to a
checkpointed length, which makes file sinks exactly-once together with the service's
checkpoints.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

import numpy as np

from streamkm.logs import log_event
from streamkm.state_io import fsync_dir

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
        """Append one JSON object as a line."""
        self._write(json.dumps(entry, separators=(",", ":"), default=_json_default).encode()
                    + b"\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _json_id(value: Any) -> str:
    if isinstance(value, str):
        return encode_basestring(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    return json.dumps(value, default=_json_default)


class AssignmentFileSink(JsonLinesFileSink):
    """Lines ``{"id", "cluster", "sq_distance", "step"}``, one per accepted record."""

    def write_assignments(self, ids: list[Any], clusters: Any, sq_distances: Any,
                          step: int) -> None:
        """Append the assignments of one batch."""
        tail = f',"step":{int(step)}}}\n'
        lines = [
            f'{{"id":{_json_id(i)},"cluster":{c},"sq_distance":{d!r}{tail}'
            for i, c, d in zip(ids, np.asarray(clusters).tolist(),
                               np.asarray(sq_distances, dtype=np.float64).tolist())
        ]
        self._write("".join(lines).encode())


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
