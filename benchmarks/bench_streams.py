"""Head to head on streams: streamkm against scikit-learn's and River's streaming clusterers,
evaluated prequentially.

Run (one thread each, as in docs/benchmarks.md):

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/bench_streams.py --figures docs/images

Every system sees the same stream in the same order. Per window of ``W`` records it first
predicts the window (scored against the true classes), then learns it; the first window is
learnt only (nothing can predict before it). Systems take turns window by window, the first
of each window rotating, in one process. Per system and stream:

* mean and worst-window ARI, NMI and purity, and the ARI of all prequential predictions of
  the stream against all its labels (stable cluster ids carry over windows; methods that
  renumber their clusters when they re-cluster lose there, not in the window scores);
* records/s: rows learnt over the CPU time (``time.process_time``) of the learner's calls
  alone, and median (min-max) of the same rate over the five fifths of the stream;
* the size of the model's state: streamkm's checkpoint arrays (``get_state``), the others'
  pickled object, the largest of five measurements along the stream;
* the number of clusters over time: the model's own count where it has one, and the true
  classes of each window.

CMM (Kremer et al., KDD 2011) is not implemented.

A River clusterer whose learner CPU time on one stream exceeds ``--budget`` seconds stops
there and is scored on the prefix it saw (marked with its row count); it always sees at least
two windows, so it is scored on at least one. Before each stream,
streamkm's modes and scikit-learn run untimed on its first two windows, so numba's
compilation (once per process) is not counted as a learner's time. ``--quick`` runs every stream
on small prefixes in a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _streams_data import Stream, all_streams  # noqa: E402
from _streams_systems import StreamFacts, System, all_systems  # noqa: E402

import streamkm  # noqa: E402


def purity(y: np.ndarray, pred: np.ndarray) -> float:
    """Share of rows whose predicted cluster's most common class is their own class."""
    _, p = np.unique(pred, return_inverse=True)
    _, t = np.unique(y, return_inverse=True)
    table = np.zeros((p.max() + 1, t.max() + 1), dtype=np.int64)
    np.add.at(table, (p, t), 1)
    return float(table.max(axis=1).sum() / y.size)


