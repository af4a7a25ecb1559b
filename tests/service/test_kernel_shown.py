"""What runs is what is shown: with ``kernel = "rbf"`` and the default ``gamma = "auto"`` the
model may run another kernel; the log, the info metric, the live page, ``checkpoint
inspect`` and ``config show`` all name the kernel the checkpointed model runs
(``auto -> <kernel>``). ``streamkm plot`` draws a graph-kernel model, and says precisely why
it cannot draw a linear one without records."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from streamkm.io.checkpoint import CheckpointStore
from tests.helpers.processes import count_lines, metrics_url
from tests.helpers.service_process import RunningService, cli, service_config, write_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_METRICS = "[metrics]\nenabled = true\nport = 0\n"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--virtual-time-budget=4000", "--dump-dom")


def _moons(n: int, seed: int = 0) -> list[tuple[str, list[float]]]:
    rng = np.random.default_rng(seed)
    u = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(u), 1 - np.cos(u))
    y = np.where(upper, np.sin(u), 0.5 - np.sin(u))
    pts = np.c_[x, y] + rng.normal(0, 0.05, (n, 2))
    return [(f"m{i}", [float(a), float(b)]) for i, (a, b) in enumerate(pts)]


def _kernel_in_checkpoint(folder: Path) -> str:
    checkpoint = CheckpointStore(folder).load_latest()
    assert checkpoint is not None and checkpoint.model_meta is not None
    return checkpoint.model_meta["kernel_spec"]["name"]


def test_every_view_names_the_kernel_auto_chose(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, _moons(2000))
    config = service_config(tmp_path, data, n_clusters=2, extra=_METRICS)
    service = RunningService(config, env={"STREAMKM_BATCHING__FIRST_BATCH_SIZE": "1500"})
    output = tmp_path / "out" / "assignments.jsonl"
    try:
        service.wait_until(lambda: count_lines(output) >= 2000, timeout=300)
        url = metrics_url(service.log)
        assert url is not None
        base = url.rsplit("/", 1)[0]
        metrics = urllib.request.urlopen(url, timeout=10).read().decode()
        page = json.loads(urllib.request.urlopen(base + "/api/clusters", timeout=10).read())
        dom = None
        if shutil.which("chromium"):
            dom = subprocess.run(["chromium", *CHROMIUM_FLAGS,
                                  f"--user-data-dir={tmp_path / 'profile'}", base + "/"],
                                 capture_output=True, text=True, timeout=120).stdout
    finally:
        assert service.stop() == 0
    kernel = _kernel_in_checkpoint(tmp_path / "ck")
    label = f"auto -> {kernel}"

    (chosen,) = [e for e in service.events() if e["event"] == "kernel_chosen"]
    assert chosen["configured"] == "rbf" and chosen["kernel"] == kernel
    assert chosen["label"] == label
    info = re.search(r'^streamkm_model_kernel_info\{(.*)\} 1\.0$', metrics, re.M)
    assert info is not None, metrics[-2000:]
    assert f'kernel="{kernel}"' in info.group(1) and f'label="{label}"' in info.group(1)
    assert 'configured="rbf"' in info.group(1)
    assert page["kernel"] == label
    if dom is not None:
        assert f'id="kernel">{label.replace(">", "&gt;")}<' in dom

    inspect = cli("checkpoint", "inspect", str(tmp_path / "ck"))
    assert f"model    kernel {label}" in inspect.stdout, inspect.stdout
    shown = cli("config", "show", "-c", str(config))
    assert f'kernel = "rbf"  # in use: {label} (checkpoint-' in shown.stdout, shown.stdout
    summaries = json.loads(cli("checkpoint", "inspect", "--json", str(tmp_path / "ck")).stdout)
    assert summaries[-1]["model"]["kernel_in_use"] == kernel


@pytest.mark.parametrize("kernel", ["heat", "anchor"])
def test_plot_draws_a_graph_kernel_model_without_records(tmp_path: Path, kernel: str) -> None:
    pytest.importorskip("matplotlib")
    data = tmp_path / "in.jsonl"
    write_jsonl(data, _moons(1500))
    config = service_config(tmp_path, data, n_clusters=2)
    env = {"STREAMKM_MODEL__KERNEL": kernel, "STREAMKM_BATCHING__FIRST_BATCH_SIZE": "1000"}
    service = RunningService(config, env=env)
    try:
        service.wait_until(lambda: count_lines(tmp_path / "out" / "assignments.jsonl") >= 1500,
                           timeout=300)
    finally:
        assert service.stop() == 0
    png = tmp_path / "clusters.png"
    done = cli("plot", str(tmp_path / "ck"), "-o", str(png))
    assert done.returncode == 0, done.stderr
    assert f"the {kernel} kernel's" in done.stdout and "2 clusters" in done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_of_a_linear_model_says_it_needs_records(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    write_jsonl(data, _moons(400))
    config = service_config(tmp_path, data, n_clusters=2)
    service = RunningService(config, env={"STREAMKM_MODEL__KERNEL": "linear"})
    try:
        service.wait_until(lambda: count_lines(tmp_path / "out" / "assignments.jsonl") >= 400)
    finally:
        assert service.stop() == 0
    done = cli("plot", str(tmp_path / "ck"), "-o", str(tmp_path / "x.png"))
    assert done.returncode == 2
    assert ("the linear kernel's model keeps its 2 centroids and no records to draw: give "
            "records with --data FILE") in done.stderr
    with_data = cli("plot", str(tmp_path / "ck"), "--data", str(data), "-o",
                    str(tmp_path / "x.png"))
    assert with_data.returncode == 0 and "400 records" in with_data.stdout
