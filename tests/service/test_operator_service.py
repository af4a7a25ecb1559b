"""The service as an operator runs it (issues 13 and 19): ``streamkm run`` in a subprocess on
real files, then ``checkpoint inspect`` / ``export`` and restarts with changed settings."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.service_process import (
    RunningService,
    blob_rows,
    busy_port,
    cli,
    count_lines,
    run_until_assigned,
    service_config,
    write_jsonl,
)
from streamkm import MiniBatchKernelKMeans
from streamkm.io.checkpoint import CheckpointStore

pytestmark = pytest.mark.integration


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_predicts_what_the_service_assigned(tmp_path: Path) -> None:
    rows = blob_rows(3000)
    data = tmp_path / "in.jsonl"
    write_jsonl(data, rows)
    config = service_config(tmp_path, data, model="tol = 0.5\npatience = 2\nwake_margin = 1000.0")
    run_until_assigned(config, len(rows))

    proc = cli("checkpoint", "export", str(tmp_path / "ck"), "-o", str(tmp_path / "model.npz"))
    assert proc.returncode == 0, proc.stderr
    assert "MiniBatchKernelKMeans at step 30" in proc.stdout
    model = MiniBatchKernelKMeans.load(tmp_path / "model.npz")

    # From the last "converged" on, the model only assigned: those assignments were made
    # by exactly the centers the export holds.
    events = read_jsonl(tmp_path / "out" / "events.jsonl")
    assert events[-1]["event"] == "converged", events
    settled = events[-1]["step"]
    x_by_id = dict(rows)
    assigned = [a for a in read_jsonl(tmp_path / "out" / "assignments.jsonl")
                if a["step"] > settled]
    assert len(assigned) >= 1000
    X = np.array([x_by_id[a["id"]] for a in assigned])
    assert model.predict(X).tolist() == [a["cluster"] for a in assigned]
    np.testing.assert_allclose(model.transform(X).min(axis=1),
                               [a["sq_distance"] for a in assigned], rtol=1e-9, atol=1e-12)


def test_export_without_a_model_fails_clearly(tmp_path: Path) -> None:
    CheckpointStore(tmp_path / "ck").write(
        model_arrays={}, model_meta=None, positions={}, sink_positions={}, counters={},
        config_hash="h")
    proc = cli("checkpoint", "export", str(tmp_path / "ck"), "-o", str(tmp_path / "m.npz"))
    assert proc.returncode == 1
    assert "holds no model yet" in proc.stderr and not (tmp_path / "m.npz").exists()
    proc = cli("checkpoint", "export", str(tmp_path / "nope"), "-o", str(tmp_path / "m.npz"))
    assert proc.returncode == 1 and "does not exist" in proc.stderr


def test_inspect_summary_explains_csv_header_and_positions(tmp_path: Path) -> None:
    rows = blob_rows(3000)
    data = tmp_path / "in.csv"
    data.write_text("a,b\n" + "".join(f"{x[0]},{x[1]}\n" for _, x in rows))
    config = service_config(tmp_path, data)
    config.write_text(config.read_text().replace(
        "dim = 2", 'dim = 2\nformat = "csv"\ncsv_header = true'))
    run_until_assigned(config, len(rows))

    proc = cli("checkpoint", "inspect", str(tmp_path / "ck"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("latest valid checkpoint: checkpoint-")
    assert "kernel auto -> rbf" in out and "3 clusters" in out and "2 features" in out
    assert "read 3001 = accepted 3000 + rejected 0 + 1 CSV header line skipped" in out
    size = data.stat().st_size
    assert f"{data}: offset {size} (of {size} bytes, 0 bytes still to read)" in out
    assert "fingerprint" not in out and '"ino"' not in out and '"fp"' not in out

    data.write_text(data.read_text() + "1.0,2.0\n")  # 8 more bytes to read
    assert f"offset {size} (of {size + 8} bytes, 8 bytes still to read)" in cli(
        "checkpoint", "inspect", str(tmp_path / "ck")).stdout

    raw = json.loads(cli("checkpoint", "inspect", "--json", str(tmp_path / "ck")).stdout)
    latest = raw[-1]
    assert latest["header_lines_skipped"] == 1
    (position,) = latest["positions"].values()
    assert position["files"][0]["offset"] == size and "fp" in position["files"][0]


def clustered(tmp_path: Path, n: int) -> tuple[list, Path, Path]:
    """``n`` records in ``in.jsonl`` clustered by a service run to the end: (rows, data
    file, configuration)."""
    rows = blob_rows(n)
    data = tmp_path / "in.jsonl"
    write_jsonl(data, rows)
    config = service_config(tmp_path, data)
    run_until_assigned(config, len(rows))
    return rows, data, config


def test_model_defining_change_refuses_and_reset_model_starts_fresh(tmp_path: Path) -> None:
    rows, data, config = clustered(tmp_path, 1200)
    assignments = tmp_path / "out" / "assignments.jsonl"

    refused = cli("run", "-c", str(config), env={"STREAMKM_MODEL__N_CLUSTERS": "5"})
    assert refused.returncode == 2, refused.stderr
    assert "model.n_clusters: checkpoint 3, config 5" in refused.stderr
    assert "--reset-model" in refused.stderr and "revert" in refused.stderr
    assert count_lines(assignments) == len(rows)

    # a harmless change applies and is logged as a diff
    harmless = RunningService(config, env={"STREAMKM_BATCHING__MAX_WAIT_MS": "150"})
    harmless.wait_until(harmless.started)
    assert harmless.stop() == 0
    (change,) = [e for e in harmless.events()
                 if e["event"] == "config_changed_since_checkpoint"]
    assert change["harmless"] == ["batching.max_wait_ms: checkpoint 200.0, config 150.0"]
    assert change["model_defining"] == []

    # --reset-model: a fresh k=5 model; input positions and outputs are kept
    reset = RunningService(config, "--reset-model", env={"STREAMKM_MODEL__N_CLUSTERS": "5"})
    reset.wait_until(reset.started)
    more = blob_rows(600, seed=1, start=len(rows))
    write_jsonl(data, more, append=True)
    reset.wait_until(lambda: count_lines(assignments) >= len(rows) + len(more))
    assert reset.stop() == 0
    assert [e["event"] for e in reset.events()].count("model_reset") == 1
    lines = [json.loads(line) for line in assignments.read_text().splitlines()]
    assert [a["id"] for a in lines] == [r[0] for r in rows + more]  # nothing re-read
    ckpt = CheckpointStore(tmp_path / "ck").load_latest()
    assert ckpt.model_arrays["counts"].shape == (5,)
    assert ckpt.meta["config"]["model.n_clusters"] == 5
    # the next plain start with k=5 is accepted (the reset was checkpointed)
    again = RunningService(config, env={"STREAMKM_MODEL__N_CLUSTERS": "5"})
    again.wait_until(again.started)
    assert again.stop() == 0


def test_outputs_without_checkpoint_refused_unless_told(tmp_path: Path) -> None:
    rows, _data, config = clustered(tmp_path, 600)
    assignments = tmp_path / "out" / "assignments.jsonl"
    shutil.rmtree(tmp_path / "ck")

    refused = cli("run", "-c", str(config))
    assert refused.returncode == 2
    assert str(assignments) in refused.stderr and "--on-existing-output=truncate" in refused.stderr
    assert count_lines(assignments) == len(rows)

    run_until_assigned(config, len(rows), "--on-existing-output=truncate")
    ids = [a["id"] for a in read_jsonl(assignments)]
    assert sorted(ids) == sorted(r[0] for r in rows)  # each record once, not doubled

    shutil.rmtree(tmp_path / "ck")
    run_until_assigned(config, 2 * len(rows), "--on-existing-output=append")
    assert count_lines(assignments) == 2 * len(rows)


def small_config(tmp_path: Path, extra: str = "") -> Path:
    """A configuration over 10 records."""
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(10))
    return service_config(tmp_path, data, extra=extra)


def test_metrics_port_in_use_exits_2_with_one_line(tmp_path: Path) -> None:
    with busy_port() as port:
        proc = cli("run", "-c", str(small_config(tmp_path, f"[metrics]\nport = {port}\n")))
    assert proc.returncode == 2
    assert proc.stderr == (f"streamkm: error: metrics.port {port} is in use: set [metrics] "
                           f"port or STREAMKM_METRICS__PORT=0 (any free port)\n")
    assert not (tmp_path / "out").exists()


def test_metrics_bind_error_at_server_start_names_the_key(tmp_path: Path) -> None:
    """The preflight check and the bind are not atomic: the bind itself names the key."""
    from prometheus_client import CollectorRegistry

    from streamkm.app.service import Service
    from streamkm.config.schema import load_config
    from streamkm.exceptions import ConfigError

    with busy_port() as port:
        config = load_config(small_config(tmp_path, f"[metrics]\nport = {port}\n"), env={})
        with pytest.raises(ConfigError, match=f"^metrics.port {port} is in use: set"):
            Service(config, registry=CollectorRegistry()).start()


@pytest.mark.parametrize(("address", "needle"), [
    ("no-such-host.invalid", "metrics.address 'no-such-host.invalid' does not resolve"),
    ("192.0.2.1", "metrics.address '192.0.2.1' is not an address of this host"),
])
def test_bad_metrics_address_exits_2(tmp_path: Path, address: str, needle: str) -> None:
    config = small_config(tmp_path, f'[metrics]\naddress = "{address}"\n')
    proc = cli("run", "-c", str(config))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and needle in proc.stderr
    assert "STREAMKM_METRICS__ADDRESS" in proc.stderr


def test_checkpoint_dir_under_a_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    config = small_config(tmp_path)
    proc = cli("run", "-c", str(config), env={"STREAMKM_CHECKPOINT__DIR": "plain/ck"})
    assert proc.returncode == 2
    assert proc.stderr == (
        f"streamkm: error: checkpoint.dir '{tmp_path / 'plain' / 'ck'}' is under the file "
        f"'{tmp_path / 'plain'}', not a folder: set [checkpoint] dir or "
        f"STREAMKM_CHECKPOINT__DIR to a folder path\n")
    proc = cli("run", "-c", str(config), env={"STREAMKM_SINKS__DEAD_LETTER": "plain/d.jsonl"})
    assert proc.returncode == 2 and "sinks.dead_letter" in proc.stderr
    assert "STREAMKM_SINKS__DEAD_LETTER" in proc.stderr


def test_secret_never_in_logs_metrics_or_checkpoint(tmp_path: Path) -> None:
    secret = "987654321"
    data = tmp_path / "in.jsonl"
    write_jsonl(data, blob_rows(300))
    config = service_config(tmp_path, data, extra="[metrics]\nport = 0\n")
    config.write_text(config.read_text().replace("level = \"info\"", "level = \"debug\""))
    env = {"STREAMKM_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
           "STREAMKM_KAFKA__SASL_MECHANISM": "PLAIN",
           "STREAMKM_KAFKA__SASL_PLAIN_USERNAME": "svc",
           "STREAMKM_KAFKA__SASL_PLAIN_PASSWORD": secret}
    service = RunningService(config, env=env)
    try:
        service.wait_until(lambda: count_lines(tmp_path / "out" / "assignments.jsonl") >= 300)
        (listening,) = [e for e in service.events() if e["event"] == "metrics_listening"]
        with urllib.request.urlopen(listening["url"], timeout=10) as response:
            metrics = response.read().decode()
    finally:
        assert service.stop() == 0
    assert "streamkm_records_accepted_total 300.0" in metrics
    assert secret not in metrics and secret not in service.stderr()
    for path in (tmp_path / "ck").iterdir():
        assert secret.encode() not in path.read_bytes()
    ckpt = CheckpointStore(tmp_path / "ck").load_latest()
    assert ckpt.meta["config"]["kafka.sasl_plain_password"] == "**********"


@pytest.mark.integration
def test_sigusr1_writes_every_threads_stack_and_the_service_carries_on(tmp_path: Path) -> None:
    """An operator whose service does not stop asks it what it is doing (SIGUSR1)."""
    import signal

    rows = blob_rows(300)
    data = tmp_path / "in.jsonl"
    write_jsonl(data, rows)
    service = RunningService(service_config(tmp_path, data))
    try:
        service.wait_until(service.started)
        service.proc.send_signal(signal.SIGUSR1)
        # the main thread's stack ends in runpy (python -m streamkm) and passes the CLI
        service.wait_until(lambda: "_run_module_as_main" in service.stderr())
        dump = service.stderr()
        assert "(most recent call first)" in dump and "streamkm/cli.py" in dump
        service.wait_until(lambda: count_lines(tmp_path / "out" / "assignments.jsonl") >= 300)
    finally:
        assert service.stop() == 0


_STOP_WHILE_LOCKED = """
import os, signal, sys, threading
from streamkm.cli import _install_stop_handlers

stop = threading.Event()
_install_stop_handlers(stop.set)
with stop._cond:  # the main thread inside Event.wait, holding the event's lock
    os.kill(os.getpid(), signal.SIGTERM)
    total = sum(range(10000))  # bytecodes: the Python-level handler runs here
sys.exit(0 if stop.wait(10) else 3)
"""


@pytest.mark.integration
def test_sigterm_while_the_main_thread_holds_the_stop_event_still_stops() -> None:
    """A handler that set the stop event itself waited for ever for a lock its own thread
    held (a service that had written everything did not exit after SIGTERM)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _STOP_WHILE_LOCKED], timeout=20,
                          capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
