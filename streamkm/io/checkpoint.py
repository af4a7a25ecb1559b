"""Checkpoints: model state, source positions and sink positions in one atomic file.

A checkpoint is a ``checkpoint-<sequence>.npz`` file written by
:func:`streamkm._core.state_io.write_npz_atomic` (temp file, fsync, rename; arrays loaded with
``allow_pickle=False``; SHA-256 per array). The model's arrays are stored under the prefix
``model.``; the JSON metadata holds::

    format            "streamkm-checkpoint"
    format_version    2 (1: before the metadata digest; still read)
    streamkm_version  version that wrote it
    sequence          increasing number of the checkpoint
    created_unix      wall time of the write
    config_hash       hash of the decoding/model/batching configuration
    model             the model's JSON metadata (None before the model is initialised)
    positions         {partition key: source snapshot}
    sink_positions    {sink name: sink position}
    counters          records read/accepted/rejected, batches, ...
    batcher           state of the batcher (round-robin pointer)
    sketch            the feature sketch's metadata (only when sketching); its arrays are
                      stored under the prefix ``sketch.``
    config            the effective configuration, flat and with secrets masked
                      (``streamkm.config.diff`` compares it at start)

The metadata carries its own SHA-256 next to the arrays' (:mod:`streamkm._core.state_io`). A
version 2 file without it, or whose metadata fails it, is corrupt and skipped like a file
that fails an array digest. Version 1 files (written before the metadata digest) are read
as they are: their metadata is guarded by the zip CRC only.

A folder that disappears while the service runs (``rm -rf``, an unmounted volume) is
created again by the next write, which logs ``checkpoint_folder_recreated`` once.

The store keeps the newest ``keep`` files. Loading walks from the newest to the oldest and
returns the first that reads and verifies; every file skipped is logged and reported to the
``on_corrupt`` callback.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamkm._core.state_io import MetaDigestMissing, read_npz, write_npz_atomic
from streamkm._version import __version__
from streamkm.exceptions import CheckpointError, StateError, StorageError, StreamkmError
from streamkm.io.checkpoint_files import CHECKPOINT_NAME, checkpoint_files, sequence_of
from streamkm.logs import log_event

__all__ = ["Checkpoint", "CheckpointInfo", "CheckpointStore", "read_checkpoint",
           "checkpoint_files", "inspect_checkpoints", "FORMAT", "FORMAT_VERSION",
           "READABLE_FORMAT_VERSIONS"]

FORMAT = "streamkm-checkpoint"
FORMAT_VERSION = 2
#: Versions this streamkm reads: 1 has no metadata digest, 2 requires one.
READABLE_FORMAT_VERSIONS = (1, 2)
_MODEL_PREFIX = "model."
_SKETCH_PREFIX = "sketch."
_log = logging.getLogger("streamkm.checkpoint")


@dataclass
class Checkpoint:
    """One checkpoint as read back.

    Attributes
    ----------
    path : Path
        The file.
    sequence : int
        Its sequence number.
    model_arrays : dict of str to ndarray
        The model's arrays (prefix removed); empty before the model was initialised.
    meta : dict
        The full metadata (see the module docstring).
    sketch_arrays : dict of str to ndarray
        The feature sketch's arrays (prefix removed); empty without sketching.
    """

    path: Path
    sequence: int
    model_arrays: dict[str, np.ndarray]
    meta: dict[str, Any]
    sketch_arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def sketch_meta(self) -> dict[str, Any] | None:
        """The feature sketch's metadata, or ``None`` without sketching."""
        return self.meta.get("sketch")

    @property
    def model_meta(self) -> dict[str, Any] | None:
        """The model's metadata, or ``None`` if the model was not initialised yet."""
        return self.meta.get("model")

    @property
    def positions(self) -> dict[str, Any]:
        """Source snapshots by partition key."""
        return self.meta.get("positions", {})

    @property
    def sink_positions(self) -> dict[str, Any]:
        """Sink positions by sink name."""
        return self.meta.get("sink_positions", {})

    @property
    def counters(self) -> dict[str, Any]:
        """Counters at the time of the checkpoint."""
        return self.meta.get("counters", {})


