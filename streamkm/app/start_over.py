"""``streamkm run --reset-model --from-start``: a fresh model that reads the input again
from its beginning, with outputs that hold exactly what the new model produces.

``--reset-model`` alone keeps the checkpoint's input positions and outputs: the records the
old model saw (or rejected under the old settings, e.g. a wrong ``decoding.dim``) are not
read again. ``--from-start`` also forgets the input positions: the checkpoints move to a
folder ``replaced-<UTC time>`` inside ``[checkpoint] dir`` (kept, never read again), the
output files are emptied, and the service starts as on its first run. Every output line is
then the new model's, and every input record is read once.

Only an input and outputs whose kinds allow it are read again and emptied: each source and
sinks kind says why it cannot (its ``start_over_refusal`` hook,
:class:`streamkm.io.registry.KindHooks`: a Kafka source, Kafka outputs, a file source with
``source.start_at = "end"``), and a scale-out group is refused too, with the reason.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from streamkm.config.preflight import empty_files
from streamkm.config.schema import ServiceConfig
from streamkm.exceptions import ConfigError
from streamkm.io import registry
from streamkm.io.checkpoint import checkpoint_files

__all__ = ["start_from_beginning"]


def _refusal(config: ServiceConfig) -> str | None:
    for hooks, section in ((registry.source_hooks(config.source.kind), config.source),
                           (registry.sinks_hooks(config.sinks.kind), config.sinks)):
        if hooks.start_over_refusal is not None:
            reason = hooks.start_over_refusal(section)
            if reason is not None:
                return reason
    if config.scaleout.enabled:
        return "a scale-out group's model lives on its model topic, not in checkpoints"
    return None


def start_from_beginning(config: ServiceConfig) -> Path | None:
    """Move the checkpoints aside and empty the output files, so that the service starts
    as on its first run; return the folder the checkpoints went to (``None``: there were
    none).

    Raises
    ------
    ConfigError
        The configuration's input cannot be read again from its beginning (the message
        says why).
    """
    reason = _refusal(config)
    if reason is not None:
        raise ConfigError(f"--from-start cannot re-read this input: {reason}")
    folder = Path(config.checkpoint.dir)
    moved = None
    found = checkpoint_files(folder) if folder.is_dir() else []
    if found:
        moved = folder / time.strftime("replaced-%Y%m%dT%H%M%SZ", time.gmtime())
        moved.mkdir()
        for path in found:
            os.replace(path, moved / path.name)
    empty_files([path for _, path in registry.output_files(config.sinks) if path.is_file()])
    return moved
