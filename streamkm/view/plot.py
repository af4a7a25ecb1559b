"""A PNG of the clusters, drawn with matplotlib (the ``plot`` extra).

The picture is the live page's scatter: records in a plane (their own coordinates when
d <= 2, else the first two principal components), coloured by stable cluster id, with each
cluster's most central record marked by a diamond.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from streamkm.exceptions import ConfigError
from streamkm.view.cluster_view import ClusterView

__all__ = ["checkpoint_view", "cluster_view_of", "render_png"]

#: The page's palette, so a PNG and the live page colour a cluster alike.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#e7969c")


#: State arrays of a kernel fitted on records (input rows), and what to call them.
_KERNEL_ROWS = {"kernel_landmarks": "landmark rows", "kernel_anchors": "anchor rows"}


def cluster_view_of(rows: Any, cluster_ids: np.ndarray, sq_distances: np.ndarray, *,
                    step: int, max_points: int = 5000, random_state: int = 0
                    ) -> dict[str, Any]:
    """The cluster-view document of fixed data (the page's JSON, for a saved model).

    At most ``max_points`` rows, chosen uniformly, are drawn.
    """
    n = int(rows.shape[0])
    view = ClusterView(sample_size=max(1, min(n, max_points)), random_state=random_state)
    view.sample.per_batch = view.sample.capacity
    view.observe_batch(rows, np.asarray(cluster_ids), np.asarray(sq_distances), step=step,
                       objective=float(np.mean(sq_distances)) if n else 0.0,
                       converged=False, n_clusters=len(np.unique(cluster_ids)))
    return view.to_dict()


def render_png(doc: dict[str, Any], path: str | Path, *, title: str | None = None) -> Path:
    """Draw the scatter of a cluster-view document into a PNG file.

    Raises
    ------
    ConfigError
        When matplotlib is not installed (``pip install -e '.[plot]'`` in a checkout).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # optional dependency
        raise ConfigError(
            "streamkm plot needs matplotlib: pip install -e '.[plot]' in a checkout of "
            f"streamkm, or pip install matplotlib (import failed: {exc})") from exc
    pts = doc["points"]
    x, y = np.asarray(pts["x"]), np.asarray(pts["y"])
    ids = np.asarray(pts["cluster"], dtype=np.int64)
    fig, ax = plt.subplots(figsize=(7, 5.5), dpi=110)
    for cluster in doc["clusters"]:
        cid = cluster["id"]
        colour = PALETTE[cid % len(PALETTE)]
        members = ids == cid
        ax.scatter(x[members], y[members], s=6, color=colour, alpha=0.7,
                   label=f"{cid} ({cluster['sample_size']})")
        mx, my = cluster["medoid"]
        ax.scatter([mx], [my], s=90, marker="D", color=colour, edgecolors="black",
                   linewidths=1.2, zorder=3)
    ax.set_xlabel(doc["axes"][0])
    ax.set_ylabel(doc["axes"][1])
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(title="cluster (records)", fontsize=8, loc="best", markerscale=2)
    ax.set_title(title or f"streamkm clusters at step {doc['step']}")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


def checkpoint_view(directory: str | Path, *, data: str | Path | None = None,
                    max_points: int = 5000) -> tuple[dict[str, Any], str]:
    """The cluster-view document of the newest valid checkpoint in ``directory``.

    With ``data`` (JSON lines or CSV, decoded like the service decodes them: ``.csv`` files
    as CSV with a header, anything else as JSON lines) the model assigns those records;
    without it the picture shows the rows the model keeps: each center's support rows (the
    recent records it is made of), or for a kernel whose centers have no support rows the
    rows the kernel was fitted on (heat: landmarks; anchor, level_set: anchors), coloured as
    the model assigns them. A linear model keeps no records: it needs ``data``. Returns the
    document and a title.
    """
    from streamkm.config.schema import DecodingConfig
    from streamkm.io.model_export import latest_valid_checkpoint, model_from_checkpoint
    from streamkm.io.sources import RawRecord
    from streamkm.runtime.wiring import build_decoder

    checkpoint = latest_valid_checkpoint(directory)
    model = model_from_checkpoint(checkpoint)
    engine = getattr(model, "model_", model)
    step = int(engine.n_steps_)
    if data is not None:
        path = Path(data)
        csv = path.suffix.lower() == ".csv"
        dim = int(getattr(model, "n_features_in_", engine.n_features_in_))
        decoder = build_decoder(DecodingConfig(format="csv" if csv else "json", dim=dim,
                                               csv_header=csv))
        lines = [line for line in path.read_bytes().splitlines() if line.strip()]
        records = [RawRecord(value=line, key=None, position={"line": i})
                   for i, line in enumerate(lines)]
        rows, _ids, _accepted, rejections = decoder.decode_many(records)
        if rows.shape[0] == 0:
            raise ConfigError(f"no record of {str(path)!r} could be decoded "
                              f"({len(rejections)} rejected)")
        sq = np.asarray(model.transform(rows))
        labels = np.argmin(sq, axis=1)
        cluster_ids = engine.cluster_ids_[labels]
        title = f"{path.name}: {rows.shape[0]} records at step {step}"
        return cluster_view_of(rows, cluster_ids, sq[np.arange(len(labels)), labels],
                               step=step, max_points=max_points), title
    arrays, _meta = engine.get_state()
    kernel = engine.kernel_.name
    if "support_rows" in arrays:
        rows = arrays["support_rows"]
        offsets = arrays["support_offsets"]
        labels = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        sq = np.asarray(engine.transform(rows))[np.arange(len(labels)), labels]
        what = "support rows of the model"
    else:
        # a graph kernel's centers live in its feature space; the rows it was fitted on
        # (landmarks, anchors) are records, drawn as the model assigns them
        name = next((n for n in _KERNEL_ROWS if n in arrays), None)
        if name is None:
            raise ConfigError(
                f"the {kernel} kernel's model keeps its {engine.n_clusters_} centroids and no "
                f"records to draw: give records with --data FILE (JSON lines, or .csv with "
                f"a header)")
        rows = arrays[name]
        dist = np.asarray(engine.transform(rows))
        labels = np.argmin(dist, axis=1)
        sq = dist[np.arange(len(labels)), labels]
        what = f"the {kernel} kernel's {_KERNEL_ROWS[name]}"
    title = f"{what} at step {step} ({checkpoint.path.name})"
    return cluster_view_of(rows, engine.cluster_ids_[labels], sq, step=step,
                           max_points=max_points), title
