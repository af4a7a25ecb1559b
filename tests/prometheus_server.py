"""Test helpers: a real Prometheus server and a real streamkm service, both as subprocesses.

Used by the ``tests/test_ops_*.py`` modules. Nothing here is skipped when a binary is
missing: :func:`require_binary` fails the test, because the ops files are only worth
shipping if they are proven against a real Prometheus (CI installs Debian's ``prometheus``
package, which brings ``prometheus`` and ``promtool``).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
OPS = REPO / "ops"
PROMETHEUS_CONFIG = OPS / "prometheus" / "prometheus.yml"
RULES_FILE = OPS / "prometheus" / "streamkm.rules.yml"
RULE_TESTS_DIR = OPS / "prometheus" / "tests"
DASHBOARD = OPS / "grafana" / "dashboards" / "streamkm.json"

#: The target written in the shipped scrape configuration (the service's default address).
SHIPPED_TARGET = "127.0.0.1:9108"

#: Series Prometheus makes itself for every target (allowed in queries besides streamkm_*).
PROMETHEUS_SERIES = frozenset({"up"})

def require_binary(name: str) -> str:
    """Path of ``name``; the test FAILS (not skips) when it is not installed."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists()
                                  else None)
    if path is None:
        pytest.fail(f"{name!r} is not installed: the ops tests need a real Prometheus "
                    f"(Debian/Ubuntu: apt-get install prometheus)", pytrace=False)
    return path


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float, what: str,
             alive: Callable[[], str | None] | None = None, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail with ``what`` on timeout.

    ``alive`` returns an error message when a process the wait depends on has died.
    """
    deadline = time.monotonic() + timeout
    while True:
        if alive is not None and (dead := alive()):
            pytest.fail(f"while waiting for {what}: {dead}", pytrace=False)
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}", pytrace=False)
        time.sleep(interval)


def http_get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (loopback only)
        return resp.read()


def metric_names_in(expr: str) -> set[str]:
    """Metric names a PromQL expression selects.

    Good enough for the expressions shipped in ``ops/``: strings, label matchers, range
    selectors and ``by (...)``-style groupings are removed first; then every identifier
    that is not a function call (followed by ``(``) or a keyword is a metric name.
    """
    keywords = {"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring",
                "group_left", "group_right", "inf", "nan"}
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for match in re.finditer(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()", s):
        if match.group(1).lower() not in keywords:
            names.add(match.group(1))
    return names


def exported_sample_names(metrics_text: str) -> set[str]:
    """Sample names in a Prometheus text exposition (``foo_total``, ``foo_bucket``, ...)."""
    names = set()
    for line in metrics_text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


# ---------------------------------------------------------------------------- Prometheus


def scrape_config_for_target(dest: Path, target: str, interval: str = "1s") -> Path:
    """Write the shipped ``prometheus.yml`` into ``dest`` with only ``target`` and the
    scrape/evaluation intervals changed, and the shipped rules file beside it."""
    text = PROMETHEUS_CONFIG.read_text()
    shipped = f'targets: ["{SHIPPED_TARGET}"]'
    assert text.count(shipped) == 1, f"expected one line {shipped} in {PROMETHEUS_CONFIG}"
    text = text.replace(shipped, f'targets: ["{target}"]')
    text, n = re.subn(r"(?m)^([ \t]*(?:scrape|evaluation)_interval:[ \t]*)\S+[ \t]*$",
                      rf"\g<1>{interval}", text)
    assert n >= 2, "the shipped config should set scrape_interval and evaluation_interval"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(RULES_FILE, dest / RULES_FILE.name)
    out = dest / "prometheus.yml"
    out.write_text(text)
    return out


class PrometheusServer:
    """A real ``prometheus`` on a free loopback port with its TSDB in ``workdir``."""

    def __init__(self, config: Path, workdir: Path) -> None:
        self.binary = require_binary("prometheus")
        self.config = config
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> PrometheusServer:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [self.binary, f"--config.file={self.config}",
                 f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        wait_for(lambda: http_get(f"{self.url}/-/ready", timeout=2), timeout,
                 "Prometheus to be ready", self.dead)
        return self

    def dead(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            return (f"prometheus exited with code {self.proc.returncode}:\n"
                    + self.log_path.read_text(errors="replace")[-3000:])
        return None

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``; returns ``data`` (fails the test on an API error)."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            body = json.loads(http_get(url))
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise PromQLError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Evaluate ``expr`` now (instant query); the vector's samples."""
        data = self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class PromQLError(AssertionError):
    """Prometheus rejected a query."""


# ---------------------------------------------------------------------------- streamkm


SERVICE_CONFIG = """\
[source]
paths = ["stream.jsonl"]
poll_interval_ms = 20
[decoding]
format = "json"
dim = 2
[model]
n_clusters = 4
kernel = "rbf"
tau = 100
n_init = 1
random_state = 0
[batching]
batch_size = 200
max_wait_ms = 200
[checkpoint]
dir = "checkpoints"
every_batches = 10
every_seconds = 2
keep = 2
[sinks]
assignments = "assignments.jsonl"
events = "events.jsonl"
dead_letter = "dead_letter.jsonl"
[metrics]
address = "127.0.0.1"
port = 0
[logging]
level = "info"
"""


class StreamkmService:
    """``streamkm run`` on the demo's drifting stream (with 5 % bad lines) in ``workdir``.

    A writer thread appends ``rate`` records per second to ``workdir/stream.jsonl``; the
    service tails it and serves metrics on a free loopback port (``port = 0``, the URL is
    read from the ``metrics_listening`` log event).
    """

    def __init__(self, workdir: Path, rate: float = 400.0, bad_fraction: float = 0.05) -> None:
        self.workdir = workdir
        self.rate = rate
        self.bad_fraction = bad_fraction
        self.log_path = workdir / "service.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_url = ""
        self._stop = threading.Event()
        self._writer: threading.Thread | None = None

    @property
    def target(self) -> str:
        """``host:port`` of the metrics endpoint (a Prometheus target)."""
        return urllib.parse.urlsplit(self.metrics_url).netloc

    def start(self, timeout: float = 60) -> StreamkmService:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "streamkm.toml"
        config.write_text(SERVICE_CONFIG)
        (self.workdir / "stream.jsonl").write_bytes(b"")
        self._writer = threading.Thread(target=self._write, name="stream-writer", daemon=True)
        self._writer.start()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streamkm.cli", "run", "-c", str(config)],
                stdout=subprocess.DEVNULL, stderr=log, cwd=self.workdir)
        self.metrics_url = wait_for(self._listening_url, timeout, "the service's metrics URL",
                                    self.dead)
        return self

    def _listening_url(self) -> str | None:
        for line in self.log_path.read_text(errors="replace").splitlines():
            if '"metrics_listening"' in line:
                return str(json.loads(line)["url"])
        return None

    def _write(self) -> None:
        from streamkm.service.demo import DriftingStream

        stream = DriftingStream(seed=0, bad_fraction=self.bad_fraction)
        written, owed, tick = 0, 0.0, 0.1
        with open(self.workdir / "stream.jsonl", "ab") as fh:
            while not self._stop.wait(tick):
                owed += self.rate * tick
                count = int(owed)
                owed -= count
                if count:
                    fh.write(stream.lines(written, count))
                    fh.flush()
                    written += count

    def dead(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            return (f"streamkm exited with code {self.proc.returncode}:\n"
                    + self.log_path.read_text(errors="replace")[-3000:])
        return None

    def scrape(self) -> str:
        return http_get(self.metrics_url).decode()

    def stop(self) -> int | None:
        """SIGTERM (graceful stop); the exit code."""
        self._stop.set()
        if self._writer is not None:
            self._writer.join(timeout=5)
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


# ---------------------------------------------------------------------------- dashboard

#: Values the dashboard's variables take in the tests ("All" for job and instance).
GRAFANA_SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$job": ".+",
    "$instance": ".+",
}


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows (rows themselves excluded)."""
    out = []
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            out.extend(panel.get("panels", []))
        else:
            out.append(panel)
    return out


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, expr)`` for every PromQL expression of the dashboard (panels, variables)."""
    queries = []
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            where = f"panel {panel['id']} {panel['title']!r} target {target.get('refId')}"
            queries.append((where, target["expr"]))
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            inner = label_values_query(var["query"])
            queries.append((f"variable ${var['name']} ({var['query']})", inner[0]))
    return queries


def label_values_query(query: str) -> tuple[str, str]:
    """Grafana's ``label_values(expr, label)`` as ``(expr, label)``."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query, flags=re.S)
    assert m, f"unsupported variable query {query!r} (expected label_values(expr, label))"
    return m.group(1), m.group(2)


def substitute_grafana_variables(expr: str) -> str:
    """The expression as Grafana would send it with "All" selected."""
    for name, value in sorted(GRAFANA_SUBSTITUTIONS.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown Grafana variable left in {expr!r}"
    return expr