@dataclass
class Run:
    """One system on one stream."""

    system: str
    setting: str
    ari: list[float] = field(default_factory=list)
    nmi: list[float] = field(default_factory=list)
    purity: list[float] = field(default_factory=list)
    window_start: list[int] = field(default_factory=list)
    clusters: list[int | None] = field(default_factory=list)
    predictions: list[np.ndarray] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    state_bytes: int = 0
    stopped_at: int | None = None

    def summary(self, y: np.ndarray, n_records: int) -> dict:
        seen = int(sum(self.rows))
        pred = np.concatenate(self.predictions) if self.predictions else np.zeros(0, int)
        scored = y[self.rows[0]:self.rows[0] + pred.size] if self.rows else y[:0]
        rates = []
        for part in np.array_split(np.arange(len(self.rows)), 5):
            if part.size:
                cpu = sum(self.cpu[i] for i in part)
                rates.append(sum(self.rows[i] for i in part) / max(cpu, 1e-9))
        return {
            "system": self.system, "setting": self.setting,
            "ari_mean": _mean(self.ari), "ari_worst": min(self.ari, default=float("nan")),
            "nmi_mean": _mean(self.nmi), "nmi_worst": min(self.nmi, default=float("nan")),
            "purity_mean": _mean(self.purity),
            "purity_worst": min(self.purity, default=float("nan")),
            "ari_stream": float(adjusted_rand_score(scored, pred)) if pred.size else float("nan"),
            "records_per_s": seen / max(sum(self.cpu), 1e-9),
            "records_per_s_fifths": [statistics.median(rates), min(rates), max(rates)],
            "state_bytes": self.state_bytes, "rows": seen,
            "prefix": seen < n_records, "windows": len(self.ari),
            "clusters": self.clusters, "ari_windows": self.ari,
            "window_start": self.window_start,
        }


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def run_stream(stream: Stream, systems: list[System], window: int, budget: float
               ) -> tuple[list[dict], dict]:
    """All ``systems`` on ``stream``, interleaved window by window."""
    n = stream.X.shape[0]
    starts = list(range(0, n, window))
    first = stream.X[:window]
    k0 = (int(np.unique(stream.y[:window]).size) if stream.events or stream.name == "demo"
          else stream.n_classes)
    facts = StreamFacts(n_clusters=k0, window=window, first_window=first)
    for system in systems:
        if not system.uses_dicts:
            # Untimed, on the first two windows: compiles the numba kernels this stream's
            # path needs (once per process); the timed run starts a fresh model.
            system.start(facts)
            for s in (0, window):
                system.step(stream.X[s:s + window], None)
    runs = []
    for system in systems:
        system.start(facts)
        runs.append(Run(system.name, system.setting()))
    checkpoints = {starts[int(i)] for i in np.linspace(0, len(starts) - 1, 5)}
    true_clusters = []
    for w, s in enumerate(starts):
        x, y = stream.X[s:s + window], stream.y[s:s + window]
        true_clusters.append(int(np.unique(y).size))
        rows = [dict(enumerate(r)) for r in x.tolist()]
        order = [(w + i) % len(systems) for i in range(len(systems))]
        for i in order:
            system, run = systems[i], runs[i]
            if run.stopped_at is not None:
                continue
            t0 = time.process_time()
            labels = system.step(x, rows if system.uses_dicts else None)
            run.cpu.append(time.process_time() - t0)
            run.rows.append(x.shape[0])
            run.clusters.append(system.model_clusters())
            if labels is not None:
                run.window_start.append(s)
                run.predictions.append(labels)
                run.ari.append(float(adjusted_rand_score(y, labels)))
                run.nmi.append(float(normalized_mutual_info_score(y, labels)))
                run.purity.append(purity(y, labels))
            if s in checkpoints:
                run.state_bytes = max(run.state_bytes, system.state_bytes())
            # A prefix is scored on at least one window, however slow its learner.
            if (system.uses_dicts and run.ari and sum(run.cpu) > budget
                    and s + window < n):
                run.stopped_at = s + window
                run.state_bytes = max(run.state_bytes, system.state_bytes())
    info = {"name": stream.name, "n": n, "d": int(stream.X.shape[1]), "k": k0,
            "window": window, "true_clusters": true_clusters,
            "events": [(e.kind, e.at) for e in stream.events]}
    return [run.summary(stream.y, n) for run in runs], info


def _fmt_rate(r: float) -> str:
    return f"{r:,.0f}"


def _fmt_bytes(b: int) -> str:
    return f"{b / 1024:,.0f} KiB" if b < 1 << 20 else f"{b / (1 << 20):,.1f} MiB"


