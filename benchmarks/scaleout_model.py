"""Scale-out scaling model: throughput of 1-64 machines from measured unit costs, where the
merge leader saturates, and a check of the model against real runs on this machine.

Inputs: the JSON written by ``bench_scaleout_costs.py`` (in-process CPU costs: worker per
record, leader per update and per version, adoption of a version, version size, at each
(k, tau)). Two predictions per machine count P, each member one core:

* **analytic**: the largest record rate X (records/s, all members together) such that
  every member's core keeps up. With N input partitions split over min(P, N) members, a
  member's batch of B records covers ceil(N / P) partitions, so an update stands for
  R = B / ceil(N / P) records and carries m = min(R, k * tau) rows (at most tau per
  cluster). Updates arrive at u = X / R per second; the leader publishes v = max(u / pe,
  min(u, 1 / interval)) versions per second (every ``publish_every_updates`` updates, or
  ``publish_interval_ms`` after the last one), at most one in flight (v <= 1 / (t_V +
  ack)). Then a worker's core needs (X / P) (t_w + t_io) + v t_adopt <= 1 and the leader's
  member, which is also a worker, needs that plus u t_L(m) + v t_V <= 1. The issue's
  formula, min(P / t_w, R / (t_L + t_V / pe)), is printed beside it.
* **simulation**: a discrete-event simulation of the members' loops with the same costs
  (each member: adopt the newest version, the leader applies up to
  ``max_updates_per_round`` queued updates and publishes when due, then one batch; a
  publication reaches the members ``ack`` seconds after it is handed over); the
  throughput is the rate at which the leader absorbs records.

``--validate runs.jsonl`` compares the model with real runs of ``bench_scaleout.py --out``
on this machine (P = 1, 2 processes, the real Tansu broker): CPU seconds per record of the
members in the steady window (load-independent) against the model's, with the Kafka client
work per record (t_io, not measured in-process) calibrated on P = 1 and P = 2 predicted; and
the records per second the members reached on the cores they got.

Usage (from the repository root)::

    .venv/bin/python -m benchmarks.scaleout_model --costs scaleout_costs.json
        [--batch-size 1000] [--partitions 64] [--publish-every 16] [--figure out.png]
        [--validate runs.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import statistics
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MACHINES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class CellCosts:
    """CPU seconds at one (k, tau), measured for updates of a few sizes (``rows``,
    ascending, the last one full), each in its steady state: the leader per update, per
    version and per adopted version on a member, a worker per record; the version's bytes.
    At other sizes they are interpolated (piecewise linear in the rows, constant beyond)."""

    k: int
    tau: int
    rows: tuple[float, ...]
    t_update: tuple[float, ...]
    t_versions: tuple[float, ...]
    t_adopts: tuple[float, ...]
    t_records: tuple[float, ...]  # worker: decode + assign + build updates, per record
    versions_bytes: tuple[float, ...]
    extrapolated: bool = False

    def at(self, values: tuple[float, ...], rows: float) -> float:
        return float(np.interp(rows, self.rows, values))

    def t_leader(self, rows: float) -> float:
        return self.at(self.t_update, rows)

    def t_version(self, rows: float) -> float:
        return self.at(self.t_versions, rows)

    def t_adopt(self, rows: float) -> float:
        return self.at(self.t_adopts, rows)

    def t_record(self, rows: float) -> float:
        return self.at(self.t_records, rows)

    def version_bytes(self, rows: float) -> float:
        return self.at(self.versions_bytes, rows)

    @property
    def max_rows(self) -> float:
        return self.rows[-1]


FIELDS = ("t_update", "t_versions", "t_adopts", "t_records", "versions_bytes")


def load_cells(paths: list[Path]) -> tuple[dict[tuple[int, int], CellCosts], dict[str, Any]]:
    """Cells measured in the cost files; per-record worker costs other than the
    assignment (decode, build updates) come from the ``dense d=16`` worker row."""
    sizes: dict[tuple[int, int], list[dict[str, Any]]] = {}
    meta: dict[str, Any] = {"files": [str(p) for p in paths], "load": []}
    base = None
    for path in paths:
        data = json.loads(path.read_text())
        meta["load"] += data["meta"]["load_average_1min"]
        worker = data["worker"].get("dense d=16")
        if worker is not None:
            base = worker["per_record"]
        for c in data["leader"]:
            sizes.setdefault((c["k"], c["tau"]), []).append(c)
    if base is None:
        raise SystemExit("no 'dense d=16' worker row in the cost files")
    other = base["decode"]["cpu_s"] + base["updates"]["cpu_s"]
    meta["worker_other_s"] = other
    meta["worker_parts"] = {k: v["cpu_s"] for k, v in base.items()}
    cells = {}
    for (k, tau), entries in sizes.items():
        entries = sorted(entries, key=lambda c: c["rows"])
        cells[(k, tau)] = CellCosts(
            k, tau, tuple(float(c["rows"]) for c in entries),
            tuple(c["t_L"]["cpu_s"] for c in entries), tuple(c["t_V"]["cpu_s"] for c in entries),
            tuple(c["t_adopt"]["cpu_s"] for c in entries),
            tuple(c["t_assign_per_record"]["cpu_s"] + other for c in entries),
            tuple(float(c["version_bytes"]) for c in entries))
    return cells, meta


def extrapolate(cells: dict[tuple[int, int], CellCosts], k: int, tau: int) -> CellCosts:
    """A cell not measured: each cost at each measured size (smallest, middle, full) fitted
    as c * k^a * tau^b (least squares in logs) over the measured cells."""
    known = [c for c in cells.values() if len(c.rows) == 3]
    design = np.array([[1.0, math.log(c.k), math.log(c.tau)] for c in known])
    at = np.array([1.0, math.log(k), math.log(tau)])

    def fit(values: list[float]) -> float:
        coef, *_ = np.linalg.lstsq(design, np.log(values), rcond=None)
        return float(math.exp(at @ coef))

    full_share = statistics.median(c.rows[-1] / (c.k * c.tau) for c in known)
    rows = (32.0, k * tau / 4, full_share * k * tau)
    values = {f: tuple(fit([getattr(c, f)[i] for c in known]) for i in range(3))
              for f in FIELDS}
    return CellCosts(k, tau, rows, **values, extrapolated=True)


@dataclass(frozen=True)
class Settings:
    """Deployment settings of the model."""

    batch_size: int = 1000
    partitions: int = 64
    publish_every: int = 16
    publish_interval_s: float = 0.2
    ack_s: float = 0.05
    t_io: float = 0.0  # Kafka client work per record (fetch, produce), seconds
    max_updates_per_round: int = 64

    def shape(self, machines: int) -> tuple[int, int, float]:
        """Active members, partitions per batch (the largest share) and records per
        update."""
        active = min(machines, self.partitions)
        parts = math.ceil(self.partitions / active)
        return active, parts, self.batch_size / parts


def versions_per_s(x: float, cell: CellCosts, s: Settings, machines: int) -> float:
    """Versions published per second at ``x`` records/s: every ``publish_every`` updates
    or ``publish_interval`` after the last one, one in flight, at most one per round of the
    leader's loop (one round per batch of its own)."""
    active, _, per_update = s.shape(machines)
    u = x / per_update
    v = max(u / s.publish_every, min(u, 1.0 / s.publish_interval_s))
    t_v = cell.t_version(min(per_update, cell.max_rows))
    return min(v, 1.0 / (t_v + s.ack_s), x / active / s.batch_size)


