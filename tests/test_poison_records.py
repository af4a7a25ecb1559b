"""No poison records: generated raw input through decode -> batch -> every sink.

Each hypothesis example draws a few templates (structured JSON with hostile ids and values,
and raw bytes) and expands them with seeded byte-level mutations into a bulk of records,
read from file and Kafka positions (file names that are not valid UTF-8, random Kafka keys
and headers). Every record goes through the real decoder and batcher and then through every
sink: the assignment, event and dead-letter file sinks, and the Kafka assignment, event and
dead-letter sinks whose messages are serialised by kafka-python's own record-batch builder.
Checked: no exception escapes, every output line is strict UTF-8 JSON, and every input is
either assigned or dead-lettered, exactly once.

The number of generated records is ``STREAMKM_FUZZ_RECORDS`` (default 250,000: 50
examples, derandomised, so every run draws the same ones; a longer run draws more examples,
e.g. ``STREAMKM_FUZZ_RECORDS=20000000 pytest tests/test_poison_records.py``).
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from streamkm.io.batcher import Batcher
from streamkm.io.decoding import RecordDecoder
from streamkm.sources import RawRecord
from streamkm_connectors.file_sinks import AssignmentFileSink, DeadLetterFileSink, EventFileSink
from streamkm_connectors.kafka_common import KafkaRecord
from streamkm_connectors.kafka_sinks import (
    AssignmentKafkaSink,
    DeadLetterKafkaSink,
    EventKafkaSink,
    KafkaProducerHandle,
)

pytestmark = pytest.mark.slow

DIM = 3
TOTAL_RECORDS = int(os.environ.get("STREAMKM_FUZZ_RECORDS", "250000"))
PER_EXAMPLE = 5000
EXAMPLES = max(1, math.ceil(TOTAL_RECORDS / PER_EXAMPLE))
#: File names as Python holds them: the last two are not valid UTF-8 (surrogate escapes).
FILE_NAMES = ["in.jsonl", "données.jsonl", os.fsdecode(b"bad-\xff\xfe.jsonl"),
              os.fsdecode(b"\xc3(.jsonl")]
#: Fragments the mutations splice in: escapes, quotes, invalid UTF-8, numbers, literals.
FRAGMENTS = [b'"\\ud800"', b"\\udc00", b"\\u0000", b'"', b"\\", b"\xff", b"\xc3\x28",
             b"\xed\xa0\x80", b"\x00", b"NaN", b"-Infinity", b"1e999", b"1" * 30, b"true",
             b"null", b"[", b"]",
             b"{", b"}", b",", b":", b'"id":', b'"x":', b'"indices":[0,1]', b'"values":[1,2]',
             b"\n", b"\r", b" "]

json_scalars = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-(10**30),
                                                                 max_value=10**30),
    st.booleans(), st.none(), st.text(max_size=5))
ids = st.one_of(st.none(), st.integers(min_value=-(2**70), max_value=2**70),
                st.text(alphabet=st.characters(codec=None), max_size=12), st.floats(),
                st.booleans(), st.lists(st.integers(), max_size=2))
dense_x = st.one_of(st.lists(st.floats(-1e6, 1e6), min_size=DIM, max_size=DIM),
                    st.lists(json_scalars, min_size=DIM - 1, max_size=DIM + 1))
sparse_indices = st.lists(st.one_of(st.integers(-2, DIM + 1), json_scalars), max_size=4)


@st.composite
def structured(draw: st.DrawFn) -> bytes:
    """A JSON object (dense or sparse fields), serialised with or without escapes."""
    obj: dict[str, Any] = {}
    if draw(st.booleans()):
        obj["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        obj["x"] = draw(dense_x)
    if draw(st.booleans()):
        obj["indices"] = draw(sparse_indices)
        obj["values"] = draw(st.lists(json_scalars, max_size=4))
    if draw(st.booleans()):
        obj[draw(st.text(alphabet=st.characters(codec=None), max_size=4))] = draw(json_scalars)
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    return text.encode("utf-8", "surrogatepass")


csv_lines = st.lists(st.one_of(st.floats(), st.integers(), st.text(max_size=3)),
                     min_size=DIM - 1, max_size=DIM + 2).map(
    lambda row: ",".join(str(v) for v in row).encode("utf-8", "surrogatepass"))
templates = st.lists(st.one_of(structured(), st.binary(max_size=40), csv_lines),
                     min_size=1, max_size=12)


def mutate(value: bytes, rng: random.Random) -> bytes:
    """Zero to three random splices, deletions, byte flips or truncations."""
    data = bytearray(value)
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        op = rng.randrange(4)
        at = rng.randrange(len(data) + 1)
        if op == 0:
            data[at:at] = rng.choice(FRAGMENTS)
        elif op == 1 and data:
            del data[at:at + rng.randint(1, 4)]
        elif op == 2 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        else:
            del data[at:]
    return bytes(data)


def expand(seeds: list[bytes], seed: int, offset0: int) -> list[RawRecord]:
    """``PER_EXAMPLE`` records mutated from ``seeds``, each with a unique offset, from a file
    (some names not UTF-8) or a Kafka partition (random raw keys and headers)."""
    rng = random.Random(seed)
    records: list[RawRecord] = []
    for i in range(PER_EXAMPLE):
        value = mutate(rng.choice(seeds), rng)
        offset = offset0 + i
        if rng.random() < 0.5:
            position: dict[str, Any] = {"file": rng.choice(FILE_NAMES), "offset": offset}
            records.append(RawRecord(value=value, key=None, position=position))
        else:
            raw_key = rng.choice((None, b"k", bytes(rng.randrange(256) for _ in range(3))))
            headers = tuple((rng.choice(("h", "trace")), bytes(rng.randrange(256)
                                                                for _ in range(2)))
                            for _ in range(rng.randrange(3)))
            key = raw_key.decode("utf-8", "replace") if raw_key is not None else None
            records.append(KafkaRecord(
                value=value, key=key, raw_key=raw_key, headers=headers,
                position={"topic": "t", "partition": 0, "offset": offset}))
    return records


class ListPartition:
    """An in-memory source partition over a list of records."""

    def __init__(self, records: list[RawRecord]) -> None:
        self.records = records
        self.next = 0

    def next_batch(self, max_records: int) -> list[RawRecord]:
        out = self.records[self.next:self.next + max_records]
        self.next += len(out)
        return out

    def snapshot(self) -> dict[str, Any]:
        return {"next": self.next}

    def lag(self) -> float | None:
        return float(len(self.records) - self.next)

    def close(self) -> None:
        pass


class DeliveredFuture:
    """The future of a message the broker acknowledged."""

    is_done = True
    exception = None

    def failed(self) -> bool:
        return False


class SerialisingProducer:
    """A ``KafkaProducer`` stand-in that serialises every message the way kafka-python's
    producer does (its record-batch builder) and counts them per topic."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self.builder = self._new_builder()
        self.offset = 0

    @staticmethod
    def _new_builder() -> DefaultRecordBatchBuilder:
        return DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)

    def send(self, topic: str, value: bytes, key: bytes | None, headers: list[Any]) -> Any:
        assert isinstance(value, bytes) and (key is None or isinstance(key, bytes))
        self.builder.append(self.offset, timestamp=0, key=key, value=value, headers=headers)
        self.offset += 1
        self.sent[topic] = self.sent.get(topic, 0) + 1
        if self.offset >= 10000:  # keep the builder's buffer small
            self.builder.build()
            self.builder, self.offset = self._new_builder(), 0
        return DeliveredFuture()

    def flush(self, timeout: float | None = None) -> None:
        pass

    def metrics(self) -> dict[str, Any]:
        return {}

    def close(self, timeout: float | None = None) -> None:
        pass


