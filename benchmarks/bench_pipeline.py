"""Pipeline throughput: the service versus the engine alone, the Kafka source versus the file
source, a bare kafka-python consumer, and the time from start to the first batch.

``engine`` part: for each row (JSON d=32, JSON d=784, float32 d=32) the same records are
written to a file and run through the whole service (file tailer -> decoder -> batcher ->
engine -> assignment, dead-letter and event sinks -> checkpoints), in-process, metrics
registry included, no HTTP server. The baseline feeds the identical arrays, in the identical
batches, to ``MiniBatchKernelKMeans.step`` directly. Both are timed from the end of the
first (initialising) batch to the last record. The service runs twice per repeat: reading
the file record by record (``[source] read_blocks = false``) and in blocks (the default).
Each row runs in two model modes:

* ``updating``: ``tol=0`` and a patience no run reaches, so every step updates the centers;
* ``converged``: the default ``tol`` / ``patience``; the model converges after a few steps
  and then only assigns (the column ``updates`` gives the share of updating steps).

``kafka`` part (needs the dev and confluent extras: the Tansu test broker, confluent-kafka):
the JSON d=32 records are produced to a 4-partition topic; the service reads them with the
Kafka source on each client (``[kafka] client`` kafka-python and confluent) and, in the
same repeat, from the file (same sinks, model updating; the order rotates per repeat); the
records per ``decode_many`` call show how whole the pieces are that the source hands the
batcher; bare consumers of both clients (manual assignment, no group, the service's fetch
settings) read the topic; and the time from ``Service.start()`` to the first processed batch
is measured for a new consumer group.

``overlap`` part: ingest overlapping the step (``[batching] overlap``) off and on, model
updating: per row (JSON d=32, JSON d=784, float32 d=32) the engine alone and the service from
the file with overlap off and on, each reading the file record by record and in blocks
(``[source] read_blocks``), and (with the Tansu broker) the JSON d=32 records through the
Kafka source with overlap off and on, all interleaved in one run (the order of the variants
rotates per repeat). After each repeat, two threads of GEMMs against one: the
speed-up a second core gives right now, the ceiling of any overlap on a shared machine.

``ingest`` part: the file tailer, batcher and decoder alone (no model, no sinks), record by
record and in blocks, interleaved: microseconds per record spent reading and decoding.

``kafka-sinks`` part: Kafka source and Kafka sinks, exactly-once outputs (``[kafka]
transactional_id``, one transaction per checkpoint) off and on, interleaved, with a
checkpoint every 5 batches and every batch.

Every comparison is interleaved (one run of each variant per repeat); the table gives the
median (min-max) over the repeats, ratios are medians of the per-repeat ratios.

Usage::

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/bench_pipeline.py [engine|kafka|kafka-sinks|overlap|ingest|all] \
        [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from streamkm import MiniBatchKernelKMeans
from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping

BATCH = 1024
PARTITIONS = 4
#: (format, dtype, dim, records) of the engine rows.
ENGINE_ROWS = (("json", "float64", 32, 32 * BATCH), ("json", "float64", 784, 8 * BATCH),
               ("float32", "float32", 32, 32 * BATCH))
MODES = {"updating": {"tol": 0.0, "patience": 1_000_000}, "converged": {}}


def make_data(n: int, dim: int, k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 4, size=(k, dim))
    return (centers[rng.integers(k, size=n)] + rng.normal(size=(n, dim))).astype(np.float32)


def json_values(x: np.ndarray) -> list[bytes]:
    return [json.dumps({"id": i, "x": row}).encode() for i, row in enumerate(x.tolist())]


def model_params(k: int, mode: str) -> dict[str, Any]:
    return {"n_clusters": k, "kernel": "rbf", "tau": 200, "n_init": 1, "random_state": 0,
            **MODES[mode]}


def engine_only(x: np.ndarray, k: int, dtype: str, mode: str) -> dict[str, float]:
    """Steps 2.. of the engine on the same batches: rate and share of updating steps."""
    model = MiniBatchKernelKMeans(batch_size=BATCH, **model_params(k, mode))
    xs = x.astype(dtype)
    model.step(xs[:BATCH])
    updated = 0
    t0 = time.perf_counter()
    for start in range(BATCH, len(xs), BATCH):
        updated += bool(model.step(xs[start:start + BATCH]).updated)
    seconds = time.perf_counter() - t0
    steps = (len(xs) - BATCH) // BATCH
    return {"rate": (len(xs) - BATCH) / seconds, "updates": updated / steps,
            "kernel": model.kernel_.name}


def service_config(folder: Path, source: dict[str, Any], fmt: str, dim: int, k: int,
                   dtype: str, mode: str, kafka: dict[str, Any] | None = None,
                   ui: bool = True, sinks: dict[str, Any] | None = None,
                   every_batches: int = 25, overlap: bool = True,
                   model: dict[str, Any] | None = None) -> Any:
    mapping: dict[str, Any] = {
        "source": source,
        "decoding": {"format": fmt, "dim": dim, "dtype": dtype},
        "model": {**model_params(k, mode), **(model or {})},
        # the engine's first step is one batch too: the same kernel decision, and the rate
        # after the first batch counts the same records
        "batching": {"batch_size": BATCH, "first_batch_size": BATCH, "max_wait_ms": 1000,
                     "overlap": overlap},
        "checkpoint": {"dir": "ck", "every_batches": every_batches, "every_seconds": 60},
        "sinks": sinks or {"assignments": "assignments.jsonl", "events": "events.jsonl",
                           "dead_letter": "dead.jsonl"},
        "metrics": {"enabled": False},
        "logging": {"level": "warning"},
        "ui": {"enabled": ui},
    }
    if kafka is not None:
        mapping["kafka"] = kafka
    return config_from_mapping(mapping, base_dir=folder, where="of the benchmark")


def run_service(config: Any, n: int) -> dict[str, float]:
    """Run the service until ``n`` records are accepted; rate after the first batch, and the
    seconds from ``start()`` to the first processed batch."""
    t_start = time.perf_counter()
    service = Service(config)
    service.start()
    marks: dict[str, float] = {}
    at_first: dict[str, float] = {}

    def watch() -> None:
        while service.status.records_accepted < BATCH:
            time.sleep(0.0005)
        marks["first"] = time.perf_counter()
        at_first.update(_time_parts(service.status))
        while service.status.records_accepted < n:
            time.sleep(0.0005)
        marks["done"] = time.perf_counter()
        service.request_stop()

    watcher = threading.Thread(target=watch)
    watcher.start()
    service.run()
    watcher.join()
    wall = marks["done"] - marks["first"]
    parts = {key: (value - at_first[key]) / wall
             for key, value in _time_parts(service.status).items()}
    status = service.status
    return {"rate": (n - BATCH) / wall, "first_batch_s": marks["first"] - t_start,
            "checkpoint_ms": 1000 * status.checkpoint_seconds / max(status.checkpoints, 1),
            **parts}


def _time_parts(status: Any) -> dict[str, float]:
    """Seconds the service spent reading, decoding, in the engine and in the sinks."""
    return {"read": status.read_seconds, "decode": status.decode_seconds,
            "engine": status.model_seconds, "sinks": status.sink_seconds}


def file_source(data: Path, fmt: str, dim: int, blocks: bool = True) -> dict[str, Any]:
    """The file source of ``data``; ``blocks`` False reads and decodes record by record."""
    source: dict[str, Any] = {"paths": [str(data)], "poll_interval_ms": 5,
                              "read_blocks": blocks}
    if fmt == "float32":
        source.update(framing="fixed", record_size=4 * dim)
    return source


def summary(values: list[float], fmt: str = ",.0f") -> str:
    return (f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})")


# ---------------------------------------------------------------------- engine part


def engine_part(tmp: Path, repeats: int, k: int) -> None:
    print(f"## Service from a file vs the engine alone (k={k}, rbf with gamma auto: the kernel "
          f"it resolved to on the first batch is the kernel column, tau=200, batch {BATCH}, "
          f"{repeats} interleaved repeats, median (min-max); the service reads the file "
          f"record by record and in blocks)\n")
    print("| format | dtype | d | records | kernel | model | updates | engine rec/s "
          "| per-record rec/s | blocks rec/s | per-record / engine | blocks / engine "
          "| blocks / per-record | blocks time: read / decode / engine / sinks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for fmt, dtype, dim, n in ENGINE_ROWS:
        x = make_data(n, dim, k)
        data = tmp / f"in-{fmt}-{dim}"
        if fmt == "json":
            data.write_bytes(b"\n".join(json_values(x)) + b"\n")
        else:
            data.write_bytes(x.astype("<f4").tobytes())
        for mode in MODES:
            runs: dict[str, list[float]] = {key: [] for key in (
                "engine", "records", "blocks", "records/engine", "blocks/engine",
                "blocks/records", "updates")}
            shares: dict[str, list[float]] = {key: [] for key in ("read", "decode", "engine",
                                                                  "sinks")}
            engine_only(x, k, dtype, mode)  # compiles the numba specialisations of this mode
            for rep in range(repeats):
                rates: dict[str, float] = {}
                variants = ["engine", "records", "blocks"]
                for name in variants[rep % 3:] + variants[:rep % 3]:
                    if name == "engine":
                        e = engine_only(x, k, dtype, mode)
                        rates[name] = e["rate"]
                        runs["updates"].append(e["updates"])
                        continue
                    folder = tmp / f"{fmt}-{dim}-{mode}-{rep}-{name}"
                    folder.mkdir()
                    source = file_source(data, fmt, dim, blocks=name == "blocks")
                    s = run_service(service_config(folder, source, fmt, dim, k, dtype, mode), n)
                    rates[name] = s["rate"]
                    if name == "blocks":
                        for key, values in shares.items():
                            values.append(s[key])
                for key in ("engine", "records", "blocks"):
                    runs[key].append(rates[key])
                runs["records/engine"].append(rates["records"] / rates["engine"])
                runs["blocks/engine"].append(rates["blocks"] / rates["engine"])
                runs["blocks/records"].append(rates["blocks"] / rates["records"])
            split = " / ".join(f"{100 * statistics.median(v):.0f}%" for v in shares.values())
            print(f"| {fmt} | {dtype} | {dim} | {n:,} | {e['kernel']} | {mode} | "
                  f"{100 * statistics.median(runs['updates']):.0f}% | {summary(runs['engine'])}"
                  f" | {summary(runs['records'])} | {summary(runs['blocks'])} | "
                  f"{summary(runs['records/engine'], '.2f')} | "
                  f"{summary(runs['blocks/engine'], '.2f')} | "
                  f"{summary(runs['blocks/records'], '.2f')} | {split} |", flush=True)
    print()


# ---------------------------------------------------------------------- cluster view


def ui_part(tmp: Path, repeats: int, k: int) -> None:
    """Service throughput with the live cluster view on ([ui] enabled, the default: the
    per-batch sample and the per-cluster counts) vs off, interleaved, JSON d=32 and d=2."""
    print(f"## Live cluster view on vs off (service from a file, k={k}, rbf, batch {BATCH}, "
          f"{repeats} interleaved repeats, median (min-max))\n")
    print("| format | d | records | model | view off rec/s | view on rec/s | on / off |")
    print("|---|---|---|---|---|---|---|")
    for dim, n in ((2, 60_000), (32, 60_000)):
        x = make_data(n, dim, k)
        data = tmp / f"ui-{dim}"
        data.write_bytes(b"\n".join(json_values(x)) + b"\n")
        for mode in MODES:
            rates: dict[bool, list[float]] = {False: [], True: []}
            engine_only(x, k, "float64", mode)  # compile first
            for rep in range(repeats):
                for ui in ((False, True) if rep % 2 == 0 else (True, False)):
                    folder = tmp / f"ui-{dim}-{mode}-{rep}-{ui}"
                    folder.mkdir()
                    config = service_config(folder, file_source(data, "json", dim), "json",
                                            dim, k, "float64", mode, ui=ui)
                    rates[ui].append(run_service(config, n)["rate"])
            ratio = [on / off for on, off in zip(rates[True], rates[False])]
            print(f"| json | {dim} | {n:,} | {mode} | {summary(rates[False])} | "
                  f"{summary(rates[True])} | {summary(ratio, '.2f')} |", flush=True)
    print()


# ---------------------------------------------------------------------- Kafka part


def bare_consumer(bootstrap: str, topic: str, n: int, settings: dict[str, Any]) -> float:
    """Records/s of a kafka-python consumer reading ``n`` records of ``topic`` (manual
    assignment, from the beginning), timed from the first record to the last."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             group_id=None, **settings)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got, first, t0 = 0, 0, 0.0
        deadline = time.monotonic() + 120
        while got < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"bare consumer read {got} of {n} records")
            fetched = sum(len(m) for m in consumer.poll(timeout_ms=1000).values())
            if fetched and not got:  # the first fetch starts the clock
                t0, first = time.perf_counter(), fetched
            got += fetched
        return (got - first) / (time.perf_counter() - t0)
    finally:
        consumer.close(autocommit=False)


