"""Recognising a file across renames, truncation and inode reuse.

A file is identified by its (device, inode) pair plus the SHA-256 of its first
``fingerprint_bytes`` bytes. The inode alone is not enough: a deleted file's inode is
reused by the next file created, and copytruncate keeps the inode while replacing the
content. A file shorter than ``fingerprint_bytes`` is fingerprinted over what it has, and
the fingerprint is extended as it grows (after checking the shorter prefix still matches).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

__all__ = ["TrackedFile", "prefix_digest"]


def prefix_digest(fd: int, length: int) -> str | None:
    """SHA-256 (hex) of the first ``length`` bytes of open file ``fd``; None if shorter."""
    data = os.pread(fd, length, 0) if length else b""
    if len(data) < length:
        return None
    return hashlib.sha256(data).hexdigest()


@dataclass(slots=True)
class TrackedFile:
    """A file the tailer knows: identity, last path seen, and the resume offset.

    ``offset`` is the byte offset just after the last record handed out from this file.
    ``seen_size`` / ``seen_mtime_ns`` (from the last scan) and ``eof_size`` (size when the
    reader last found nothing complete to return) are in-memory hints, not resume state.
    """

    dev: int
    ino: int
    fp_len: int
    fp: str
    path: str
    offset: int = 0
    seen_size: int = -1
    seen_mtime_ns: int = -1
    eof_size: int = -1

    @property
    def key(self) -> tuple[int, int]:
        """The (device, inode) pair."""
        return (self.dev, self.ino)

    @classmethod
    def from_fd(cls, fd: int, path: str, fingerprint_bytes: int, offset: int = 0) -> TrackedFile:
        """Identify the open file ``fd`` (found at ``path``)."""
        st = os.fstat(fd)
        fp_len = min(st.st_size, fingerprint_bytes)
        digest = prefix_digest(fd, fp_len)
        if digest is None:  # shrank between fstat and pread: fingerprint what is there
            fp_len = 0
            digest = hashlib.sha256(b"").hexdigest()
        return cls(st.st_dev, st.st_ino, fp_len, digest, path, offset)

    def same_content(self, fd: int, fingerprint_bytes: int) -> bool:
        """True if open file ``fd`` (same inode) still starts with the fingerprinted bytes
        and is not shorter than the resume offset; extends the fingerprint if it grew."""
        size = os.fstat(fd).st_size
        if size < self.offset:
            return False
        digest = prefix_digest(fd, self.fp_len)
        if digest != self.fp:
            return False
        if self.fp_len < fingerprint_bytes and size > self.fp_len:
            new_len = min(size, fingerprint_bytes)
            new_digest = prefix_digest(fd, new_len)
            if new_digest is not None:
                self.fp_len, self.fp = new_len, new_digest
        return True

    def restart(self, fd: int, fingerprint_bytes: int) -> None:
        """The content was replaced (truncated or a new file on a reused inode): read the
        file again from offset 0 with a fresh fingerprint."""
        fresh = TrackedFile.from_fd(fd, self.path, fingerprint_bytes)
        self.fp_len, self.fp, self.offset, self.eof_size = fresh.fp_len, fresh.fp, 0, -1

    def to_json(self) -> dict[str, Any]:
        """Resume state of this file (JSON-able)."""
        return {"dev": self.dev, "ino": self.ino, "fp_len": self.fp_len, "fp": self.fp,
                "path": self.path, "offset": self.offset}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrackedFile:
        """Inverse of :meth:`to_json`."""
        return cls(int(data["dev"]), int(data["ino"]), int(data["fp_len"]), str(data["fp"]),
                   str(data["path"]), int(data["offset"]))