def strict_json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` (split at ``\n`` only, as JSON lines are; text may hold
    U+0085 or U+2028) as JSON, each decoded as strict UTF-8."""
    return [json.loads(line.decode("utf-8")) for line in path.read_bytes().split(b"\n")[:-1]]


def run_through_everything(records: list[RawRecord], fmt: str, folder: Path) -> None:
    decoder = RecordDecoder(format=fmt, dim=DIM, csv_id_column=0 if fmt == "csv" else None)
    batcher = Batcher({"p": ListPartition(records)}, decoder, dim=DIM, batch_size=1024,
                      max_wait_s=0.0, poll_interval_s=0.0)
    assignments = AssignmentFileSink(folder / "assignments.jsonl")
    events = EventFileSink(folder / "events.jsonl")
    dead = DeadLetterFileSink(folder / "dead.jsonl")
    producer = SerialisingProducer()
    handle = KafkaProducerHandle({}, producer_factory=lambda: producer)
    kafka_sinks = (AssignmentKafkaSink(handle.acquire(), "a"),
                   EventKafkaSink(handle.acquire(), "e"),
                   DeadLetterKafkaSink(handle.acquire(), "d"))
    accepted_offsets: list[int] = []
    n_assigned = n_dead = 0
    while True:
        batch = batcher.collect(min_valid=1, wait=lambda _s: True)
        if batch is None or batch.n_read == 0:
            break
        x = batch.X.toarray() if hasattr(batch.X, "toarray") else batch.X
        sq = np.einsum("ij,ij->i", x, x)
        clusters = np.zeros(len(batch.ids), dtype=np.int64)
        assignments.write_assignments(batch.ids, clusters, sq, step=1)
        kafka_sinks[0].write_record_assignments(batch.records, batch.ids, clusters, sq, step=1)
        event = {"event": "batch", "ids": batch.ids[:3],
                 "sources": sorted({str(r.position.get("file")) for r in batch.records})}
        events.write_event(event)
        kafka_sinks[1].write_event(event)
        for rejection in batch.rejections:
            record = rejection.record
            dead.write_dead_letter(record.value, rejection.reason.value, rejection.detail,
                                   record.position)
            kafka_sinks[2].write_dead_letter(record.value, rejection.reason.value,
                                             rejection.detail, record.position)
        accepted_offsets.extend(r.position["offset"] for r in batch.records)
        n_assigned += len(batch.ids)
        n_dead += len(batch.rejections)
        for sink in kafka_sinks:
            sink.flush()
    for sink in (assignments, events, dead):
        sink.close()
    for sink in kafka_sinks:
        sink.sync()

    assigned_lines = strict_json_lines(folder / "assignments.jsonl")
    dead_lines = strict_json_lines(folder / "dead.jsonl")
    strict_json_lines(folder / "events.jsonl")
    assert len(assigned_lines) == n_assigned
    assert len(dead_lines) == n_dead
    assert all(isinstance(line["id"], str) for line in assigned_lines)
    dead_offsets = [line["position"]["offset"] for line in dead_lines]
    seen = sorted(accepted_offsets + dead_offsets)
    assert seen == sorted(r.position["offset"] for r in records), "lost or duplicated input"
    assert producer.sent.get("a", 0) == n_assigned
    assert producer.sent.get("d", 0) == n_dead


# No shrinking: an example is a bulk of records; the failing example is printed as drawn.
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seeds=templates, seed=st.integers(0, 2**32 - 1),
       fmt=st.sampled_from(["json", "json", "json", "json_sparse", "csv"]))
def test_every_record_is_assigned_or_dead_lettered_once(seeds: list[bytes], seed: int,
                                                        fmt: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_through_everything(expand(seeds, seed, 0), fmt, Path(tmp))
