"""``/healthz`` and ``/readyz`` of a runtime, in-process: the liveness clock turns 503 when
the loop is really blocked (a hook that blocks the runtime's thread) and 200 again when it
moves; readiness names each check, fails before the start, while the checkpoint folder
cannot be written, and for a scale-out member until it adopted a model version."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streamkm.app.service import Service
from streamkm.config.schema import ServiceConfig, config_from_mapping, service_model
from streamkm.io.batcher import Batch
from streamkm.runtime import Learned, RuntimeHook
from streamkm.runtime.health import HealthChecks, stall_after_s
from tests.helpers.http import get_json
from tests.scaleout.test_scaleout_retry import World

pytestmark = pytest.mark.unit

CHECKS = {"runtime", "model", "source", "checkpoint", "outputs"}


def wait_for(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _config(tmp_path: Path, n: int = 200) -> ServiceConfig:
    rng = np.random.default_rng(0)
    rows = [{"id": i, "x": rng.normal(5.0 * (i % 2), 0.3, 2).tolist()} for i in range(n)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return config_from_mapping({
        "source": {"paths": ["in.jsonl"], "start_at": "beginning", "poll_interval_ms": 5},
        "decoding": {"dim": 2}, "batching": {"batch_size": 20, "first_batch_size": 20,
                                                    "max_wait_ms": 20},
        "model": {"n_clusters": 2, "random_state": 0},
        "checkpoint": {"dir": "ckpt", "every_batches": 1},
        "sinks": {"assignments": "out/a.jsonl", "events": "out/e.jsonl",
                  "dead_letter": "out/d.jsonl"},
        "metrics": {"enabled": True, "port": 0}, "ui": {"enabled": False},
    }, base_dir=tmp_path)


class BlockingHook(RuntimeHook):
    """Blocks the runtime's thread in its second batch until released."""

    def __init__(self) -> None:
        self.blocked = threading.Event()
        self.release = threading.Event()
        self.batches = 0

    def on_batch(self, runtime: Any, batch: Batch, learned: Learned) -> None:
        self.batches += 1
        if self.batches == 2:
            self.blocked.set()
            assert self.release.wait(60)


@pytest.fixture
def running(tmp_path: Path) -> Any:
    service = Service(_config(tmp_path), registry=CollectorRegistry())
    hook = BlockingHook()
    service.add_hook(hook)
    thread = threading.Thread(target=service.run, name="test-runtime")
    thread.start()
    try:
        wait_for(lambda: service.http_server is not None, "the listener")
        yield service, hook
    finally:
        hook.release.set()
        service.request_stop()
        thread.join(60)
        assert not thread.is_alive()


def test_healthz_is_503_while_the_loop_is_blocked_and_200_once_it_moves(running: Any) -> None:
    service, hook = running
    base = service.http_server.base_url
    assert hook.blocked.wait(60)
    service.health.stall_after_s = 0.3  # the configured 60 s floor, shortened for the test
    wait_for(lambda: get_json(base + "/healthz")[0] == 503, "a 503 from /healthz")
    status, body = get_json(base + "/healthz")
    assert status == 503 and body["status"] == "stuck"
    assert body["loop_age_s"] > 0.3 and body["stall_after_s"] == 0.3
    assert "has not turned for" in body["reason"] and "limit 0.3 s" in body["reason"]
    hook.release.set()
    wait_for(lambda: get_json(base + "/healthz")[0] == 200, "a 200 from /healthz again")
    status, body = get_json(base + "/healthz")
    assert body["status"] == "ok" and body["loop_age_s"] <= 0.3


def test_readyz_lists_each_check_and_fails_while_checkpoints_fail(running: Any,
                                                                  tmp_path: Path) -> None:
    service, hook = running
    base = service.http_server.base_url
    assert hook.blocked.wait(60)
    status, body = get_json(base + "/readyz")
    assert status == 200 and body["status"] == "ready"
    assert set(body["checks"]) == CHECKS and all(c["ok"] for c in body["checks"].values())
    assert str(tmp_path / "in.jsonl") in body["checks"]["source"]["detail"]
    assert "written" in body["checks"]["checkpoint"]["detail"]
    # the checkpoint folder becomes a file: the next checkpoint (after this batch) fails
    shutil.rmtree(tmp_path / "ckpt")
    (tmp_path / "ckpt").write_text("not a folder")
    hook.release.set()
    wait_for(lambda: get_json(base + "/readyz")[0] == 503, "a 503 from /readyz")
    status, body = get_json(base + "/readyz")
    assert body["status"] == "not_ready"
    check = body["checks"]["checkpoint"]
    assert not check["ok"] and "failed" in check["detail"]
    assert service.last_checkpoint_error and service.last_checkpoint_error in check["detail"]
    # the refused checkpoint also pauses ingestion until it can be written
    outputs = body["checks"]["outputs"]
    assert not outputs["ok"] and "checkpoint" in outputs["detail"]
    assert all(body["checks"][name]["ok"] for name in CHECKS - {"checkpoint", "outputs"})


