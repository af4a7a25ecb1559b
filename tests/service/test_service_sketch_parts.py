"""Sketching in the service, in-process: sparse JSON decoding, [sketch] config, metrics."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping, config_hash
from streamkm.exceptions import ConfigError, ParameterError
from streamkm.io.checkpoint import CheckpointStore
from streamkm.io.decoding import RecordDecoder, RejectReason
from streamkm.io.decoding_sparse import stack_batch_rows
from streamkm.sources import RawRecord

pytestmark = pytest.mark.unit

DIM = 50


def raw(value: bytes, offset: int = 0) -> RawRecord:
    return RawRecord(value, None, {"file": "f.jsonl", "offset": offset})


@pytest.mark.parametrize(("value", "reason", "quoted"), [
    (b'{"id": "r", "indices": [1, 50], "values": [1, 2]}', RejectReason.INDEX_OUT_OF_RANGE,
     "index 50 at position 1 is outside [0, 50)"),
    (b'{"id": "n", "indices": [-3], "values": [1]}', RejectReason.INDEX_OUT_OF_RANGE,
     "index -3"),
    (b'{"id": "h", "indices": [' + b"9" * 30 + b'], "values": [1]}',
     RejectReason.INDEX_OUT_OF_RANGE, "999"),
    (b'{"id": "u", "indices": [4, 2], "values": [1, 2]}', RejectReason.UNSORTED_INDICES,
     "unsorted index 2 after 4"),
    (b'{"id": "d", "indices": [2, 2], "values": [1, 2]}', RejectReason.UNSORTED_INDICES,
     "duplicate index 2"),
    (b'{"id": "l", "indices": [1, 2, 3], "values": [1, 2]}', RejectReason.LENGTH_MISMATCH,
     "'indices' has 3 entries but 'values' has 2"),
    (b'{"id": "f", "indices": [1.5], "values": [1]}', RejectReason.UNPARSEABLE, "1.5"),
    (b'{"id": "b", "indices": [true], "values": [1]}', RejectReason.UNPARSEABLE, "true"),
    (b'{"id": "s", "indices": [1], "values": ["2"]}', RejectReason.UNPARSEABLE, '"2"'),
    (b'{"id": "i", "indices": [1], "values": [Infinity]}', RejectReason.NON_FINITE, "inf"),
    (b'{"id": "m", "indices": [1], "values": [1e300]}', RejectReason.MAGNITUDE, "1e+300"),
    (b'{"id": "x", "values": [1]}', RejectReason.MISSING_FIELD, "'indices'"),
    (b'{"id": "y", "indices": "1,2", "values": [1, 2]}', RejectReason.UNPARSEABLE, "1,2"),
    (b'{"id": "z", "indices": [1], "values": [1]', RejectReason.UNPARSEABLE, "invalid JSON"),
    (b"", RejectReason.EMPTY, "empty"),
])
def test_bad_sparse_records_are_rejected_with_their_reason(value, reason, quoted) -> None:
    good = [raw(b'{"id": "g1", "indices": [0, 7, 49], "values": [1.5, -2, 3]}', 0),
            raw(b'{"id": "g2", "indices": [], "values": []}', 100)]
    decoder = RecordDecoder(format="json_sparse", dim=DIM)
    x, ids, accepted, rejections = decoder.decode_many([good[0], raw(value, 50), good[1]])
    assert [(r.reason, r.record.position["offset"]) for r in rejections] == [(reason, 50)]
    assert quoted in rejections[0].detail
    assert sp.issparse(x) and x.shape == (2, DIM) and ids == ["g1", "g2"]
    np.testing.assert_array_equal(x.toarray()[0, [0, 7, 49]], [1.5, -2.0, 3.0])
    assert x.nnz == 3 and x.dtype == np.float64


def test_sparse_decoding_single_records_fields_and_dtype() -> None:
    decoder = RecordDecoder(format="json_sparse", dim=4, indices_field="j", values_field="v",
                            dtype=np.float32)
    record = decoder.decode(raw(b'{"j": [3], "v": [2.5]}', 8))
    assert record.id == "f.jsonl:8"
    np.testing.assert_array_equal(record.x, np.array([0, 0, 0, 2.5], dtype=np.float32))
    x, _, _, _ = decoder.decode_many([raw(b'{"j": [1], "v": [1]}')])
    assert x.dtype == np.float32
    with pytest.raises(ParameterError, match="three different strings"):
        RecordDecoder(format="json_sparse", dim=4, values_field="id")
    chunks = [sp.csr_matrix(np.eye(2, 4)), sp.csr_matrix(np.ones((1, 4)))]
    stacked = stack_batch_rows(chunks, 4, np.float64)
    assert sp.issparse(stacked) and stacked.shape == (3, 4) and stacked.nnz == 6


BASE = {"source": {"paths": ["in.jsonl"]}, "decoding": {"format": "json_sparse", "dim": DIM},
        "model": {"n_clusters": 4}}


def with_sketch(**sketch) -> dict:
    return {**BASE, "sketch": sketch}


@pytest.mark.parametrize(("sketch", "message"), [
    ({"kind": "pca"}, "config key 'sketch.kind' has bad value 'pca'"),
    ({"kind": "svd", "rank": 3}, "unknown config key 'sketch.rank' (value 3)"),
    ({"kind": "gaussian", "n_components": 0}, "'auto' or a positive int, got 0"),
    ({"kind": "gaussian", "n_components": "many"}, "'auto' or a positive int, got 'many'"),
    ({"kind": "gaussian", "eps": 0}, "'sketch.eps' has bad value 0"),
    ({"kind": "svd", "resketch_every": 0}, "'sketch.resketch_every' has bad value 0"),
    ({"resketch_every": 5}, "sketch.resketch_every = 5 needs sketch.kind other than 'none'"),
    ({"kind": "svd", "n_components": 60}, "at most decoding.dim (50)"),
    ({"kind": "svd", "reservoir_size": 2}, "at most sketch.reservoir_size (2)"),
])
def test_sketch_config_errors_name_key_and_value(sketch, message) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(with_sketch(**sketch))
    assert message in str(info.value)


def test_sketch_config_defaults_env_and_hash() -> None:
    plain = config_from_mapping(BASE)
    assert plain.sketch.kind == "none"
    env = {"STREAMKM_SKETCH__KIND": "leverage", "STREAMKM_SKETCH__RESKETCH_EVERY": "7"}
    sketched = config_from_mapping(BASE, env=env)
    assert sketched.sketch.kind == "leverage" and sketched.sketch.resketch_every == 7
    assert config_hash(plain) == config_hash(config_from_mapping(BASE))
    assert config_hash(plain) != config_hash(sketched)


def sparse_lines(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        c = i % 4
        idx = np.sort(rng.choice(np.arange(10 * c, 10 * c + 10), size=6, replace=False))
        vals = 2.0 + rng.normal(0, 0.2, 6)
        lines.append(json.dumps({"id": f"r{i}", "indices": idx.tolist(),
                                 "values": np.round(vals, 4).tolist()}).encode())
    return lines


def test_service_sketches_sparse_records_and_reports_resketches(tmp_path: Path) -> None:
    n = 1200
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(sparse_lines(n)) + b"\n")
    raw_config = {**with_sketch(kind="svd", resketch_every=3, reservoir_size=300),
                  "model": {"n_clusters": 4, "tau": 40, "n_init": 2},
                  "batching": {"batch_size": 100, "max_wait_ms": 200},
                  "checkpoint": {"dir": "ck", "every_batches": 5},
                  "sinks": {"assignments": "out/a.jsonl", "events": "out/e.jsonl",
                            "dead_letter": "out/d.jsonl"},
                  "source": {"paths": ["in.jsonl"], "poll_interval_ms": 5},
                  "metrics": {"enabled": False}}
    config = config_from_mapping(raw_config, base_dir=tmp_path)
    registry = CollectorRegistry()
    service = Service(config, registry=registry)
    thread = threading.Thread(target=service.run)
    service.start()
    thread.start()
    deadline = time.monotonic() + 60
    while service.status.records_accepted < n and time.monotonic() < deadline:
        time.sleep(0.02)
    service.request_stop()
    thread.join(timeout=30)
    assert service.status.records_accepted == n and service.status.batches == 12
    value = registry.get_sample_value
    assert value("streamkm_sketch_epoch") == 4
    assert value("streamkm_resketches_total", {"trigger": "schedule"}) == 4
    assert value("streamkm_resketch_seconds_count") == 4
    events = [json.loads(line) for line in (tmp_path / "out" / "e.jsonl").read_text().splitlines()]
    resketched = [e for e in events if e["event"] == "resketched"]
    assert [e["sketch_epoch"] for e in resketched] == [1, 2, 3, 4]
    assert [e["step"] for e in resketched] == [3, 6, 9, 12]

    checkpoint = CheckpointStore(tmp_path / "ck").load_latest()
    assert checkpoint.sketch_meta["sketch_epoch"] == 4
    assert checkpoint.model_meta["format"] == "streamkm.MiniBatchKernelKMeans"
    assert any(name.startswith("sketcher.") for name in checkpoint.sketch_arrays)
    # a configuration without sketching refuses this checkpoint with a clear error
    plain = config_from_mapping({**raw_config, "sketch": {}}, base_dir=tmp_path)
    refused = r"define the model:\n  sketch.kind: checkpoint 'svd', config 'none'\nThe"
    with pytest.raises(Exception, match=refused):
        Service(plain, registry=CollectorRegistry()).start()


def test_drift_events_refit_only_data_dependent_sketches() -> None:
    from streamkm import MiniBatchKernelKMeans
    from streamkm.runtime.metrics import ServiceMetrics
    from streamkm.runtime.sketching import ServiceSketching

    rows = []
    for line in sparse_lines(300):
        obj = json.loads(line)
        row = np.zeros(DIM)
        row[obj["indices"]] = obj["values"]
        rows.append(row)
    X = sp.csr_matrix(np.array(rows))
    for kind, expected in (("svd", 1), ("gaussian", 0)):
        registry = CollectorRegistry()
        sketching = ServiceSketching(config_from_mapping(with_sketch(kind=kind)),
                                     ServiceMetrics(registry))
        model = sketching.wrap(MiniBatchKernelKMeans(4, n_init=1, random_state=0))
        sketching.step(model, X[:100])
        real_step = model.model_.step

        def split_step(*args, **kwargs):
            import dataclasses

            report = real_step(*args, **kwargs)
            return dataclasses.replace(report, events=({"event": "split", "step": report.step},))

        model.model_.step = split_step
        _, events = sketching.step(model, X[100:200])
        assert model.sketch_epoch_ == expected
        assert [e["trigger"] for e in events] == ["drift"] * expected
        assert registry.get_sample_value("streamkm_resketches_total",
                                         {"trigger": "drift"}) == expected


def test_example_sketch_config_is_valid() -> None:
    from streamkm.config.schema import load_config

    config = load_config(Path(__file__).parents[2] / "examples" / "sketch.toml", env={})
    assert config.sketch.kind == "svd" and config.decoding.format == "json_sparse"


def test_checkpoint_inspect_shows_the_sketch(tmp_path: Path) -> None:
    from streamkm.app.inspect import summarize_checkpoints

    store = CheckpointStore(tmp_path)
    sketch_meta = {"sketcher": {"sketcher": "ApproxSVD", "n_components": 6}, "sketch_epoch": 2,
                   "reservoir": {"n_seen": 900}}
    store.write(model_arrays={"counts": np.array([1, 2])}, model_meta={"n_steps": 9},
                positions={}, sink_positions={}, counters={}, config_hash="h",
                sketch_arrays={"sketcher.components": np.eye(2)}, sketch_meta=sketch_meta)
    [summary] = summarize_checkpoints(tmp_path)
    assert summary["sketch"] == {"sketcher": "ApproxSVD", "n_components": 6, "sketch_epoch": 2,
                                 "reservoir_rows_seen": 900}
    checkpoint = store.load_latest()
    np.testing.assert_array_equal(checkpoint.sketch_arrays["sketcher.components"], np.eye(2))
