"""Scale-out leadership under membership changes: time without a new model version.

Starts a Tansu broker (``tests/kafka_broker.py``), a producer thread writing ``--rate``
JSON records per second to a 6-partition topic, and two ``streamkm run`` scale-out members
(a, b). A reader follows the model topic and notes when each version arrives and which
member published it. Then, ``--settle`` seconds apart:

1. **join**: a third member (c) starts;
2. **worker kill**: SIGKILL of a member that is not the leader;
3. **leader kill**: SIGKILL of the leader.

Each event waits for the previous one to settle (the joining member owns partitions, a new
leader publishes) plus ``--settle`` seconds. For each event it reports the longest time without a
new version between the event and the next one (the gap the event caused), beside the same figure for the steady state before the first event, and the
number of leadership moves (changes of the publishing member) the event caused. A stable
leadership keeps the leader through the join and the worker kill (0 moves) and moves it
once on the leader kill.

``--baseline-tree PATH`` also runs every repeat with the members importing ``streamkm`` and
``streamkm_connectors`` from another checkout (e.g. a ``git worktree`` of an older
commit), interleaved with the current tree.

Every repeat runs the three events in turn (join, worker kill, leader kill, then the next
repeat), so load from elsewhere on the machine falls on all of them alike; each repeat also
records the load average. The summary gives the median (min-max) per event over the
repeats and a markdown row per tree for ``docs/scaleout.md``.

Usage (from the repository root, as a module so that the tests' helpers import)::

    .venv/bin/python -m benchmarks.bench_scaleout_failover [--repeats 5] [--rate 400]
        [--settle 10] [--baseline-tree /tmp/old-checkout] [--quick]

``--quick``: one repeat with 4 s settling (a smoke test; not the documented numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


from tests.helpers.kafka_broker import create_topics, start_tansu
from tests.helpers.processes import kill, log_events, stop
from tests.scaleout.test_scaleout_kafka import PARTITIONS, scaleout_configs, value

from streamkm.scaleout.leader import ModelVersion
from streamkm_connectors.scaleout_kafka import ModelReader

EVENTS = ("join", "worker_kill", "leader_kill")


class Feed(threading.Thread):
    """Writes ``rate`` records per second until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
        self.topic, self.rate = topic, rate
        self.sent = 0
        self.halt = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.halt.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                self.producer.send(self.topic, value=value(self.sent),
                                   partition=(self.sent // 4) % PARTITIONS)
                self.sent += 1
            self.halt.wait(0.02)
        self.producer.flush(30)
        self.producer.close(10)


class Versions:
    """Arrival time and publisher of every model version."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.arrivals: list[tuple[float, int, str]] = []
        self.reader = ModelReader({"bootstrap_servers": [bootstrap]}, topic,
                                  max_fetch_bytes=1 << 22, on_version=self._on,
                                  from_tail=False)

    def _on(self, version: int, data: bytes) -> None:
        self.arrivals.append((time.monotonic(), version, ModelVersion.from_bytes(data).leader))

    def follow(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.reader.poll(0.05)


def until(versions: Versions, predicate: object, what: str, timeout: float = 120.0) -> None:
    """Follow the versions until ``predicate()`` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        versions.follow(0.2)
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")


def start_member(config: Path, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "ab") as err:
        # cwd: the member's folder (not this checkout, whose packages would shadow a
        # baseline tree's)
        return subprocess.Popen([sys.executable, "-m", "streamkm.cli", "run", "-c", str(config)],
                                stdout=subprocess.DEVNULL, stderr=err, env=env,
                                cwd=config.parent)


def longest_gap(arrivals: list[float], start: float, end: float) -> float:
    """Longest time within ``[start, end)`` without an arrival: the intervals between
    consecutive arrivals, the one open at ``end`` included, clipped to the window."""
    inside = [t for t in arrivals if start <= t < end]
    before = [t for t in arrivals if t < start][-1:]
    after = [t for t in arrivals if t >= end][:1]
    points = before + inside + after
    gaps = [min(b, end) - max(a, start) for a, b in zip(points, points[1:])]
    if not after:
        gaps.append(end - max(points[-1], start) if points else end - start)
    return max(gaps, default=end - start)


def moves(publishers: list[str]) -> int:
    return sum(1 for a, b in zip(publishers, publishers[1:]) if a != b)


def run_once(bootstrap: str, workdir: Path, tag: str, settle: float, rate: float,
             env: dict[str, str]) -> dict[str, float]:
    prefix = f"fo-{tag}"
    configs = scaleout_configs(workdir / prefix, bootstrap, prefix, "abc")
    feed = Feed(bootstrap, prefix, rate)
    feed.start()
    logs = {m: c.parent / "service.log" for m, c in configs.items()}
    procs = {m: start_member(configs[m], logs[m], env) for m in "ab"}
    versions = None
    try:
        while versions is None:
            try:
                versions = Versions(bootstrap, f"{prefix}-model")
            except Exception:  # noqa: BLE001 - the members have not created the topic yet
                time.sleep(0.2)
        deadline = time.monotonic() + 120
        while len(versions.arrivals) < 20:  # learning, under a leader
            versions.follow(0.5)
            assert time.monotonic() < deadline, "no model versions"
        versions.follow(5.0)
        marks: dict[str, float] = {"steady": time.monotonic() - 5.0}
        # each event once the previous one has settled: the group is complete again and the
        # versions flow (process start-up on a loaded machine takes seconds)
        marks["join"] = time.monotonic()
        procs["c"] = start_member(configs["c"], logs["c"], env)
        until(versions, lambda: any(e.get("event") == "partitions_assigned"
                                    for e in log_events(logs["c"])), "c joining")
        versions.follow(settle)
        leader = versions.arrivals[-1][2]
        victim = next(m for m in sorted(procs) if m != leader)
        marks["worker_kill"] = time.monotonic()
        procs[victim].send_signal(signal.SIGKILL)
        versions.follow(settle)
        leader = versions.arrivals[-1][2]
        marks["leader_kill"] = time.monotonic()
        procs[leader].send_signal(signal.SIGKILL)
        until(versions, lambda: versions.arrivals[-1][2] != leader, "a new leader")
        versions.follow(settle)
        marks["end"] = time.monotonic()
    finally:
        feed.halt.set()
        feed.join()
        for proc in procs.values():
            if proc.poll() is None:
                stop(proc, timeout=30)
            kill(proc)
        if versions is not None:
            versions.reader.close()
    (workdir / prefix / "arrivals.json").write_text(json.dumps(
        {"marks": marks, "arrivals": versions.arrivals}))
    times = [t for t, _, _ in versions.arrivals]
    out = {"steady": longest_gap(times, marks["steady"], marks["join"])}
    bounds = list(zip(EVENTS, [marks[e] for e in EVENTS],
                      [marks[e] for e in EVENTS[1:]] + [marks["end"]]))
    for event, start, end in bounds:
        out[event] = longest_gap(times, start, end)
        before = [p for t, _, p in versions.arrivals if t < start][-1:]
        out[f"{event}_moves"] = moves(before + [p for t, _, p in versions.arrivals
                                                if start <= t < end])
    out["elections"] = sum(1 for log in logs.values() for e in log_events(log)
                           if e.get("event") == "scaleout_leader_elected")
    return out


def baseline_env(tree: Path, workdir: Path) -> dict[str, str]:
    """An environment importing streamkm and streamkm_connectors from ``tree`` (links to its
    packages on ``PYTHONPATH``, ahead of this checkout's editable install)."""
    path = workdir / "baseline-path"
    path.mkdir(exist_ok=True)
    for name, target in (("streamkm", tree / "streamkm"),
                         ("streamkm_connectors", tree / "connectors")):
        link = path / name
        if not link.exists():
            link.symlink_to(target)
    return {**os.environ, "PYTHONPATH": str(path)}


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rate", type=float, default=400.0)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--baseline-tree", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the members' logs here (default: a temporary folder)")
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, 4 s settling: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.settle = 1, 4.0
    trees = {"current": dict(os.environ)}
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = str(args.workdir) if args.workdir is not None else tmp_dir
        if args.baseline_tree is not None:
            trees["baseline"] = baseline_env(args.baseline_tree.resolve(), Path(tmp))
        broker = start_tansu(Path(tmp) / "tansu.log")
        try:
            create_topics(broker.bootstrap, {"probe": 1})
            for i in range(args.repeats):
                for name, env in trees.items():
                    load_before = os.getloadavg()[0]
                    row = run_once(broker.bootstrap, Path(tmp), f"{name}{i}", args.settle,
                                   args.rate, env)
                    row["load_before"], row["load_after"] = load_before, os.getloadavg()[0]
                    print(json.dumps({"tree": name, "repeat": i,
                                      **{k: round(v, 3) for k, v in row.items()}}), flush=True)
                    results.setdefault(name, []).append(row)
        finally:
            broker.stop()
    print("seconds without a new model version: median (min-max) over "
          f"{args.repeats} repeats; leadership moves: total over the repeats")
    for name, rows in results.items():
        cells = [f"{k} {summary([r[k] for r in rows])}" for k in ("steady", *EVENTS)]
        cells += [f"{e}_moves {sum(int(r[f'{e}_moves']) for r in rows)}" for e in EVENTS]
        print(f"{name}: " + ", ".join(cells))
        loads = [r[k] for r in rows for k in ("load_before", "load_after")]
        print(f"{name}: load average (1 min) {min(loads):.1f}-{max(loads):.1f}")
    print("| tree | steady (largest gap) | member joins | SIGKILL worker | SIGKILL leader "
          "| leadership moves (join / worker / leader kill) |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        gaps = [summary([r[k] for r in rows]) for k in ("steady", *EVENTS)]
        moved = " / ".join(str(sum(int(r[f"{e}_moves"]) for r in rows)) for e in EVENTS)
        print(f"| {name} | " + " | ".join(gaps) + f" | {moved} |")


if __name__ == "__main__":
    main()
