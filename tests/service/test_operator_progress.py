"""``streamkm run`` as an operator sees it: a periodic status event (also while it waits),
loud warnings for a source path that matches nothing, for records that are all rejected and
for a model that gets no record, and the live status line on a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from streamkm.app.warnings_monitor import NO_ACCEPTED_RECORDS, SOURCE_NO_FILES
from tests.helpers.processes import metrics_url, scrape
from tests.helpers.service_process import RunningService, blob_rows, service_config, write_jsonl

pytestmark = pytest.mark.integration

_FAST = """
[status]
interval_s = 0.5
[warnings]
source_no_files_after_s = 1
no_accepted_records_after_s = 1
"""
_METRICS = "[metrics]\nenabled = true\nport = 0\n"


def _named(service: RunningService, name: str) -> list[dict]:
    return [e for e in service.events() if e["event"] == name]


def _warning_gauge(service: RunningService, warning: str) -> float | None:
    url = metrics_url(service.log)
    if url is None:
        return None
    return scrape(url).get(f'streamkm_warning_active{{warning="{warning}"}}')


def test_waiting_service_reports_status_and_warns_until_its_file_appears(tmp_path: Path
                                                                         ) -> None:
    data = tmp_path / "data" / "features.jsonl"  # like examples/: a path that is not there
    config = service_config(tmp_path, data, extra=_FAST + _METRICS)
    service = RunningService(config)
    try:
        service.wait_until(lambda: _named(service, "source_no_files")
                           and _named(service, "no_accepted_records"))
        warning = _named(service, "source_no_files")[0]
        assert warning["level"] == "warning" and warning["patterns"] == [str(data)]
        assert "matched no file" in warning["message"]
        waiting = [e for e in _named(service, "status")
                   if e["activity"] == "waiting for records"]
        assert waiting and waiting[-1]["records_per_s"] == 0.0
        assert waiting[-1]["records_read"] == 0 and waiting[-1]["clusters"] == 3
        service.wait_until(lambda: any(e["warnings"] == [NO_ACCEPTED_RECORDS, SOURCE_NO_FILES]
                                       for e in _named(service, "status")))
        service.wait_until(lambda: _warning_gauge(service, "source_no_files") == 1.0)
        assert _warning_gauge(service, "no_accepted_records") == 1.0
        assert _warning_gauge(service, "reject_ratio_high") == 0.0

        data.parent.mkdir()
        write_jsonl(data, blob_rows(600))
        service.wait_until(lambda: _named(service, "source_no_files_cleared")
                           and _named(service, "no_accepted_records_cleared"))
        service.wait_until(lambda: any(e["activity"] == "clustering" and e["step"] > 0
                                       for e in _named(service, "status")))
        busy = [e for e in _named(service, "status") if e["activity"] == "clustering"][-1]
        assert busy["records_per_s"] > 0 and busy["records_accepted"] > 0
        assert busy["lag_unit"] == "bytes" and busy["last_checkpoint_step"] is not None
        service.wait_until(lambda: _warning_gauge(service, "source_no_files") == 0.0)
        assert _warning_gauge(service, "no_accepted_records") == 0.0
    finally:
        assert service.stop() == 0
    # once when each warning starts, once when it clears: not on every loop
    assert len(_named(service, "source_no_files")) == 1
    assert len(_named(service, "source_no_files_cleared")) == 1
    assert len(_named(service, "no_accepted_records")) == 1


def test_all_records_rejected_warns_with_the_reason_and_an_example(tmp_path: Path) -> None:
    data = tmp_path / "features.jsonl"
    with open(data, "w") as fh:  # 3 features, the configuration says dim = 2
        for i in range(1500):
            fh.write(json.dumps({"id": f"r{i}", "x": [1.0, 2.0, float(i)]}) + "\n")
    config = service_config(tmp_path, data, extra=_METRICS)
    service = RunningService(config)
    try:
        service.wait_until(lambda: _named(service, "reject_ratio_high"))
        warning = _named(service, "reject_ratio_high")[0]
        assert warning["level"] == "warning"
        assert warning["top_reason"] == "wrong_dimension" and warning["ratio"] == 1.0
        assert "has 3 values, expected 2" in warning["example"]
        assert "wrong_dimension" in warning["message"] and "expected 2" in warning["message"]
        service.wait_until(lambda: _warning_gauge(service, "reject_ratio_high") == 1.0)
    finally:
        assert service.stop() == 0
    assert len(_named(service, "reject_ratio_high")) == 1
    assert not _named(service, "reject_ratio_high_cleared")


def _run_on_terminal(config: Path, *args: str, until: Callable[[bytes], bool],
                     timeout: float = 90) -> bytes:
    """``streamkm run`` with stdin/stdout/stderr on a pseudo-terminal until ``until`` holds
    for what it printed; stopped with SIGTERM; everything it printed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "streamkm", "run", "-c", str(config), *args],
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while not until(out):
            assert time.monotonic() < deadline, out[-2000:]
            assert proc.poll() is None, out[-2000:]
            if select.select([master], [], [], 0.1)[0]:
                out += os.read(master, 65536)
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
    return out


