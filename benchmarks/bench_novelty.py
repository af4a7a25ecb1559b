"""Novelty and outliers: streamkm's per-record novelty score side by side with
IsolationForest, LocalOutlierFactor(novelty=True) and River's HalfSpaceTrees, in one run.

Run (one thread each, as in docs/benchmarks.md):

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 .venv/bin/python benchmarks/bench_novelty.py \\
        --json benchmarks/results/novelty.json --docs docs/benchmarks.md

Prequential protocol: every set is shuffled (seed 0; the new-mode stream keeps its order)
and cut into windows of ``W`` records, ``W = min(256, max(32, n // 8))``. The first window
is learnt only; every later window is first scored by each detector with its model as it
was before the window, then learnt (the detectors take turns, the first rotating). The
scores of all records after the first window give the ROC-AUC and the precisions
(``_novelty_detectors.py`` says what each detector does; ``_novelty_metrics.py`` how the
scores are computed). Precision at the flagged rate: the share of anomalies among each
detector's top-scored records, as many as streamkm flagged on that set
(``report.outliers`` at ``outlier_alpha`` = 0.01).

The other tables: the cost of the novelty score (``_novelty_cost.py``: the step of the engine
before the novelty score against this engine's step with and without ``outlier_alpha``,
interleaved worker processes, process CPU time); a stream where a new mode appears
half-way (records flagged, births); the inlier ARI of ``outliers="exclude"`` against
``"learn"`` on blobs and moons with 5% uniform noise; and the share of records flagged on
streams without anomalies. ``--quick`` runs on small sets in about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _novelty_data as data  # noqa: E402
import _novelty_cost  # noqa: E402
from _novelty_detectors import StreamkmDetector, all_detectors  # noqa: E402
from _novelty_metrics import set_scores  # noqa: E402
from _novelty_tables import render, write_docs  # noqa: E402

import streamkm  # noqa: E402
from streamkm import MiniBatchKernelKMeans  # noqa: E402

#: outlier level of every streamkm run
ALPHA = 0.01


def window_for(n: int) -> int:
    """Records per window of a set of ``n`` rows."""
    return min(256, max(32, n // 8))


def run_set(s: data.NoveltySet, seed: int = 0) -> dict[str, Any]:
    """Every detector on one set, prequentially; scores of all windows after the first."""
    n = s.X.shape[0]
    window = window_for(n)
    memory = 4 * window
    detectors = all_detectors(s.n_clusters, window, memory, seed)
    ours = detectors[0]
    first = s.X[:window]
    for det in detectors:
        det.start(first)
    names = ["streamkm", "streamkm distance"] + [d.name for d in detectors[1:]]
    scores: dict[str, list[np.ndarray]] = {name: [] for name in names}
    cpu = {name: 0.0 for name in names}
    flags = []
    for w, start in enumerate(range(window, n, window)):
        x = s.X[start:start + window]
        for i in range(len(detectors)):
            det = detectors[(w + i) % len(detectors)]
            t0 = time.process_time()
            out = det.score_then_learn(x)
            cpu[det.name] += time.process_time() - t0
            scores[det.name].append(out)
            if det is ours:
                scores["streamkm distance"].append(ours.distances)
                flags.append(ours.flags)
    cpu["streamkm distance"] = cpu["streamkm"]
    truth = s.anomaly[window:]
    flagged = np.concatenate(flags)
    # novelty 1.0 (score 0): the model had fewer recent members than the score
    # needs, or the record is at least as close to the center as all of them
    novelty_one = float(np.mean(np.concatenate(scores["streamkm"]) == 0.0))
    rate = float(flagged.mean())
    n_scored = truth.size
    systems = {}
    for name in names:
        result = set_scores(truth, np.concatenate(scores[name]), rate)
        result["us_per_record"] = 1e6 * cpu[name] / n_scored
        systems[name] = result
    return {
        "name": s.name, "kind": s.kind, "n": n, "d": int(s.X.shape[1]),
        "anomalies": int(s.anomaly.sum()), "scored": n_scored,
        "scored_anomalies": int(truth.sum()), "window": window, "memory": memory,
        "n_clusters": s.n_clusters, "flag_rate": rate,
        "inliers_flagged": float(flagged[~truth].mean()),
        "flag_precision": (float(truth[flagged].mean()) if flagged.any() else float("nan")),
        "novelty_one": novelty_one,
        "systems": systems,
        "settings": {det.name: det.setting() for det in detectors},
    }


def new_mode_run(s: data.NoveltySet, window: int, reach: int = 64, seed: int = 0
                 ) -> dict[str, Any]:
    """streamkm with drift handling (``k_max`` = 2 k) and ``outlier_alpha`` on the stream
    where a new mode appears: per window the new mode's rows flagged and the other rows
    flagged, the window where the flagged rows counted from the appearance reach
    ``reach``, every ``born`` event and the other changes of the clusters (``split``,
    ``merge``, ``retired``)."""
    det = StreamkmDetector(s.n_clusters, seed=seed, drift={"k_max": 2 * s.n_clusters})
    det.start(s.X[:window])
    windows = []
    flagged_since = 0
    reached_at = None
    for w, start in enumerate(range(window, s.X.shape[0], window)):
        det.events = []
        det.score_then_learn(s.X[start:start + window])
        new = s.anomaly[start:start + window]
        if start >= s.appears_at:
            flagged_since += int(det.flags.sum())
            if reached_at is None and flagged_since >= reach:
                reached_at = w
        windows.append({"start": start, "new_rows": int(new.sum()),
                        "new_flagged": int(det.flags[new].sum()),
                        "old_flagged": int(det.flags[~new].sum()), "old_rows": int((~new).sum()),
                        "born": [e for e in det.events if e.get("event") == "born"],
                        "changes": [e for e in det.events
                                    if e.get("event") in ("split", "merge", "retired")],
                        "clusters": int(det.model.n_clusters_)})
    births = [w for w, row in enumerate(windows) if row["born"]]
    changes = [w for w, row in enumerate(windows)
               if row["changes"] and row["start"] >= s.appears_at]
    before = [w for w in births if windows[w]["start"] < s.appears_at]
    after = [w for w in births if windows[w]["start"] >= s.appears_at]
    return {"n": int(s.X.shape[0]), "window": window, "appears_at": s.appears_at,
            "reach": reach, "reached_at_window": reached_at,
            "births_before_appearance": len(before),
            "first_birth_after_window": after[0] if after else None,
            "windows_to_birth": (after[0] - reached_at if after and reached_at is not None
                                 else None),
            "first_change_after_window": changes[0] if changes else None,
            "setting": det.setting(), "windows": windows}


def ari_policies(s: data.NoveltySet, window: int, seed: int = 0) -> dict[str, Any]:
    """Inlier ARI with ``outliers="exclude"`` and ``"learn"``: of the prequential cluster
    ids (windows after the first) and of the final model's ``predict`` of every inlier."""
    out: dict[str, Any] = {"name": s.name, "n": int(s.X.shape[0]), "window": window,
                           "n_clusters": s.n_clusters}
    inlier = ~s.anomaly
    for policy in ("exclude", "learn"):
        model = MiniBatchKernelKMeans(s.n_clusters, outlier_alpha=ALPHA, outliers=policy,
                                      random_state=seed)
        ids = []
        for start in range(0, s.X.shape[0], window):
            report = model.step(s.X[start:start + window])
            if start:
                ids.append(report.cluster_ids)
        pred = np.concatenate(ids)
        keep = inlier[window:]
        out[policy] = {
            "prequential": float(adjusted_rand_score(s.classes[window:][keep], pred[keep])),
            "final": float(adjusted_rand_score(s.classes[inlier],
                                               model.predict(s.X[inlier]))),
        }
    return out


