"""Scale-out throughput: 1, 2 and 3 ``streamkm run`` processes in one consumer group.

Starts a Tansu broker (the tests' broker, ``tests/helpers/kafka_broker.py``), writes
``--records`` JSON records (a ``--k`` component Gaussian mixture in ``--dim`` dimensions)
to a 6-partition topic, then for P = 1, 2, 3 starts P scale-out processes and times how long the
global model takes to count every record (first process start to exact count; process start
and group joins included, reported separately as the time to the first version). After a
graceful stop each process logs ``scaleout_stats``: worker seconds per record (assignment
+ subsample/encode) and leader seconds per applied update and per published version, from
which the scaling model in ``docs/benchmarks.md`` is fitted.

For the validation of the scaling model (``benchmarks/scaleout_model.py --validate``) it also
samples the CPU time (``/proc/<pid>/stat``) of every member and of the broker when the first
version arrives and when the count is complete: CPU seconds per record in the steady window
(first version to exact count) do not depend on how many cores the other work on the machine
left, unlike records per second. ``--repeats`` runs every P in turn per repeat (interleaved)
and ``--out`` appends one JSON line per run.

Usage (from the repository root, as a module so that the tests' helpers import)::

    .venv/bin/python -m benchmarks.bench_scaleout [--records 40000] [--dim 16] [--k 8]
        [--procs 1 2 3] [--sketch none gaussian] [--repeats 1] [--out runs.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from streamkm.scaleout.leader import ModelVersion
from streamkm_connectors.scaleout_kafka import ModelReader
from tests.helpers.kafka_broker import create_topics, produce, start_tansu
from tests.helpers.processes import kill, log_events, start_service, stop

PARTITIONS = 6
_TICKS = os.sysconf("SC_CLK_TCK")
STATS = ("leader_apply_seconds", "leader_updates", "leader_rows", "leader_publish_seconds",
         "versions_published", "worker_assign_seconds", "worker_records",
         "worker_encode_seconds")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def write_config(folder: Path, bootstrap: str, prefix: str, member: str, args: argparse.Namespace,
                 sketch: str = "none") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "streamkm.toml"
    config.write_text(f"""
