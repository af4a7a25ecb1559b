"""``streamkm demo`` as a real process keeps its word: the port it is given or a one-line
error, a stream file that stays bounded, a whole folder that stays bounded (a fresh model
once the outputs reach their size), "stopping" on the first Ctrl-C and an immediate
exit 130 without a traceback on the second."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from streamkm.io.checkpoint import CheckpointStore
from tests.helpers.processes import free_port, scrape, wait_until

pytestmark = pytest.mark.integration


def _demo(state: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "streamkm.cli", "demo", "--state-dir", str(state), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class _Collect(threading.Thread):
    """Everything a pipe says, readable while the process runs."""

    def __init__(self, pipe) -> None:
        super().__init__(daemon=True)
        self.pipe, self.text = pipe, ""

    def run(self) -> None:
        for line in self.pipe:
            self.text += line


def _port_in_time_wait() -> int:
    """A port whose server side (a listener like the demo's, with ``SO_REUSEADDR``) closed
    first, so its connection lingers in TIME_WAIT: a demo stopped a moment ago."""
    port = free_port()
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the side that closes first keeps TIME_WAIT
        time.sleep(0.1)
        client.close()
    return port


def test_busy_port_is_a_one_line_error_with_exit_2(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "streamkm.cli", "demo", "--state-dir", str(tmp_path),
             "--metrics-port", str(port), "--duration", "5"],
            capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"--metrics-port {port}" in lines[0] and "--metrics-port 0" in lines[0]
    assert "127.0.0.1:" not in proc.stdout  # no other address offered instead


@pytest.mark.slow
def test_port_in_time_wait_is_used_as_given(tmp_path: Path) -> None:
    port = _port_in_time_wait()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # a probe without SO_REUSEADDR calls it busy
    proc = subprocess.run(
        [sys.executable, "-m", "streamkm.cli", "demo", "--state-dir", str(tmp_path),
         "--metrics-port", str(port), "--duration", "3"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"watch the clusters at http://127.0.0.1:{port}/" in proc.stdout


@pytest.mark.slow
def test_stream_file_moves_aside_at_its_bound_and_is_read_across(tmp_path: Path) -> None:
    bound = 200_000
    proc = subprocess.run(
        [sys.executable, "-m", "streamkm.cli", "demo", "--state-dir", str(tmp_path),
         "--metrics-port", "0", "--duration", "12", "--rate", "4000",
         "--max-stream-mb", str(bound / 1e6)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "at most 0.4 MB" in proc.stdout and "newest 3 checkpoints are kept" in proc.stdout
    stream, rotated = tmp_path / "stream.jsonl", tmp_path / "stream.jsonl.1"
    assert rotated.exists()
    one_write = 4000 * 0.1 * 60  # the writer checks the size after each 0.1 s of lines
    assert rotated.stat().st_size < bound + one_write
    assert stream.stat().st_size < bound + one_write
    assert len(list((tmp_path / "checkpoints").glob("checkpoint-*.npz"))) <= 3
    # the numbering continues in the new file, and the service read past the rotation
    before = int((tmp_path / "stream.jsonl.count").read_text())
    first = next(json.loads(line) for line in stream.read_bytes().splitlines()
                 if line.startswith(b'{"id":'))
    assert before - 2 < first["id"] <= before + 2  # a malformed first line skips a number
    ckpt = CheckpointStore(tmp_path / "checkpoints").load_latest()
    seen = ckpt.counters["records_accepted"] + ckpt.counters["records_rejected"]
    assert seen > stream.read_bytes().count(b"\n")


@pytest.mark.slow
def test_ctrl_c_stops_then_quits_at_once_with_130(tmp_path: Path) -> None:
    proc = _demo(tmp_path, "--metrics-port", "0", "--rate", "3000")
    out, err = _Collect(proc.stdout), _Collect(proc.stderr)
    out.start()
    err.start()
    try:
        wait_until(lambda: "clustered" in out.text, 300, "the first status line", [proc])
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: "stopping (Ctrl-C again to quit now)" in err.text, 60,
                   "the stopping line")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130, out.text + err.text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.join(5)
    err.join(5)
    assert "Traceback" not in err.text and "KeyboardInterrupt" not in err.text, err.text


@pytest.mark.slow
def test_one_ctrl_c_stops_cleanly(tmp_path: Path) -> None:
    proc = _demo(tmp_path, "--metrics-port", "0", "--rate", "3000")
    out, err = _Collect(proc.stdout), _Collect(proc.stderr)
    out.start()
    err.start()
    try:
        wait_until(lambda: "clustered" in out.text, 300, "the first status line", [proc])
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0, out.text + err.text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.join(5)
    err.join(5)
    assert "stopping (Ctrl-C again to quit now)" in err.text
    assert "stopped:" in out.text and "Traceback" not in err.text
    assert CheckpointStore(tmp_path / "checkpoints").load_latest() is not None


def _folder_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except FileNotFoundError:  # replaced between the listing and the stat
            pass
    return total


def _bytes_per_line(path: Path) -> float:
    """Mean size of the file's lines (0 while it is missing or empty)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0.0
    lines = data.count(b"\n")
    return len(data) / lines if lines else 0.0


def _file_sizes(folder: Path) -> list[int]:
    sizes = []
    for path in folder.glob("*"):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:  # replaced between the listing and the stat
            pass
    return sizes


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as page:  # noqa: S310 (loopback)
            return page.status == 200 and bool(page.read())
    except (urllib.error.URLError, ConnectionError):
        return False  # between two models: the listener is being opened again


def _accepted(base: str) -> float:
    try:
        return scrape(base + "/metrics").get("streamkm_records_accepted_total", 0.0)
    except (urllib.error.URLError, ConnectionError):
        return 0.0


@pytest.mark.slow
def test_whole_folder_stays_bounded_while_clustering_goes_on(tmp_path: Path) -> None:
    stream_mb, output_mb = 0.2, 0.3
    proc = _demo(tmp_path, "--metrics-port", "0", "--rate", "4000",
                 "--max-stream-mb", str(stream_mb), "--max-output-mb", str(output_mb))
    out, err = _Collect(proc.stdout), _Collect(proc.stderr)
    out.start()
    err.start()
    started_over = "the outputs reached 0.3 MB: starting over with a fresh model"
    try:
        wait_until(lambda: "plus the checkpoints" in out.text, 300,
                   "the page address and the folder's bound", [proc])
        assert "at most 0.7 MB plus the checkpoints" in out.text
        base = out.text.split("watch the clusters at ", 1)[1].split()[0].rstrip("/")
        largest, until = 0, time.monotonic() + 40
        record_bytes, checkpoint_bytes = 0.0, 0
        while time.monotonic() < until or out.text.count(started_over) < 2:
            assert proc.poll() is None, out.text[-3000:] + err.text
            largest = max(largest, _folder_bytes(tmp_path))
            record_bytes = max(record_bytes, _bytes_per_line(tmp_path / "assignments.jsonl"))
            checkpoint_bytes = max([checkpoint_bytes, *_file_sizes(tmp_path / "checkpoints")])
            time.sleep(0.25)
            if time.monotonic() > until + 240:
                break
        assert out.text.count(started_over) >= 2, out.text[-3000:]
        # slack: what the writer adds between two size checks of the stream (0.1 s, input
        # lines of about 60 bytes), what the service writes between two of the outputs (1 s
        # and a batch, at the assignment lines' measured size) and the 3 kept checkpoints
        slack = 4000 * 60 * 0.1 + 4000 * record_bytes * 1.5 + 3 * checkpoint_bytes
        bound = (2 * stream_mb + output_mb) * 1e6 + slack
        assert largest < bound, (largest, bound, record_bytes, checkpoint_bytes)
        # the page of the latest model answers at the address first printed, and it clusters
        wait_until(lambda: _answers(base + "/"), 120, "the page answering")
        wait_until(lambda: _accepted(base) > 0, 120, "records clustered by the latest model")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0, out.text[-3000:] + err.text
        # a start-over keeps no copy of the old checkpoints (looked at once the demo has
        # stopped: one in progress holds them in a replaced-* folder for a moment)
        assert not list((tmp_path / "checkpoints").glob("replaced-*"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.join(5)
    err.join(5)
    assert "Traceback" not in err.text, err.text
