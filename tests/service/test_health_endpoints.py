"""The endpoints an operator's probes and Prometheus use, on a real ``streamkm run``
(subprocess, real files): ``/healthz`` and ``/readyz`` answer JSON, anything else is 404,
and ``/metrics`` carries the process metrics, no ``_created`` series and the file source's
lag in bytes only."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.http import get
from tests.helpers.processes import metrics_url
from tests.helpers.service_process import (
    RunningService,
    blob_rows,
    count_lines,
    service_config,
    write_jsonl,
)

pytestmark = pytest.mark.integration


def get_json(url: str) -> tuple[int, dict[str, Any]]:
    status, body, content_type = get(url)
    assert content_type == "application/json", (url, status, body)
    return status, json.loads(body)


def test_health_ready_404_and_process_metrics_of_a_running_service(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(600))
    config = service_config(tmp_path, data, extra="[metrics]\nenabled = true\nport = 0\n")
    # where systemd would listen for the watchdog pings of a unit with WatchdogSec=2s
    name = f"streamkm-test-{os.getpid()}-{time.monotonic_ns()}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + name)
    notify.settimeout(30)
    service = RunningService(config, env={"NOTIFY_SOCKET": "@" + name,
                                          "WATCHDOG_USEC": "2000000"})
    try:
        service.wait_until(lambda: metrics_url(service.log) is not None)
        base = str(metrics_url(service.log)).removesuffix("/metrics")
        service.wait_until(lambda: count_lines(tmp_path / "out" / "assignments.jsonl") >= 600)

        status, live = get_json(base + "/healthz")
        assert status == 200 and live["status"] == "ok"
        assert 0 <= live["loop_age_s"] <= live["stall_after_s"] == 60.0

        status, ready = get_json(base + "/readyz")
        assert status == 200 and ready["status"] == "ready", ready
        assert set(ready["checks"]) == {"runtime", "model", "source", "checkpoint", "outputs"}
        assert all(check["ok"] for check in ready["checks"].values())
        assert str(data) in ready["checks"]["source"]["detail"]

        status, body, _ = get(base + "/nope")
        assert status == 404 and b"/nope" in body

        status, page, _ = get(base + "/metrics")
        text = page.decode()
        names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                 if line and not line.startswith("#")}
        assert {"process_resident_memory_bytes", "process_cpu_seconds_total",
                "process_open_fds", "process_start_time_seconds", "python_info"} <= names
        assert not [n for n in names if n.endswith("_created")]
        lag = [line for line in text.splitlines() if line.startswith("streamkm_source_lag")]
        assert lag == [f'streamkm_source_lag_bytes{{partition="{data}"}} 0.0'], lag

        assert notify.recv(64) == b"WATCHDOG=1"
    finally:
        assert service.stop() == 0
    messages = []
    while (message := notify.recv(64)) != b"STOPPING=1":
        messages.append(message)
    assert set(messages) <= {b"WATCHDOG=1"}
    notify.close()