def produce_batched(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Write ``values`` round-robin over the partitions, in large producer batches (as a
    throughput-minded producer would: the consumer's cost per record batch is high)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20,
                             max_request_size=8 << 20)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % PARTITIONS)
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)


def bare_confluent(bootstrap: str, topic: str, n: int) -> float:
    """Records/s of a confluent-kafka consumer reading ``n`` records of ``topic`` (manual
    assignment, from the beginning, the service's fetch settings), timed from the first
    record to the last."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from streamkm_connectors.confluent_source import THROUGHPUT_PROPERTIES

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-bare",
                         "enable.auto.commit": False, **THROUGHPUT_PROPERTIES})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got, first, t0 = 0, 0, 0.0
        deadline = time.monotonic() + 120
        while got < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"bare consumer read {got} of {n} records")
            messages = consumer.consume(10000, timeout=0)  # what librdkafka holds
            if not messages:
                first_message = consumer.poll(0.5)
                messages = [first_message] if first_message is not None else []
            fetched = sum(1 for m in messages if not m.error())
            if fetched and not got:  # the first fetch starts the clock
                t0, first = time.perf_counter(), fetched
            got += fetched
        return (got - first) / (time.perf_counter() - t0)
    finally:
        consumer.close()


class DecodeCalls:
    """Counts the batcher's ``decode_many`` calls and the records they decode (how whole
    the pieces are that a source hands the batcher)."""

    def __init__(self) -> None:
        from streamkm.io.decoding import RecordDecoder

        self.calls = self.records = 0
        self._cls, self._original = RecordDecoder, RecordDecoder.decode_many

        def counting(decoder: Any, records: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.records += len(records)
            return self._original(decoder, records, *args, **kwargs)

        RecordDecoder.decode_many = counting  # type: ignore[method-assign]

    def take(self) -> float:
        """Records per call since the last ``take``."""
        per_call = self.records / max(self.calls, 1)
        self.calls = self.records = 0
        return per_call

    def close(self) -> None:
        self._cls.decode_many = self._original  # type: ignore[method-assign]


def kafka_part(tmp: Path, repeats: int, k: int) -> None:
    """The service from Kafka (kafka-python and confluent-kafka) against the same records
    from a file, the bare consumers of both clients, the time to the first batch."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.helpers.kafka_broker import create_topics, start_tansu

    from streamkm_connectors.kafka_source import THROUGHPUT_CONSUMER_SETTINGS

    dim, n = 32, 64 * BATCH
    # the median width, not gamma="auto": the automatic choice is made on the first batch,
    # whose mix of partitions differs between the sources, and a different kernel would
    # make this a comparison of kernels rather than of sources
    pinned = {"gamma": "median"}
    x = make_data(n, dim, k)
    values = json_values(x)
    data = tmp / "kafka-in.jsonl"
    data.write_bytes(b"\n".join(values) + b"\n")
    broker = start_tansu(tmp / "tansu.log")
    decodes = DecodeCalls()
    try:
        bootstrap, topic = broker.bootstrap, "bench-in"
        create_topics(bootstrap, {topic: PARTITIONS})
        produce_batched(bootstrap, topic, values)
        runs: dict[str, list[float]] = {}

        def add(name: str, value: float) -> None:
            runs.setdefault(name, []).append(value)

        for rep in range(repeats):
            # the order of the three services rotates per repeat (the load drifts)
            variants = ["file", "kafka-python", "confluent"]
            variants = variants[rep % 3:] + variants[:rep % 3]
            rates: dict[str, float] = {}
            for name in variants:
                folder = tmp / f"{name}-{rep}"
                folder.mkdir()
                if name == "file":
                    config = service_config(folder, file_source(data, "json", dim), "json",
                                            dim, k, "float64", "updating", model=pinned)
                else:
                    source = {"kind": "kafka", "topics": [topic],
                              "group_id": f"g-{name}-{rep}", "auto_offset_reset": "earliest"}
                    config = service_config(folder, source, "json", dim, k, "float64",
                                            "updating", {"bootstrap_servers": [bootstrap],
                                                         "client": name}, model=pinned)
                decodes.take()
                result = run_service(config, n)
                rates[name] = result["rate"]
                add(f"rate {name}", result["rate"])
                add(f"per decode {name}", decodes.take())
                if name != "file":
                    add(f"first {name}", result["first_batch_s"])
            add("kafka-python/file", rates["kafka-python"] / rates["file"])
            add("confluent/file", rates["confluent"] / rates["file"])
            add("confluent/kafka-python", rates["confluent"] / rates["kafka-python"])
            add("bare kafka-python", bare_consumer(bootstrap, topic, n,
                                                   THROUGHPUT_CONSUMER_SETTINGS))
            add("bare confluent", bare_confluent(bootstrap, topic, n))
    finally:
        decodes.close()
        broker.stop()
    print(f"## Kafka (Tansu, {PARTITIONS} partitions, JSON d={dim}, {n:,} records, k={k}, "
          f"rbf of the median width, model updating, {repeats} interleaved repeats, median (min-max))\n")
    print("| measurement | file source | Kafka, kafka-python | Kafka, confluent |")
    print("|---|---|---|---|")
    print(f"| service, rec/s | {summary(runs['rate file'])} | "
          f"{summary(runs['rate kafka-python'])} | {summary(runs['rate confluent'])} |")
    print(f"| / file source | 1 | {summary(runs['kafka-python/file'], '.2f')} | "
          f"{summary(runs['confluent/file'], '.2f')} |")
    print(f"| records per decode call | whole blocks | "
          f"{summary(runs['per decode kafka-python'])} | "
          f"{summary(runs['per decode confluent'])} |")
    print(f"| start to first batch, new group, s | - | "
          f"{summary(runs['first kafka-python'], '.2f')} | "
          f"{summary(runs['first confluent'], '.2f')} |")
    print(f"| bare consumer, service's fetch settings, rec/s | - | "
          f"{summary(runs['bare kafka-python'])} | {summary(runs['bare confluent'])} |")
    print(f"\nconfluent / kafka-python, service: "
          f"{summary(runs['confluent/kafka-python'], '.2f')}\n")


