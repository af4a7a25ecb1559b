"""An input replaced under a running ``streamkm run`` by one that exists but cannot be read
(a directory at the input path, a broken symlink, a FIFO): the service logs ``source_unreadable`` naming the path and the
errno, exports ``streamkm_warning_active{warning="source_unreadable"} 1``, fails the
``/readyz`` source check, and clears all three once the input is a readable file, whose
records are then assigned. (Root may read any file, so permissions are not the fault here.)"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.http import get, get_json
from tests.helpers.processes import count_lines, metrics_url
from tests.helpers.service_process import RunningService, blob_rows, service_config, write_jsonl

pytestmark = pytest.mark.integration

_GAUGE = 'streamkm_warning_active{warning="source_unreadable"}'


def _directory(path: Path) -> None:
    path.mkdir()


def _broken_symlink(path: Path) -> None:
    path.symlink_to(path.with_name("missing-target.jsonl"))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _clear(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    else:
        path.unlink()


def _gauge(base: str) -> str | None:
    _status, page, _ = get(base + "/metrics")
    return next((line.rsplit(" ", 1)[1] for line in page.decode().splitlines()
                 if line.startswith(_GAUGE + " ")), None)


@pytest.mark.parametrize(("make", "errno_name"), [
    (_directory, "EISDIR"), (_broken_symlink, "ENOENT"), (_fifo, None)],
    ids=["directory", "broken-symlink", "fifo"])
def test_unreadable_input_is_warned_fails_readiness_and_clears(
        tmp_path: Path, make: Callable[[Path], None], errno_name: str | None) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data, extra="[metrics]\nenabled = true\nport = 0\n"
                                                  "[status]\ninterval_s = 0\n")
    assignments = tmp_path / "out" / "assignments.jsonl"
    service = RunningService(config)
    try:
        service.wait_until(lambda: metrics_url(service.log) is not None)
        base = str(metrics_url(service.log)).removesuffix("/metrics")
        service.wait_until(lambda: count_lines(assignments) >= 300)
        assert _gauge(base) == "0.0"
        data.unlink()
        make(data)
        service.wait_until(lambda: any(e["event"] == "source_unreadable"
                                       for e in service.events()))
        (warning,) = [e for e in service.events() if e["event"] == "source_unreadable"]
        assert warning["level"] == "warning"
        assert [(i["path"], i["errno"]) for i in warning["inputs"]] == [(str(data), errno_name)]
        assert str(data) in warning["message"]
        assert _gauge(base) == "1.0"
        status, ready = get_json(base + "/readyz")
        assert status == 503
        source = ready["checks"]["source"]
        assert not source["ok"] and str(data) in source["detail"]
        if errno_name is not None:
            assert errno_name in source["detail"]

        _clear(data)
        write_jsonl(data, blob_rows(300, seed=1, start=300))
        service.wait_until(lambda: count_lines(assignments) >= 600)
        service.wait_until(lambda: any(e["event"] == "source_unreadable_cleared"
                                       for e in service.events()))
        assert _gauge(base) == "0.0"
        status, ready = get_json(base + "/readyz")
        assert ready["checks"]["source"]["ok"], ready
    finally:
        assert service.stop() == 0, service.stderr()
