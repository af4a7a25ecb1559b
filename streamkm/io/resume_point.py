"""The resume point: the positions of the latest checkpoint, kept beside the file outputs.

After every checkpoint the service also writes a small JSON file next to its first file
output (``<assignments>.resume.json``; ``events`` or ``dead_letter`` when there is no
assignments file), atomically: the checkpoint's source positions, sink lengths, counters and
batcher state, without the model. When the checkpoint folder is lost while the outputs
survive, ``streamkm run --on-existing-output=resume`` reads it: the file sinks are truncated
to its lengths, every partition resumes from its position and a fresh model is trained from
there. Each input record is then assigned exactly once across the outputs (no duplicates,
nothing clustered again); the cluster numbers after the resume come from the new model.

The file (one JSON line)::

    {"format": "streamkm-resume-point", "format_version": 1, "sha256": "<hex>",
     "state": {"sequence": 12, "created_unix": ..., "positions": {...},
               "sink_positions": {...}, "counters": {...}, "batcher": {...}}}

``sha256`` is the digest of ``state`` encoded as sorted-key compact JSON; a file that fails
it is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from streamkm._core.state_io import write_bytes_atomic

from streamkm.exceptions import StateError
from streamkm.io import registry
from streamkm.io.checkpoint import Checkpoint

__all__ = ["resume_point_path", "write_resume_point", "read_resume_point", "FORMAT"]

FORMAT = "streamkm-resume-point"
FORMAT_VERSION = 1
_SUFFIX = ".resume.json"


def resume_point_path(sinks: Any) -> Path | None:
    """Where the resume point of the ``[sinks]`` section ``sinks`` lives (``None`` without
    file outputs)."""
    files = registry.output_files(sinks)
    if not files:
        return None
    path = files[0][1]
    return path.with_name(path.name + _SUFFIX)


def _digest(state: dict[str, Any]) -> str:
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def write_resume_point(path: str | os.PathLike[str], *, sequence: int, created_unix: float,
                       positions: dict[str, Any], sink_positions: dict[str, Any],
                       counters: dict[str, Any], batcher: dict[str, Any]) -> None:
    """Replace the resume point at ``path`` atomically (its folder is created if missing).

    Raises
    ------
    OSError
        The file system refused the write (the previous resume point is kept).
    """
    state = {"sequence": sequence, "created_unix": created_unix, "positions": positions,
             "sink_positions": sink_positions, "counters": counters, "batcher": batcher}
    body = {"format": FORMAT, "format_version": FORMAT_VERSION, "sha256": _digest(state),
            "state": state}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(target, json.dumps(body, allow_nan=False).encode() + b"\n")


def read_resume_point(path: str | os.PathLike[str]) -> Checkpoint:
    """The resume point at ``path`` as a :class:`Checkpoint` without a model.

    Raises
    ------
    StateError
        The file is missing, unreadable, not a resume point, or fails its digest.
    """
    file = Path(path)
    try:
        body = json.loads(file.read_bytes())
    except FileNotFoundError:
        raise StateError(f"no resume point at {str(file)!r}") from None
    except (OSError, ValueError) as exc:
        raise StateError(f"cannot read the resume point {str(file)!r}: {exc}") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise StateError(f"{str(file)!r} is not a streamkm resume point")
    if body.get("format_version") != FORMAT_VERSION:
        raise StateError(f"{str(file)!r} has unsupported resume point format version "
                         f"{body.get('format_version')!r} (this streamkm reads "
                         f"{FORMAT_VERSION})")
    state = body.get("state")
    if not isinstance(state, dict) or body.get("sha256") != _digest(state):
        raise StateError(f"{str(file)!r} fails its SHA-256 (edited or corrupt)")
    meta = {"sequence": state.get("sequence"), "created_unix": state.get("created_unix"),
            "model": None, "positions": state.get("positions", {}),
            "sink_positions": state.get("sink_positions", {}),
            "counters": state.get("counters", {}), "batcher": state.get("batcher", {})}
    return Checkpoint(path=file, sequence=int(state.get("sequence", -1)), model_arrays={},
                      meta=meta)
