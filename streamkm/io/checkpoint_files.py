"""The names of checkpoint files (``checkpoint-<12-digit sequence>.npz``) and the listing of
a checkpoint folder, without reading a file: what tells whether there is a checkpoint at all
(``streamkm config check`` with none yet loads no numpy)."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["CHECKPOINT_NAME", "checkpoint_files", "sequence_of"]

#: A checkpoint file's name; group 1 is its sequence number.
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d{12})\.npz$")


def sequence_of(path: Path) -> int:
    """The sequence number in a checkpoint file's name."""
    match = CHECKPOINT_NAME.match(path.name)
    if match is None:
        raise ValueError(f"{path.name!r} is not a checkpoint file name")
    return int(match.group(1))


def checkpoint_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The checkpoint files in ``directory``, oldest first (read only)."""
    found = [p for p in Path(directory).iterdir() if CHECKPOINT_NAME.match(p.name)]
    return sorted(found, key=sequence_of)
