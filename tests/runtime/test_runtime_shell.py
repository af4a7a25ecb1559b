"""The runtime shell with the local learner, driven batch by batch: hooks see every batch,
event and checkpoint; a registered source kind is what the runtime reads; the listener
serves the process's metrics and 404s anything else."""

from __future__ import annotations

import inspect
import json
import typing
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm import registry as connectors
from streamkm.app.build import build_runtime
from streamkm.app.service import Service
from streamkm.config.schema import config_from_mapping
from streamkm.exceptions import ConfigError
from streamkm.io.batcher import Batch
from streamkm.runtime import Learned, LearnerHost, Runtime, RuntimeHook, RuntimeHost

pytestmark = pytest.mark.unit


def _config(tmp_path: Path, **extra: Any):
    rng = np.random.default_rng(0)
    rows = [{"id": i, "x": [float(v) for v in rng.normal(5.0 * (i % 2), 0.3, 2)]}
            for i in range(60)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows)
                                       + "not json\n")
    return config_from_mapping({
        "source": {"paths": ["in.jsonl"], "start_at": "beginning"},
        "decoding": {"dim": 2}, "batching": {"batch_size": 20, "max_wait_ms": 50},
        "model": {"n_clusters": 2, "random_state": 0},
        "checkpoint": {"dir": "ckpt", "every_batches": 2},
        "sinks": {"assignments": "out/assignments.jsonl", "events": "out/events.jsonl",
                  "dead_letter": "out/dead.jsonl"},
        "metrics": {"enabled": False}, **extra,
    }, base_dir=tmp_path)


class Recorder(RuntimeHook):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def on_started(self, runtime: Any) -> None:
        self.calls.append(("started", None))

    def on_batch(self, runtime: Any, batch: Batch, learned: Learned) -> None:
        self.calls.append(("batch", (batch.n_read, learned.step)))

    def on_checkpoint(self, runtime: Any, reason: str, ok: bool) -> None:
        self.calls.append(("checkpoint", (reason, ok)))

    def on_stopped(self, runtime: Any) -> None:
        self.calls.append(("stopped", None))


def _drain(service: Service) -> None:
    """Process batches until the input is read (no thread: the test drives the loop)."""
    assert service.batcher is not None
    for _ in range(20):
        batch = service.batcher.collect(min_valid=service.learner.min_valid(),
                                        wait=service.wait_stop)
        if batch is not None and batch.n_read and service.learner.accepts(batch):
            service.process(batch)
            service._maybe_checkpoint()
        if service.status.records_read == 61:
            return
    raise AssertionError(f"read {service.status.records_read} of 61 records")


def test_hooks_see_start_batches_checkpoints_and_stop(tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    hook = Recorder()
    service.add_hook(hook)
    service.start()
    _drain(service)
    service.close()
    assert hook.calls[:2] == [("checkpoint", ("initial", True)), ("started", None)]
    assert hook.calls[-1] == ("stopped", None)
    batches = [arg for kind, arg in hook.calls if kind == "batch"]
    assert sum(n for n, _ in batches) == 61
    steps = [s for _, s in batches if s is not None]  # None: a batch of rejected rows only
    assert steps == [1, 2, 3]  # 60 valid rows in batches of 20
    checkpoints = [arg for kind, arg in hook.calls if kind == "checkpoint"]
    assert ("initial", True) in checkpoints and ("batches", True) in checkpoints
    assert all(ok for _, ok in checkpoints)
    assert service.store is not None
    assert service.store.load_latest().counters["records_read"] == 61  # nothing unsaved
    assert service.status.records_rejected == 1 and service.status.step == 3


def test_every_batches_cadence_is_counted_in_batches(tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    service.start()
    _drain(service)
    assert service.status.batches >= 3
    # every_batches = 2: the initial checkpoint, then one per two batches
    assert service.status.checkpoints == 1 + service.status.batches // 2
    service.close(final_checkpoint=False)


def test_the_runtime_reads_the_source_registered_for_its_kind(tmp_path: Path) -> None:
    config = _config(tmp_path)
    built: list[Any] = []
    file_factory = connectors.source_factory("file")
    registration = {"section": connectors.source_sections()["file"],
                    "lag_unit": connectors.source_lag_unit("file"),
                    "hooks": connectors.source_hooks("file")}

    def recording(section: Any, config: Any, metrics: Any) -> Any:
        source = file_factory(section, config, metrics)
        built.append(source)
        return source

    connectors.register_source("file", recording, **registration)
    try:
        service = build_runtime(config, registry=CollectorRegistry())
        service.start()
        _drain(service)
        service.close()
    finally:
        connectors.register_source("file", file_factory, **registration)
    assert connectors.source_lag_unit("file") == "bytes"
    assert len(built) == 1 and service.source is built[0]


def _protocol_members(protocol: type) -> dict[str, Any]:
    """Attributes (annotations) and methods / properties a protocol declares, own and
    inherited."""
    members: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, typing.Protocol, typing.Generic) or klass.__name__ == "Protocol":
            continue
        members.update({name: None for name in klass.__dict__.get("__annotations__", {})})
        members.update({name: value for name, value in vars(klass).items()
                        if not name.startswith("_") and callable(value)
                        or isinstance(value, property)})
    return members


@pytest.mark.parametrize("protocol", [RuntimeHost, LearnerHost], ids=lambda p: p.__name__)
def test_the_runtime_has_every_member_its_hooks_and_learners_see(tmp_path: Path,
                                                                protocol: type) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    members = _protocol_members(protocol)
    assert {"config", "add_hook"} <= set(members)
    for name, declared in members.items():
        assert hasattr(service, name), name
        if callable(declared):
            assert (inspect.signature(getattr(Runtime, name)).parameters.keys()
                    == inspect.signature(declared).parameters.keys()), name
        if isinstance(declared, property):
            assert isinstance(getattr(Runtime, name), property), name


def test_unregistered_kind_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="'carrier-pigeon'"):
        connectors.source_factory("carrier-pigeon")


def test_service_listener_serves_metrics_and_404s_other_paths(tmp_path: Path) -> None:
    config = _config(tmp_path, metrics={"enabled": True, "port": 0})
    service = Service(config, registry=CollectorRegistry())
    service.start()
    try:
        assert service.http_server is not None
        assert service.http_server.address == "127.0.0.1"
        with urllib.request.urlopen(service.http_server.url, timeout=10) as response:
            assert b"streamkm_records_read_total" in response.read()
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(service.http_server.base_url + "/nope", timeout=10)
        assert error.value.code == 404
    finally:
        service.close(final_checkpoint=False)
