"""Does the number of clusters follow a stream's scheduled events? Drift handling's settings
side by side on :func:`streamkm.datasets.make_drifting_stream`.

Each setting sees the same stream window by window (``step``: assign with the centers
before the update, then learn). Per window: the model's number of clusters after the step
and the number of true classes in the window. Per scheduled event that changes the number
of classes (an appearance or a split adds one, a disappearance or a merge takes one away):
the lag in windows from the window holding the event's ``at`` to the first later window
whose step changed the model's k in the same direction (a split or birth; a merge or
retirement) and that no earlier event took, or "not followed" within ``--horizon``
windows; the changes no event took are counted apart. Also: the share of windows
whose k equals the classes in the window, and the mean window ARI after the first window.

Usage::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \\
        python benchmarks/bench_stream_events.py --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.metrics import adjusted_rand_score

from streamkm import MiniBatchKernelKMeans
from streamkm.datasets import make_drifting_stream

#: what each setting passes to MiniBatchKernelKMeans besides n_clusters and random_state
SETTINGS: dict[str, dict[str, Any]] = {
    "drift": {"drift": True},
    "drift + births, retirements, redundancy merges": {
        "drift": {"retire_after": 3, "merge_below": 0.6, "merge_every": 2},
        "outlier_alpha": 0.01,
    },
}
#: the change in the number of classes each kind of event makes
CHANGE = {"appear": +1, "split": +1, "disappear": -1, "merge": -1}
GROW, SHRINK = ("split", "born"), ("merge", "retired")


@dataclass
class Run:
    setting: str
    seed: int
    k_model: list[int] = field(default_factory=list)
    k_true: list[int] = field(default_factory=list)
    changes: list[tuple[int, int]] = field(default_factory=list)  # (window, +1 / -1)
    aris: list[float] = field(default_factory=list)
    cpu_s: float = 0.0


def run_setting(name: str, x: np.ndarray, y: np.ndarray, n_clusters: int, window: int,
                seed: int) -> Run:
    """One setting over the stream."""
    model = MiniBatchKernelKMeans(n_clusters, random_state=seed, **SETTINGS[name])
    run = Run(name, seed)
    started = time.process_time()
    for w, start in enumerate(range(0, x.shape[0], window)):
        fitted = model.is_fitted()
        report = model.step(x[start:start + window])
        truth = y[start:start + window]
        if fitted:
            run.aris.append(float(adjusted_rand_score(truth, report.cluster_ids)))
        for event in report.events or ():
            kind = event.get("event")
            if kind in GROW or kind in SHRINK:
                run.changes.append((w, +1 if kind in GROW else -1))
        run.k_model.append(int(model.n_clusters_))
        run.k_true.append(int(np.unique(truth).shape[0]))
    run.cpu_s = time.process_time() - started
    return run


def event_lags(run: Run, events: Any, window: int, horizon: int) -> list[tuple[str, int | None]]:
    """Per class-changing event: windows from the event's window to the first same-direction
    change of k (None: not within ``horizon``)."""
    out, taken = [], set()
    for event in events:
        sign = CHANGE.get(event.kind)
        if sign is None:
            continue
        at = event.at // window
        match = next((i for i, (w, s) in enumerate(run.changes)
                      if i not in taken and s == sign and at <= w <= at + horizon), None)
        if match is not None:
            taken.add(match)
        out.append((event.kind, None if match is None else run.changes[match][0] - at))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--horizon", type=int, default=5,
                        help="windows after an event within which a change counts (default 5)")
    parser.add_argument("--json", help="write every run's per-window figures here")
    args = parser.parse_args(argv)
    print(f"make_drifting_stream({args.rows}), W = {args.window}, seeds {args.seeds}, "
          f"load {os.getloadavg()[0]:.1f}")
    runs, lags = [], {}
    for seed in args.seeds:
        x, y, events = make_drifting_stream(args.rows, random_state=seed)
        k0 = int(np.unique(y[:args.window]).shape[0])
        for name in SETTINGS:
            run = run_setting(name, x, y, k0, args.window, seed)
            runs.append(run)
            lags[(name, seed)] = event_lags(run, events, args.window, args.horizon)
    print()
    print(f"| setting | seed | events followed within {args.horizon} windows (lag) "
          "| changes of k (not following an event) | windows with k = classes | mean window ARI | CPU s |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for run in runs:
        cells = ", ".join(f"{kind} {'-' if lag is None else lag}"
                          for kind, lag in lags[(run.setting, run.seed)])
        hit = np.mean(np.array(run.k_model) == np.array(run.k_true))
        matched = sum(lag is not None for _, lag in lags[(run.setting, run.seed)])
        print(f"| {run.setting} | {run.seed} | {cells} | {len(run.changes)} "
              f"({len(run.changes) - matched}) | {hit:.0%} "
              f"| {np.mean(run.aris):.3f} | {run.cpu_s:.1f} |")
    print()
    print("| setting | events followed | median lag (windows) | windows with k = classes, "
          "median | mean window ARI, median (min-max) |")
    print("|---|---:|---:|---:|---|")
    for name in SETTINGS:
        mine = [r for r in runs if r.setting == name]
        all_lags = [lag for r in mine for _, lag in lags[(name, r.seed)]]
        followed = [lag for lag in all_lags if lag is not None]
        hits = [np.mean(np.array(r.k_model) == np.array(r.k_true)) for r in mine]
        aris = [np.mean(r.aris) for r in mine]
        median_lag = f"{np.median(followed):.0f}" if followed else "-"
        print(f"| {name} | {len(followed)} of {len(all_lags)} | {median_lag} "
              f"| {np.median(hits):.0%} | {np.median(aris):.3f} "
              f"({min(aris):.3f}-{max(aris):.3f}) |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{**r.__dict__, "lags": lags[(r.setting, r.seed)]} for r in runs], fh)


if __name__ == "__main__":
    main()