def analytic(machines: int, cell: CellCosts, s: Settings) -> dict[str, float | str]:
    """The largest sustainable record rate (see the module docstring) and what binds."""
    active, _, per_update = s.shape(machines)
    rows = min(per_update, cell.max_rows)
    t_l, t_v, t_a = cell.t_leader(rows), cell.t_version(rows), cell.t_adopt(rows)
    t_w = cell.t_record(rows) + s.t_io

    def loads(x: float) -> tuple[float, float]:
        u = x / per_update
        v = versions_per_s(x, cell, s, machines)
        return x / active * t_w + v * t_a, u * t_l + v * t_v

    lo, hi = 0.0, active / t_w
    for _ in range(60):
        mid = (lo + hi) / 2
        worker, leader = loads(mid)
        lo, hi = (mid, hi) if worker + leader <= 1.0 else (lo, mid)
    worker, leader = loads(lo)
    v = versions_per_s(lo, cell, s, machines)
    # saturated: the merge work takes at least half of the leading member's core
    return {"records_per_s": lo, "leader_busy": leader, "worker_busy": worker,
            "binds": "leader" if leader >= 0.5 else "workers",
            "efficiency": lo * t_w / active, "t_w": t_w,
            "records_per_update": per_update, "rows_per_update": rows,
            "versions_per_s": v,
            "fanout_mb_per_s": v * active * cell.version_bytes(rows) / 1e6,
            "issue_formula": min(active / t_w, per_update / (t_l + t_v / s.publish_every))}


