"""Blocks from the file source: the same records, positions, batches and rejections as the
per-record path, for every record format, hostile input included."""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.io.batcher import Batcher
from streamkm.io.blocks import RecordBlock, RecordRows, all_replayed, any_replayed
from streamkm.io.checkpoint import checkpoint_files, read_checkpoint
from streamkm.io.decoding import RecordDecoder
from streamkm.sources import RawRecord
from streamkm_connectors._framing import FramedReader
from streamkm_connectors.file_tailer import FileTailSource
from tests.runtime.test_overlap import _config as service_config
from tests.runtime.test_overlap import _run_until as run_until
from tests.test_poison_records import mutate, templates

pytestmark = pytest.mark.unit

DIM = 3


def flatten(items: list[RecordBlock | RawRecord]) -> list[RawRecord]:
    out: list[RawRecord] = []
    for item in items:
        out.extend(item.records() if isinstance(item, RecordBlock) else [item])
    return out


def readers(path: Path, **kwargs: Any) -> tuple[FramedReader, FramedReader, list[int]]:
    fds = [os.open(path, os.O_RDONLY) for _ in range(2)]
    made = [FramedReader(fd, str(path), "p", 0, **kwargs) for fd in fds]
    return made[0], made[1], fds


@pytest.mark.parametrize("chunk", [5, 64, 1 << 16])
@pytest.mark.parametrize("framing", ["lines", "fixed"])
def test_blocks_hold_the_records_and_positions_the_per_record_reader_gives(
        tmp_path: Path, chunk: int, framing: str) -> None:
    rng = random.Random(chunk)
    lines = [bytes(rng.randrange(32, 127) for _ in range(rng.choice((0, 3, 20, 90))))
             for _ in range(300)]
    path = tmp_path / "in"
    path.write_bytes(b"\n".join(lines) + b"\npartial")  # an oversized line or two (> 60)
    kwargs: dict[str, Any] = dict(framing=framing, record_size=12 if framing == "fixed" else None,
                                  max_record_bytes=60, chunk_bytes=chunk)
    one, blocks, fds = readers(path, **kwargs)
    try:
        while True:
            want = rng.choice((1, 7, 50, 400))
            expected = one.read(want)
            got = blocks.read_blocks(want)
            assert flatten(got) == expected
            assert blocks.emitted_offset == one.emitted_offset
            if not expected:
                break
        with path.open("ab") as fh:  # the partial line is completed later
            fh.write(b" done\n")
        assert flatten(blocks.read_blocks(10)) == one.read(10)
        assert blocks.emitted_offset == one.emitted_offset == path.stat().st_size - (
            path.stat().st_size % 12 if framing == "fixed" else 0)
    finally:
        for fd in fds:
            os.close(fd)


def test_a_line_longer_than_the_limit_is_one_oversized_record_between_blocks(
        tmp_path: Path) -> None:
    path = tmp_path / "in"
    path.write_bytes(b"a\nb\n" + b"x" * 5000 + b"\nc\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        reader = FramedReader(fd, str(path), "p", 0, framing="lines", record_size=None,
                              max_record_bytes=100, chunk_bytes=64)
        items = reader.read_blocks(10)
    finally:
        os.close(fd)
    kinds = [(type(i).__name__, len(i) if isinstance(i, RecordBlock) else i.error)
             for i in items]
    assert kinds == [("RecordBlock", 2), ("RawRecord", "oversized"), ("RecordBlock", 1)]
    assert items[1].position == {"partition": "p", "file": str(path), "offset": 4,
                                 "length": 5000}


def test_record_rows_is_the_list_of_accepted_records(tmp_path: Path) -> None:
    data = b"r0\nr1\nr2\nr3\n"
    block = RecordBlock(data, np.array([0, 3, 6, 9]), np.array([2, 5, 8, 11]), 100, "f", "p")
    single = RawRecord(b"k", "key", {"topic": "t", "partition": 0, "offset": 7}, replayed=True)
    rows = RecordRows([(block, np.array([1, 3])), [single], (block, np.array([], int))])
    expected = [block.record(1), block.record(3), single]
    assert len(rows) == 3 and list(rows) == expected
    assert [rows[i] for i in range(-3, 3)] == expected * 2
    assert rows[1:] == expected[1:] and rows[::2] == expected[::2]
    assert rows[0].position == {"partition": "p", "file": "f", "offset": 103}
    with pytest.raises(IndexError):
        rows[3]
    assert any_replayed(rows) and not all_replayed(rows)
    assert all_replayed(RecordRows([[single]])) and not all_replayed(RecordRows([]))
    assert not any_replayed(RecordRows([(block, np.arange(4))]))


