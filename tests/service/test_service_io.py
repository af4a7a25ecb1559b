"""Bad input through the real service process, and its Prometheus endpoint.

One service subprocess tails a file; the test appends valid records mixed with a corpus of
bad ones, scrapes ``/metrics`` over HTTP between waves and checks that every bad record is
quarantined with the right reason while all valid ones are assigned and the process keeps
running.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from pathlib import Path

import pytest

from tests.helpers.processes import count_lines, metrics_url, scrape, stop, wait_until

pytestmark = pytest.mark.integration

DIM = 3
K = 3

CORPUS: list[tuple[bytes, str]] = [
    (b'{"id": "m1", "x": [1.0, 2.0', "unparseable"),
    (b'{"id": "d1", "x": [1.0, 2.0]}', "wrong_dimension"),
    (b'{"id": "n1", "x": [NaN, 1.0, 1.0]}', "non_finite"),
    (b'{"id": "i1", "x": [1.0, Infinity, 1.0]}', "non_finite"),
    (b'{"id": "h1", "x": [1e300, 0.0, 0.0]}', "magnitude"),
    (b"\x00\x01\x02\x03 binary garbage \x7f", "unparseable"),
    (b"\x89PNG\r\x1a\x00\x9c\xff\xfe", "encoding"),
    (b"", "empty"),
    (b"   ", "empty"),
    (b'{"id": "big", "x": [' + b"1.0, " * (10 * 1024 * 1024 // 5) + b"1.0]}", "oversized"),
    (b'{"id": "u1", "x": [1.0, 2.0, 3.0], "note": "\xc3\x28"}', "encoding"),
    (b'{"id": "f1"}', "missing_field"),
]


def valid_line(i: int) -> bytes:
    c = (i % K) * 5.0
    return json.dumps({"id": f"v{i}", "x": [c + (i % 7) * 0.1, c - (i % 5) * 0.1, c]}).encode()


@pytest.mark.slow
def test_bad_input_quarantined_metrics_move_process_survives(tmp_path: Path,
                                                           service_process) -> None:
    data = tmp_path / "in.jsonl"
    data.write_bytes(b"")
    config = tmp_path / "streamkm.toml"
    config.write_text(f"""
[source]
paths = ["in.jsonl"]
poll_interval_ms = 5
[decoding]
dim = {DIM}
[model]
n_clusters = {K}
tau = 50
n_init = 1
[batching]
batch_size = 64
first_batch_size = 64
max_wait_ms = 100
[checkpoint]
dir = "ck"
every_batches = 2
[sinks]
assignments = "out/assignments.jsonl"
dead_letter = "out/dead.jsonl"
[metrics]
port = 0
""")
    log = tmp_path / "service.log"
    proc = service_process(config, log)
    try:
        wait_until(lambda: metrics_url(log) is not None, 60, "the metrics endpoint", [proc])
        url = str(metrics_url(log))
        assert url.startswith("http://127.0.0.1:")
        before = scrape(url)
        assert before["streamkm_records_read_total"] == 0
        assert before['streamkm_build_info{version="0.1.0"}'] == 1
        assert before['streamkm_records_rejected_total{reason="oversized"}'] == 0

        # Wave 1: valid records only.
        with open(data, "ab") as fh:
            fh.write(b"".join(valid_line(i) + b"\n" for i in range(200)))
        assignments = tmp_path / "out" / "assignments.jsonl"
        wait_until(lambda: count_lines(assignments) >= 200, 60, "wave 1's assignments", [proc])
        wave1 = scrape(url)
        assert wave1["streamkm_records_accepted_total"] == 200
        assert wave1["streamkm_batches_total"] >= 200 / 64
        assert wave1["streamkm_model_steps"] >= 4
        assert wave1["streamkm_clusters"] == K
        assert wave1["streamkm_batch_processing_seconds_count"] == wave1["streamkm_batches_total"]
        assert f'streamkm_source_lag_bytes{{partition="{data}"}}' in wave1
        assert not any(name.startswith("streamkm_source_lag_records") for name in wave1)

        # Wave 2: every bad record between valid ones.
        n_valid = 200
        with open(data, "ab") as fh:
            for bad, _reason in CORPUS:
                fh.write(valid_line(n_valid) + b"\n" + bad + b"\n")
                n_valid += 1
            fh.write(b"".join(valid_line(i) + b"\n" for i in range(n_valid, n_valid + 100)))
            n_valid += 100
        dead = tmp_path / "out" / "dead.jsonl"
        wait_until(lambda: count_lines(assignments) >= n_valid
                   and count_lines(dead) >= len(CORPUS), 60, "wave 2's output", [proc])
        time.sleep(0.3)
        wave2 = scrape(url)
        assert proc.poll() is None
    finally:
        code = stop(proc)
    assert code == 0

    quarantined = [json.loads(line) for line in dead.read_text().splitlines()]
    assert [q["reason"] for q in quarantined] == [reason for _bad, reason in CORPUS]
    for entry, (bad, _reason) in zip(quarantined, CORPUS):
        assert entry["detail"] and entry["position"]["file"] == str(data)
        assert isinstance(entry["position"]["offset"], int)
        if entry["reason"] == "oversized":
            assert entry["position"]["length"] == len(bad)
            continue
        raw = entry["raw"].encode() if "raw" in entry else base64.b64decode(entry["raw_base64"])
        assert raw == bad
    assert "raw_base64" in quarantined[6] and "raw" in quarantined[0]

    out = [json.loads(line) for line in assignments.read_text().splitlines()]
    assert sorted(rec["id"] for rec in out) == sorted(f"v{i}" for i in range(n_valid))
    assert all(set(rec) == {"id", "cluster", "distance", "sq_distance", "step", "novelty",
                            "outlier", "second_cluster", "margin"} for rec in out)
    assert all(0 <= rec["cluster"] < K and rec["sq_distance"] >= 0 for rec in out)
    assert all(rec["distance"] == math.sqrt(rec["sq_distance"]) for rec in out)

    assert wave2["streamkm_records_accepted_total"] == n_valid
    assert wave2["streamkm_records_read_total"] == n_valid + len(CORPUS)
    for reason in {r for _b, r in CORPUS}:
        expected = sum(1 for _b, r in CORPUS if r == reason)
        assert wave2[f'streamkm_records_rejected_total{{reason="{reason}"}}'] == expected
    assert wave2["streamkm_batches_total"] > wave1["streamkm_batches_total"]
    assert wave2["streamkm_model_steps"] > wave1["streamkm_model_steps"]
    assert wave2["streamkm_checkpoints_total"] >= 2
    assert wave2["streamkm_checkpoint_last_success_timestamp_seconds"] > time.time() - 120
    assert wave2["streamkm_checkpoint_failures_total"] == 0
    assert wave2[f'streamkm_source_lag_bytes{{partition="{data}"}}'] == 0
    assert wave2["streamkm_model_converged"] in (0, 1)
    assert re.match(r"^-?\d", str(wave2["streamkm_batch_objective"]))
