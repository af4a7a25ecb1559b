"""``streamkm checkpoint export``: the service's current model in the estimator's own format.

An application loads the file with :meth:`streamkm.MiniBatchKernelKMeans.load` (or
:meth:`streamkm.sketch.SketchedKernelKMeans.load` when the service sketches its input) and
predicts exactly what the service would assign with that model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from streamkm.exceptions import CheckpointError, StateError
from streamkm.io.checkpoint import Checkpoint, checkpoint_files, read_checkpoint

__all__ = ["model_from_checkpoint", "latest_valid_checkpoint", "export_model"]


def model_from_checkpoint(checkpoint: Checkpoint) -> Any:
    """The model held by ``checkpoint``: the engine, or the sketch pipeline around it.

    Raises
    ------
    StateError
        The checkpoint was written before the model was initialised, or is malformed.
    """
    from streamkm.cluster import MiniBatchKernelKMeans

    if checkpoint.model_meta is None:
        raise StateError(f"checkpoint {str(checkpoint.path)!r} holds no model yet (written "
                         f"before the first batch)")
    engine = MiniBatchKernelKMeans.from_state(checkpoint.model_arrays, checkpoint.model_meta)
    if checkpoint.sketch_meta is None:
        return engine
    from streamkm.sketch import SketchedKernelKMeans

    return SketchedKernelKMeans.from_parts(engine, checkpoint.sketch_arrays,
                                           checkpoint.sketch_meta)


def latest_valid_checkpoint(directory: str | os.PathLike[str]) -> Checkpoint:
    """The newest checkpoint in ``directory`` that verifies (as a restart would pick it).

    Raises
    ------
    CheckpointError
        The folder is missing or holds no valid checkpoint.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint folder {str(folder)!r} does not exist")
    errors = []
    for path in reversed(checkpoint_files(folder)):
        try:
            return read_checkpoint(path)
        except StateError as exc:
            errors.append(str(exc))
    raise CheckpointError(f"no valid checkpoint in {str(folder)!r}"
                          + (f" ({'; '.join(errors)})" if errors else ""))


def export_model(directory: str | os.PathLike[str], output: str | os.PathLike[str]
                 ) -> tuple[Checkpoint, Any]:
    """Write the model of the newest valid checkpoint in ``directory`` to ``output``
    (atomically, with the model's ``save``); return the checkpoint and the model."""
    checkpoint = latest_valid_checkpoint(directory)
    model = model_from_checkpoint(checkpoint)
    model.save(output)
    return checkpoint, model
