"""Running ``streamkm`` as a real process in the tests, and watching what it does.

Start it with :func:`start_service` (or the ``service_process`` fixture of
``tests/conftest.py``, which also kills it at teardown), wait on files and logs with
:func:`wait_until`, read its JSON log with :func:`log_events`, its metrics with
:func:`scrape`, and stop it with :func:`stop` (SIGTERM, graceful) or :func:`kill`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The ``service_process`` fixture: ``(config, log, *, command, args, cwd) -> Popen``.
ServiceStarter = Callable[..., subprocess.Popen[bytes]]


#: Under pytest-xdist each worker hands out ports from its own block below the kernel's
#: ephemeral range (32768-60999 by default), so a port :func:`free_port` returned is never
#: taken meanwhile by another worker's :func:`free_port`, nor by the kernel for a client's
#: connection or a ``port = 0`` listener.
PORT_BLOCK_START, PORT_BLOCK_SIZE = 12000, 1200
_next_port: dict[str, int] = {}


def _port_block() -> range | None:
    """This xdist worker's block of ports (``None`` outside xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    start = PORT_BLOCK_START + int(worker[2:]) * PORT_BLOCK_SIZE
    if start + PORT_BLOCK_SIZE > 32768:
        raise RuntimeError(f"too many xdist workers for the test port blocks: {worker}")
    return range(start, start + PORT_BLOCK_SIZE)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a process the test starts to listen on.

    Outside xdist: one the kernel picks (free a moment ago). Under xdist: the next port of
    this worker's block that binds (see :data:`PORT_BLOCK_START`), which no other test
    process hands out; a port is handed out again only after the whole block.
    """
    block = _port_block()
    if block is None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    key = os.environ["PYTEST_XDIST_WORKER"]
    # start where an earlier run of this worker probably did not (TIME_WAIT leftovers)
    index = _next_port.get(key, random.randrange(len(block)))
    for _ in range(len(block)):
        port = block[index % len(block)]
        index += 1
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))  # no SO_REUSEADDR: TIME_WAIT counts as busy
            except OSError:
                continue
        _next_port[key] = index
        return port
    raise RuntimeError(f"no free port in {block} for xdist worker {key}")


def start_service(config: Path, log: Path, *, command: str = "run",
                  args: Sequence[str] = (), cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """``python -m streamkm.cli <command> -c <config> <args>`` (in ``cwd``) with its stderr
    (the JSON log) appended to ``log``; returns at once."""
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "streamkm.cli", command, "-c", str(config), *args],
            stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)


def count_lines(path: Path) -> int:
    """Newline-terminated lines in ``path`` (0 while it does not exist)."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def complete_records(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of the newline-terminated lines of ``path`` ([] while it does not
    exist): a line a running service is still writing has no newline yet and is left out."""
    try:
        complete = path.read_text().rpartition("\n")[0]
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in complete.splitlines()]


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               procs: Sequence[subprocess.Popen[bytes]] = (),
               interval: float = 0.02) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds,
    or as soon as one of ``procs`` has exited."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for proc in procs:
            assert proc.poll() is None, (f"service exited early with code {proc.returncode} "
                                         f"while waiting for {what}")
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(interval)


def stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """SIGTERM (the graceful stop: final checkpoint and commit); the exit code. If it does
    not exit within ``timeout`` seconds: SIGUSR1 (the stacks go to its log), SIGKILL, raise."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # `streamkm run`: every thread's stack into its log
        time.sleep(1.0)
        proc.kill()
        proc.wait()
        raise


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL (a crash) if still running, and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def log_events(log: Path) -> list[dict[str, Any]]:
    """The JSON log lines of a service log (other lines are ignored)."""
    events = []
    try:
        text = log.read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def count_events(log: Path, name: str, **fields: Any) -> int:
    """Log events named ``name`` whose fields include ``fields``."""
    return sum(1 for e in log_events(log) if e.get("event") == name
               and all(e.get(k) == v for k, v in fields.items()))


def metrics_url(log: Path) -> str | None:
    """The metrics endpoint the service logged (``None`` before it listens)."""
    for event in log_events(log):
        if event.get("event") == "metrics_listening":
            return str(event["url"])
    return None


def scrape(url: str) -> dict[str, float]:
    """``{"name{labels}": value}`` of a Prometheus text page."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()  # noqa: S310 (loopback)
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values
