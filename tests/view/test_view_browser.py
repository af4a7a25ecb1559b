"""The live cluster view of a running ``streamkm demo``, opened in a real browser (Debian's
headless chromium): the rendered page shows one point per sampled record, one colour per
cluster and the demo's split in its event list; ``/api/clusters`` matches the model."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.processes import free_port, kill, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("chromium") is None,
                                 reason="Debian's chromium is not installed")]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")
#: Set to a path to keep the screenshot (README's picture is made this way).
SCREENSHOT_ENV = "STREAMKM_VIEW_SCREENSHOT"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read()
        return json.loads(body) if resp.headers.get_content_type() == "application/json" \
            else body.decode()


def _chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           "--virtual-time-budget=4000", *extra, url],
                          capture_output=True, text=True, timeout=120)


def test_demo_page_shows_points_clusters_and_the_split(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "demo.out"
    with open(out, "wb") as stdout:
        demo = subprocess.Popen(
            [sys.executable, "-m", "streamkm", "demo", "--state-dir", str(tmp_path / "state"),
             "--rate", "8000", "--metrics-port", str(port), "--duration", "120"],
            stdout=stdout, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: out.read_text().startswith("streamkm demo: watch the clusters at"),
                   60, "the demo printing the page's URL", procs=(demo,))
        assert out.read_text().splitlines()[0].endswith(f"{base}/")
        doc: dict[str, Any] = {}

        def retired_after(split: dict[str, Any]) -> set[int]:
            return {c for e in doc["events"] if e["event"] == "merge"
                    and e["step"] >= split["step"] for c in e["clusters"] if c != e["into"]}

        def split_shown() -> bool:
            """The split is announced with the batch assigned just before it, so its new id
            reaches the view's sampled points with the next batch (or a later merge
            retires it)."""
            doc.update(_get(base + "/api/clusters"))
            split = next((e for e in doc["events"] if e["event"] == "split"), None)
            return split is not None and split["into"][1] in (
                {c["id"] for c in doc["clusters"]} | retired_after(split))

        wait_until(split_shown, 90, "the demo's split and its new cluster in /api/clusters",
                   procs=(demo,), interval=0.5)
        # the JSON matches the model: sizes sum to the sample, ids are stable cluster ids
        n_points = len(doc["points"]["x"])
        assert sum(c["sample_size"] for c in doc["clusters"]) == n_points > 0
        assert set(doc["points"]["cluster"]) == {c["id"] for c in doc["clusters"]}
        split = next(e for e in doc["events"] if e["event"] == "split")
        assert doc["projection"] == "raw" and doc["axes"] == ["x0", "x1"]
        exported = set(re.findall(r'streamkm_cluster_records\{cluster="(-?\d+)"\}',
                                  _get(base + "/metrics")))
        assert {int(c) for c in exported} >= {c["id"] for c in doc["clusters"]} - {split["cluster"]}

        result = _chromium(base + "/", tmp_path / "profile", "--dump-dom")
        dom = result.stdout
        rendered = re.search(r'data-rendered="(\d+)"', dom)
        assert rendered, f"the page did not render: {result.stderr[-2000:]}"
        shown = int(re.search(r'id="n-points">(\d+)<', dom).group(1))
        points = re.findall(r'<circle[^>]*class="pt"[^>]*data-cluster="(-?\d+)"', dom)
        assert len(points) == shown >= min(n_points, 500)
        bars = set(re.findall(r'<rect[^>]*class="bar"[^>]*data-cluster="(-?\d+)"', dom))
        assert set(points) == bars and len(bars) >= 4
        fills = set(re.findall(r'<circle[^>]*fill="(#[0-9a-f]{6})"[^>]*class="pt"', dom))
        assert len(fills) == len(bars)  # one colour per cluster
        assert 'data-event="split"' in dom
        assert "split into" in dom

        screenshot = Path(os.environ.get(SCREENSHOT_ENV, tmp_path / "view.png"))
        _chromium(base + "/", tmp_path / "profile2", "--window-size=1200,760",
                  f"--screenshot={screenshot}")
        assert screenshot.stat().st_size > 10_000
    finally:
        kill(demo)


def test_page_and_api_are_off_with_ui_disabled_and_unknown_paths_are_404(
        tmp_path: Path) -> None:
    from streamkm.service.demo import demo_config
    from streamkm.service.runtime import Service

    config = demo_config(tmp_path, metrics_port=0, env={"STREAMKM_UI__ENABLED": "false"})
    service = Service(config)
    service.start()
    try:
        base = service.metrics_server.base_url
        for path in ("/", "/api/clusters", "/nope"):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(base + path, timeout=10)
            assert info.value.code == 404
        assert "streamkm_records_read_total" in _get(base + "/metrics")
    finally:
        service.close(final_checkpoint=False)


def test_plot_draws_a_checkpoint_with_and_without_data(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from streamkm.service.demo import DriftingStream, demo_config
    from streamkm.service.runtime import Service
    from tests.service.test_drift_service import _run_until

    stream = DriftingStream(seed=0, bad_fraction=0.0)
    (tmp_path / "stream.jsonl").write_bytes(stream.lines(0, 6000))
    _run_until(Service(demo_config(tmp_path, metrics_port=0, env={}), serve_metrics=False),
               6000)
    for extra, what in (((), "support rows"), (("--data", str(tmp_path / "stream.jsonl")),
                                               "6000 records")):
        png = tmp_path / f"plot{len(extra)}.png"
        done = subprocess.run([sys.executable, "-m", "streamkm", "plot",
                               str(tmp_path / "checkpoints"), *extra, "-o", str(png)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert what in done.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = subprocess.run([sys.executable, "-m", "streamkm", "plot", str(tmp_path / "no"),
                              "-o", str(tmp_path / "x.png")], capture_output=True, text=True)
    assert missing.returncode != 0 and "no" in missing.stderr