[source]
kind = "kafka"
topics = ["{prefix}"]
group_id = "{prefix}-g"
session_timeout_ms = 6000
heartbeat_interval_ms = 1000
max_poll_interval_ms = 10000
poll_interval_ms = 20
max_poll_records = 2000
[kafka]
bootstrap_servers = ["{bootstrap}"]
[decoding]
dim = {args.dim}
[model]
n_clusters = {args.k}
tau = {args.tau}
n_init = 1
random_state = 0
[batching]
batch_size = {args.batch_size}
max_wait_ms = 100
[checkpoint]
dir = "ck"
every_seconds = 5
[sinks]
kind = "kafka"
assignments_topic = "{prefix}-assignments"
events_topic = ""
dead_letter_topic = "{prefix}-dlq"
[metrics]
enabled = false
[logging]
level = "info"
[sketch]
kind = "{sketch}"
[scaleout]
enabled = true
updates_topic = "{prefix}-updates"
model_topic = "{prefix}-model"
coordination_topic = "{prefix}-coord"
member_id = "{member}"
""")
    return config


def run(broker_pid: int, bootstrap: str, workdir: Path, n_procs: int, values: list[bytes],
        args: argparse.Namespace, repeat: int = 0, sketch: str = "none") -> dict[str, float]:
    prefix = f"bench{n_procs}{sketch}r{repeat}"
    create_topics(bootstrap, {prefix: PARTITIONS, f"{prefix}-assignments": 3,
                              f"{prefix}-dlq": 1})
    produce(bootstrap, prefix, [(None, v, i % PARTITIONS) for i, v in enumerate(values)])
    latest: dict[str, ModelVersion] = {}

    def on_version(_v: int, data: bytes) -> None:
        latest["v"] = ModelVersion.from_bytes(data)

    members = [chr(ord("a") + i) for i in range(n_procs)]
    logs = {m: workdir / prefix / m / "service.log" for m in members}
    t0 = time.perf_counter()
    procs = [start_service(write_config(workdir / prefix / m, bootstrap, prefix, m, args,
                                        sketch), logs[m]) for m in members]
    reader = None
    first_version = None
    cpu_first: list[float] = []
    count_first = 0
    try:
        while reader is None:
            try:
                reader = ModelReader({"bootstrap_servers": [bootstrap]}, f"{prefix}-model",
                                     max_fetch_bytes=1 << 22, on_version=on_version)
            except Exception:  # noqa: BLE001 - topic not created yet
                time.sleep(0.2)
        while True:
            reader.poll(0.05)
            v = latest.get("v")
            if v is not None and first_version is None and v.model_arrays is not None:
                first_version = time.perf_counter() - t0
                cpu_first = [cpu_seconds(p.pid) for p in procs] + [cpu_seconds(broker_pid)]
                count_first = int(v.model_arrays["counts"].sum())
            if v is not None and v.model_arrays is not None and \
                    int(v.model_arrays["counts"].sum()) >= len(values):
                cpu_end = [cpu_seconds(p.pid) for p in procs] + [cpu_seconds(broker_pid)]
                load = os.getloadavg()[0]
                break
            if time.perf_counter() - t0 > 600:
                raise RuntimeError("timed out")
        elapsed = time.perf_counter() - t0
        for p in procs:
            try:  # the stats are logged at a graceful stop; a slow stop loses only them
                stop(p, timeout=180)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for p in procs:
            kill(p)
        if reader is not None:
            reader.close()
    stats = [e for m in members for e in log_events(logs[m]) if e.get("event") == "scaleout_stats"]
    total = {k: sum(float(s.get(k, 0)) for s in stats) for k in STATS}
    window = max(1e-9, elapsed - (first_version or 0))
    steady_records = len(values) - count_first
    member_cpu = sum(cpu_end[:-1]) - sum(cpu_first[:-1])
    return {"processes": n_procs, "sketch": sketch, "seconds": elapsed, "first_version_s": first_version or 0.0,
            "records_per_s": len(values) / elapsed,
            "steady_records_per_s": steady_records / window,
            "steady_records": steady_records, "steady_seconds": window,
            "member_cpu_us_per_record": 1e6 * member_cpu / max(1, steady_records),
            "member_cores_used": member_cpu / window,
            "broker_cpu_us_per_record": 1e6 * (cpu_end[-1] - cpu_first[-1])
            / max(1, steady_records),
            "load_average": load, **total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=40000)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--tau", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sketch", nargs="+", default=["none"],
                        help="[sketch] kinds to run, interleaved (e.g. none gaussian)")
    parser.add_argument("--out", type=Path, default=None,
                        help="append one JSON line per run (with the settings) to this file")
    parser.add_argument("--quick", action="store_true",
                        help="8000 records in batches of 200, P = 1 and 2, one repeat: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.records, args.procs, args.repeats, args.batch_size = 8000, [1, 2], 1, 200
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 4, (args.k, args.dim))
    labels = rng.integers(args.k, size=args.records)
    x = centers[labels] + rng.normal(0, 1, (args.records, args.dim))
    values = [json.dumps({"id": f"r{i}", "x": row.round(5).tolist()}).encode()
              for i, row in enumerate(x)]
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_tansu(Path(tmp) / "tansu.log")
        try:
            create_topics(broker.bootstrap, {"probe": 1})
            rows = []
            for repeat in range(args.repeats):
                for p, sketch in [(p, k) for p in args.procs for k in args.sketch]:
                    rows.append(run(broker.proc.pid, broker.bootstrap, Path(tmp), p, values,
                                    args, repeat, sketch))
                    print(json.dumps(summarise(rows[-1], args)), flush=True)
                    if args.out is not None:
                        with open(args.out, "a") as fh:
                            fh.write(json.dumps({**rows[-1], "repeat": repeat,
                                                 "settings": vars(args) | {"out": None}})
                                     + "\n")
        finally:
            broker.stop()
    print(f"\nmedian (min-max) over {args.repeats} repeats, the P interleaved")
    keys = ("steady_records_per_s", "member_cpu_us_per_record", "member_cores_used",
            "broker_cpu_us_per_record", "worker_us_per_record", "leader_ms_per_update",
            "leader_ms_per_version", "records_per_update")
    print("| P | sketch | " + " | ".join(keys) + " |")
    print("|---:|---|" + "---:|" * len(keys))
    for p, sketch in [(p, k) for p in args.procs for k in args.sketch]:
        done = [summarise(r, args) for r in rows
                if r["processes"] == p and r["sketch"] == sketch]
        cells = [f"{statistics.median(d[k] for d in done):.4g} "
                 f"({min(d[k] for d in done):.4g}-{max(d[k] for d in done):.4g})" for k in keys]
        print(f"| {p} | {sketch} | " + " | ".join(cells) + " |")


def summarise(r: dict[str, float], args: argparse.Namespace) -> dict[str, float]:
    """One run's figures per record, per update and per version."""
    upd = max(1.0, r["leader_updates"])
    return {
        "processes": r["processes"], "sketch": r["sketch"], "seconds": round(r["seconds"], 2),
        "first_version_s": round(r["first_version_s"], 2),
        "records_per_s": round(r["records_per_s"]),
        "steady_records_per_s": round(r["steady_records_per_s"]),
        "worker_us_per_record": round(1e6 * (r["worker_assign_seconds"]
                                             + r["worker_encode_seconds"])
                                      / max(1.0, r["worker_records"]), 2),
        "leader_ms_per_update": round(1e3 * r["leader_apply_seconds"] / upd, 3),
        "leader_rows_per_update": round(r["leader_rows"] / upd, 1),
        "records_per_update": round(args.records / upd, 1),
        "leader_ms_per_version": round(1e3 * r["leader_publish_seconds"]
                                       / max(1.0, r["versions_published"]), 3),
        "updates": int(r["leader_updates"]), "versions": int(r["versions_published"]),
        "member_cpu_us_per_record": round(r["member_cpu_us_per_record"], 2),
        "member_cores_used": round(r["member_cores_used"], 2),
        "broker_cpu_us_per_record": round(r["broker_cpu_us_per_record"], 2),
        "load_average": round(r["load_average"], 1),
    }


if __name__ == "__main__":
    main()