# ---------------------------------------------------------------------- overlap part


def two_thread_speedup(rounds: int = 4) -> float:
    """How much faster two threads run GEMMs (which release the GIL) than one, right now:
    the most any overlap of two threads can gain on this machine at its current load."""
    rng = np.random.default_rng(0)
    a, b = rng.random((1024, 512)), rng.random((1024, 512))

    def gemms(n: int) -> None:
        for _ in range(n):
            a @ b.T

    t0 = time.perf_counter()
    gemms(2 * rounds)
    one = time.perf_counter() - t0
    threads = [threading.Thread(target=gemms, args=(rounds,)) for _ in range(2)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return one / (time.perf_counter() - t0)


def ingest_part(tmp: Path, repeats: int) -> None:
    """Reading and decoding alone (file tailer -> batcher -> decoder, no model, no sinks):
    microseconds per record, record by record against blocks, interleaved."""
    rows = (("json", 32, 32 * BATCH), ("json", 784, 4 * BATCH), ("csv", 32, 32 * BATCH),
            ("float32", 32, 32 * BATCH))
    print(f"## Reading and decoding alone: record by record vs blocks (batch {BATCH}, "
          f"{repeats} interleaved repeats, median (min-max), microseconds per record)\n")
    print("| format | d | records | per-record read | per-record decode | blocks read "
          "| blocks decode | per-record total / blocks total |")
    print("|---|---|---|---|---|---|---|---|")
    from streamkm.io.batcher import Batcher
    from streamkm.io.decoding import RecordDecoder
    from streamkm_connectors.file_tailer import FileTailSource

    for fmt, dim, n in rows:
        x = make_data(n, dim, 10)
        data = tmp / f"ingest-{fmt}-{dim}"
        framing: dict[str, Any] = {}
        if fmt == "json":
            data.write_bytes(b"\n".join(json_values(x)) + b"\n")
        elif fmt == "csv":
            data.write_bytes(b"".join(",".join(map(repr, r)).encode() + b"\n"
                                      for r in x.tolist()))
        else:
            data.write_bytes(x.astype("<f4").tobytes())
            framing = {"framing": "fixed", "record_size": 4 * dim}
        times: dict[str, list[float]] = {key: [] for key in (
            "records read", "records decode", "blocks read", "blocks decode", "ratio")}
        for rep in range(repeats + 1):  # the first round compiles and warms the caches
            totals = {}
            for blocks in ((False, True) if rep % 2 else (True, False)):
                name = "blocks" if blocks else "records"
                part = FileTailSource([str(data)], blocks=blocks, **framing).build_part(
                    str(data), None)
                batcher = Batcher({str(data): part}, RecordDecoder(format=fmt, dim=dim),
                                  dim=dim, batch_size=BATCH, max_wait_s=1.0,
                                  poll_interval_s=0.001)
                got = read = decode = 0.0
                while got < n:
                    batch = batcher.collect(min_valid=1, wait=lambda seconds: True)
                    assert batch is not None
                    got += batch.n_read
                    read += batch.read_seconds
                    decode += batch.decode_seconds
                part.close()
                if rep:
                    times[f"{name} read"].append(1e6 * read / n)
                    times[f"{name} decode"].append(1e6 * decode / n)
                totals[name] = read + decode
            if rep:
                times["ratio"].append(totals["records"] / totals["blocks"])
        cells = " | ".join(summary(times[key], ".2f") for key in (
            "records read", "records decode", "blocks read", "blocks decode", "ratio"))
        print(f"| {fmt} | {dim} | {n:,} | {cells} |", flush=True)
    print()


#: Service variants of the overlap part: name -> (overlap, read_blocks).
OVERLAP_VARIANTS = {"off": (False, False), "on": (True, False), "blocks off": (False, True),
                    "blocks on": (True, True)}


def overlap_part(tmp: Path, repeats: int, k: int, with_kafka: bool = True) -> None:
    """Overlap off vs on, model updating: the file rows against the engine alone (read
    record by record and in blocks), and the Kafka source on JSON d=32 (needs the Tansu
    broker; blocks are a file-source feature)."""
    mode = "updating"
    print(f"## Ingest overlapping the step: off vs on, records vs blocks (k={k}, rbf with "
          f"gamma auto, tau=200, batch {BATCH}, model updating, {repeats} interleaved repeats, "
          f"median (min-max); 'blocks on' is the default configuration)\n")
    print("| source | format | dtype | d | records | kernel | engine rec/s "
          "| per-record, overlap off, rec/s | per-record, overlap on, rec/s "
          "| blocks, overlap off, rec/s | blocks, overlap on, rec/s "
          "| per-record off / engine | per-record on / engine | blocks off / engine "
          "| blocks on / engine | blocks on / per-record on | 2-thread GEMM speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows: list[tuple[str, str, str, int, int]] = [("file", *row) for row in ENGINE_ROWS]
    if with_kafka:
        rows.append(("kafka", "json", "float64", 32, 32 * BATCH))
    broker = None
    try:
        for source_kind, fmt, dtype, dim, n in rows:
            x = make_data(n, dim, k)
            data = tmp / f"ov-{fmt}-{dim}"
            if fmt == "json":
                values = json_values(x)
                data.write_bytes(b"\n".join(values) + b"\n")
            else:
                data.write_bytes(x.astype("<f4").tobytes())
            kafka: dict[str, Any] | None = None
            topic = f"bench-overlap-{dim}"
            names = ["engine", *OVERLAP_VARIANTS]
            if source_kind == "kafka":
                sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
                from tests.helpers.kafka_broker import create_topics, start_tansu

                broker = start_tansu(tmp / "tansu-overlap.log")
                create_topics(broker.bootstrap, {topic: PARTITIONS})
                produce_batched(broker.bootstrap, topic, values)
                kafka = {"bootstrap_servers": [broker.bootstrap]}
                names = ["engine", "off", "on"]
            runs: dict[str, list[float]] = {key: [] for key in (*names, "headroom")}
            ratios: dict[str, list[float]] = {key: [] for key in names[1:]}
            blocks_gain: list[float] = []
            e = engine_only(x, k, dtype, mode)  # compiles this mode's numba specialisations
            for rep in range(repeats):
                rates: dict[str, float] = {}
                turn = rep % len(names)
                for name in names[turn:] + names[:turn]:
                    if name == "engine":
                        e = engine_only(x, k, dtype, mode)
                        rates[name] = e["rate"]
                        continue
                    overlap, blocks = OVERLAP_VARIANTS[name]
                    folder = tmp / f"ov-{source_kind}-{fmt}-{dim}-{rep}-{name.replace(' ', '-')}"
                    folder.mkdir()
                    source = (file_source(data, fmt, dim, blocks=blocks) if kafka is None else
                              {"kind": "kafka", "topics": [topic],
                               "group_id": f"g-ov-{rep}-{name}",
                               "auto_offset_reset": "earliest"})
                    config = service_config(folder, source, fmt, dim, k, dtype, mode, kafka,
                                            overlap=overlap)
                    rates[name] = run_service(config, n)["rate"]
                for key in names:
                    runs[key].append(rates[key])
                for key in names[1:]:
                    ratios[key].append(rates[key] / rates["engine"])
                if "blocks on" in rates:
                    blocks_gain.append(rates["blocks on"] / rates["on"])
                runs["headroom"].append(two_thread_speedup())
            cells = [summary(runs[key]) if key in runs else "-" for key in OVERLAP_VARIANTS]
            cells += [summary(ratios[key], ".2f") if key in ratios else "-"
                      for key in OVERLAP_VARIANTS]
            gain = summary(blocks_gain, ".2f") if blocks_gain else "-"
            print(f"| {source_kind} | {fmt} | {dtype} | {dim} | {n:,} | {e['kernel']} | "
                  f"{summary(runs['engine'])} | {' | '.join(cells)} | {gain} | "
                  f"{summary(runs['headroom'], '.2f')} |", flush=True)
    finally:
        if broker is not None:
            broker.stop()
    print()


def kafka_sinks_part(tmp: Path, repeats: int, k: int) -> None:
    """Kafka in, Kafka out: exactly-once outputs (``[kafka] transactional_id``) on vs off,
    one transaction per checkpoint, at two checkpoint cadences."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.helpers.kafka_broker import create_topics, start_tansu

    dim, n = 32, 32 * BATCH
    values = json_values(make_data(n, dim, k))
    broker = start_tansu(tmp / "tansu-sinks.log")
    cadences = (5, 1)
    try:
        bootstrap, topic = broker.bootstrap, "bench-eos-in"
        outputs = {"assignments_topic": "bench-eos-a", "events_topic": "bench-eos-e",
                   "dead_letter_topic": "bench-eos-d"}
        create_topics(bootstrap, {topic: PARTITIONS, "bench-eos-a": PARTITIONS,
                                  "bench-eos-e": 1, "bench-eos-d": 1})
        produce_batched(bootstrap, topic, values)
        runs: dict[str, list[float]] = {}
        for rep in range(repeats):
            for every in cadences:
                rates = {}
                for txn in (False, True):
                    name = f"{'on' if txn else 'off'}-{every}"
                    kafka: dict[str, Any] = {"bootstrap_servers": [bootstrap]}
                    if txn:
                        kafka["transactional_id"] = f"bench-{name}-{rep}"
                    source = {"kind": "kafka", "topics": [topic], "group_id": f"g-{name}-{rep}",
                              "auto_offset_reset": "earliest"}
                    folder = tmp / f"eos-{name}-{rep}"
                    folder.mkdir()
                    config = service_config(folder, source, "json", dim, k, "float64",
                                            "updating", kafka, sinks={"kind": "kafka", **outputs},
                                            every_batches=every)
                    result = run_service(config, n)
                    rates[txn] = result["rate"]
                    runs.setdefault(name, []).append(rates[txn])
                    runs.setdefault(f"ck-{name}", []).append(result["checkpoint_ms"])
                runs.setdefault(f"ratio-{every}", []).append(rates[True] / rates[False])
    finally:
        broker.stop()
    print(f"## Kafka in, Kafka out: transactions off vs on (Tansu, {PARTITIONS} partitions, "
          f"JSON d={dim}, {n:,} records, batch {BATCH}, k={k}, model updating, {repeats} "
          f"interleaved repeats, median (min-max))\n")
    print("| checkpoint (= transaction) every | off, rec/s | on, rec/s | on / off | "
          "checkpoint off, ms | checkpoint + commit on, ms |")
    print("|---|---|---|---|---|---|")
    for every in cadences:
        print(f"| {every} batch{'es' if every > 1 else ''} ({every * BATCH:,} records) | "
              f"{summary(runs[f'off-{every}'])} | {summary(runs[f'on-{every}'])} | "
              f"{summary(runs[f'ratio-{every}'], '.2f')} | "
              f"{summary(runs[f'ck-off-{every}'], '.1f')} | "
              f"{summary(runs[f'ck-on-{every}'], '.1f')} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=("engine", "kafka", "kafka-sinks", "ui",
                                                    "overlap", "ingest", "all"),
                        default="all")
    parser.add_argument("--no-kafka", action="store_true",
                        help="overlap part: the file rows only (no broker)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("engine", "all"):
            engine_part(Path(tmp), args.repeats, args.k)
        if args.part in ("ui", "all"):
            ui_part(Path(tmp), args.repeats, args.k)
        if args.part in ("kafka", "all"):
            kafka_part(Path(tmp), args.repeats, args.k)
        if args.part in ("kafka-sinks", "all"):
            kafka_sinks_part(Path(tmp), args.repeats, args.k)
        if args.part in ("ingest", "all"):
            ingest_part(Path(tmp), args.repeats)
        if args.part in ("overlap", "all"):
            overlap_part(Path(tmp), args.repeats, args.k, with_kafka=not args.no_kafka)


if __name__ == "__main__":
    main()
