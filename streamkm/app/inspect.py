"""``streamkm checkpoint inspect``: what is in a checkpoint folder.

The text output starts with a readable summary of the newest valid checkpoint (the one a
restart resumes from): the model, the record counts (``read`` = accepted + rejected + CSV
header lines, which are neither), where each input stands (file, offset, bytes still to
read; or topic, partition, offset) and how long each output was; then one line per file.
``--json`` prints the summaries with the raw positions instead.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, TextIO

from streamkm.app.kernel_label import kernel_label, meta_kernel
from streamkm.io.checkpoint import CheckpointInfo, inspect_checkpoints

__all__ = ["summarize_checkpoints", "print_checkpoints", "describe_position"]


def _summary(info: CheckpointInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": str(info.path), "sequence": info.sequence,
                             "valid": info.valid}
    if not info.valid:
        entry["error"] = info.error
        return entry
    meta = info.meta
    model = meta.get("model")
    counts = info.model_arrays.get("counts")
    counters = meta.get("counters", {})
    entry.update({
        "created_unix": meta.get("created_unix"),
        "streamkm_version": meta.get("streamkm_version"),
        "format_version": meta.get("format_version"),
        "config_hash": meta.get("config_hash"),
        "model_initialised": model is not None,
        "step": model.get("n_steps") if model else 0,
        "model_records": int(counts.sum()) if counts is not None else 0,
        "cluster_counts": counts.tolist() if counts is not None else [],
        "counters": counters,
        "header_lines_skipped": max(0, int(counters.get("records_read", 0))
                                    - int(counters.get("records_accepted", 0))
                                    - int(counters.get("records_rejected", 0))),
        "positions": meta.get("positions", {}),
        "sink_positions": meta.get("sink_positions", {}),
    })
    if model:
        params = model.get("params", {})
        in_use, reason = meta_kernel(model)
        entry["model"] = {"kernel": params.get("kernel"), "kernel_in_use": in_use,
                          "kernel_label": kernel_label(str(params.get("kernel")),
                                                       params.get("gamma"), in_use),
                          "kernel_reason": reason, "n_clusters": len(entry[
            "cluster_counts"]) or params.get("n_clusters"), "gamma": model.get("gamma_"),
            "converged": bool(model.get("monitor", {}).get("converged", False)),
            "n_features": model.get("n_features_in")}
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


def _file_now(entry: dict[str, Any]) -> str:
    """Where a tracked file stands now: its size and the bytes left after the offset."""
    path, offset = entry.get("path"), int(entry.get("offset", 0))
    try:
        st = os.stat(path) if isinstance(path, str) else None
    except OSError:
        st = None
    if st is None:
        return "file gone"
    if (st.st_dev, st.st_ino) != (entry.get("dev"), entry.get("ino")):
        return "replaced by another file since"
    return f"of {st.st_size} bytes, {max(0, st.st_size - offset)} bytes still to read"


def describe_position(key: str, position: Any) -> list[str]:
    """Readable lines for one partition's position (file tailer or Kafka partition)."""
    if not isinstance(position, dict):
        return [f"{key}: {position!r}"]
    if "topic" in position:
        return [f"{position['topic']} partition {position.get('partition')}: next offset "
                f"{position.get('offset')}" + (" (released)" if position.get("released")
                                               else "")]
    files = position.get("files")
    if isinstance(files, list):
        if not files:
            return [f"{key}: no file read yet"]
        active = position.get("active")
        lines = []
        for entry in files:
            current = active == [entry.get("dev"), entry.get("ino")]
            lines.append(f"{entry.get('path')}: offset {entry.get('offset')} "
                         f"({_file_now(entry)}){', current file' if current else ''}")
        return lines
    return [f"{key}: {json.dumps(position, sort_keys=True)}"]


def _time(unix: Any) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix or 0))


def _print_latest(s: dict[str, Any], out: TextIO) -> None:
    out.write(f"latest valid checkpoint: {Path(s['path']).name} (written {_time(s['created_unix'])}"
              f" by streamkm {s['streamkm_version']}; a restart resumes from it)\n")
    model = s.get("model")
    if model is None:
        out.write("  model    not initialised yet (no batch processed)\n")
    else:
        gamma = f", gamma {model['gamma']:.6g}" if isinstance(model["gamma"], float) else ""
        why = f" ({model['kernel_reason']})" if model.get("kernel_reason") else ""
        out.write(f"  model    kernel {model['kernel_label']}{why}{gamma}, "
                  f"{model['n_clusters']} clusters, "
                  f"{model['n_features']} features, step {s['step']}, "
                  f"converged {'yes' if model['converged'] else 'no'}\n")
        sizes = ", ".join(str(c) for c in s["cluster_counts"])
        out.write(f"           {s['model_records']} records in the model; cluster sizes {sizes}\n")
    if "sketch" in s:
        sk = s["sketch"]
        out.write(f"  sketch   {sk['sketcher']}, {sk['n_components']} components, "
                  f"epoch {sk['sketch_epoch']}\n")
    c = s["counters"]
    header = s["header_lines_skipped"]
    out.write(f"  records  read {c.get('records_read', 0)} = accepted "
              f"{c.get('records_accepted', 0)} + rejected {c.get('records_rejected', 0)}"
              + (f" + {header} CSV header line{'s' if header != 1 else ''} skipped"
                 if header else "")
              + f"; {c.get('batches', 0)} batches\n")
    by_reason = c.get("records_rejected_by_reason") or {}
    if any(by_reason.values()):
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(by_reason.items()) if n)
        out.write(f"           rejected by reason: {reasons}\n")
    for key, pos in sorted(s["positions"].items()):
        for i, line in enumerate(describe_position(key, pos)):
            out.write(f"  {'input' if i == 0 else '':8} {line}\n")
    for name, pos in sorted(s["sink_positions"].items()):
        if isinstance(pos, dict) and "path" in pos and "bytes" in pos:
            out.write(f"  output   {name}: {pos['path']} ({pos['bytes']} bytes at this "
                      f"checkpoint; longer files are cut back on restart)\n")
        else:
            out.write(f"  output   {name}: {json.dumps(pos, sort_keys=True)}\n")


def print_checkpoints(summaries: list[dict[str, Any]], out: TextIO) -> None:
    """Readable listing of :func:`summarize_checkpoints` output: the newest valid
    checkpoint in detail, then one line per file."""
    if not summaries:
        out.write("no checkpoints\n")
        return
    valid = [s for s in summaries if s["valid"]]
    if valid:
        _print_latest(valid[-1], out)
    else:
        out.write("no valid checkpoint: a restart would refuse to start\n")
    out.write("files (oldest first):\n")
    for s in summaries:
        name = Path(s["path"]).name
        if not s["valid"]:
            out.write(f"  {name}  INVALID  {s['error']}\n")
            continue
        c = s["counters"]
        out.write(f"  {name}  valid  {_time(s['created_unix'])}  step {s['step']}  "
                  f"accepted {c.get('records_accepted', 0)}  "
                  f"rejected {c.get('records_rejected', 0)}\n")