def leader_ceiling(cell: CellCosts, s: Settings) -> float:
    """Records/s a leader absorbs with nothing else to do, when every update stands for a
    whole batch (each member owns at most one partition)."""
    machines = s.partitions
    per_update = s.shape(machines)[2]
    rows = min(per_update, cell.max_rows)
    t_l, t_v = cell.t_leader(rows), cell.t_version(rows)
    lo, hi = 0.0, 1e9
    for _ in range(80):
        mid = (lo + hi) / 2
        busy = mid / per_update * t_l + versions_per_s(mid, cell, s, machines) * t_v
        lo, hi = (mid, hi) if busy <= 1.0 else (lo, mid)
    return lo


def simulate(machines: int, cell: CellCosts, s: Settings, seconds: float = 30.0,
             warmup: float = 5.0) -> dict[str, float]:
    """Discrete-event simulation of the members' loops (member 0 leads); every member
    always has a batch waiting (a backlog)."""
    active, parts, per_update = s.shape(machines)
    rows = min(per_update, cell.max_rows)
    t_l, t_v, t_a = cell.t_leader(rows), cell.t_version(rows), cell.t_adopt(rows)
    batch_s = s.batch_size * (cell.t_record(rows) + s.t_io)
    queue: deque[tuple[float, int]] = deque()  # (arrival, model version used)
    events: list[tuple[float, int, int]] = [(0.0, 1, i) for i in range(active)]
    adopted = [0] * active
    newest = published = 0
    in_flight = False
    since = 0
    last_publish = 0.0
    absorbed = busy = behind = 0.0
    applied = 0
    while events:
        t, kind, who = heapq.heappop(events)
        if t > seconds:
            break
        if kind == 0:  # a publication acknowledged: every member may adopt it
            newest, in_flight = who, False
            continue
        now = t
        if newest > adopted[who]:
            now += t_a
            adopted[who] = newest
        if who == 0:
            start, n = now, 0
            while (queue and queue[0][0] <= now and n < s.max_updates_per_round
                   and now < seconds):
                _, used = queue.popleft()
                now += t_l
                n += 1
                since += 1
                if now >= warmup:
                    absorbed += per_update
                    applied += 1
                    behind += published - used
            due = since >= s.publish_every or (
                since and now - last_publish >= s.publish_interval_s)
            if due and not in_flight:
                now += t_v
                published += 1
                in_flight, since, last_publish = True, 0, now
                heapq.heappush(events, (now + s.ack_s, 0, published))
            if now >= warmup:
                busy += min(now, seconds) - max(start, warmup)
        now += batch_s
        for _ in range(parts):
            queue.append((now + s.ack_s / 2, adopted[who]))
        heapq.heappush(events, (now, 1, who))
    window = seconds - warmup
    return {"records_per_s": absorbed / window, "leader_busy": busy / window,
            "queued_updates": len(queue),
            "versions_behind": behind / applied if applied else 0.0}