def _status_events(out: bytes) -> int:
    return out.count(b'"event": "status"')


def test_terminal_gets_the_live_status_line_unless_no_status(tmp_path: Path) -> None:
    config = service_config(tmp_path, tmp_path / "nothing-yet.jsonl",
                            extra="[status]\ninterval_s = 1\n")
    shown = _run_on_terminal(config, until=lambda out: b"0 records/s |" in out)
    assert b"\r\x1b[2Kwaiting for records, 0 records/s |         0 clustered, " in shown
    assert b"3 clusters, step 0 |" in shown
    # the JSON log still reaches the terminal, each line starting on a cleared line
    assert b'\r\x1b[2K{"ts": ' in shown and b'"event": "status"' in shown

    # two status events: more than a second of running, when the line would be drawn
    quiet = _run_on_terminal(config, "--no-status", until=lambda out: _status_events(out) >= 2)
    assert b"records/s |" not in quiet and b"\x1b[2K" not in quiet


def test_status_counts_the_rows_of_the_first_batch_while_it_fills(tmp_path: Path) -> None:
    data = tmp_path / "features.jsonl"
    write_jsonl(data, blob_rows(2000))
    config = service_config(tmp_path, data, extra=_FAST)
    service = RunningService(config, "--status", env={
        "STREAMKM_BATCHING__FIRST_BATCH_SIZE": "3072",
        "STREAMKM_BATCHING__FIRST_BATCH_WAIT_MS": "600000"})
    text = "collecting the first batch: 2,000 / 3,072 rows"
    try:
        service.wait_until(lambda: text in service.stderr()
                           and any(e.get("first_batch_rows") == [2000, 3072]
                                   for e in _named(service, "status")))
        assert all(e["activity"] == "collecting the first batch"
                   for e in _named(service, "status") if e.get("first_batch_rows"))
        write_jsonl(data, blob_rows(1072, seed=1, start=2000), append=True)
        service.wait_until(lambda: any(e["step"] > 0 and e["first_batch_rows"] is None
                                       for e in _named(service, "status")))
    finally:
        assert service.stop() == 0


def test_records_filling_the_first_batch_keep_no_accepted_records_quiet(tmp_path: Path
                                                                        ) -> None:
    data = tmp_path / "features.jsonl"
    write_jsonl(data, blob_rows(50))
    config = service_config(tmp_path, data, extra="""
[status]
interval_s = 0.5
[warnings]
no_accepted_records_after_s = 3
""")
    service = RunningService(config, env={
        "STREAMKM_BATCHING__FIRST_BATCH_SIZE": "100000",
        "STREAMKM_BATCHING__FIRST_BATCH_WAIT_MS": "600000"})
    try:
        service.wait_until(lambda: any(e.get("first_batch_rows") for e in
                                       _named(service, "status")))
        # Records keep arriving faster than the grace, yet no batch closes: no step.
        rows, until = 50, time.monotonic() + 8
        while time.monotonic() < until:
            write_jsonl(data, blob_rows(50, seed=rows, start=rows), append=True)
            rows += 50
            time.sleep(0.25)
        service.wait_until(lambda: any((e.get("first_batch_rows") or [0])[0] >= rows
                                       for e in _named(service, "status")))
        assert not _named(service, NO_ACCEPTED_RECORDS)
        assert all(e["step"] == 0 for e in _named(service, "status"))
        # Once the records stop, the warning is raised while the batch still waits.
        service.wait_until(lambda: _named(service, NO_ACCEPTED_RECORDS))
        assert _named(service, "status")[-1]["step"] == 0
    finally:
        assert service.stop() == 0
