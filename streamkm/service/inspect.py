"""``streamkm checkpoint inspect``: what is in a checkpoint folder."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, TextIO

from streamkm.service.checkpoint import CheckpointInfo, inspect_checkpoints

__all__ = ["summarize_checkpoints", "print_checkpoints"]


def _summary(info: CheckpointInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": str(info.path), "sequence": info.sequence,
                             "valid": info.valid}
    if not info.valid:
        entry["error"] = info.error
        return entry
    meta = info.meta
    model = meta.get("model")
    counts = info.model_arrays.get("counts")
    entry.update({
        "created_unix": meta.get("created_unix"),
        "streamkm_version": meta.get("streamkm_version"),
        "config_hash": meta.get("config_hash"),
        "model_initialised": model is not None,
        "step": model.get("n_steps") if model else 0,
        "model_records": int(counts.sum()) if counts is not None else 0,
        "cluster_counts": counts.tolist() if counts is not None else [],
        "counters": meta.get("counters", {}),
        "positions": meta.get("positions", {}),
        "sink_positions": meta.get("sink_positions", {}),
    })
    sketch = meta.get("sketch")
    if sketch is not None:
        entry["sketch"] = {"sketcher": sketch.get("sketcher", {}).get("sketcher"),
                           "n_components": sketch.get("sketcher", {}).get("n_components"),
                           "sketch_epoch": sketch.get("sketch_epoch"),
                           "reservoir_rows_seen": sketch.get("reservoir", {}).get("n_seen")}
    return entry


def summarize_checkpoints(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One JSON-able summary per checkpoint file in ``directory``, oldest first."""
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(f"checkpoint folder {str(folder)!r} does not exist")
    return [_summary(info) for info in inspect_checkpoints(folder)]


def print_checkpoints(summaries: list[dict[str, Any]], out: TextIO) -> None:
    """Human-readable listing of :func:`summarize_checkpoints` output."""
    if not summaries:
        out.write("no checkpoints\n")
        return
    for s in summaries:
        name = Path(s["path"]).name
        if not s["valid"]:
            out.write(f"{name}  INVALID  {s['error']}\n")
            continue
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s["created_unix"] or 0))
        c = s["counters"]
        out.write(
            f"{name}  valid  created={created}  step={s['step']}  "
            f"model_records={s['model_records']}  read={c.get('records_read', 0)}  "
            f"accepted={c.get('records_accepted', 0)}  "
            f"rejected={c.get('records_rejected', 0)}  batches={c.get('batches', 0)}\n")
        out.write(f"    cluster_counts={s['cluster_counts']}\n")
        if "sketch" in s:
            out.write(f"    sketch {json.dumps(s['sketch'], sort_keys=True)}\n")
        for key, pos in sorted(s["positions"].items()):
            out.write(f"    position {key}: {json.dumps(pos, sort_keys=True)}\n")
        for key, pos in sorted(s["sink_positions"].items()):
            out.write(f"    sink {key}: {json.dumps(pos, sort_keys=True)}\n")