def calibration(streams: list[data.NoveltySet], window: int, warmup: int = 5,
                seed: int = 0) -> list[dict[str, Any]]:
    """Share of records flagged at ``ALPHA`` after ``warmup`` windows on streams without
    anomalies, drift handling off and on (with the births counted)."""
    rows = []
    for s in streams:
        row: dict[str, Any] = {"name": s.name, "n": int(s.X.shape[0]), "window": window}
        for label, params in (("fixed", {}), ("drift", {"drift": {"k_max": 2 * s.n_clusters}})):
            det = StreamkmDetector(s.n_clusters, seed=seed, **params)
            det.start(s.X[:window])
            flags = []
            for w, start in enumerate(range(window, s.X.shape[0], window)):
                det.score_then_learn(s.X[start:start + window])
                if w + 1 >= warmup:
                    flags.append(det.flags)
            row[label] = float(np.concatenate(flags).mean())
            if label == "drift":
                row["births"] = sum(e.get("event") == "born" for e in det.events)
        rows.append(row)
    return rows


def inlier_streams(quick: bool, seed: int = 0) -> list[data.NoveltySet]:
    """Streams without anomalies, shuffled: the generated blobs and moons without their
    noise, and penbased and satimage without their thinned class (``quick``: blobs, moons
    and penbased, at most 2,000 rows each)."""
    n = 2000 if quick else 10_000
    sources = [(data.blobs_with_noise(n, seed), "blobs"),
               (data.moons_with_noise(n, seed), "moons")]
    for name in data.THINNED[:1 if quick else 2]:
        s = data.keel_thinned(name, seed)
        rare = s.name[len(name) + 1:].split("-")[0]  # the class label in "<set>-<label>-1%"
        sources.append((s, f"{name} without class {rare}"))
    out = []
    for s, name in sources:
        keep = ~s.anomaly
        stream = data.NoveltySet(name, "inliers", data.standardise(s.X[keep]), s.anomaly[keep],
                                 s.classes[keep], s.n_clusters).shuffled(seed)
        out.append(stream.head(2000) if quick else stream)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one KEEL file per family, penbased, 2,000-row generated streams")
    parser.add_argument("--repeats", type=int, default=None,
                        help="repeats of the cost table (default 21; --quick: 5)")
    parser.add_argument("--baseline-rev", default=None,
                        help="git revision of the engine before the novelty score, for the "
                             "cost table (default: the newest first-parent ancestor of HEAD "
                             "without streamkm/cluster/_novelty.py)")
    parser.add_argument("--json", type=Path, default=None, help="write every result here")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="render the tables of a saved run instead of running")
    parser.add_argument("--docs", type=Path, default=None,
                        help="write the tables into this markdown file's novelty section")
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
    else:
        results = run_all(args.quick, args.repeats or (5 if args.quick else 21),
                          args.baseline_rev)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(_nan_to_null(results), indent=1,
                                            allow_nan=False) + "\n")
    tables = render(results)
    print(tables)
    if args.docs:
        write_docs(args.docs, tables)
    return 0