def table(cells: dict[tuple[int, int], CellCosts], s: Settings, machines: tuple[int, ...],
          sim: bool, sim_seconds: float) -> list[dict[str, Any]]:
    rows = []
    for (k, tau), cell in sorted(cells.items()):
        for p in machines:
            a = analytic(p, cell, s)
            row = {"k": k, "tau": tau, "machines": p, **a,
                   "extrapolated": cell.extrapolated}
            if sim:
                row["simulated"] = simulate(p, cell, s, seconds=sim_seconds)
            rows.append(row)
    return rows


def print_tables(rows: list[dict[str, Any]], cells: dict[tuple[int, int], CellCosts],
                 s: Settings) -> None:
    print(f"\nSettings: batch_size {s.batch_size}, {s.partitions} partitions, publish every "
          f"{s.publish_every} updates or {1e3 * s.publish_interval_s:.0f} ms, ack "
          f"{1e3 * s.ack_s:.0f} ms, t_io {1e6 * s.t_io:.1f} µs/record; one core per member")
    print("\nCosts (CPU) with full updates (k·tau rows; t_L also at 32 rows): t_w µs/record "
          "(t_io included), t_L ms/update, t_V ms/version, t_adopt ms/version, version MB "
          "(* extrapolated)\n")
    print("| k | tau | t_w µs | t_L ms, 32 rows | t_L ms, full | t_V ms | t_adopt ms "
          "| version MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (k, tau), c in sorted(cells.items()):
        star = "*" if c.extrapolated else ""
        full = c.max_rows
        print(f"| {k} | {tau}{star} | {1e6 * (c.t_record(full) + s.t_io):.3g} | "
              f"{1e3 * c.t_leader(32):.3g} | {1e3 * c.t_leader(full):.3g} | "
              f"{1e3 * c.t_version(full):.3g} | {1e3 * c.t_adopt(full):.3g} | "
              f"{c.version_bytes(full) / 1e6:.3g} |")
    print("\nThroughput, records/s (analytic; simulated; issue formula) and what binds\n")
    machines = sorted({r["machines"] for r in rows})
    print("| k | tau | " + " | ".join(f"P={p}" for p in machines) + " | leader saturates at |")
    print("|---:|---:|" + "---:|" * len(machines) + "---|")
    for (k, tau) in sorted(cells):
        mine = [r for r in rows if (r["k"], r["tau"]) == (k, tau)]
        out = []
        for r in mine:
            sim = r.get("simulated")
            txt = f"{r['records_per_s']:.3g}"
            if sim is not None:
                txt += f"; {sim['records_per_s']:.3g}"
            txt += f"; {r['issue_formula']:.3g}"
            out.append(txt + (" L" if r["binds"] == "leader" else ""))
        first = next((r["machines"] for r in mine if r["binds"] == "leader"), None)
        star = "*" if cells[(k, tau)].extrapolated else ""
        print(f"| {k} | {tau}{star} | " + " | ".join(out) + " | "
              + (f"P = {first}" if first is not None else f"> {machines[-1]}") + " |")


def workers_served(cells: dict[tuple[int, int], CellCosts], base: Settings) -> None:
    """How many full-speed workers one leader serves, and what changing the settings buys."""
    variants = [("as configured", base),
                ("publish every 64 updates, 1 s", Settings(**{
                    **base.__dict__, "publish_every": 64, "publish_interval_s": 1.0})),
                ("batch_size x4", Settings(**{**base.__dict__,
                                              "batch_size": 4 * base.batch_size}))]
    print("\nOne leader: records/s it absorbs when updates stand for B records (P >= "
          "partitions) and the full-speed workers it serves (ceiling x t_w)\n")
    print("| k | tau | worker records/s | " + " | ".join(
        f"{name}: ceiling, workers" for name, _ in variants) + " |")
    print("|---:|---:|---:|" + "---|" * len(variants))
    for (k, tau), c in sorted(cells.items()):
        t_w = c.t_record(min(base.batch_size, c.max_rows)) + base.t_io
        out = []
        for _, s in variants:
            ceiling = leader_ceiling(c, s)
            out.append(f"{ceiling:.3g}, {ceiling * t_w:.3g}")
        star = "*" if c.extrapolated else ""
        print(f"| {k} | {tau}{star} | {1 / t_w:.3g} | " + " | ".join(out) + " |")


def figure(rows: list[dict[str, Any]], path: Path, s: Settings) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    for (k, tau) in sorted({(r["k"], r["tau"]) for r in rows}):
        mine = [r for r in rows if (r["k"], r["tau"]) == (k, tau)]
        ps = [r["machines"] for r in mine]
        line, = ax.plot(ps, [r["records_per_s"] for r in mine], marker="o", ms=3,
                        ls="--" if mine[0]["extrapolated"] else "-",
                        label=f"k={k}, tau={tau}" + (" (extrapolated)"
                                                     if mine[0]["extrapolated"] else ""))
        if "simulated" in mine[0]:
            ax.plot(ps, [r["simulated"]["records_per_s"] for r in mine], ls="none",
                    marker="x", color=line.get_color())
    ps = sorted({r["machines"] for r in rows})
    rate = max(c["records_per_s"] / c["efficiency"] / min(c["machines"], s.partitions)
               for c in rows if c["machines"] == 1)
    ax.plot(ps, [min(p, s.partitions) * rate for p in ps], color="grey", ls=":",
            label="P workers at full speed (fastest cell)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("machines (one member each; member 1 also leads)")
    ax.set_ylabel("records/s absorbed by the global model")
    ax.set_title(f"Scale-out model, batch {s.batch_size}, {s.partitions} partitions, "
                 f"publish every {s.publish_every} updates\n(lines: analytic; x: simulation)",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nfigure written to {path}")


def validate(runs_path: Path, cells: dict[tuple[int, int], CellCosts],
             t_io: float | None = None) -> None:
    """Model against real runs (``bench_scaleout.py --out``): CPU per record and
    throughput on the cores the members got. ``t_io`` (Kafka client work per record) is
    calibrated on the P = 1 runs unless given (then every P is predicted)."""
    runs = [json.loads(line) for line in runs_path.read_text().splitlines() if line.strip()]
    cfg = runs[0]["settings"]
    key = (cfg["k"], cfg["tau"])
    if key not in cells:
        raise SystemExit(f"no measured costs at k={key[0]}, tau={key[1]} (run "
                         f"bench_scaleout_costs.py --k {key[0]} --tau {key[1]})")
    cell = cells[key]
    s = Settings(batch_size=cfg["batch_size"], partitions=6)

    def model_cpu(p: int, x: float, t_io: float) -> float:
        """Members' CPU seconds per record at record rate x (updates of the records per
        update measured in the runs: fetches do not spread a batch evenly over the
        partitions)."""
        active = min(p, s.partitions)
        per_update = med[p]["records_per_update"]
        u = x / per_update
        rows = min(per_update, cell.max_rows)
        t_v = cell.t_version(rows)
        v = min(max(u / s.publish_every, min(u, 1.0 / s.publish_interval_s)),
                1.0 / (t_v + s.ack_s), x / active / s.batch_size)
        return (cell.t_record(rows) + t_io + cell.t_leader(rows) / per_update
                + v * (t_v + active * cell.t_adopt(rows)) / x)

    by_p: dict[int, list[dict[str, Any]]] = {}
    for r in runs:
        by_p.setdefault(r["processes"], []).append(r)
    med = {p: {k: statistics.median(r[k] for r in rs) for k in
               ("member_cpu_us_per_record", "steady_records_per_s", "member_cores_used",
                "broker_cpu_us_per_record", "load_average")} for p, rs in by_p.items()}
    for p, rs in by_p.items():  # runs whose leader logged its stats at the graceful stop
        med[p]["records_per_update"] = statistics.median(
            cfg["records"] / r["leader_updates"] for r in rs if r["leader_updates"] > 0)
    one = med[1]
    inproc = model_cpu(1, one["steady_records_per_s"], 0.0)
    print(f"\nValidation against {len(runs)} real runs ({runs_path}), k={key[0]}, "
          f"tau={key[1]}, batch {cfg['batch_size']}, 6 partitions; medians over the repeats")
    if t_io is None:
        t_io = one["member_cpu_us_per_record"] / 1e6 - inproc
        print(f"In-process costs explain {1e6 * inproc:.3g} of the "
              f"{one['member_cpu_us_per_record']:.3g} µs of member CPU per record at P=1; "
              f"the rest, t_io = {1e6 * t_io:.3g} µs/record (Kafka clients, sinks, loop), is "
              "calibrated there.\n")
    else:
        print(f"t_io = {1e6 * t_io:.3g} µs/record given (calibrated on other runs); "
              f"in-process costs at P=1: {1e6 * inproc:.3g} µs/record.\n")
    print("| P | member CPU µs/record: measured | model | model / measured | records/s: "
          "measured | model on the cores the members got | model / measured | cores got "
          "| broker CPU µs/record | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in sorted(med):
        m = med[p]
        pred_cpu = 1e6 * model_cpu(p, m["steady_records_per_s"], t_io)
        pred_x = m["member_cores_used"] / (pred_cpu / 1e6)
        print(f"| {p} | {m['member_cpu_us_per_record']:.3g} | {pred_cpu:.3g} | "
              f"{pred_cpu / m['member_cpu_us_per_record']:.2f} | "
              f"{m['steady_records_per_s']:.4g} | {pred_x:.4g} | "
              f"{pred_x / m['steady_records_per_s']:.2f} | {m['member_cores_used']:.2f} | "
              f"{m['broker_cpu_us_per_record']:.3g} | {m['load_average']:.1f} |")
    print(f"\nt_io for the scaling table: {1e6 * t_io:.3g} µs/record (use --io-us)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--costs", type=Path, nargs="+", default=[Path("scaleout_costs.json")])
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--publish-every", type=int, default=16)
    parser.add_argument("--publish-interval-ms", type=float, default=200.0)
    parser.add_argument("--ack-ms", type=float, default=50.0,
                        help="handing a version to the broker until every member has it")
    parser.add_argument("--io-us", type=float, default=0.0,
                        help="Kafka client work per record (from --validate; given with "
                        "--validate, every P is predicted with it)")
    parser.add_argument("--extrapolate", type=int, nargs=2, action="append",
                        metavar=("K", "TAU"), default=None,
                        help="also model an unmeasured (k, tau) (default: 64 1000)")
    parser.add_argument("--machines", type=int, nargs="+", default=list(MACHINES))
    parser.add_argument("--no-sim", action="store_true")
    parser.add_argument("--sim-seconds", type=float, default=30.0)
    parser.add_argument("--figure", type=Path, default=None)
    parser.add_argument("--validate", type=Path, default=None,
                        help="JSON lines of bench_scaleout.py --out")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument("--quick", action="store_true",
                        help="P = 1, 4, 16, 64 and 10 simulated seconds")
    args = parser.parse_args()
    if args.quick:
        args.machines, args.sim_seconds = [1, 4, 16, 64], 10.0
    cells, meta = load_cells(args.costs)
    if args.validate is not None:
        validate(args.validate, cells, args.io_us / 1e6 if args.io_us else None)
    for k, tau in args.extrapolate or [(64, 1000)]:
        if (k, tau) not in cells:
            cells[(k, tau)] = extrapolate(cells, k, tau)
    s = Settings(args.batch_size, args.partitions, args.publish_every,
                 args.publish_interval_ms / 1000.0, args.ack_ms / 1000.0, args.io_us / 1e6)
    print(f"costs from {', '.join(meta['files'])} (load average "
          f"{min(meta['load']):.1f}-{max(meta['load']):.1f} while measured)")
    rows = table(cells, s, tuple(args.machines), not args.no_sim, args.sim_seconds)
    print_tables(rows, cells, s)
    workers_served(cells, s)
    if args.figure is not None:
        figure(rows, args.figure, s)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
