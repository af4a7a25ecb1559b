"""Pickle-free persistence of arrays plus JSON metadata in one ``.npz`` file.

The file holds the named arrays and one extra uint8 array ``__meta__.json`` with the UTF-8
JSON metadata, which records the SHA-256 of every array's bytes, dtype and shape
(``__digests__``) and the SHA-256 of the metadata itself (``__meta_sha256__``, over its
canonical JSON: sorted keys, without this entry). Files are loaded with
``allow_pickle=False``; any mismatch raises :class:`StateError`. Files written before the
metadata digest existed have none; :func:`read_npz` accepts them unless told to require it.
The digests detect corruption and edits, not a forger (who can recompute them). Writes go to a
temporary file in the same folder, are fsynced, then renamed over the target.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from streamkm.exceptions import StateError

__all__ = ["array_digest", "write_npz_atomic", "write_bytes_atomic", "read_npz", "fsync_dir",
           "encode_npz_bytes", "decode_npz_bytes", "MetaDigestMissing"]

_META_KEY = "__meta__.json"
_META_DIGEST = "__meta_sha256__"


class MetaDigestMissing(StateError):
    """A file's metadata has no SHA-256 digest (written before it existed) and one was
    required."""


def _meta_digest(meta: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True, allow_nan=False).encode()).hexdigest()


def array_digest(arr: np.ndarray) -> str:
    """SHA-256 over an array's dtype, shape and C-order bytes."""
    h = hashlib.sha256()
    h.update(f"{arr.dtype.str}|{arr.shape}|".encode())
    h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename inside it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _encode(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bytes:
    if _META_KEY in arrays:
        raise StateError(f"array name {_META_KEY!r} is reserved")
    for name, arr in arrays.items():
        if not isinstance(arr, np.ndarray) or arr.dtype.hasobject:
            raise StateError(f"array {name!r} must be a non-object numpy array, got {type(arr)!r}")
    full_meta = dict(meta)
    full_meta["__digests__"] = {name: array_digest(a) for name, a in arrays.items()}
    full_meta[_META_DIGEST] = _meta_digest(full_meta)
    blob = json.dumps(full_meta, sort_keys=True, allow_nan=False).encode()
    buf = io.BytesIO()
    np.savez(buf, **arrays, **{_META_KEY: np.frombuffer(blob, dtype=np.uint8)})
    return buf.getvalue()


def write_npz_atomic(path: str | os.PathLike[str], arrays: dict[str, np.ndarray],
                     meta: dict[str, Any]) -> None:
    """Write ``arrays`` and JSON-able ``meta`` to ``path`` atomically (temp, fsync, rename)."""
    write_bytes_atomic(path, _encode(arrays, meta))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically: a reader opens the old file or the new one,
    never a partial one (temporary file in the same folder, fsync, rename, fsync folder)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk gets its space back
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def encode_npz_bytes(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bytes:
    """``arrays`` and JSON-able ``meta`` as the bytes of one ``.npz`` (the file format of
    :func:`write_npz_atomic`, for messages)."""
    return _encode(arrays, meta)


def decode_npz_bytes(data: bytes, *, where: str = "message"
                     ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read bytes made by :func:`encode_npz_bytes`, verifying every digest (no pickle)."""
    return _decode(io.BytesIO(data), where)


def read_npz(path: str | os.PathLike[str], *, require_meta_digest: bool = False
             ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read a file written by :func:`write_npz_atomic`, verifying every digest.

    ``require_meta_digest``: refuse a file whose metadata carries no SHA-256 (for formats
    whose version promises one).
    """
    return _decode(path, f"state file {str(path)!r}", require_meta_digest=require_meta_digest)


def _decode(source: Any, where: str, *, require_meta_digest: bool = False
            ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    try:
        with np.load(source, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise StateError(f"cannot read {where}: {exc}") from exc
    if _META_KEY not in arrays:
        raise StateError(f"{where} has no {_META_KEY!r} entry")
    try:
        meta = json.loads(arrays.pop(_META_KEY).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateError(f"{where} has corrupt metadata: {exc}") from exc
    if not isinstance(meta, dict):
        raise StateError(f"{where} has corrupt metadata: not a JSON object")
    meta_digest = meta.pop(_META_DIGEST, None)
    if meta_digest is None and require_meta_digest:
        raise MetaDigestMissing(f"{where}: its metadata has no SHA-256 digest")
    if meta_digest is not None and meta_digest != _meta_digest(meta):
        raise StateError(f"{where}: its metadata fails its SHA-256 check")
    digests = meta.pop("__digests__", None)
    if not isinstance(digests, dict) or set(digests) != set(arrays):
        raise StateError(f"{where}: array list does not match its digests")
    for name, arr in arrays.items():
        if array_digest(arr) != digests[name]:
            raise StateError(f"{where}: array {name!r} fails its SHA-256 check")
    return arrays, meta
