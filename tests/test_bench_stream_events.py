"""benchmarks/bench_stream_events.py: how it matches changes of k to scheduled events, and its
smallest end-to-end run, so the documented command keeps working."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from streamkm.datasets import StreamEvent

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _bench():
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))
    return importlib.import_module("bench_stream_events")


def _event(kind: str, at: int) -> StreamEvent:
    return StreamEvent(kind, at, at, at, (), (), kind)


@pytest.mark.unit
def test_each_change_follows_at_most_one_event_in_its_direction_and_horizon():
    bench = _bench()
    run = bench.Run("s", 0, changes=[(3, +1), (5, -1), (12, +1), (13, +1)])
    events = [_event("move", 1000), _event("appear", 2000), _event("split", 2500),
              _event("disappear", 5000), _event("merge", 5000), _event("split", 10_000)]
    lags = bench.event_lags(run, events, window=1000, horizon=5)
    # the move changes no class count; the appearance takes the change at window 3, so the
    # split at window 2 finds none left; one shrink for two shrinking events; the change
    # at window 12 follows the split at window 10; window 13's explains nothing
    assert lags == [("appear", 1), ("split", None), ("disappear", 0), ("merge", None),
                    ("split", 2)]


@pytest.mark.slow
def test_smallest_run_prints_both_tables(capsys):
    _bench().main(["--seeds", "0", "--rows", "6000", "--window", "500"])
    out = capsys.readouterr().out
    assert out.count("| drift | 0 |") == 1
    assert "| drift + births, retirements, redundancy merges |" in out
    assert "events followed within 5 windows" in out
