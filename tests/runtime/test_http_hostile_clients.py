"""The listener of a real ``streamkm run`` against clients that do not behave (loopback only).

Vanished clients (reset before their answer), 300 slowloris connections that never finish
their headers, 200 concurrent scrapes and oversized requests: the service keeps assigning
records, a well-behaved scrape is answered meanwhile, the thread count stays bounded,
oversized requests are refused with 431 / 413, and stderr stays one JSON object per line
(a client that goes away is a debug line, never a traceback).
"""

from __future__ import annotations

import json
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from streamkm.runtime.http import ListenerLimits
from tests.helpers.http import get
from tests.helpers.processes import metrics_url
from tests.helpers.service_process import (
    RunningService,
    blob_rows,
    count_lines,
    service_config,
    write_jsonl,
)

# hundreds of connections at once: run while no other test runs, so neither disturbs the other
pytestmark = [pytest.mark.integration, pytest.mark.alone]

LIMITS = ListenerLimits()


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count in /proc")


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _vanish(port: int, request: bytes) -> None:
    """Send ``request`` (maybe nothing) and reset the connection at once."""
    sock = _connect(port)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if request:
        sock.sendall(request)
    sock.close()


def _raw_status(port: int, request: bytes) -> int:
    with _connect(port) as sock:
        sock.sendall(request)
        reply = b""
        while b"\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    return int(reply.split(b" ", 2)[1])


def test_slow_many_vanished_and_oversized_clients_do_not_hurt_the_service(
        tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data, extra="[metrics]\nenabled = true\nport = 0\n")
    config.write_text(config.read_text().replace('level = "info"', 'level = "debug"'))
    assignments = tmp_path / "out" / "assignments.jsonl"
    service = RunningService(config)
    slow: list[socket.socket] = []
    try:
        service.wait_until(lambda: metrics_url(service.log) is not None)
        url = str(metrics_url(service.log))
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        service.wait_until(lambda: count_lines(assignments) >= 300)
        threads_before = _threads(service.proc.pid)

        # vanished: reset right after the request, or before sending anything
        for i in range(60):
            _vanish(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" if i % 3 else b"")

        # slowloris: headers started, never finished
        for _ in range(300):
            sock = _connect(port)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slow.append(sock)
        started = time.monotonic()
        status, body, _ = get(url)
        assert status == 200 and b"streamkm_records_read_total" in body
        assert time.monotonic() - started < LIMITS.header_timeout_s
        assert _threads(service.proc.pid) <= threads_before + LIMITS.max_connections + 2
        write_jsonl(data, blob_rows(300, seed=1, start=300), append=True)
        service.wait_until(lambda: count_lines(assignments) >= 600, timeout=30)
        for sock in slow:
            sock.close()
        slow.clear()

        # many: 200 scrapes at once, none refused
        with ThreadPoolExecutor(200) as pool:
            statuses = list(pool.map(lambda _: get(url)[0], range(200)))
        assert statuses == [200] * 200

        # oversized requests
        big_header = b"X-Big: " + b"a" * (LIMITS.max_header_bytes + 1) + b"\r\n"
        assert _raw_status(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + big_header
                           + b"\r\n") == 431
        assert _raw_status(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: "
                           + str(LIMITS.max_body_bytes + 1).encode() + b"\r\n\r\n") == 413

        write_jsonl(data, blob_rows(300, seed=2, start=600), append=True)
        service.wait_until(lambda: count_lines(assignments) >= 900, timeout=30)
    finally:
        for sock in slow:
            sock.close()
        code = service.stop()
    assert code == 0
    lines = service.stderr().splitlines()
    not_json = []
    for line in lines:
        try:
            assert isinstance(json.loads(line), dict)
        except (ValueError, AssertionError):
            not_json.append(line)
    assert not not_json, not_json[:10]
    events = [json.loads(line) for line in lines]
    gone = [e for e in events if e["event"] == "http_client_gone"]
    assert gone and all(e["level"] == "debug" for e in gone)
    assert not [e for e in events if e["event"] == "http_connection_failed"]