def stream_table(results: list[dict], info: dict) -> str:
    lines = [f"#### {info['name']} (n={info['n']:,}, d={info['d']}, k={info['k']}, "
             f"W={info['window']})", "",
             "| system | setting | ARI mean | ARI worst | NMI mean | NMI worst | purity mean "
             "| purity worst | ARI whole stream | records/s | records/s per fifth, median "
             "(min-max) | state | rows |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        med, lo, hi = r["records_per_s_fifths"]
        rows = f"{r['rows']:,}" + (" (prefix)" if r["prefix"] else "")
        lines.append(
            f"| {r['system']} | {r['setting']} | {r['ari_mean']:.3f} | {r['ari_worst']:.3f} "
            f"| {r['nmi_mean']:.3f} | {r['nmi_worst']:.3f} | {r['purity_mean']:.3f} "
            f"| {r['purity_worst']:.3f} | {r['ari_stream']:.3f} | {_fmt_rate(r['records_per_s'])} "
            f"| {_fmt_rate(med)} ({_fmt_rate(lo)}-{_fmt_rate(hi)}) "
            f"| {_fmt_bytes(r['state_bytes'])} | {rows} |")
    return "\n".join(lines)


def floors_table(all_results: list[tuple[list[dict], dict]]) -> str:
    """The floors per stream: the better streamkm mode (defaults or drift) against
    the best other system that saw the whole stream, by mean window ARI and by the whole
    stream's ARI; streamkm's records/s over River's fastest and over River's most accurate;
    linear mode over River's fastest and over scikit-learn's MiniBatchKMeans."""
    lines = ["| stream | d | best streamkm, window ARI | best other, window ARI | gap "
             "| best streamkm, stream ARI | best other, stream ARI | gap "
             "| streamkm / fastest River, records/s | streamkm / most accurate River, records/s "
             "| linear / fastest River, records/s | linear / sklearn, records/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for results, info in all_results:
        by = {r["system"]: r for r in results}
        ours = [by[s] for s in ("streamkm", "streamkm drift") if s in by]
        others = [r for r in results if not r["system"].startswith("streamkm")
                  and not r["prefix"]]
        cells = [info["name"], str(info["d"])]
        for key in ("ari_mean", "ari_stream"):
            best = max(ours, key=lambda r: r[key])
            other = max(others, key=lambda r: r[key])
            cells += [f"{best['system']} ({best[key]:.3f})", f"{other['system']} ({other[key]:.3f})",
                      f"{best[key] - other[key]:+.3f}"]
        river = [r for r in results if r["system"].startswith("River")]
        for pick in ("records_per_s", "ari_mean"):
            if river:
                ref = max(river, key=lambda r: r[pick])
                cells.append(f"{by['streamkm']['records_per_s'] / ref['records_per_s']:.1f}x "
                             f"({ref['system']})")
            else:
                cells.append("")
        linear = by.get("streamkm linear")
        if river and linear is not None:
            ref = max(river, key=lambda r: r["records_per_s"])
            cells.append(f"{linear['records_per_s'] / ref['records_per_s']:.1f}x")
        else:
            cells.append("")
        lin = ""
        if "streamkm linear" in by and "sklearn MiniBatchKMeans" in by:
            ratio = (by["streamkm linear"]["records_per_s"]
                     / by["sklearn MiniBatchKMeans"]["records_per_s"])
            lin = f"{ratio:.1f}x"
        cells.append(lin)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def clusters_table(results: list[dict], info: dict) -> str:
    """Clusters over time on a stream with events: true classes per window and each
    streamkm mode's count, every ``step`` windows."""
    step = max(1, len(info["true_clusters"]) // 20)
    idx = list(range(0, len(info["true_clusters"]), step))
    head = "| window start | " + " | ".join(f"{i * info['window']:,}" for i in idx) + " |"
    lines = [head, "|---" * (len(idx) + 1) + "|",
             "| true classes | " + " | ".join(str(info["true_clusters"][i]) for i in idx) + " |"]
    for r in results:
        if r["system"].startswith("streamkm") or "DenStream" in r["system"] \
                or "DBSTREAM" in r["system"]:
            cells = [str(r["clusters"][i]) if i < len(r["clusters"]) else "" for i in idx]
            lines.append(f"| {r['system']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(results: list[dict], info: dict, path: Path) -> None:
    """ARI per window (one line per system) above; clusters in the model over time and
    records/s bars below."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(13, 8.5))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.15, 1], width_ratios=[1.2, 1])
    ari_ax = fig.add_subplot(grid[0, :])
    k_ax, rate_ax = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    colors = plt.get_cmap("tab20").colors
    cap = 3 * max(info["true_clusters"])
    for i, r in enumerate(results):
        ours = r["system"].startswith("streamkm")
        style, width = ("-", 2.2) if ours else ("--", 1.0)
        label = r["system"] + (" (prefix)" if r["prefix"] else "")
        ari_ax.plot(r["window_start"], r["ari_windows"], style, lw=width,
                    color=colors[i % 20], label=label)
        counts = r["clusters"]
        if counts and all(c is not None for c in counts):
            k_ax.plot([j * info["window"] for j in range(len(counts))],
                      [min(c, cap) for c in counts], style, lw=width, color=colors[i % 20])
    starts = [j * info["window"] for j in range(len(info["true_clusters"]))]
    k_ax.plot(starts, info["true_clusters"], "k-", lw=3, alpha=0.35, label="true classes")
    for kind, at in info["events"]:
        for ax in (ari_ax, k_ax):
            ax.axvline(at, color="grey", lw=0.8, ls=":")
        ari_ax.text(at, 1.01, kind, fontsize=8, va="bottom", ha="center")
    ari_ax.set_ylim(-0.1, 1.0)
    ari_ax.set_xlabel("record")
    ari_ax.set_ylabel("ARI of the window (prequential)")
    ari_ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    k_ax.set_xlabel("record")
    k_ax.set_ylabel(f"clusters in the model (capped at {cap})")
    k_ax.set_ylim(0, cap + 1)
    k_ax.legend(fontsize=8, loc="upper left")
    names = [r["system"] + (" *" if r["prefix"] else "") for r in results]
    rates = [r["records_per_s"] for r in results]
    rate_ax.barh(range(len(results)), rates, color=[colors[i % 20] for i in range(len(results))])
    rate_ax.set_yticks(range(len(results)), names, fontsize=7)
    rate_ax.invert_yaxis()
    rate_ax.set_xscale("log")
    rate_ax.set_xlabel("records/s, learner CPU time (* = prefix)")
    fig.suptitle(f"{info['name']}: n={info['n']:,}, d={info['d']}, k={info['k']}, "
                 f"window {info['window']}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def report(everything: list[tuple[list[dict], dict]], figures: Path | None) -> None:
    """Every stream's tables (and figure), then the floors table."""
    for results, info in everything:
        print(stream_table(results, info), flush=True)
        if info["events"] or info["name"] == "demo":
            print("\n" + clusters_table(results, info), flush=True)
        print()
        if figures:
            figure(results, info, figures / f"streams-{info['name']}.png")
    print("### Floors\n")
    print(floors_table(everything))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small prefixes of every stream (a few minutes)")
    parser.add_argument("--streams", nargs="*", default=None,
                        help="names of the streams to run (default: all)")
    parser.add_argument("--window", type=int, default=None,
                        help="records per window (default 500 for the KEEL sets and 1000 for "
                             "the generated streams; --quick: 250 and 500)")
    parser.add_argument("--budget", type=float, default=None,
                        help="learner CPU seconds per River clusterer and stream before it "
                             "stops on a prefix (default 10; --quick: 1)")
    parser.add_argument("--rows", type=int, default=None,
                        help="records per stream: a random subset of each KEEL set, the "
                             "first records of the generated streams (default: whole sets and "
                             "40,000; --quick: 2,000 and 8,000)")
    parser.add_argument("--no-river", action="store_true", help="leave River's clusterers out")
    parser.add_argument("--figures", type=Path, default=None,
                        help="folder for the figures streams-<stream>.png")
    parser.add_argument("--json", type=Path, default=None, help="write every result here")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="print the tables and draw the figures of a saved run instead")
    args = parser.parse_args(argv)
    if args.figures:
        args.figures.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        report([(run["results"], run["info"]) for run in saved], args.figures)
        return 0
    budget = args.budget if args.budget is not None else (1.0 if args.quick else 10.0)
    streams = all_streams(quick=args.quick, rows=args.rows)
    if args.streams:
        streams = [s for s in streams if s.name in args.streams]
        if not streams:
            parser.error(f"no stream named {args.streams}")
    wall = time.perf_counter()
    print(f"# bench_streams {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average {_load()}, streamkm {streamkm.__version__}, River budget {budget:g} s"
          + (", quick" if args.quick else "") + "\n", flush=True)
    everything = []
    with streamkm.num_threads(1), threadpool_limits(1):
        for stream in streams:
            generated = bool(stream.events) or stream.name == "demo"
            window = args.window or ((500 if args.quick else 1000) if generated
                                     else (250 if args.quick else 500))
            t0 = time.perf_counter()
            everything.append(run_stream(stream, all_systems(river=not args.no_river), window,
                                         budget))
            print(f"{stream.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps([{"info": i, "results": r} for r, i in everything]))
    report(everything, args.figures)
    print(f"\nload average at the end {_load()}, wall {time.perf_counter() - wall:.0f} s, "
          f"process CPU {time.process_time():.0f} s")
    return 0


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


if __name__ == "__main__":
    raise SystemExit(main())
