"""A full disk pauses the service; it alerts, and resumes by itself, exactly once.

A real ``streamkm run`` writes its outputs and checkpoints on a small tmpfs mounted for the
test (mounting needs root: elsewhere the tests are skipped with the reason). A filler file
fills it up, more input arrives: the service stalls (``streamkm_io_stalled`` 1,
``streamkm_io_errors_total`` rising on ``/metrics``) with only whole lines in its files.
Once the filler is deleted it resumes; a SIGTERM or a SIGKILL while stalled and a restart
after space came back lose and duplicate nothing either.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.processes import count_events, count_lines, metrics_url, scrape
from tests.helpers.service_process import RunningService, blob_rows, service_config, write_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BATCH = 600  # records appended per phase (6 batches of 100)


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs for the outputs and checkpoints (unmounted at teardown)."""
    target = tmp_path / "vol"
    target.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(target)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


class Setup:
    """Input outside the tmpfs, outputs and checkpoints on it, metrics on a free port."""

    def __init__(self, tmp_path: Path, volume: Path) -> None:
        self.volume = volume
        self.data = tmp_path / "in.jsonl"
        self.data.touch()
        self.config = service_config(tmp_path, self.data,
                                     extra="[metrics]\nenabled = true\nport = 0\n")
        self.assignments = volume / "out" / "assignments.jsonl"
        self.env = {"STREAMKM_CHECKPOINT__DIR": str(volume / "ck"),
                    "STREAMKM_SINKS__ASSIGNMENTS": str(self.assignments),
                    "STREAMKM_SINKS__EVENTS": str(volume / "out" / "events.jsonl"),
                    "STREAMKM_SINKS__DEAD_LETTER": str(volume / "out" / "dead.jsonl")}
        self.written = 0

    def append(self, n: int = BATCH) -> None:
        write_jsonl(self.data, blob_rows(n, seed=self.written, start=self.written),
                    append=True)
        self.written += n

    def start(self) -> RunningService:
        service = RunningService(self.config, env=self.env)
        service.wait_until(lambda: metrics_url(service.log) is not None, timeout=60)
        return service

    def metrics(self, service: RunningService) -> dict[str, float]:
        url = metrics_url(service.log)
        assert url is not None
        return scrape(url)

    def readiness(self, service: RunningService) -> tuple[int, dict]:
        url = metrics_url(service.log)
        assert url is not None
        try:
            with urllib.request.urlopen(url.replace("/metrics", "/readyz"), timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def fill(self) -> None:
        with open(self.volume / "filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC

    def free(self) -> None:
        (self.volume / "filler").unlink()

    def wait_assigned(self, service: RunningService, n: int) -> None:
        service.wait_until(lambda: count_lines(self.assignments) >= n, timeout=60)

    def wait_stalled(self, service: RunningService) -> dict[str, float]:
        service.wait_until(lambda: self.metrics(service)["streamkm_io_stalled"] == 1,
                           timeout=30)
        return self.metrics(service)

    def whole_lines(self) -> bool:
        """Whether every output file, read once, is whole JSON lines."""
        try:
            self.assert_whole_lines()
        except (AssertionError, ValueError):
            return False
        return True

    def assert_whole_lines(self) -> list[dict]:
        """Every output file ends with a newline and every line is JSON; the assignments."""
        for path in (self.volume / "out").iterdir():
            data = path.read_bytes()
            assert not data or data.endswith(b"\n"), f"torn last line in {path.name}"
            for line in data.split(b"\n")[:-1]:
                json.loads(line)
        return [json.loads(line) for line in self.assignments.read_bytes().splitlines()]

    def assert_exactly_once(self) -> None:
        ids = [a["id"] for a in self.assert_whole_lines()]
        assert len(ids) == self.written
        assert sorted(ids) == sorted(f"r{i}" for i in range(self.written))
        assert count_lines(self.volume / "out" / "dead.jsonl") == 0


def io_errors(metrics: dict[str, float], target: str) -> float:
    return metrics[f'streamkm_io_errors_total{{target="{target}"}}']


def test_full_disk_stalls_alerts_resumes_and_stops_cleanly(tmp_path: Path,
                                                           volume: Path) -> None:
    setup = Setup(tmp_path, volume)
    setup.append()
    service = setup.start()
    setup.wait_assigned(service, BATCH)
    before = setup.metrics(service)
    assert before["streamkm_io_stalled"] == 0
    assert io_errors(before, "assignments") == 0

    setup.fill()
    setup.append()
    stalled = setup.wait_stalled(service)
    assert io_errors(stalled, "assignments") >= 1
    assert stalled["streamkm_records_accepted_total"] < 2 * BATCH  # the batch is not counted
    # a partial write is truncated away after every failed attempt (a read can land between
    # an attempt's write and its truncation, so wait for the files to be whole again)
    service.wait_until(setup.whole_lines, timeout=10)
    service.wait_until(lambda: io_errors(setup.metrics(service), "assignments")
                       > io_errors(stalled, "assignments"), timeout=10)  # it keeps retrying
    assert count_events(service.log, "io_stalled", target="assignments") == 1
    status, body = setup.readiness(service)  # a probe takes the stalled process out
    assert status == 503 and not body["checks"]["outputs"]["ok"]
    assert "assignments" in body["checks"]["outputs"]["detail"]

    setup.free()
    setup.wait_assigned(service, 2 * BATCH)
    service.wait_until(lambda: setup.metrics(service)["streamkm_io_stalled"] == 0, timeout=10)
    assert count_events(service.log, "io_resumed") == 1
    assert setup.readiness(service)[0] == 200
    assert count_events(service.log, "io_stalled") == 1
    setup.assert_exactly_once()

    # Stalled again, then SIGTERM: a clean exit that gives the batch up, no traceback.
    setup.fill()
    setup.append()
    setup.wait_stalled(service)
    assert service.stop() == 0
    assert "Traceback" not in service.stderr()
    assert count_events(service.log, "stopped_while_stalled") == 1
    setup.assert_whole_lines()
    assert count_lines(setup.assignments) < setup.written

    setup.free()
    restarted = setup.start()
    setup.wait_assigned(restarted, setup.written)
    assert restarted.stop() == 0
    setup.assert_exactly_once()


def test_kill_while_stalled_then_restart_is_exact(tmp_path: Path, volume: Path) -> None:
    setup = Setup(tmp_path, volume)
    setup.append()
    service = setup.start()
    setup.wait_assigned(service, BATCH)
    setup.fill()
    setup.append()
    setup.wait_stalled(service)
    service.proc.send_signal(signal.SIGKILL)
    service.proc.wait()
    setup.assert_whole_lines()

    setup.free()
    restarted = setup.start()
    setup.wait_assigned(restarted, setup.written)
    assert restarted.stop() == 0
    assert "Traceback" not in restarted.stderr()
    setup.assert_exactly_once()