@dataclass
class CheckpointInfo:
    """Summary of one checkpoint file for inspection."""

    path: Path
    sequence: int
    valid: bool
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    model_arrays: dict[str, np.ndarray] = field(default_factory=dict)


def read_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """Read and verify one checkpoint file.

    Raises
    ------
    StateError
        The file is unreadable, fails a digest, or is not a streamkm checkpoint of a
        supported format version.
    """
    file = Path(path)
    match = CHECKPOINT_NAME.match(file.name)
    try:
        arrays, meta = read_npz(file, require_meta_digest=True)
    except MetaDigestMissing:
        arrays, meta = read_npz(file)
        if meta.get("format_version", 1) >= 2:  # the digest is part of the format since 2
            raise StateError(f"{str(file)!r}: checkpoint format version "
                             f"{meta.get('format_version')!r} without its metadata SHA-256 "
                             f"(edited or corrupt)") from None
    if meta.get("format") != FORMAT:
        raise StateError(f"{str(file)!r} is not a streamkm checkpoint "
                         f"(format {meta.get('format')!r})")
    version = meta.get("format_version")
    if version not in READABLE_FORMAT_VERSIONS:
        raise StateError(f"{str(file)!r} has unsupported checkpoint format version "
                         f"{version!r} (this streamkm reads {READABLE_FORMAT_VERSIONS})")
    unexpected = [name for name in arrays
                  if not name.startswith((_MODEL_PREFIX, _SKETCH_PREFIX))]
    if unexpected:
        raise StateError(f"{str(file)!r} holds unexpected arrays {unexpected!r}")
    model_arrays = {name[len(_MODEL_PREFIX):]: arr for name, arr in arrays.items()
                    if name.startswith(_MODEL_PREFIX)}
    sketch_arrays = {name[len(_SKETCH_PREFIX):]: arr for name, arr in arrays.items()
                     if name.startswith(_SKETCH_PREFIX)}
    sequence = int(meta.get("sequence", int(match.group(1)) if match else -1))
    return Checkpoint(path=file, sequence=sequence, model_arrays=model_arrays, meta=meta,
                      sketch_arrays=sketch_arrays)


def inspect_checkpoints(directory: str | os.PathLike[str]) -> list[CheckpointInfo]:
    """Every checkpoint file in ``directory`` with whether it verifies, oldest first."""
    infos = []
    for path in checkpoint_files(directory):
        try:
            ckpt = read_checkpoint(path)
        except StateError as exc:
            infos.append(CheckpointInfo(path=path, sequence=sequence_of(path), valid=False,
                                        error=str(exc)))
        else:
            infos.append(CheckpointInfo(path=path, sequence=ckpt.sequence, valid=True,
                                        meta=ckpt.meta, model_arrays=ckpt.model_arrays))
    return infos


