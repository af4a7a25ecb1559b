"""Helpers for tests that drive ``streamkm`` as a user would: ``python -m streamkm`` in a
subprocess, on real files, with a configuration written to disk."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from tests.helpers.processes import count_lines

#: The checkout (the root of the ``tests`` package).
REPO = Path(__file__).resolve().parents[2]
BLOB_CENTERS = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])


def blob_rows(n: int, *, seed: int = 0, start: int = 0) -> list[tuple[str, list[float]]]:
    """``n`` records ``(id, x)`` from three well separated 2-D blobs."""
    rng = np.random.default_rng(seed)
    return [(f"r{start + i}", (BLOB_CENTERS[i % 3] + rng.normal(0, 0.5, 2)).tolist())
            for i in range(n)]


def write_jsonl(path: Path, rows: list[tuple[str, list[float]]], *, append: bool = False
                ) -> None:
    with open(path, "a" if append else "w") as fh:
        for rid, x in rows:
            fh.write(json.dumps({"id": rid, "x": x}) + "\n")


def service_config(folder: Path, data: Path, *, extra: str = "", n_clusters: int = 3,
                   batch_size: int = 100, model: str = "") -> Path:
    """A small file-source configuration under ``folder`` (metrics off unless ``extra``
    sets them)."""
    config = folder / "streamkm.toml"
    config.write_text(f"""
[source]
paths = ["{data}"]
poll_interval_ms = 5
[decoding]
dim = 2
[model]
n_clusters = {n_clusters}
tau = 60
n_init = 2
random_state = 3
{model}
[batching]
batch_size = {batch_size}
first_batch_size = {batch_size}
max_wait_ms = 200
[checkpoint]
dir = "ck"
every_batches = 5
every_seconds = 3600
[sinks]
assignments = "out/assignments.jsonl"
events = "out/events.jsonl"
dead_letter = "out/dead.jsonl"
[logging]
level = "info"
{extra}
""" + ("" if "[metrics]" in extra else "[metrics]\nenabled = false\n"))
    return config


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A loopback port another socket listens on, for the duration."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    """Run ``python -m streamkm ARGS`` to completion."""
    return subprocess.run([sys.executable, "-m", "streamkm", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


class RunningService:
    """``streamkm run`` in the background; stderr goes to a file."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None,
                 command: Sequence[str] = ("-m", "streamkm")) -> None:
        """``command``: what follows the Python interpreter before ``run -c config``, e.g.
        ``("-m", "tests.helpers.short_stall_run", "10")`` (the checkout is on its path)."""
        self.log = config.parent / f"service-{time.monotonic_ns()}.log"
        full_env = {**os.environ, **(env or {})}
        if tuple(command) != ("-m", "streamkm"):
            full_env["PYTHONPATH"] = os.pathsep.join(
                filter(None, (str(REPO), full_env.get("PYTHONPATH"))))
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, *command, "run", "-c", str(config), *args],
                stdout=subprocess.DEVNULL, stderr=err, env=full_env)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"service exited with {self.proc.returncode}: "
                                     f"{self.stderr()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; service log: {self.stderr()[-2000:]}")
            time.sleep(0.02)

    def stop(self) -> int:
        """SIGTERM and wait; the exit code. A service still running after 60 s fails the
        test with its log and every thread's stack (SIGUSR1)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(2.0)
            raise AssertionError(f"the service did not stop within 60 s of SIGTERM; its log "
                                 f"and stacks:\n{self.stderr()[-6000:]}") from None
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def started(self) -> bool:
        """Whether the service logged ``service_started``."""
        return any(e["event"] == "service_started" for e in self.events())

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def events(self) -> list[dict]:
        """The JSON log lines written so far."""
        return [json.loads(line) for line in self.stderr().splitlines()
                if line.startswith("{")]


def run_until_assigned(config: Path, n: int, *args: str, env: dict[str, str] | None = None,
                       assignments: Path | None = None) -> RunningService:
    """Run the service until ``assignments`` (default ``out/assignments.jsonl`` next to the
    configuration) has ``n`` lines, then stop it (exit 0 asserted)."""
    output = assignments or config.parent / "out" / "assignments.jsonl"
    service = RunningService(config, *args, env=env)
    try:
        service.wait_until(service.started)
        service.wait_until(lambda: count_lines(output) >= n)
    finally:
        code = service.stop()
    assert code == 0, service.stderr()
    return service
