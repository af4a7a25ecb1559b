"""Scale-out unit costs, measured in-process: what one record costs a worker and what one
update and one published version cost the merge leader.

These are the inputs of the scaling model (``benchmarks/scaleout_model.py``). Every cost is
measured on the library's own code paths, in this process, one thread:

* **worker, per record** (``t_w``): decoding a batch of JSON records
  (:class:`~streamkm.io.decoding.RecordDecoder`), assigning it with the global model
  (``transform`` + ``argmin``, as :class:`~streamkm.scaleout.worker.ScaleoutWorker` does), and
  building the batch's updates (:func:`~streamkm.scaleout.compress.subsample_per_cluster`
  per partition + :func:`~streamkm.scaleout.messages.encode_message`);
* **worker, per version** (``t_adopt``): decoding a published version and building its
  model (every member adopts every version it sees);
* **leader, per update** (``t_L``): :func:`~streamkm.scaleout.messages.decode_message` +
  :meth:`~streamkm.scaleout.leader.MergeLeader.apply` of one update (a weighted step of
  the global model on its rows), for k in {4, 16, 64} and tau in {50, 200, 1000} (and
  k = 8, tau = 100, the setting of ``bench_scaleout.py``), for updates standing for 32,
  k * tau / 4 and 3 k * tau records (the last one full: k * tau rows), each size on its own
  leader in its steady state (a center's support holds its newest updates up to tau rows, so
  the support sizes depend on the update size);
* **leader, per version** (``t_V``): :meth:`~streamkm.scaleout.leader.MergeLeader.snapshot`
  + :meth:`~streamkm.scaleout.leader.ModelVersion.to_bytes` (the CPU side of a
  publication; the broker round trip is not CPU and is measured by ``bench_scaleout.py``);
* the leader's per-update cost with updates from **W workers** (W partitions, each owned by
  another fence token, round-robin, computed against older versions);
* **sketching on / off** at d = 1000 input features: worker projection
  (:class:`~streamkm.sketch.RandomProjection`, r = ceil(k / eps^2)) + assignment in r
  dimensions against assignment in d dimensions, and the leader's step on sketch-sized rows
  against full rows: the costs of the same in-process operations, not of a scale-out run
  with ``[sketch]`` (whose updates also carry their raw rows; ``bench_scaleout.py --sketch``
  runs that).

Kafka client work (fetching records, producing assignments, updates and versions) is not
included: ``scaleout_model.py --validate`` calibrates it from a real run.

Every cost is the median over ``--repeats`` interleaved repeats (the cells of a table take
turns within each repeat) of process CPU time (``time.process_time``); wall-clock medians
are kept beside it in the JSON output. The (k=64, tau=1000) cell is not run: its version is
about 0.5 GB (k * tau^2 Gram entries) and a full update's kernel block 64,000 x 64,000;
``scaleout_model.py`` extrapolates it and says so.

Usage (from the repository root)::

    .venv/bin/python -m benchmarks.bench_scaleout_costs [--repeats 5] [--out costs.json]
    .venv/bin/python -m benchmarks.bench_scaleout_costs --quick   # smoke test, small grid
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from streamkm import MiniBatchKernelKMeans, num_threads
from streamkm.io.decoding import RecordDecoder
from streamkm.scaleout.compress import subsample_per_cluster
from streamkm.scaleout.leader import MergeLeader, ModelVersion
from streamkm.scaleout.ledger import PartitionLedger
from streamkm.scaleout.messages import Fence, ModelUpdate, decode_message, encode_message
from streamkm.sketch import RandomProjection, kmeans_sketch_dimension
from streamkm.sources import RawRecord

GRID_K = (4, 16, 64)
GRID_TAU = (50, 200, 1000)
SKIPPED = {(64, 1000)}
WORKERS = (1, 4, 16, 64)


@dataclass
class Timings:
    """CPU and wall seconds of repeated calls of one operation."""

    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    def time(self, fn: Callable[[], Any], per: float = 1.0) -> Any:
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        self.cpu.append((time.process_time() - c0) / per)
        self.wall.append((time.perf_counter() - w0) / per)
        return out

    def summary(self) -> dict[str, float]:
        return {"cpu_s": statistics.median(self.cpu), "cpu_min_s": min(self.cpu),
                "cpu_max_s": max(self.cpu), "wall_s": statistics.median(self.wall),
                "repeats": len(self.cpu)}


def mixture(rng: np.random.Generator, k: int, d: int, n: int) -> np.ndarray:
    centers = rng.normal(0.0, 4.0, (k, d))
    return centers[rng.integers(k, size=n)] + rng.normal(0.0, 1.0, (n, d))


#: ``tol`` of the measured models: 0 never converges (every step updates the centers, the
#: model while it learns); ``--mode converged`` keeps the default, and the models converge
#: within the first steps (steps then only assign, until the monitor wakes them).
TOL = {"updating": 0.0, "converged": 0.005}
MODE = ["updating"]


def warm_model(x: np.ndarray, k: int, tau: int, batch: int) -> MiniBatchKernelKMeans:
    """A model whose centers have (close to) full supports: a few steps of ``batch`` rows."""
    model = MiniBatchKernelKMeans(k, tau=tau, n_init=1, random_state=0, batch_size=batch,
                                  tol=TOL[MODE[0]])
    for lo in range(0, min(x.shape[0], 3 * batch), batch):
        model.partial_fit(x[lo:lo + batch])
    return model


def update_bytes(model: MiniBatchKernelKMeans, x: np.ndarray, partition: str, token: str,
                 start: int, version: int, rng: np.random.Generator) -> bytes:
    """An encoded update of ``x`` (one partition's share of a batch), as a worker builds it."""
    labels = np.argmin(model.transform(x), axis=1)
    rows, mult = subsample_per_cluster(labels, int(model.n_clusters_), int(model.tau), rng)
    return encode_message(ModelUpdate(partition=partition, start=start,
                                      end=start + x.shape[0], token=token, worker="w",
                                      model_version=version, rows=x[rows],
                                      multiplicities=mult))


class LeaderCell:
    """A merge leader at one (k, tau, d) fed updates standing for ``records`` records each.

    It starts from a warm model (``state``) and applies a few untimed updates of its size
    first: a center's support holds its newest batches up to ``tau`` rows, so the support
    sizes -- and what a step, a version and an assignment cost -- depend on the size of the
    updates the leader receives, and each size is measured in its own steady state.
    """

    def __init__(self, k: int, tau: int, records: int, x: np.ndarray,
                 state: tuple[dict[str, np.ndarray], dict[str, Any]],
                 rng: np.random.Generator, settle: int = 3) -> None:
        self.k, self.tau, self.d, self.records = k, tau, x.shape[1], records
        self.rng, self.x = rng, x
        start = ModelVersion(applied_offset=-1, ledger=PartitionLedger(),
                             model_arrays={n: a.copy() for n, a in state[0].items()},
                             model_meta=state[1])
        self.leader = MergeLeader(lambda: None, init_records=1, start=start, member="bench")
        self.offsets: dict[str, int] = {}
        self.next_offset = 0
        self.rows: list[int] = []
        self.t_update = Timings()
        self.t_version = Timings()
        self.t_adopt = Timings()
        self.t_assign = Timings()
        self.version_bytes = 0
        for _ in range(settle):
            self.apply_update(into=Timings())
        self.rows.clear()

    @classmethod
    def sizes(cls, k: int, tau: int, d: int, rng: np.random.Generator,
              records: tuple[int, ...]) -> list[LeaderCell]:
        """One cell per update size, sharing one warm model."""
        n = k * tau
        x = mixture(rng, k, d, max(8 * n, 4 * max(records)))
        state = warm_model(x, k, tau, n).get_state()
        return [cls(k, tau, r, x, state, rng) for r in records]

    def fence(self, partitions: int) -> None:
        for p in range(partitions):
            key = f"t:{p}"
            if key not in self.offsets:
                self.leader.apply(Fence(key, f"tok{p}", "w"), self.next_offset)
                self.next_offset += 1
                self.offsets[key] = 0

    def apply_update(self, partition: int = 0, stale_by: int = 0,
                     into: Timings | None = None) -> None:
        """Time decoding + applying one update of ``partition`` (at most ``tau`` rows per
        cluster: 3 k tau records give a full update of about k * tau rows)."""
        self.fence(partition + 1)
        key = f"t:{partition}"
        n = self.records
        lo = self.rng.integers(0, self.x.shape[0] - n)
        data = update_bytes(self.leader.model, self.x[lo:lo + n], key, f"tok{partition}",
                            self.offsets[key], self.leader.version - stale_by, self.rng)
        self.rows.append(int(decode_message(data).rows.shape[0]))
        self.offsets[key] += n
        offset = self.next_offset
        self.next_offset += 1
        timings = into if into is not None else self.t_update
        outcome = timings.time(lambda: self.leader.apply(decode_message(data), offset))
        assert outcome.verdict == "applied", outcome.verdict

    def assign(self, n: int = 1000) -> None:
        """Time a worker's assignment of ``n`` records with this model (per record)."""
        x = self.x[:n]
        self.t_assign.time(lambda: np.argmin(self.leader.model.transform(x), axis=1), per=n)

    def publish_and_adopt(self) -> None:
        data = self.t_version.time(lambda: self.leader.snapshot().to_bytes())
        self.version_bytes = len(data)
        self.t_adopt.time(lambda: ModelVersion.from_bytes(data).build_model())

    def round(self) -> None:
        """One repeat: an update, a version (published and adopted), an assignment."""
        self.apply_update()
        self.publish_and_adopt()
        self.assign()

    def summary(self) -> dict[str, Any]:
        return {"k": self.k, "tau": self.tau, "d": self.d, "records": self.records,
                "rows": statistics.median(self.rows) if self.rows else None,
                "support_rows": int(self.leader.model.get_state()[0]["support_rows"].shape[0]),
                "t_L": self.t_update.summary() if self.t_update.cpu else None,
                "t_V": self.t_version.summary() if self.t_version.cpu else None,
                "t_adopt": self.t_adopt.summary() if self.t_adopt.cpu else None,
                "t_assign_per_record": self.t_assign.summary() if self.t_assign.cpu else None,
                "version_bytes": self.version_bytes}


def json_records(x: np.ndarray) -> list[RawRecord]:
    return [RawRecord(value=json.dumps({"id": f"r{i}", "x": row.round(5).tolist()}).encode(),
                      key=None, position={"partition": i % 6, "offset": i})
            for i, row in enumerate(x)]


class WorkerCell:
    """A worker's per-record costs at one setting: decode, (project,) assign, build updates."""

    def __init__(self, k: int, tau: int, d: int, batch: int, partitions: int,
                 rng: np.random.Generator, sketch: int | None = None) -> None:
        self.k, self.tau, self.d, self.batch, self.partitions = k, tau, d, batch, partitions
        self.rng = rng
        x = mixture(rng, k, d, 4 * batch + 3 * k * tau)
        self.records = json_records(x[:batch])
        self.decoder = RecordDecoder(format="json", dim=d)
        self.sketch_dim = sketch
        self.projection = None
        train = x[batch:]
        if sketch is not None:
            self.projection = RandomProjection(n_components=sketch, random_state=0).fit(train)
            train = self.projection.transform(train)
        self.model = warm_model(train, k, tau, max(batch, k * tau))
        self.t = {name: Timings() for name in ("decode", "project", "assign", "updates")}

    def run(self) -> None:
        n = len(self.records)
        x = self.t["decode"].time(lambda: self.decoder.decode_many(self.records)[0], per=n)
        if self.projection is not None:
            x = self.t["project"].time(lambda: self.projection.transform(x), per=n)
        labels = self.t["assign"].time(
            lambda: np.argmin(self.model.transform(x), axis=1), per=n)
        parts = np.arange(n) % self.partitions

        def updates() -> None:
            for p in range(self.partitions):
                idx = np.flatnonzero(parts == p)
                rows, mult = subsample_per_cluster(labels[idx], self.k, self.tau, self.rng)
                encode_message(ModelUpdate(partition=f"t:{p}", start=0, end=idx.shape[0],
                                           token="t", worker="w", model_version=1,
                                           rows=np.ascontiguousarray(x[idx[rows]]),
                                           multiplicities=mult))
        self.t["updates"].time(updates, per=n)

    def summary(self) -> dict[str, Any]:
        parts = {name: t.summary() for name, t in self.t.items() if t.cpu}
        return {"k": self.k, "tau": self.tau, "d": self.d, "batch": self.batch,
                "partitions": self.partitions, "sketch_dim": self.sketch_dim,
                "per_record": parts,
                "t_w_cpu_s": sum(p["cpu_s"] for p in parts.values())}


def fmt_ms(t: dict[str, float]) -> str:
    return f"{1e3 * t['cpu_s']:.3g} ({1e3 * t['cpu_min_s']:.3g}-{1e3 * t['cpu_max_s']:.3g})"


def fmt_us(t: dict[str, float]) -> str:
    return f"{1e6 * t['cpu_s']:.3g} ({1e6 * t['cpu_min_s']:.3g}-{1e6 * t['cpu_max_s']:.3g})"


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    loads = [os.getloadavg()[0]]
    grid = [(k, tau) for k in args.k for tau in args.tau if (k, tau) not in SKIPPED]
    grid += [tuple(kt) for kt in args.also if tuple(kt) not in grid]
    t0 = time.perf_counter()
    cells = [cell for k, tau in grid
             for cell in LeaderCell.sizes(k, tau, args.dim, rng, (32, k * tau // 4,
                                                                  3 * k * tau))]
    (sweep,) = LeaderCell.sizes(args.sweep_k, args.sweep_tau, args.dim, rng,
                                (3 * args.sweep_k * args.sweep_tau,))
    sweep_t = {w: Timings() for w in args.workers}
    # sketch on / off: d_in raw features, r = ceil(k / eps^2) after projection
    sk, stau, d_in = args.sketch_k, args.sketch_tau, args.sketch_dim_in
    r = kmeans_sketch_dimension(sk, 0.5, d_in)
    workers = {"dense d=16": WorkerCell(args.worker_k, args.worker_tau, args.dim,
                                        args.batch, args.worker_partitions, rng),
               f"sketch off, d={d_in}": WorkerCell(sk, stau, d_in, args.batch,
                                                   args.worker_partitions, rng),
               f"sketch on, d={d_in} -> r={r}": WorkerCell(sk, stau, d_in, args.batch,
                                                          args.worker_partitions, rng,
                                                          sketch=r)}
    sketch_leaders = {
        f"sketch off, rows of d={d_in}": LeaderCell.sizes(sk, stau, d_in, rng,
                                                         (3 * sk * stau,))[0],
        f"sketch on, rows of r={r}": LeaderCell.sizes(sk, stau, r, rng, (3 * sk * stau,))[0]}
    print(f"set-up {time.perf_counter() - t0:.0f} s", flush=True)
    for rep in range(args.repeats):
        for cell in cells:
            cell.round()
        for w, timings in sweep_t.items():
            for i in range(w):  # one update per worker, round-robin, against older versions
                sweep.apply_update(partition=i, stale_by=i % 4, into=timings)
        for cell in workers.values():
            cell.run()
        for cell in sketch_leaders.values():
            cell.round()
        loads.append(os.getloadavg()[0])
        print(f"repeat {rep + 1}/{args.repeats} done ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    return {"meta": {"repeats": args.repeats, "dim": args.dim, "threads": 1,
                     "mode": args.mode,
                     "load_average_1min": [min(loads), max(loads)],
                     "measured_unix": time.time(), "skipped": sorted(SKIPPED)},
            "leader": [c.summary() for c in cells],
            "workers_sweep": {"k": args.sweep_k, "tau": args.sweep_tau,
                              "rows": statistics.median(sweep.rows),
                              "t_L": {str(w): t.summary() for w, t in sweep_t.items()}},
            "worker": {name: c.summary() for name, c in workers.items()},
            "sketch_leader": {name: c.summary() for name, c in sketch_leaders.items()}}