# ---------------------------------------------------------------------- whole batches


DECODERS: dict[str, dict[str, Any]] = {
    "json": {"format": "json"},
    "json-float32": {"format": "json", "dtype": np.float32, "max_abs_value": 1e5},
    "csv": {"format": "csv"},
    "csv-id": {"format": "csv", "csv_id_column": 0},
    "csv-header-named-id": {"format": "csv", "csv_header": True, "csv_id_column": "name"},
    "json_sparse": {"format": "json_sparse"},
}


def batches(path: Path, decoder: RecordDecoder, *, blocks: bool, framing: str = "lines",
            record_size: int | None = None, batch_size: int = 64) -> list[Any]:
    source = FileTailSource([str(path)], framing=framing, record_size=record_size,
                            max_record_bytes=200, blocks=blocks, read_chunk_bytes=512)
    part = source.build_part(str(path), None)
    batcher = Batcher({str(path): part}, decoder, dim=DIM, batch_size=batch_size,
                      max_wait_s=0.0, poll_interval_s=0.001, dtype=decoder.dtype)
    out = []
    try:
        while True:
            batch = batcher.collect(min_valid=1, wait=lambda s: True)
            if batch is None or not batch.n_read:
                break
            x = batch.X.toarray() if hasattr(batch.X, "toarray") else batch.X
            out.append((x.dtype, x.shape, x.tobytes(), batch.ids, list(batch.records),
                        [(r.reason, r.detail, r.record) for r in batch.rejections],
                        batch.n_read, batch.positions))
    finally:
        part.close()
    return out


def assert_same_batches(path: Path, make: Any, **kwargs: Any) -> None:
    per_record = batches(path, make(), blocks=False, **kwargs)
    by_block = batches(path, make(), blocks=True, **kwargs)
    assert len(by_block) == len(per_record)
    for got, expected in zip(by_block, per_record):
        assert got == expected