def run_all(quick: bool, repeats: int, baseline_rev: str | None = None, seed: int = 0
            ) -> dict[str, Any]:
    """Every table's measurements, in one process."""
    wall = time.perf_counter()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_start": _load(), "streamkm": streamkm.__version__, "quick": quick,
            "seed": seed, "alpha": ALPHA}
    out: dict[str, Any] = {"meta": meta}
    with streamkm.num_threads(1), threadpool_limits(1):
        out["sets"] = []
        for s in data.scored_sets(quick=quick, seed=seed):
            t0 = time.perf_counter()
            out["sets"].append(run_set(s, seed))
            print(f"{s.name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        configs = [(10, 256, 2)] if quick else [(10, 1024, 16), (10, 256, 2)]
        out["cost"] = _novelty_cost.measure(configs, repeats, 3 if quick else 10,
                                            baseline_rev, seed)
        stream = data.new_mode_stream(4000 if quick else 12_000, seed)
        out["new_mode"] = new_mode_run(stream, 250, seed=seed)
        n = 2000 if quick else 10_000
        out["ari"] = [ari_policies(s.shuffled(seed), 500 if not quick else 250, seed)
                      for s in (data.blobs_with_noise(n, seed), data.moons_with_noise(n, seed))]
        out["calibration"] = calibration(inlier_streams(quick, seed), 250 if quick else 500,
                                         seed=seed)
    meta["load_end"] = _load()
    meta["wall_s"] = round(time.perf_counter() - wall, 1)
    meta["cpu_s"] = round(time.process_time(), 1)
    return out


def _nan_to_null(value: Any) -> Any:
    """``value`` with every NaN (an undefined precision) as None, so the file is strict
    JSON (null); the tables read null as undefined."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _nan_to_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_null(v) for v in value]
    return value


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


if __name__ == "__main__":
    raise SystemExit(main())
