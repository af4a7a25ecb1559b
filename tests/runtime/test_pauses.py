"""A paused process is not a stuck loop: the liveness clock leaves out the seconds the whole
process was not running (measured by :class:`PauseClock`, also before its thread woke up),
still fails a loop that is really stuck, and reports each stall once it is over."""

from __future__ import annotations

import pytest

from streamkm.runtime.health import HealthChecks
from streamkm.runtime.pauses import PauseClock

pytestmark = pytest.mark.unit


def _clocks(stall_after_s: float = 60.0) -> tuple[list[float], PauseClock, HealthChecks,
                                                   list[tuple[float, str]]]:
    now = [1000.0]
    stalls: list[tuple[float, str]] = []
    pauses = PauseClock(interval_s=0.5, min_pause_s=1.0, clock=lambda: now[0],
                        on_pause=lambda s: stalls.append((s, "process_paused")))
    health = HealthChecks(stall_after_s, clock=lambda: now[0], pauses=pauses,
                          on_stall=lambda s, cause: stalls.append((s, cause)))
    health.beat()
    return now, pauses, health, stalls


def test_first_probe_after_a_long_pause_is_alive_and_says_how_long() -> None:
    now, pauses, health, stalls = _clocks()
    now[0] += 0.5
    pauses.wake()
    now[0] += 90.0  # SIGSTOP for 90 s, then SIGCONT: the probe runs before any other thread
    alive, body = health.liveness()
    assert alive and body["status"] == "ok"
    assert body["paused_s"] == pytest.approx(89.5) and body["loop_age_s"] == pytest.approx(1.0)
    assert pauses.wake() == pytest.approx(89.5)  # the pause thread wakes: reported once
    assert stalls == [(pytest.approx(89.5), "process_paused")]
    assert pauses.wake() == 0.0
    health.beat()
    assert health.liveness()[1]["loop_age_s"] == 0.0 and len(stalls) == 1


def test_a_loop_stuck_besides_the_pause_still_fails() -> None:
    now, pauses, health, stalls = _clocks(stall_after_s=60.0)
    for _ in range(100):  # 50 s of a stuck loop while the process runs
        now[0] += 0.5
        pauses.wake()
    now[0] += 30.0  # then a 30 s pause
    alive, body = health.liveness()  # 50.5 s of running time without a turn: < 60 s
    assert alive and body["loop_age_s"] == pytest.approx(50.5)
    assert body["paused_s"] == pytest.approx(29.5)
    assert pauses.wake() == pytest.approx(29.5)  # the pause thread wakes with the process
    for _ in range(30):  # the loop stays stuck: 15 s more of running time
        now[0] += 0.5
        pauses.wake()
    alive, body = health.liveness()
    assert not alive and body["status"] == "stuck"
    assert body["loop_age_s"] == pytest.approx(65.5)
    health.beat()  # it moves again: the blocked stretch is reported after the fact
    assert stalls[-1] == (pytest.approx(65.5), "loop_blocked")


def test_scheduling_delays_below_the_threshold_are_not_pauses() -> None:
    now, pauses, health, stalls = _clocks()
    for _ in range(10):
        now[0] += 1.4  # each wake 0.9 s late
        assert pauses.wake() == 0.0
    assert pauses.paused_total() == 0.0 and not stalls
    assert health.liveness()[1]["loop_age_s"] == pytest.approx(14.0)
    assert "paused_s" not in health.liveness()[1]
