"""Tailing files that are being appended to, across rotation and truncation.

:class:`FileTailSource` is a :class:`streamkm.sources.Source` with one partition per
configured path or glob pattern (the partition key is the pattern string itself). A
partition reads the files its pattern matches one at a time, each to its end before the
next, in a stable order (modification time, then name), and then keeps following the
newest one:

* **appends** are picked up on the next call; a last line without its newline (or a
  partial fixed-size record) is held back until it is completed;
* **rotation by rename** (logrotate ``create``): the renamed file stays open by its file
  descriptor and is read to its end, then the partition continues with the new file at
  the path. If the renamed file ends with an incomplete line that has not grown for
  ``rotate_grace_s``, that tail is handed out once as a record with ``error="truncated"``;
* **copytruncate**: a file shorter than the read position, or whose first
  ``fingerprint_bytes`` changed, is read again from offset 0. (Bytes written between the
  copy and the truncation are lost: that is inherent to copytruncate. Do not let the
  pattern match the rotated copies, or they are read as new files.)
* files are identified by (device, inode) plus the SHA-256 of their first
  ``fingerprint_bytes`` bytes, so a new file on a reused inode is read from its start;
* a line longer than ``max_record_bytes`` is streamed past (memory stays bounded by about
  ``max_record_bytes`` plus one read: ``read_chunk_bytes``, or up to 1 MiB when a block of
  many records is read) and handed out as one record with ``error="oversized"``, its first
  KiB as value and ``position["length"]``.

An input that exists but cannot be read is reported, not skipped silently:
:attr:`FileTailPartition.unreadable` maps each such path to its errno and error, from the
latest scan: a literal path that is a directory (``EISDIR``) or another non-regular file
(FIFO, socket, device), a broken symlink (``ENOENT``), a file the process may not open
(``EACCES``). Directories and special files a wildcard matches are not inputs and are not
reported. The entry goes once the path can be read. (The service turns it into the
``source_unreadable`` warning and a ``/readyz`` failure.)

The snapshot holds, per known file, its identity, last path and the offset just after the
last record handed out, plus which file is current. Files that no longer exist (neither
matched by the pattern nor at their last path) are forgotten, so the snapshot stays small.
Rebuilding a partition from a snapshot resumes exactly after the last record handed out,
even when the current file was renamed meanwhile (it is looked up by identity in the
folder of its last path).
"""

from __future__ import annotations

import errno
import glob
import logging
import os
import stat
import time
from dataclasses import dataclass
from typing import Any, Literal

from ._file_identity import TrackedFile
from ._framing import FramedReader
from streamkm.exceptions import ParameterError, StateError
from streamkm.io.blocks import RecordBlock, count_records
from streamkm.sources import LAG_BYTES, RawRecord

__all__ = ["FileTailSource", "FileTailPartition"]

logger = logging.getLogger(__name__)

SNAPSHOT_VERSION = 1


@dataclass(slots=True)
class _Match:
    """A file matched by the pattern in the latest scan."""

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.dev, self.ino)


