"""JSON-lines file sinks: assignments, lifecycle events, dead letters; and the model file.

Each sink appends one JSON object per line to a file and counts the bytes it wrote. Its
position is that byte count; :meth:`JsonLinesFileSink.restore` truncates the file back to a
checkpointed length, which makes file sinks exactly-once together with the service's
checkpoints.

A file deleted while the sink writes it (``rm -rf`` of its folder) keeps receiving the
entries through the open descriptor; :meth:`JsonLinesFileSink.sync` (every checkpoint) then
creates the folder and the file again with everything written so far, and logs
``output_recreated``: nothing written is lost and the checkpoint records the new file.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import logging
import os
import time
from pathlib import Path
from typing import Any

from streamkm._core.state_io import fsync_dir, write_bytes_atomic
from streamkm.logs import log_event
from streamkm.sinks import AssignmentNovelty

from ._json_out import assignments, encode, encode_lines

__all__ = ["JsonLinesFileSink", "AssignmentFileSink", "EventFileSink", "DeadLetterFileSink",
           "ModelFileSink"]

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
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT
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
        """Flush and fsync (recreating the file first if it was deleted); return the
        position."""
        self.flush()
        self._recreate_if_deleted()
        os.fsync(self.fd)
        return self.position()

    def _recreate_if_deleted(self) -> None:
        """If nothing is at :attr:`path` any more, write the open (deleted) file's content
        to a new file there (temp file, fsync, rename) and append to that one from now on.

        Raises
        ------
        OSError
            The folder or the file cannot be created; the sink keeps its deleted file and
            the next call tries again.
        """
        fd = self.fd
        if os.path.lexists(self.path):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.recreate-{os.getpid()}")
        new = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            _copy_prefix(fd, new, self._disk)
            os.fsync(new)
            os.rename(tmp, self.path)
        except BaseException:
            os.close(new)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(new)
        fsync_dir(self.path.parent)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        os.close(fd)
        log_event(_log, "warning", "output_recreated", path=str(self.path), bytes=self._disk)

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


def _copy_prefix(src: int, dst: int, length: int, chunk: int = 1 << 20) -> None:
    """Write the first ``length`` bytes of file ``src`` to file ``dst``."""
    offset = 0
    while offset < length:
        data = os.pread(src, min(chunk, length - offset), offset)
        if not data:
            raise OSError(errno.EIO, f"file shorter than {length} bytes while copying it")
        with memoryview(data) as view:
            done = 0
            while done < len(view):
                done += os.write(dst, view[done:])
        offset += len(data)


class AssignmentFileSink(JsonLinesFileSink):
    """Lines ``{"id", "cluster", "distance", "sq_distance", "step"}``, one per accepted
    record (``distance`` is the kernel distance to the cluster's center, ``sq_distance`` its
    square), then ``"novelty", "outlier", "second_cluster", "margin"`` when the model scored
    the batch, as in the Kafka assignments."""

    def write_assignments(self, ids: list[Any], clusters: Any, sq_distances: Any,
                          step: int, novelty: AssignmentNovelty | None = None) -> None:
        """Append the assignments of one batch (with the novelty fields when given)."""
        self._write(encode_lines(assignments(ids, clusters, sq_distances, step, novelty)))


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


class ModelFileSink:
    """The model file (``[sinks] model``): each publication replaces it atomically, so a
    reader (``MiniBatchKernelKMeans.load``) opens the previous model or the new one, never a
    partial file.

    Parameters
    ----------
    path : path
        The ``.npz`` file; its folder is created if missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.version: int | None = None

    def publish(self, data: bytes, version: int) -> None:
        """Replace the file by ``data`` (durable when this returns)."""
        write_bytes_atomic(self.path, data)
        self.version = version

    def flush(self) -> None:
        """Nothing buffered."""

    def sync(self) -> dict[str, Any]:
        """Every publication is already durable."""
        return {"path": str(self.path), "version": self.version}

    def close(self) -> None:
        """Nothing to release."""
