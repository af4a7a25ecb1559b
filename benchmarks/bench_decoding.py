"""Decoding and sink serialisation: JSON libraries and streamkm's decoder on our record shapes.

Per record shape (dense JSON d = 2, 32, 784; sparse JSON with 20 nonzeros of 10,000; CSV
d = 2, 32, 784) this times, in microseconds per record, turning a batch of raw records into
one float64 array:

* ``stdlib``: ``json.loads`` per record + ``np.array`` (what the decoder did before);
* ``orjson``, ``msgspec`` (typed: ``x: list[float]``), ``simdjson`` (pysimdjson, ``x`` read
  with ``as_buffer``, no Python floats): the candidate libraries, same work;
* ``decoder``: ``RecordDecoder.decode_many`` (all validation included) as shipped, and
  ``decoder (stdlib path)``: the same decoder with its typed fast path switched off.

For CSV: the decoder, ``np.loadtxt`` and ``np.fromstring`` over the joined batch. For the
sinks: an assignment batch as JSON lines (old f-strings vs msgspec) and one Kafka message
per assignment (old ``json.dumps`` vs msgspec).

Libraries that are not installed (orjson and pysimdjson are not dependencies) are skipped:
``pip install orjson pysimdjson`` for the full table. Interleaved, median (min-max) of
``--repeats`` runs.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_decoding.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

import msgspec
import numpy as np

from streamkm.io.decoding import RecordDecoder
from streamkm.sources import RawRecord
from streamkm_connectors._json_out import assignments, encode, encode_lines


class _RefuseAll:
    def decode(self, value: bytes) -> Any:
        raise msgspec.DecodeError("slow path")


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def dense_candidates(values: list[bytes], dim: int) -> dict[str, Callable[[], Any]]:
    records = [RawRecord(value=v, key=None, position={"file": "f", "offset": i})
               for i, v in enumerate(values)]
    decoder = RecordDecoder(format="json", dim=dim)
    slow = RecordDecoder(format="json", dim=dim)
    slow._typed_dense = _RefuseAll()
    loads = json.JSONDecoder().decode
    typed = msgspec.json.Decoder(msgspec.defstruct("R", [("x", list[float]),
                                                         ("id", str | int | None, None)]))
    out: dict[str, Callable[[], Any]] = {
        "stdlib": lambda: np.array([loads(v.decode())["x"] for v in values]),
        "msgspec": lambda: np.array([typed.decode(v).x for v in values], dtype=np.float64),
    }
    orjson = _optional("orjson")
    if orjson is not None:
        out["orjson"] = lambda: np.array([orjson.loads(v)["x"] for v in values])
    simdjson = _optional("simdjson")
    if simdjson is not None:
        parser = simdjson.Parser()

        def simd() -> Any:
            return np.frombuffer(b"".join([parser.parse(v)["x"].as_buffer(of_type="d")
                                           for v in values])).reshape(len(values), dim)
        out["simdjson"] = simd
    out["decoder"] = lambda: decoder.decode_many(records)[0]
    out["decoder (stdlib path)"] = lambda: slow.decode_many(records)[0]
    return out


def sparse_candidates(values: list[bytes], dim: int) -> dict[str, Callable[[], Any]]:
    records = [RawRecord(value=v, key=None, position={"file": "f", "offset": i})
               for i, v in enumerate(values)]
    decoder = RecordDecoder(format="json_sparse", dim=dim)
    loads = json.JSONDecoder().decode
    typed = msgspec.json.Decoder(msgspec.defstruct(
        "S", [("indices", list[int]), ("values", list[float]), ("id", str | int | None, None)]))

    def stdlib() -> Any:
        objs = [loads(v.decode()) for v in values]
        return (np.array([i for o in objs for i in o["indices"]]),
                np.array([x for o in objs for x in o["values"]]))

    def fast() -> Any:
        objs = [typed.decode(v) for v in values]
        return (np.array([i for o in objs for i in o.indices]),
                np.array([x for o in objs for x in o.values]))
    return {"stdlib": stdlib, "msgspec": fast,
            "decoder": lambda: decoder.decode_many(records)[0]}


def csv_candidates(lines: list[bytes], dim: int) -> dict[str, Callable[[], Any]]:
    records = [RawRecord(value=v, key=None, position={"file": "f", "offset": i + 1})
               for i, v in enumerate(lines)]
    decoder = RecordDecoder(format="csv", dim=dim)
    return {
        "decoder": lambda: decoder.decode_many(records)[0],
        "np.loadtxt": lambda: np.loadtxt(lines, delimiter=",", dtype=np.float64),
        "np.fromstring": lambda: np.fromstring(b",".join(lines), sep=","),
    }


def sink_candidates(n: int) -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(0)
    ids = [f"rec-{i}" for i in range(n)]
    clusters, sq = rng.integers(0, 10, n), rng.random(n)

    def file_fstrings() -> bytes:
        tail = ',"step":7}\n'
        dist = np.sqrt(np.maximum(sq, 0.0)).tolist()
        return "".join(
            f'{{"id":{encode_basestring(i)},"cluster":{c},"distance":{e!r},'
            f'"sq_distance":{d!r}{tail}'
            for i, c, e, d in zip(ids, clusters.tolist(), dist, sq.tolist())).encode()

    def kafka_json() -> list[bytes]:
        dist = np.sqrt(np.maximum(sq, 0.0)).tolist()
        return [json.dumps({"id": i, "cluster": c, "distance": e, "sq_distance": d, "step": 7},
                           separators=(",", ":")).encode()
                for i, c, e, d in zip(ids, clusters.tolist(), dist, sq.tolist())]
    return {
        "file lines, f-strings (before)": file_fstrings,
        "file lines, msgspec (now)": lambda: encode_lines(assignments(ids, clusters, sq, 7)),
        "Kafka values, json.dumps (before)": kafka_json,
        "Kafka values, msgspec (now)": lambda: [encode(a) for a in
                                                assignments(ids, clusters, sq, 7)],
    }


def measure(candidates: dict[str, Callable[[], Any]], n: int, repeats: int
            ) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in candidates.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) / n * 1e6)
    return times


def report(title: str, times: dict[str, list[float]], baseline: str) -> None:
    base = statistics.median(times[baseline])
    print(f"\n{title}\n")
    print(f"| candidate | us/record | speed-up vs {baseline} |")
    print("|---|---|---|")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"| {name} | {med:.2f} ({min(values):.2f}-{max(values):.2f}) | "
              f"{base / med:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for dim in (2, 32, 784):
        n = 4096 if dim < 784 else 512
        x = rng.normal(size=(n, dim))
        values = [json.dumps({"id": f"r{i}", "x": row}).encode()
                  for i, row in enumerate(x.tolist())]
        report(f"### Dense JSON, d={dim} ({n} records per batch)",
               measure(dense_candidates(values, dim), n, args.repeats), "stdlib")
    dim, nnz, n = 10000, 20, 4096
    values = [json.dumps({"id": f"r{i}", "indices": sorted(rng.choice(dim, nnz, replace=False)
                                                           .tolist()),
                          "values": rng.normal(size=nnz).tolist()}).encode() for i in range(n)]
    report(f"### Sparse JSON, {nnz} of {dim} features ({n} records per batch)",
           measure(sparse_candidates(values, dim), n, args.repeats), "stdlib")
    for dim in (2, 32, 784):
        n = 4096 if dim < 784 else 512
        lines = [",".join(repr(v) for v in row).encode()
                 for row in rng.normal(size=(n, dim)).tolist()]
        report(f"### CSV, d={dim} ({n} records per batch)",
               measure(csv_candidates(lines, dim), n, args.repeats), "decoder")
    n = 8192
    report(f"### Sink serialisation, assignments ({n} per batch)",
           measure(sink_candidates(n), n, args.repeats), "file lines, f-strings (before)")


if __name__ == "__main__":
    main()
