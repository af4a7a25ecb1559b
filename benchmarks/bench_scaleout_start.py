"""Scale-out start time against the number of model versions ever published.

Starts a Tansu broker (``tests/kafka_broker.py``; it never compacts, so every version stays
in the model topic), publishes ``--versions`` (default 10 and 1000) versions of a real global
model (``--k`` clusters, ``--tau``, ``--dim``; the scale-out tests' model by default) to a
model topic, then times what a starting member or a new leader does before it can work:
connect a model-topic reader, read the topic to its end, decode the newest version and build
its model. Two readers, interleaved, ``--repeats`` times each: ``tail`` (the default: windows
read backwards from the end until a complete version is found) and ``beginning`` (the whole
topic, as before).

Usage (from the repository root, as a module so that the tests' helpers import)::

    .venv/bin/python -m benchmarks.bench_scaleout_start [--versions 10 1000] [--repeats 5]
        [--quick]

``--quick``: 10 and 50 versions, 2 repeats (a smoke test; not the documented numbers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


from tests.helpers.kafka_broker import create_topics, start_tansu

from streamkm import MiniBatchKernelKMeans
from streamkm.scaleout.leader import MergeLeader, ModelVersion
from streamkm_connectors.scaleout_kafka import ModelPublisher, ModelReader


def model_versions(n: int, args: argparse.Namespace) -> list[bytes]:
    """``n`` encoded versions of one model stepping on mixture data (the last ones are
    published; earlier ones repeat the first version's bytes to keep the setup short)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 4, (args.k, args.dim))
    model = MiniBatchKernelKMeans(args.k, tau=args.tau, n_init=1, random_state=0,
                                  batch_size=200)
    leader = MergeLeader(lambda: None, init_records=1)
    out = []
    for i in range(min(n, 20)):
        x = centers[rng.integers(args.k, size=200)] + rng.normal(0, 1, (200, args.dim))
        model.partial_fit(x)
        leader.model, leader.applied_offset = model, i
        out.append(leader.snapshot().to_bytes())
    return [out[0]] * (n - len(out)) + out


def publish(bootstrap: str, topic: str, versions: list[bytes]) -> None:
    publisher = ModelPublisher({"bootstrap_servers": [bootstrap]}, topic, chunk_bytes=512 << 10)
    try:
        for v, data in enumerate(versions, start=1):
            publisher.send_version(v, data)
            if v % 50 == 0:
                publisher.flush(60)
        publisher.flush(60)
    finally:
        publisher.close()


def start_once(bootstrap: str, topic: str, from_tail: bool) -> tuple[float, int, int]:
    """Seconds to the newest model, messages read, the version reached."""
    latest: dict[str, bytes] = {}
    t0 = time.perf_counter()
    reader = ModelReader({"bootstrap_servers": [bootstrap]}, topic, max_fetch_bytes=1 << 20,
                         on_version=lambda v, d: latest.__setitem__("data", d),
                         from_tail=from_tail)
    try:
        reader.read_to_end(timeout_s=300)
        version = ModelVersion.from_bytes(latest["data"])
        version.build_model()
        seconds = time.perf_counter() - t0
        return seconds, reader.messages_read, reader.latest_version
    finally:
        reader.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, nargs="+", default=[10, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tau", type=int, default=40)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="10 and 50 versions, 2 repeats: a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.versions, args.repeats = [10, 50], 2
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_tansu(Path(tmp) / "tansu.log")
        try:
            for n in args.versions:
                topic = f"start-model-{n}"
                create_topics(broker.bootstrap, {topic: 1})
                versions = model_versions(n, args)
                publish(broker.bootstrap, topic, versions)
                times: dict[str, list[float]] = {"tail": [], "beginning": []}
                for _ in range(args.repeats):
                    for mode in times:
                        seconds, read, reached = start_once(broker.bootstrap, topic,
                                                            mode == "tail")
                        assert reached == n, (mode, reached, n)
                        times[mode].append(seconds)
                        print(json.dumps({"versions": n, "mode": mode,
                                          "seconds": round(seconds, 3),
                                          "messages_read": read}), flush=True)
                cells = [f"{m} {statistics.median(t):.3f} s ({min(t):.3f}-{max(t):.3f})"
                         for m, t in times.items()]
                ratio = statistics.median(times["beginning"]) / statistics.median(times["tail"])
                print(f"{n} versions of {len(versions[-1]) / 1e3:.0f} kB: " + ", ".join(cells)
                      + f"; beginning/tail {ratio:.1f}x", flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