def _good_lines(rng: random.Random, kind: str, n: int) -> list[bytes]:
    rows = [[rng.choice((rng.gauss(0, 10), rng.randint(-9, 9), float(np.float32(rng.random()))))
             for _ in range(DIM)] for _ in range(n)]
    if kind.startswith("csv"):
        return [(f"id{i}," if "id" in kind else "") .encode() + ",".join(map(repr, r)).encode()
                for i, r in enumerate(rows)]
    if kind == "json_sparse":
        return [json.dumps({"id": i, "indices": [0, 2], "values": r[:2]}).encode()
                for i, r in enumerate(rows)]
    return [json.dumps({"id": rng.choice((i, f"r{i}", None)), "x": r}).encode()
            for i, r in enumerate(rows)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(seeds=templates, seed=st.integers(0, 2**32 - 1),
       kind=st.sampled_from(sorted(DECODERS)))
def test_batches_from_blocks_equal_the_per_record_batches(
        tmp_path_factory: pytest.TempPathFactory, seeds: list[bytes], seed: int,
        kind: str) -> None:
    rng = random.Random(seed)
    lines = _good_lines(rng, kind, 150)
    hostile = [mutate(rng.choice(seeds + lines), rng) for _ in range(100)]
    for line in hostile:  # hostile records spread among the good ones
        lines.insert(rng.randrange(len(lines) + 1), line)
    if kind == "csv-header-named-id":
        lines.insert(0, b"name,a,b,c")
    path = tmp_path_factory.mktemp("blocks") / "in"
    path.write_bytes(b"\n".join(lines) + b"\n")
    options = DECODERS[kind]
    assert_same_batches(path, lambda: RecordDecoder(dim=DIM, **options),
                        batch_size=rng.choice((8, 64, 500)))


@pytest.mark.parametrize("id_column", [None, "name"])
def test_a_csv_header_before_clean_rows_is_neither_accepted_nor_rejected(
        tmp_path: Path, id_column: str | None) -> None:
    # every data row takes the fast path: only the header goes through the per-record decoder
    header = b"name,a,b,c" if id_column else b"a,b,c"
    rows = [(f"r{i}," if id_column else "").encode() + b"%d.5,1,-2" % i for i in range(40)]
    path = tmp_path / "in.csv"
    path.write_bytes(b"\n".join([header, *rows]) + b"\n")
    options = {"format": "csv", "csv_header": True, "csv_id_column": id_column}
    assert_same_batches(path, lambda: RecordDecoder(dim=DIM, **options))
    (batch,) = batches(path, RecordDecoder(dim=DIM, **options), blocks=True)
    x = np.frombuffer(batch[2]).reshape(batch[1])
    assert batch[1] == (40, DIM) and x[0].tolist() == [0.5, 1.0, -2.0]
    assert batch[5] == [] and batch[6] == 41


@pytest.mark.parametrize("record_size", [4 * DIM, 4 * DIM + 2])
def test_float32_blocks_are_read_straight_and_bad_values_rejected_as_before(
        tmp_path: Path, record_size: int) -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(500, DIM)).astype("<f4")
    values[[3, 70]] = np.nan
    values[[9]] = np.inf
    values[[11]] = 3e38
    raw = values.tobytes() + struct.pack("<2f", 1.0, 2.0)  # a partial last record
    path = tmp_path / "in.f32"
    path.write_bytes(raw)
    for dtype in (np.float32, np.float64):
        assert_same_batches(path, lambda d=dtype: RecordDecoder(format="float32", dim=DIM,
                                                                 dtype=d),
                            framing="fixed", record_size=record_size)
    batch = batches(path, RecordDecoder(format="float32", dim=DIM, dtype=np.float32),
                    blocks=True, framing="fixed", record_size=4 * DIM, batch_size=1000)[0]
    reasons = [reason for reason, _detail, _record in batch[5]]
    assert reasons == ["non_finite", "non_finite", "magnitude", "non_finite"]  # rows 3, 9, 11, 70
    assert batch[1] == (496, DIM)


# ---------------------------------------------------------------------- the service


def _service_outputs(folder: Path, data: Path, *, read_blocks: bool) -> tuple[Any, ...]:
    config = service_config(folder, data=data)
    source = config.source.model_copy(update={"read_blocks": read_blocks})
    service = Service(config.model_copy(update={"source": source}),
                      registry=CollectorRegistry())
    total = sum(1 for _ in data.open("rb"))
    run_until(service, lambda: service.status.records_read >= total)
    assignments = (folder / "out" / "assignments.jsonl").read_text().splitlines()
    dead = [{k: v for k, v in json.loads(line).items() if k != "time"}
            for line in (folder / "out" / "dead.jsonl").read_text().splitlines()]
    checkpoint = read_checkpoint(checkpoint_files(folder / "ckpt")[-1])
    return assignments, dead, checkpoint.positions


def test_the_service_writes_the_same_outputs_and_positions_with_and_without_blocks(
        tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    lines = [json.dumps({"id": i, "x": rng.normal(size=2).tolist()}).encode()
             for i in range(400)]
    for at, bad in ((5, b'{"id": 5, "x": [1]}'), (77, b"\xff\xfe"), (150, b""),
                    (260, b'{"id": "x", "x": [1, NaN]}'), (301, b'{"x": [1e999, 0]}')):
        lines[at] = bad
    data = tmp_path / "in.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    outputs = []
    for read_blocks in (False, True):
        folder = tmp_path / f"blocks-{read_blocks}"
        folder.mkdir()
        outputs.append(_service_outputs(folder, data, read_blocks=read_blocks))
    (assigned, dead, positions), (assigned_b, dead_b, positions_b) = outputs
    assert len(assigned) == 395 and assigned_b == assigned
    assert [d["reason"] for d in dead] == ["wrong_dimension", "encoding", "empty",
                                           "non_finite", "non_finite"]
    assert dead_b == dead and positions_b == positions
