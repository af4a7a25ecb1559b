"""The pieces of progress reporting, warnings and the model sink, in-process."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm._core.state_io import read_npz, write_bytes_atomic, write_npz_atomic
from streamkm.app.progress import CLUSTERING, WAITING, ProgressHook
from streamkm.app.service import Service
from streamkm.app.warnings_monitor import (
    NO_ACCEPTED_RECORDS,
    REJECT_RATIO_HIGH,
    SOURCE_NO_FILES,
    NoFilesWatch,
    RejectWindow,
    WarningsHook,
    WarningSwitch,
    records_accepted_so_far,
)
from streamkm.config.schema import WarningsConfig, config_from_mapping
from streamkm.config.view import config_to_toml
from streamkm.exceptions import ConfigError
from streamkm.io.decoding import RejectReason, Rejection
from streamkm.runtime.metrics import ServiceMetrics
from streamkm.sources import RawRecord

pytestmark = pytest.mark.unit


def _rejection(reason: RejectReason, detail: str) -> Rejection:
    return Rejection(reason, detail, RawRecord(b"{}", None, {"offset": 0}))


def _events(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def _raw(tmp_path: Path, **sections: Any) -> dict[str, Any]:
    return {"source": {"paths": [str(tmp_path / "in.jsonl")]}, "decoding": {"dim": 2},
            "model": {"n_clusters": 3}, **sections}


# ---------------------------------------------------------------------------- warnings


def test_reject_window_keeps_the_last_records_by_whole_batches() -> None:
    window = RejectWindow(1000)
    bad = [_rejection(RejectReason.WRONG_DIMENSION, "field 'x' has 3 values, expected 2")]
    window.add(600, bad * 600)
    window.add(600, [])
    assert (window.n_read, window.n_rejected) == (1200, 600)  # the newest >= 1000 records
    window.add(600, [_rejection(RejectReason.NON_FINITE, "nan")] * 3)
    assert (window.n_read, window.n_rejected) == (1200, 3)
    assert window.ratio == pytest.approx(3 / 1200)
    assert window.top_reason() == ("non_finite", 3, "nan")


def test_top_reason_quotes_its_latest_example() -> None:
    window = RejectWindow(100)
    window.add(10, [_rejection(RejectReason.UNPARSEABLE, "a"),
                    _rejection(RejectReason.UNPARSEABLE, "b"),
                    _rejection(RejectReason.EMPTY, "c")])
    assert window.top_reason() == ("unparseable", 2, "b")
    assert RejectWindow(10).top_reason() is None


def test_switch_logs_only_when_the_state_changes(caplog: pytest.LogCaptureFixture) -> None:
    metrics = ServiceMetrics(CollectorRegistry())
    switch = WarningSwitch(SOURCE_NO_FILES, metrics.warning_active)
    gauge = lambda: metrics.registry.get_sample_value(  # noqa: E731
        "streamkm_warning_active", {"warning": SOURCE_NO_FILES})
    assert gauge() == 0
    with caplog.at_level(logging.INFO, logger="streamkm"):
        assert switch.update(True, "why")
        assert not switch.update(True, "why")
        assert gauge() == 1
        assert switch.update(False)
        assert not switch.update(False)
    assert _events(caplog) == [SOURCE_NO_FILES, SOURCE_NO_FILES + "_cleared"]
    assert gauge() == 0


def _hook(tmp_path: Path, **warnings: Any) -> tuple[WarningsHook, ServiceMetrics]:
    config = config_from_mapping(_raw(tmp_path, warnings=warnings))
    metrics = ServiceMetrics(CollectorRegistry())
    return WarningsHook(config.warnings, config.source, metrics), metrics


def test_reject_ratio_needs_enough_records_and_clears_at_half(tmp_path: Path) -> None:
    hook, _ = _hook(tmp_path, reject_ratio=0.4, reject_window=200)
    bad = _rejection(RejectReason.WRONG_DIMENSION, "field 'x' has 3 values, expected 2")
    switch = hook.switches[REJECT_RATIO_HIGH]
    hook.rejects.add(50, [bad] * 50)
    hook.check_rejects()
    assert not switch.active  # 50 records: too few to judge
    hook.rejects.add(60, [bad] * 60)
    hook.check_rejects()
    assert switch.active
    hook.rejects.add(200, [bad] * 50)  # window: 200 records, 25 % rejected > 0.4 / 2
    hook.check_rejects()
    assert switch.active
    hook.rejects.add(200, [bad] * 30)  # 15 %: at most half the threshold
    hook.check_rejects()
    assert not switch.active


def test_no_files_and_no_accepted_records_use_their_grace(tmp_path: Path) -> None:
    hook, _ = _hook(tmp_path, source_no_files_after_s=10, no_accepted_records_after_s=20)
    t0 = hook._last_accepted
    hook.tick(None, t0 + 1)  # type: ignore[arg-type]
    hook.tick(None, t0 + 10.5)  # type: ignore[arg-type]
    assert not hook.switches[SOURCE_NO_FILES].active  # unmatched for 9.5 s only
    hook.tick(None, t0 + 11.5)  # type: ignore[arg-type]  (off whole seconds: t0 + n - t0 may round below n)
    assert hook.switches[SOURCE_NO_FILES].active
    assert not hook.switches[NO_ACCEPTED_RECORDS].active
    hook.tick(None, t0 + 20.5)  # type: ignore[arg-type]
    assert hook.switches[NO_ACCEPTED_RECORDS].active
    (tmp_path / "in.jsonl").write_text("")
    hook.tick(None, t0 + 21)  # type: ignore[arg-type]
    assert not hook.switches[SOURCE_NO_FILES].active


def test_records_accepted_while_no_batch_closes_restart_the_grace(tmp_path: Path) -> None:
    service = Service(config_from_mapping(_raw(tmp_path)))
    hook, _ = _hook(tmp_path, no_accepted_records_after_s=20)
    t0 = hook._last_accepted
    service.status.records_accepted = 700  # from processed batches
    hook.note_accepted(records_accepted_so_far(service), t0)
    hook.tick(service, t0 + 15)
    assert not hook.switches[NO_ACCEPTED_RECORDS].active
    hook.note_accepted(records_accepted_so_far(service) + 300, t0 + 18)  # a batch filling
    hook.tick(service, t0 + 30)  # fewer than 20 s since those rows
    assert not hook.switches[NO_ACCEPTED_RECORDS].active
    hook.note_accepted(records_accepted_so_far(service) + 300, t0 + 39)
    hook.check_no_accepted(t0 + 38.5)
    assert not hook.switches[NO_ACCEPTED_RECORDS].active
    hook.check_no_accepted(t0 + 59.5)
    assert hook.switches[NO_ACCEPTED_RECORDS].active


def test_zero_turns_a_warning_off(tmp_path: Path) -> None:
    hook, _ = _hook(tmp_path, source_no_files_after_s=0, no_accepted_records_after_s=0,
                    reject_ratio=0)
    bad = _rejection(RejectReason.EMPTY, "empty")
    hook.rejects.add(500, [bad] * 500)
    hook.check_rejects()
    hook.tick(None, hook._last_accepted + 1e6)  # type: ignore[arg-type]
    assert not any(s.active for s in hook.switches.values())


def test_no_files_watch_globs_like_the_tailer(tmp_path: Path) -> None:
    watch = NoFilesWatch([str(tmp_path / "*.jsonl")])
    assert watch.unmatched_for(5.0) == {str(tmp_path / "*.jsonl"): 0.0}
    assert watch.unmatched_for(7.0) == {str(tmp_path / "*.jsonl"): 2.0}
    (tmp_path / "a.jsonl").write_text("")
    assert watch.unmatched_for(8.0) == {}


# ---------------------------------------------------------------------------- progress


def test_status_fields_say_waiting_then_clustering(tmp_path: Path) -> None:
    service = Service(config_from_mapping(_raw(tmp_path)))
    hook = ProgressHook(10.0)
    hook._last_time, hook._last_read = 100.0, 0
    fields = hook.fields(service, 110.0)
    assert fields["activity"] == WAITING and fields["records_per_s"] == 0.0
    assert fields["last_checkpoint_age_s"] is None and fields["lag_unit"] == "bytes"
    service.status.records_read, service.status.rejected_by_reason = 500, {"empty": 2,
                                                                           "encoding": 0}
    service.metrics.source_lag("bytes").labels(partition="a").set(70)
    service.metrics.source_lag("bytes").labels(partition="b").set(30)
    fields = hook.fields(service, 120.0)
    assert fields["activity"] == CLUSTERING and fields["records_per_s"] == 50.0
    assert fields["rejected_by_reason"] == {"empty": 2} and fields["lag"] == 100
    assert fields["warnings"] == []
    service.metrics.warning_active.labels(warning=NO_ACCEPTED_RECORDS).set(1)
    assert hook.fields(service, 130.0)["warnings"] == [NO_ACCEPTED_RECORDS]
    json.dumps(fields)  # a log line


# ---------------------------------------------------------------------------- config


@pytest.mark.parametrize(("sections", "needle"), [
    ({"status": {"interval_s": -1}}, "'status.interval_s' has bad value -1"),
    ({"warnings": {"reject_ratio": 1.5}}, "'warnings.reject_ratio' has bad value 1.5"),
    ({"warnings": {"reject_window": 0}}, "'warnings.reject_window' has bad value 0"),
    ({"warnings": {"source_no_files_after_s": "soon"}}, "'soon'"),
    ({"sinks": {"model_every_batches": 5}},
     "sinks.model_every_batches = 5 needs a model sink"),
    ({"sinks": {"model_topic": "m"}}, "sinks.model_topic = 'm' needs sinks.kind = 'kafka'"),
    ({"sinks": {"kind": "kafka", "model": "m.npz", "model_topic": "m"}},
     "set at most one of sinks.model"),
])
def test_new_keys_are_validated_with_clear_errors(tmp_path: Path, sections: dict[str, Any],
                                                  needle: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        config_from_mapping(_raw(tmp_path, **sections))
    assert needle in str(info.value)


def test_model_sink_is_refused_in_scaleout_mode(tmp_path: Path) -> None:
    raw = {"source": {"kind": "kafka", "topics": ["t"]}, "decoding": {"dim": 2},
           "model": {"n_clusters": 3}, "scaleout": {"enabled": True},
           "sinks": {"kind": "kafka", "model_topic": "apps-model"}}
    with pytest.raises(ConfigError, match="not supported with scaleout.enabled"):
        config_from_mapping(raw)


def test_config_show_prints_the_new_keys_and_loads_back(tmp_path: Path) -> None:
    env = {"STREAMKM_STATUS__INTERVAL_S": "5", "STREAMKM_SINKS__MODEL": "out/model.npz",
           "STREAMKM_WARNINGS__REJECT_RATIO": "0.25"}
    config = config_from_mapping(_raw(tmp_path), env=env, base_dir=tmp_path)
    text = config_to_toml(config)
    assert "[status]\ninterval_s = 5.0\n" in text
    assert f'model = "{tmp_path / "out" / "model.npz"}"\nmodel_every_batches = 50' in text
    assert "reject_ratio = 0.25" in text and "no_accepted_records_after_s = 600.0" in text
    import tomllib

    again = config_from_mapping(tomllib.loads(text))
    assert again == config
    plain = config_to_toml(config_from_mapping(_raw(tmp_path)))
    assert 'model = ""' in plain and "model_every_batches" not in plain


# ---------------------------------------------------------------------------- model file


def test_bytes_are_replaced_atomically_and_npz_reads_back(tmp_path: Path) -> None:
    target = tmp_path / "m.npz"
    write_npz_atomic(target, {"a": np.arange(3)}, {"v": 1})
    old = target.open("rb")  # a reader that opened the old file keeps reading it whole
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new" and old.read()[:2] == b"PK"
    old.close()
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temporary file left
    write_npz_atomic(target, {"a": np.arange(3)}, {"v": 2})
    assert read_npz(target)[1] == {"v": 2}


def test_single_process_and_scaleout_members_report_alike(tmp_path: Path) -> None:
    from streamkm.app.scaleout import ScaleoutService

    raw = {"source": {"kind": "kafka", "topics": ["t"]}, "decoding": {"dim": 2},
           "model": {"n_clusters": 3}, "scaleout": {"enabled": True},
           "kafka": {"bootstrap_servers": ["127.0.0.1:1"]}}
    member = ScaleoutService(config_from_mapping(raw), serve_metrics=False)
    single = Service(config_from_mapping(_raw(tmp_path, status={"interval_s": 0})))
    kinds = {type(h) for h in member.hooks}
    assert {ProgressHook, WarningsHook} <= kinds
    assert ProgressHook not in {type(h) for h in single.hooks}  # interval_s = 0: no status
    assert WarningsHook in {type(h) for h in single.hooks}
    progress = next(h for h in member.hooks if isinstance(h, ProgressHook))
    assert progress.fields(member, progress._last_time + 1)["lag_unit"] == "records"