def report(res: dict[str, Any]) -> None:
    meta = res["meta"]
    print(f"\nModel mode: {meta.get('mode', 'converged')}. Process CPU time, 1 thread, "
          f"median (min-max) over {meta['repeats']} interleaved repeats; load average {meta['load_average_1min'][0]:.1f}-"
          f"{meta['load_average_1min'][1]:.1f} on 2 cores.\n")
    print(f"Leader (d={meta['dim']}), each update size in its own steady state: t_L per "
          "update, t_V per version (snapshot + encode), t_adopt per version on every member "
          "(decode + build), a worker's assignment per record with that model\n")
    print("| k | tau | records/update | rows/update | support rows | t_L ms | t_V ms "
          "| t_adopt ms | version MB | assign µs/record |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in res["leader"]:
        print(f"| {c['k']} | {c['tau']} | {c['records']} | {c['rows']:.0f} | "
              f"{c['support_rows']} | {fmt_ms(c['t_L'])} | {fmt_ms(c['t_V'])} | "
              f"{fmt_ms(c['t_adopt'])} | {c['version_bytes'] / 1e6:.2f} | "
              f"{fmt_us(c['t_assign_per_record'])} |")
    sw = res["workers_sweep"]
    print(f"\nLeader per update against the number of workers sending (k={sw['k']}, "
          f"tau={sw['tau']}, {sw['rows']:.0f} rows per update; one partition and fence token per worker, "
          "round-robin, 0-3 versions stale)\n")
    print("| workers | t_L ms per update |")
    print("|---:|---:|")
    for w, t in sw["t_L"].items():
        print(f"| {w} | {fmt_ms(t)} |")
    print("\nWorker per record, µs (decode JSON, project, assign, build updates)\n")
    print("| setting | k | tau | decode | project | assign | updates | t_w |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, c in res["worker"].items():
        p = c["per_record"]
        cells = [fmt_us(p[s]) if s in p else "-" for s in ("decode", "project", "assign",
                                                            "updates")]
        print(f"| {name} | {c['k']} | {c['tau']} | " + " | ".join(cells)
              + f" | {1e6 * c['t_w_cpu_s']:.3g} |")
    print("\nLeader with sketching on / off (same k, tau; m = k·tau)\n")
    print("| rows | t_L ms | t_V ms | t_adopt ms | version MB |")
    print("|---|---:|---:|---:|---:|")
    for name, c in res["sketch_leader"].items():
        print(f"| {name} | {fmt_ms(c['t_L'])} | {fmt_ms(c['t_V'])} | {fmt_ms(c['t_adopt'])} | "
              f"{c['version_bytes'] / 1e6:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--k", type=int, nargs="+", default=list(GRID_K))
    parser.add_argument("--tau", type=int, nargs="+", default=list(GRID_TAU))
    parser.add_argument("--also", type=int, nargs=2, action="append", metavar=("K", "TAU"),
                        default=[[8, 100]], help="a further (k, tau) cell")
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=list(WORKERS))
    parser.add_argument("--sweep-k", type=int, default=8)
    parser.add_argument("--sweep-tau", type=int, default=100)
    parser.add_argument("--worker-k", type=int, default=8)
    parser.add_argument("--worker-tau", type=int, default=100)
    parser.add_argument("--worker-partitions", type=int, default=6,
                        help="partitions a worker's batch covers (one update each)")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--sketch-k", type=int, default=16)
    parser.add_argument("--sketch-tau", type=int, default=50)
    parser.add_argument("--sketch-dim-in", type=int, default=1000)
    parser.add_argument("--mode", choices=sorted(TOL), default="updating",
                        help="updating: tol=0, every step moves the centers (default); "
                        "converged: default tol, steps only assign once converged")
    parser.add_argument("--out", type=Path, default=Path("scaleout_costs.json"))
    parser.add_argument("--quick", action="store_true",
                        help="2 repeats of a small grid: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.k, args.tau, args.workers = 2, [4, 16], [50], [1, 4]
        args.sketch_dim_in, args.batch = 200, 400
    MODE[0] = args.mode
    with num_threads(1), threadpool_limits(1):
        res = measure(args)
    args.out.write_text(json.dumps(res, indent=1))
    report(res)
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
