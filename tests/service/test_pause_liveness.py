"""A ``streamkm run`` stopped with SIGSTOP and continued with SIGCONT: the first ``/healthz``
probe after SIGCONT answers 200 (not 503 "stuck", also after a pause longer than the stall
threshold: the loop was not stuck, the process was not running), and the stall is reported
after the fact: a ``loop_stalled`` event, ``streamkm_loop_stalls_total{cause="process_paused"}``
and ``stalled_seconds`` in the next status event. Records keep flowing afterwards.

The pause past the threshold runs the service with the threshold's 60 s floor set to 10 s
(:mod:`tests.helpers.short_stall_run`), so that it takes 13 s instead of over a minute."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.helpers.http import get_json
from tests.helpers.processes import count_lines, metrics_url, scrape
from tests.helpers.service_process import RunningService, blob_rows, service_config, write_jsonl

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("pause_s", "stall_floor_s"), [
    pytest.param(4.0, None, id="4s"),
    pytest.param(13.0, 10.0, id="13s-past-a-10s-stall-threshold")])
def test_first_probe_after_sigcont_is_alive_and_the_pause_is_reported(
        tmp_path: Path, pause_s: float, stall_floor_s: float | None) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data, extra="[metrics]\nenabled = true\nport = 0\n"
                                                  "[status]\ninterval_s = 1\n")
    assignments = tmp_path / "out" / "assignments.jsonl"
    command = (("-m", "streamkm") if stall_floor_s is None
               else ("-m", "tests.helpers.short_stall_run", str(stall_floor_s)))
    service = RunningService(config, command=command)
    try:
        service.wait_until(lambda: metrics_url(service.log) is not None)
        url = str(metrics_url(service.log))
        base = url.removesuffix("/metrics")
        service.wait_until(lambda: count_lines(assignments) >= 300)
        # a first batch that compiles kernels (cold cache, busy machine) may block the loop
        # past a short threshold before the pause: only what the pause adds is asserted
        blocked_before = scrape(url)['streamkm_loop_stalls_total{cause="loop_blocked"}']
        service.proc.send_signal(signal.SIGSTOP)
        time.sleep(pause_s)
        service.proc.send_signal(signal.SIGCONT)
        status, live = get_json(base + "/healthz")
        assert status == 200, live
        assert live["status"] == "ok"
        assert live["loop_age_s"] < live["stall_after_s"] == (stall_floor_s or 60.0)
        # a probe that comes before the loop's first turn after SIGCONT says it saw the pause
        # (the loop's age then still spans it); once the loop has turned its age is small
        if live["loop_age_s"] >= 1.0:
            assert pause_s - 1.5 <= live.get("paused_s", 0.0) <= pause_s + 5.0, live

        def reported() -> list[dict]:
            return [e for e in service.events()
                    if e["event"] == "loop_stalled" and e["cause"] == "process_paused"]

        service.wait_until(lambda: bool(reported()))
        (stall,) = reported()
        assert stall["seconds"] >= pause_s - 1.5
        service.wait_until(lambda: any(e["event"] == "status" and e["stalled_seconds"] >= pause_s - 1.5
                                       for e in service.events()))
        samples = scrape(url)
        assert samples['streamkm_loop_stalls_total{cause="process_paused"}'] == 1.0
        assert samples['streamkm_loop_stalls_total{cause="loop_blocked"}'] == blocked_before
        assert samples['streamkm_loop_stalled_seconds_total{cause="process_paused"}'] >= pause_s - 1.5
        write_jsonl(data, blob_rows(300, seed=1, start=300), append=True)
        service.wait_until(lambda: count_lines(assignments) >= 600)
        assert get_json(base + "/healthz")[0] == 200
    finally:
        assert service.stop() == 0, service.stderr()