def test_readiness_before_start_and_after_stop(tmp_path: Path) -> None:
    service = Service(_config(tmp_path, n=40), registry=CollectorRegistry(),
                      serve_metrics=False)
    ready, body = service.health.readiness()
    assert not ready
    assert body["checks"]["runtime"] == {"ok": False, "detail": "starting"}
    assert not body["checks"]["source"]["ok"]
    service.start()
    assert service.health.readiness()[0]
    service.request_stop()
    assert service.health.readiness()[1]["checks"]["runtime"]["detail"].startswith("stopping")
    service.close()
    assert service.health.readiness()[1]["checks"]["runtime"] == {"ok": False,
                                                                   "detail": "stopped"}


def test_scaleout_member_is_ready_only_with_a_model_version(tmp_path: Path) -> None:
    world = World(tmp_path)
    check = world.svc.health.readiness()[1]["checks"]["model"]
    assert check == {"ok": False,
                     "detail": "no model version adopted yet (reading the model topic)"}
    world.own()  # the leader publishes a version confirming the fence; the member adopts it
    check = world.svc.health.readiness()[1]["checks"]["model"]
    assert not check["ok"] and "has no centers yet" in check["detail"]
    world.process(0, 20)
    world.land(1)
    world.publish()  # the first version with centers
    check = world.svc.health.readiness()[1]["checks"]["model"]
    assert check["ok"] and f"model version {world.worker.model_version} adopted" in check[
        "detail"]


def test_more_checks_can_be_registered_and_a_raising_check_fails() -> None:
    health = HealthChecks(stall_after_s=60.0)
    health.register("outputs", lambda: (True, "writable"))

    def broken() -> tuple[bool, str]:
        raise OSError("disk gone")

    health.register("disk", broken)
    ready, body = health.readiness()
    assert not ready and health.names == ["outputs", "disk"]
    assert body["checks"]["disk"] == {"ok": False, "detail": "check failed: OSError: disk gone"}
    assert body["checks"]["outputs"] == {"ok": True, "detail": "writable"}


def test_stall_threshold_follows_the_configuration(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert stall_after_s(config) == 60.0  # the floor: defaults block far less
    slow = config.model_copy(update={"batching": config.batching.model_copy(
        update={"max_wait_ms": 20_000.0})})
    assert stall_after_s(slow) == 200.0
    kafka = service_model().model_validate({
        "source": {"kind": "kafka", "topics": ["t"], "group_id": "g",
                   "max_poll_interval_ms": 300_000},
        "decoding": {"dim": 2}, "model": {"n_clusters": 2}})
    assert stall_after_s(kafka) == 300.0


@pytest.fixture
def notify_socket(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A datagram socket where systemd would listen (abstract name), announced to the
    runtime through NOTIFY_SOCKET with a 0.2 s watchdog (pings every 0.1 s)."""
    name = f"streamkm-test-{os.getpid()}-{time.monotonic_ns()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    yield sock
    sock.close()


def next_message(sock: socket.socket, timeout: float) -> str | None:
    sock.settimeout(timeout)
    try:
        return sock.recv(256).decode()
    except TimeoutError:
        return None


def test_systemd_watchdog_is_fed_only_while_the_loop_turns(notify_socket: socket.socket,
                                                            tmp_path: Path) -> None:
    service = Service(_config(tmp_path), registry=CollectorRegistry(), serve_metrics=False)
    hook = BlockingHook()
    service.add_hook(hook)
    assert service.health.watchdog is not None and service.health.watchdog.interval_s == 0.1
    thread = threading.Thread(target=service.run, name="test-runtime")
    thread.start()
    try:
        assert next_message(notify_socket, 10) == "WATCHDOG=1"
        assert hook.blocked.wait(60)
        service.health.stall_after_s = 0.3
        wait_for(lambda: not service.health.liveness()[0], "the loop reported stuck")
        while next_message(notify_socket, 0.15) is not None:
            pass  # pings sent before the stall was seen
        # 10 ping periods without a ping: systemd would restart the service (WatchdogSec)
        assert next_message(notify_socket, 1.0) is None
        hook.release.set()
        assert next_message(notify_socket, 10) == "WATCHDOG=1"
    finally:
        hook.release.set()
        service.request_stop()
        thread.join(60)
    messages = []
    while (message := next_message(notify_socket, 1.0)) is not None:
        messages.append(message)
        if message == "STOPPING=1":
            break
    assert messages[-1:] == ["STOPPING=1"]


def test_start_up_gets_a_longer_allowance_than_the_loop() -> None:
    now = [100.0]
    health = HealthChecks(stall_after_s=10.0, clock=lambda: now[0])
    now[0] = 130.0  # restoring a large checkpoint: no beat yet, within 5 x 10 s
    alive, body = health.liveness()
    assert alive and body["status"] == "starting"
    now[0] = 151.0
    alive, body = health.liveness()
    assert not alive and body["reason"] == "the start has not finished for 51.0 s (limit 50 s)"
    health.beat()
    assert health.liveness() == (True, {"status": "ok", "loop_age_s": 0.0,
                                        "stall_after_s": 10.0, "uptime_s": 51.0})
    now[0] = 161.5
    alive, body = health.liveness()
    assert not alive and body["reason"] == "the runtime loop has not turned for 10.5 s (limit 10 s)"