class CheckpointStore:
    """A folder of checkpoints, newest ``keep`` kept.

    Parameters
    ----------
    directory : path
        The folder (created if missing, at start and before each write).
    keep : int
        How many checkpoints to keep; older ones are deleted after each write.
    on_corrupt : callable, optional
        Called with ``(path, error message)`` for each file skipped while loading.
    """

    def __init__(self, directory: str | os.PathLike[str], *, keep: int = 3,
                 on_corrupt: Callable[[Path, str], None] | None = None) -> None:
        if keep < 1:
            raise CheckpointError(f"keep must be at least 1, got {keep!r}")
        self.directory = Path(directory)
        self.keep = keep
        self.on_corrupt = on_corrupt
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot create checkpoint folder {str(self.directory)!r}: {exc.strerror}"
            ) from None
        self._remove_stale_temp_files()
        existing = self.paths()
        self._next_sequence = (sequence_of(existing[-1]) + 1) if existing else 1

    def _remove_stale_temp_files(self) -> None:
        for path in self.directory.glob(".checkpoint-*.npz.tmp-*"):
            try:
                path.unlink()
            except OSError:
                pass

    def paths(self) -> list[Path]:
        """Checkpoint files, oldest first."""
        return checkpoint_files(self.directory)

    def write(self, *, model_arrays: dict[str, np.ndarray], model_meta: dict[str, Any] | None,
              positions: dict[str, Any], sink_positions: dict[str, Any],
              counters: dict[str, Any], config_hash: str,
              extra: dict[str, Any] | None = None,
              sketch_arrays: dict[str, np.ndarray] | None = None,
              sketch_meta: dict[str, Any] | None = None) -> Path:
        """Write a new checkpoint atomically, then delete the ones beyond ``keep``.

        ``sketch_arrays`` / ``sketch_meta``: the feature sketch's state, stored next to the
        model's (arrays under the prefix ``sketch.``, metadata under ``"sketch"``).

        Raises
        ------
        StorageError
            The file system refused the write (full, read-only, I/O error): nothing is
            replaced, the temp file is removed, the same call can be retried.
        CheckpointError
            The checkpoint could not be written for another reason (nothing is replaced).
        """
        self._recreate_folder_if_gone()
        sequence = self._next_sequence
        path = self.directory / f"checkpoint-{sequence:012d}.npz"
        meta: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "streamkm_version": __version__,
            "sequence": sequence,
            "created_unix": time.time(),
            "config_hash": config_hash,
            "model": model_meta,
            "positions": positions,
            "sink_positions": sink_positions,
            "counters": counters,
        }
        if extra:
            meta.update(extra)
        arrays = {_MODEL_PREFIX + name: np.asarray(arr) for name, arr in model_arrays.items()}
        if sketch_meta is not None:
            meta["sketch"] = sketch_meta
            arrays.update({_SKETCH_PREFIX + name: np.asarray(arr)
                           for name, arr in (sketch_arrays or {}).items()})
        try:
            write_npz_atomic(path, arrays, meta)
        except OSError as exc:
            if isinstance(exc, StreamkmError):
                raise CheckpointError(f"cannot write checkpoint {str(path)!r}: {exc}") from exc
            raise StorageError("checkpoint", exc) from exc
        except (StateError, TypeError, ValueError) as exc:
            raise CheckpointError(f"cannot write checkpoint {str(path)!r}: {exc}") from exc
        self._next_sequence = sequence + 1
        self.prune()
        return path

    def _recreate_folder_if_gone(self) -> None:
        """Create the folder again if it vanished since the last write.

        Raises
        ------
        StorageError
            The folder cannot be created (the same call can be retried).
        """
        if self.directory.is_dir():
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError("checkpoint", exc) from exc
        log_event(_log, "warning", "checkpoint_folder_recreated", path=str(self.directory),
                  next_sequence=self._next_sequence)

    def prune(self) -> None:
        """Delete all but the newest ``keep`` checkpoints."""
        for old in self.paths()[: -self.keep]:
            try:
                old.unlink()
            except OSError as exc:
                log_event(_log, "warning", "checkpoint_prune_failed", path=str(old),
                          error=str(exc))

    def load_latest(self) -> Checkpoint | None:
        """The newest checkpoint that verifies, or ``None`` if there is none at all.

        Corrupt files are skipped (logged, reported to ``on_corrupt``), falling back to the
        previous one.

        Raises
        ------
        CheckpointError
            Checkpoint files exist but none of them is usable.
        """
        paths = self.paths()
        for path in reversed(paths):
            try:
                return read_checkpoint(path)
            except StateError as exc:
                log_event(_log, "error", "checkpoint_corrupt", path=str(path), error=str(exc))
                if self.on_corrupt is not None:
                    self.on_corrupt(path, str(exc))
        if paths:
            raise CheckpointError(
                f"none of the {len(paths)} checkpoints in {str(self.directory)!r} is usable"
            )
        return None

    def inspect(self) -> list[CheckpointInfo]:
        """Every checkpoint file with whether it verifies, oldest first."""
        return inspect_checkpoints(self.directory)