class FileTailSource:
    """Tail files (paths and glob patterns), one partition per pattern.

    Parameters
    ----------
    paths : list of str
        Paths and glob patterns (``glob.glob`` syntax). Each is one partition, keyed by
        the string itself.
    framing : {"lines", "fixed"}
        Newline-terminated records (JSON lines, CSV) or fixed-size binary records.
    record_size : int or None
        Bytes per record; required for ``framing="fixed"``.
    max_record_bytes : int
        Longest line handed out as data (default 1 MiB); longer ones become
        ``error="oversized"`` records.
    fingerprint_bytes : int
        How many leading bytes identify a file's content (default 256).
    start_at : {"beginning", "end"}
        Where a partition without resume state starts in the files that exist when it is
        built: their beginning, or their end (after their last complete record). Files
        appearing later are always read from their beginning.
    poll_interval_s : float
        Minimum time between two scans for new, rotated or truncated files while the
        current file has nothing new (default 20 ms).
    rotate_grace_s : float
        How long a rotated-away file ending with an incomplete line may still grow before
        that tail is given up as a ``truncated`` record (default 1 s).
    read_chunk_bytes : int
        Bytes per read call (default 256 KiB; a block of many records is read in larger
        calls, see :mod:`._framing`).
    blocks : bool
        Partitions offer :meth:`FileTailPartition.next_blocks` to the batcher (default): the
        records of a batch arrive as a few buffers with offsets, not one object each. False
        keeps every record a :class:`~streamkm.sources.RawRecord` (the per-record path).
    """

    def __init__(
        self,
        paths: list[str],
        *,
        framing: Literal["lines", "fixed"] = "lines",
        record_size: int | None = None,
        max_record_bytes: int = 1 << 20,
        fingerprint_bytes: int = 256,
        start_at: Literal["beginning", "end"] = "beginning",
        poll_interval_s: float = 0.02,
        rotate_grace_s: float = 1.0,
        read_chunk_bytes: int = 1 << 18,
        blocks: bool = True,
    ) -> None:
        if isinstance(paths, (str, bytes, os.PathLike)) or not paths:
            raise ParameterError(f"paths must be a non-empty list of paths/patterns, got {paths!r}")
        patterns = [os.fspath(p) for p in paths]
        if len(set(patterns)) != len(patterns):
            raise ParameterError(f"paths must not repeat a pattern, got {patterns!r}")
        if framing not in ("lines", "fixed"):
            raise ParameterError(f"framing must be 'lines' or 'fixed', got {framing!r}")
        if framing == "fixed":
            if not _is_positive_int(record_size):
                raise ParameterError(
                    f"record_size must be a positive int for framing='fixed', got {record_size!r}")
        elif record_size is not None:
            raise ParameterError(
                f"record_size is only used with framing='fixed', got {record_size!r}")
        for name, value in (("max_record_bytes", max_record_bytes),
                            ("read_chunk_bytes", read_chunk_bytes)):
            if not _is_positive_int(value):
                raise ParameterError(f"{name} must be a positive int, got {value!r}")
        if not _is_positive_int(fingerprint_bytes) and fingerprint_bytes != 0:
            raise ParameterError(
                f"fingerprint_bytes must be a non-negative int, got {fingerprint_bytes!r}")
        if start_at not in ("beginning", "end"):
            raise ParameterError(f"start_at must be 'beginning' or 'end', got {start_at!r}")
        for name, value in (("poll_interval_s", poll_interval_s),
                            ("rotate_grace_s", rotate_grace_s)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
                raise ParameterError(f"{name} must be a number >= 0, got {value!r}")
        self.patterns = patterns
        self.framing = framing
        self.record_size = record_size
        self.max_record_bytes = max_record_bytes
        self.fingerprint_bytes = fingerprint_bytes
        self.start_at = start_at
        self.poll_interval_s = float(poll_interval_s)
        self.rotate_grace_s = float(rotate_grace_s)
        self.read_chunk_bytes = read_chunk_bytes
        self.blocks = bool(blocks)

    def list_parts(self) -> list[str]:
        """The configured patterns, in configuration order."""
        return list(self.patterns)

    def build_part(self, part_key: str, resume_state: dict[str, Any] | None) -> FileTailPartition:
        """The partition tailing ``part_key``, resumed from ``resume_state`` if given."""
        if part_key not in self.patterns:
            raise ParameterError(f"unknown partition {part_key!r}; known: {self.patterns!r}")
        return FileTailPartition(self, part_key, resume_state)


def _os_error(exc: OSError) -> dict[str, str | None]:
    """``{"errno", "error"}`` of a refused ``stat`` or ``open``."""
    name = errno.errorcode.get(exc.errno or 0)
    return {"errno": name, "error": exc.strerror or str(exc)}


_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_regular(mode: int) -> dict[str, str | None]:
    """``{"errno", "error"}`` of a path that is not a regular file."""
    if stat.S_ISDIR(mode):
        return {"errno": "EISDIR", "error": os.strerror(errno.EISDIR)}
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "not a regular file")
    return {"errno": None, "error": f"{kind}, not a regular file"}


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class FileTailPartition:
    """One tailed pattern. Build it with :meth:`FileTailSource.build_part`."""

    #: :meth:`lag` counts bytes.
    lag_unit = LAG_BYTES

    def __init__(self, source: FileTailSource, pattern: str,
                 resume_state: dict[str, Any] | None) -> None:
        self._source = source
        self.pattern = pattern
        self._files: dict[tuple[int, int], TrackedFile] = {}
        self._active: TrackedFile | None = None
        self._fd: int | None = None
        self._reader: FramedReader | None = None
        self._last_growth = time.monotonic()  # when the current file last grew
        self._last_scan = float("-inf")
        self._matches: list[_Match] = []
        #: Paths matched in the latest scan that cannot be read: ``{path: {"errno",
        #: "error"}}`` (``errno`` is the symbolic name, ``None`` for a special file).
        self.unreadable: dict[str, dict[str, str | None]] = {}
        self._closed = False
        #: The batcher may call :meth:`next_blocks` instead of :meth:`next_batch`.
        self.reads_blocks = source.blocks
        if resume_state is None:
            # Scan now, so that a snapshot taken before the first read already holds the
            # start positions (the end of existing files with start_at="end").
            self._first_scan_at_end = source.start_at == "end"
            self._scan()
            self._last_scan = float("-inf")
        else:
            self._first_scan_at_end = False
            self._restore(resume_state)

    # ------------------------------------------------------------------ protocol

    def next_batch(self, max_records: int) -> list[RawRecord]:
        """Up to ``max_records`` complete records; ``[]`` if nothing new (never blocks)."""
        if self._closed:
            raise StateError(f"partition {self.pattern!r} is closed")
        if max_records <= 0:
            return []
        out: list[RawRecord] = []
        self._restart_if_replaced()
        while len(out) < max_records:
            if self._reader is not None:
                got = self._reader.read(max_records - len(out))
                if got:
                    self._last_growth = time.monotonic()
                out.extend(got)
            if out:
                break  # hand these out; rotation is looked at when the file is drained
            if not self._advance(out):
                break
        return out

    def next_blocks(self, max_records: int) -> list[RecordBlock | RawRecord]:
        """The records :meth:`next_batch` would return, as blocks of one file each (framing
        errors as single records); ``[]`` if nothing new (never blocks)."""
        if self._closed:
            raise StateError(f"partition {self.pattern!r} is closed")
        if max_records <= 0:
            return []
        out: list[RecordBlock | RawRecord] = []
        self._restart_if_replaced()
        n = 0
        while n < max_records:
            if self._reader is not None:
                got = self._reader.read_blocks(max_records - n)
                if got:
                    self._last_growth = time.monotonic()
                out.extend(got)
                n += count_records(got)
            if out:
                break  # hand these out; rotation is looked at when the file is drained
            if not self._advance(out):
                break
            n = count_records(out)
        return out

    def snapshot(self) -> dict[str, Any]:
        """JSON-able resume state (identity and offset of every known file, current file)."""
        self._sync_active_offset()
        return {
            "version": SNAPSHOT_VERSION,
            "pattern": self.pattern,
            "active": list(self._active.key) if self._active is not None else None,
            "files": [f.to_json() for f in self._files.values()],
        }

    def lag(self) -> float | None:
        """Bytes not yet handed out in the files the partition knows (current file
        included, incomplete last lines included)."""
        total = 0
        if self._active is not None and self._fd is not None:
            self._sync_active_offset()
            total += max(0, os.fstat(self._fd).st_size - self._active.offset)
        for match in self._matches:
            if self._active is not None and match.key == self._active.key:
                continue
            known = self._files.get(match.key)
            total += max(0, match.size - (known.offset if known is not None else 0))
        return float(total)

    def close(self) -> None:
        """Close the open file; the partition cannot be used afterwards."""
        self._close_active()
        self._closed = True

    # ------------------------------------------------------------------ internals

    def _sync_active_offset(self) -> None:
        if self._active is not None and self._reader is not None:
            self._active.offset = self._reader.emitted_offset

    def _close_active(self) -> None:
        self._sync_active_offset()
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._reader = None
        self._active = None

    def _open_reader(self, tracked: TrackedFile, fd: int) -> None:
        src = self._source
        self._active, self._fd = tracked, fd
        self._reader = FramedReader(
            fd, tracked.path, self.pattern, tracked.offset, framing=src.framing,
            record_size=src.record_size, max_record_bytes=src.max_record_bytes,
            chunk_bytes=src.read_chunk_bytes)
        self._last_growth = time.monotonic()

    def _scan(self) -> None:
        """Stat the files the pattern matches now; register new ones; forget vanished ones."""
        matches: list[_Match] = []
        unreadable: dict[str, dict[str, str | None]] = {}
        literal = not glob.has_magic(self.pattern)
        for path in sorted(glob.glob(self.pattern)):
            try:
                st = os.stat(path)
            except OSError as exc:  # a broken symlink, a loop
                unreadable[path] = _os_error(exc)
                continue
            if stat.S_ISREG(st.st_mode):
                matches.append(_Match(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
            elif literal:
                unreadable[path] = _not_regular(st.st_mode)
        matches.sort(key=lambda m: (m.mtime_ns, m.path))
        self._matches = matches
        self._last_scan = time.monotonic()
        at_end = self._first_scan_at_end
        self._first_scan_at_end = False
        matched_keys = {m.key for m in matches}
        for match in matches:
            known = self._files.get(match.key)
            if known is not None and (known.seen_size, known.seen_mtime_ns) == (
                    match.size, match.mtime_ns):
                continue
            if known is not None and self._active is not None and known is self._active:
                known.path = match.path
                known.seen_size, known.seen_mtime_ns = match.size, match.mtime_ns
                continue
            tracked = self._identify(match, known, at_end, unreadable)
            if tracked is not None:
                tracked.seen_size, tracked.seen_mtime_ns = match.size, match.mtime_ns
                self._files[match.key] = tracked
        for key, tracked in list(self._files.items()):
            if key in matched_keys or tracked is self._active:
                continue
            try:
                st = os.stat(tracked.path)
                still_there = (st.st_dev, st.st_ino) == key
            except OSError:
                still_there = False
            if not still_there:
                del self._files[key]
        self.unreadable = unreadable  # replaced whole: other threads read it

    def _identify(self, match: _Match, known: TrackedFile | None, at_end: bool,
                  unreadable: dict[str, dict[str, str | None]]) -> TrackedFile | None:
        """Open a matched file briefly: check a known file's content (truncation, inode
        reuse) or fingerprint a new one. None if it vanished meanwhile or cannot be opened
        (then noted in ``unreadable``)."""
        fpb = self._source.fingerprint_bytes
        try:
            fd = os.open(match.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            unreadable[match.path] = _os_error(exc)
            return None
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != match.key:
                return None  # replaced between stat and open: next scan sees it
            if known is not None:
                known.path = match.path
                if not known.same_content(fd, fpb):
                    logger.warning("file %s was truncated or replaced (same inode, other "
                                   "content): reading it again from offset 0", match.path)
                    known.restart(fd, fpb)
                return known
            tracked = TrackedFile.from_fd(fd, match.path, fpb)
            if at_end:
                tracked.offset = self._end_offset(fd, st.st_size)
            return tracked
        finally:
            os.close(fd)

    def _end_offset(self, fd: int, size: int) -> int:
        """Offset just after the last complete record of a file (for ``start_at="end"``)."""
        src = self._source
        if src.framing == "fixed":
            assert src.record_size is not None
            return size - size % src.record_size
        start = max(0, size - src.max_record_bytes - 1)
        tail = os.pread(fd, size - start, start)
        nl = tail.rfind(b"\n")
        return start + nl + 1 if nl >= 0 else size

    def _restart_if_replaced(self) -> bool:
        """Copytruncate check of the current file (cheap: one fstat, one 256-byte read):
        if it shrank below what was read or its first bytes changed, read it again from 0."""
        active, fd, reader = self._active, self._fd, self._reader
        if active is None or fd is None or reader is None:
            return False
        self._sync_active_offset()
        size = os.fstat(fd).st_size
        if size >= reader.read_offset and active.same_content(fd, self._source.fingerprint_bytes):
            return False
        logger.warning("file %s was truncated or rewritten in place (copytruncate?): reading "
                       "it again from offset 0", active.path)
        active.restart(fd, self._source.fingerprint_bytes)
        self._open_reader(active, fd)
        return True

    def _advance(self, out: list[Any]) -> bool:
        """The current file has nothing complete to hand out: look (at most once per poll
        interval) for truncation of it, or for a next file. True if reading should go on
        (the file was restarted or another one opened); a ``truncated`` tail of a
        rotated-away file may be appended to ``out``."""
        now = time.monotonic()
        if now - self._last_scan < self._source.poll_interval_s:
            return False
        self._scan()
        if self._restart_if_replaced():
            return True
        active, fd, reader = self._active, self._fd, self._reader
        size = 0
        if active is not None and fd is not None:
            size = os.fstat(fd).st_size
            if size > active.eof_size:  # it grew (or first time at its end)
                active.eof_size = size
                self._last_growth = now
        candidates = self._candidates()
        if not candidates:
            return False
        if active is not None and reader is not None:
            still_matched = any(m.key == active.key for m in self._matches)
            if not still_matched:
                # Rotated away or deleted: the writer may not have reopened yet.
                if now - self._last_growth < self._source.rotate_grace_s:
                    return False
                tail = reader.flush_incomplete(size)
                if tail is not None:
                    logger.warning("file %s was rotated away with an incomplete last record "
                                   "of %s bytes", active.path, tail.position.get("length"))
                    out.append(tail)
            self._close_active()
        for candidate in candidates:
            if self._switch_to(candidate):
                return True
        return False

    def _candidates(self) -> list[TrackedFile]:
        """Known matched files (other than the current one) with bytes to read, in order."""
        result = []
        for match in self._matches:
            tracked = self._files.get(match.key)
            if tracked is None or tracked is self._active:
                continue
            if match.size > max(tracked.offset, tracked.eof_size):
                result.append(tracked)
        return result

    def _switch_to(self, tracked: TrackedFile) -> bool:
        try:
            fd = os.open(tracked.path, os.O_RDONLY)
        except OSError:
            return False
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != tracked.key:
            os.close(fd)
            return False
        if not tracked.same_content(fd, self._source.fingerprint_bytes):
            tracked.restart(fd, self._source.fingerprint_bytes)
        self._open_reader(tracked, fd)
        tracked.eof_size = -1
        return True

    # ------------------------------------------------------------------ resume

    def _restore(self, state: dict[str, Any]) -> None:
        try:
            if state.get("version") != SNAPSHOT_VERSION:
                raise StateError(f"unsupported file tailer snapshot version "
                                 f"{state.get('version')!r}")
            if state.get("pattern") != self.pattern:
                raise StateError(f"snapshot of pattern {state.get('pattern')!r} given to "
                                 f"partition {self.pattern!r}")
            files = [TrackedFile.from_json(item) for item in state["files"]]
            active = state.get("active")
            active_key = (int(active[0]), int(active[1])) if active is not None else None
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise StateError(f"malformed file tailer snapshot for {self.pattern!r}: {exc}") from exc
        self._files = {f.key: f for f in files}
        if active_key is None or active_key not in self._files:
            return
        tracked = self._files[active_key]
        fd = self._find_by_identity(tracked)
        if fd is None:
            logger.warning("file %s (device %s, inode %s) of the snapshot no longer exists; "
                           "records after offset %s in it are lost", tracked.path,
                           tracked.dev, tracked.ino, tracked.offset)
            del self._files[active_key]
            return
        self._open_reader(tracked, fd)

    def _find_by_identity(self, tracked: TrackedFile) -> int | None:
        """Open the snapshot's current file: at its last path, else (renamed by a
        rotation) by device/inode and fingerprint among the files of that folder."""
        folder = os.path.dirname(tracked.path) or "."
        paths = [tracked.path]
        try:
            with os.scandir(folder) as entries:
                paths.extend(e.path for e in entries if e.path != tracked.path)
        except OSError:
            pass
        fpb = self._source.fingerprint_bytes
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) != tracked.key or not stat.S_ISREG(st.st_mode):
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            if tracked.same_content(fd, fpb):
                tracked.path = path
                return fd
            logger.warning("file %s has the snapshot's inode but other content: treating "
                           "it as a new file", path)
            os.close(fd)
            return None
        return None
