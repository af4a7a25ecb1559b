"""The ``streamkm`` command: version, checkpoint inspection, the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamkm import __version__
from streamkm.cli import main
from streamkm.io.checkpoint import CheckpointStore


def streamkm_command() -> list[str]:
    script = Path(sys.executable).with_name("streamkm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "streamkm.cli"]


@pytest.mark.integration
def test_version_from_console_script() -> None:
    proc = subprocess.run([*streamkm_command(), "--version"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"streamkm {__version__}"


@pytest.mark.unit
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["demo", "--rate", "-1"])
    assert info.value.code == 2
    assert "--rate" in capsys.readouterr().err


@pytest.mark.unit
def test_checkpoint_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    store.write(model_arrays={}, model_meta=None, positions={"in.jsonl": {"offset": 0}},
                sink_positions={}, counters={}, config_hash="h")
    store.write(model_arrays={"counts": np.array([3, 4], dtype=np.int64)},
                model_meta={"n_steps": 2}, positions={"in.jsonl": {"offset": 99}},
                sink_positions={"assignments": {"path": "a.jsonl", "bytes": 512}},
                counters={"records_read": 8, "records_accepted": 7, "records_rejected": 1,
                          "batches": 2}, config_hash="h")
    (tmp_path / "checkpoint-000000000003.npz").write_bytes(b"broken")
    assert main(["checkpoint", "inspect", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "latest valid checkpoint: checkpoint-000000000002.npz" in text
    assert "checkpoint-000000000002.npz  valid" in text and "step 2" in text
    assert "read 8 = accepted 7 + rejected 1;" in text and '"offset": 99' in text
    assert "a.jsonl (512 bytes" in text
    assert "checkpoint-000000000003.npz  INVALID" in text

    assert main(["checkpoint", "inspect", "--json", str(tmp_path)]) == 0
    summaries = json.loads(capsys.readouterr().out)
    assert [s["valid"] for s in summaries] == [True, True, False]
    assert summaries[1]["cluster_counts"] == [3, 4]
    assert summaries[0]["model_initialised"] is False

    assert main(["checkpoint", "inspect", str(tmp_path / "nope")]) == 1
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.slow
def test_demo_runs_for_duration(tmp_path: Path) -> None:
    state = tmp_path / "demo"
    proc = subprocess.run(
        [*streamkm_command(), "demo", "--state-dir", str(state), "--duration", "5",
         "--rate", "1500", "--metrics-port", "0"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "metrics  http://127.0.0.1:" in out
    assert "records/s" in out and "4 clusters" in out and "stopped:" in out
    assert "clustered" in out and "mean squared distance to centers" in out
    assert "model learning" in out or "model converged (assigning only)" in out
    assert "/healthz (alive)" in out and "malformed on purpose" in out
    assert (state / "stream.jsonl").stat().st_size > 0
    assert (state / "assignments.jsonl").stat().st_size > 0
    ckpt = CheckpointStore(state / "checkpoints").load_latest()
    assert ckpt is not None and ckpt.counters["records_accepted"] > 0
