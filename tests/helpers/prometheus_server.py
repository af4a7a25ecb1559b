"""Test helpers: a real Prometheus server and a real streamkm service, both as subprocesses.

Used by the ``tests/ops/`` modules. Nothing here is skipped when a binary is
missing: :func:`require_binary` fails the test, because the ops files are only worth
shipping if they are proven against a real Prometheus (CI installs Debian's ``prometheus``
package, which brings ``prometheus`` and ``promtool``).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import pytest

from tests.helpers.kafka_broker import valid_value, write_config
from tests.helpers.processes import free_port, metrics_url, start_service

REPO = Path(__file__).resolve().parents[2]
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


def scrape_config_for_target(dest: Path, target: str | Sequence[str],
                             interval: str = "1s") -> Path:
    """Write the shipped ``prometheus.yml`` into ``dest`` with only the target (one
    ``host:port`` or several) and the scrape/evaluation intervals changed, and the shipped
    rules file beside it."""
    targets = [target] if isinstance(target, str) else list(target)
    assert targets
    text = PROMETHEUS_CONFIG.read_text()
    shipped = f'targets: ["{SHIPPED_TARGET}"]'
    assert text.count(shipped) == 1, f"expected one line {shipped} in {PROMETHEUS_CONFIG}"
    text = text.replace(shipped, "targets: [" + ", ".join(f'"{t}"' for t in targets) + "]")
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


#: The ``start_prometheus`` fixture: ``(target or targets) -> a ready PrometheusServer``.
PrometheusStarter = Callable[[str | Sequence[str]], PrometheusServer]


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
outlier_alpha = 0.1
outliers = "learn"
[drift]
enabled = true
k_max = 8
[sketch]
kind = "svd"
n_components = 2
resketch_every = 5
reservoir_size = 512
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


class ServiceProcess:
    """A ``streamkm run`` subprocess in ``workdir`` (log: ``workdir/service.log``) serving
    metrics on the URL it logs."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.log_path = workdir / "service.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_url = ""
        self._sigterm_sent = False

    @property
    def target(self) -> str:
        """``host:port`` of the metrics endpoint (a Prometheus target)."""
        return urllib.parse.urlsplit(self.metrics_url).netloc

    def wait_listening(self, timeout: float = 60) -> Self:
        """Wait until the service logs its metrics URL."""
        self.metrics_url = wait_for(lambda: metrics_url(self.log_path), timeout,
                                    "the service's metrics URL", self.dead)
        return self

    def exited(self) -> str | None:
        """Why the process is gone (its exit code and the end of its log), or ``None``."""
        if self.proc is not None and self.proc.poll() is not None:
            return (f"streamkm exited with code {self.proc.returncode}:\n"
                    + self.log_path.read_text(errors="replace")[-3000:])
        return None

    def dead(self) -> str | None:
        """What went wrong with the process or what feeds it (``None``: all is well)."""
        return self.exited()

    def scrape(self) -> str:
        return http_get(self.metrics_url).decode()

    def request_stop(self) -> None:
        """SIGTERM without waiting (see :meth:`stop_process`)."""
        if self.proc is not None and self.proc.poll() is None and not self._sigterm_sent:
            self.proc.send_signal(signal.SIGTERM)
            self._sigterm_sent = True

    def stop_process(self) -> int | None:
        """SIGTERM (graceful stop: final checkpoint and commit), SIGKILL after 60 s; the
        exit code (``None`` if never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.request_stop()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class StreamkmService(ServiceProcess):
    """``streamkm run`` (drift handling, an SVD sketch and outlier flagging at 0.1 on)
    tailing the demo's drifting stream (with 5 % bad lines) in ``workdir``.

    The service starts on an empty ``workdir/stream.jsonl`` and serves metrics on a free
    loopback port (``port = 0``, the URL is read from the ``metrics_listening`` log event).
    :meth:`start_writing` then appends ``burst`` records at once (the right-hand blob of
    :class:`~streamkm.app.demo.DriftingStream` drifts apart from the first record:
    its cluster is split within these records, with a re-sketch triggered by the split,
    and the scheduled re-sketches run every 5 batches) and ``rate`` records per second
    after them.
    """

    def __init__(self, workdir: Path, rate: float = 400.0, bad_fraction: float = 0.05,
                 burst: int = 4000) -> None:
        super().__init__(workdir)
        self.rate = rate
        self.bad_fraction = bad_fraction
        self.burst = burst
        self._stop = threading.Event()
        self._writer: threading.Thread | None = None

    def start(self, timeout: float = 60) -> StreamkmService:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "streamkm.toml"
        config.write_text(SERVICE_CONFIG)
        (self.workdir / "stream.jsonl").write_bytes(b"")
        self.proc = start_service(config, self.log_path, cwd=self.workdir)
        return self.wait_listening(timeout)

    def start_writing(self) -> None:
        """Start appending the stream (see the class docstring)."""
        self._writer = threading.Thread(target=self._write, name="stream-writer", daemon=True)
        self._writer.start()

    def _write(self) -> None:
        from streamkm.app.demo import DriftingStream

        stream = DriftingStream(seed=0, bad_fraction=self.bad_fraction, split_after=0,
                                period=8000)
        owed, tick = 0.0, 0.1
        with open(self.workdir / "stream.jsonl", "ab") as fh:
            fh.write(stream.lines(0, self.burst))
            fh.flush()
            written = self.burst
            while not self._stop.wait(tick):
                owed += self.rate * tick
                count = int(owed)
                owed -= count
                if count:
                    fh.write(stream.lines(written, count))
                    fh.flush()
                    written += count

    def stop(self) -> int | None:
        """Stop writing, then SIGTERM (graceful stop); the exit code."""
        self._stop.set()
        if self._writer is not None:
            self._writer.join(timeout=5)
        return self.stop_process()


class TopicProducer:
    """A thread feeding ``topic`` (``partitions`` partitions, round robin) with the valid
    records of ``kafka_broker.valid_value`` at ``rate`` per second."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 200.0,
                 partitions: int = 3) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.rate = rate
        self.partitions = partitions
        self.produced = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> TopicProducer:
        self._thread = threading.Thread(target=self._produce, name="kafka-producer",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, check: bool = True) -> None:
        """Stop the thread; fails when it could not produce (with ``check``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if check and self.error is not None:
            raise AssertionError(f"the test producer failed: {self.error!r}")

    def failed(self) -> str | None:
        return None if self.error is None else f"the test producer failed: {self.error!r}"

    def _produce(self) -> None:
        from kafka import KafkaProducer

        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        except BaseException as exc:  # reported by stop() and failed()
            self.error = exc
            return
        owed, tick = 0.0, 0.1
        try:
            while not self._stop.wait(tick):
                owed += self.rate * tick
                count = int(owed)
                owed -= count
                futures = [producer.send(self.topic, key=f"k{i}".encode(),
                                         value=valid_value(i), partition=i % self.partitions)
                           for i in range(self.produced, self.produced + count)]
                producer.flush(timeout=10)
                for future in futures:
                    future.get(timeout=10)
                self.produced += count
        except BaseException as exc:
            self.error = exc
        finally:
            producer.close(timeout=5)


class KafkaStreamkmService(ServiceProcess):
    """``streamkm run`` with a Kafka source and Kafka sinks against a real broker.

    The configuration is the Kafka tests' (``kafka_broker.write_config``: consumer group
    ``<topic>-group``, batches of 50, a checkpoint and an offset commit every 2 batches or
    second, metrics on a free port) plus ``extra_config`` (e.g. a ``[scaleout]`` section:
    several services on the same ``topic`` share the group). :meth:`start_producing` feeds
    ``topic`` (3 partitions) with valid records at ``rate`` per second from a producer
    thread (:class:`TopicProducer`).
    """

    def __init__(self, workdir: Path, bootstrap: str, topic: str, rate: float = 200.0,
                 extra_config: str = "") -> None:
        super().__init__(workdir)
        self.bootstrap = bootstrap
        self.topic = topic
        self.rate = rate
        self.extra_config = extra_config
        self.producer: TopicProducer | None = None

    @property
    def produced(self) -> int:
        return 0 if self.producer is None else self.producer.produced

    def start(self, timeout: float = 60) -> KafkaStreamkmService:
        """Start the process; returns once it serves metrics."""
        self.launch()
        return self.wait_listening(timeout)

    def launch(self) -> KafkaStreamkmService:
        """Start the process without waiting (see :meth:`wait_listening`)."""
        config = write_config(self.workdir, self.bootstrap, topic=self.topic,
                              group=f"{self.topic}-group", out_prefix=f"{self.topic}-out",
                              metrics_port=0)
        if self.extra_config:
            with open(config, "a") as fh:
                fh.write("\n" + self.extra_config)
        self.proc = start_service(config, self.log_path)
        return self

    def start_producing(self) -> None:
        self.producer = TopicProducer(self.bootstrap, self.topic, self.rate).start()

    def stop_producing(self) -> None:
        if self.producer is not None:
            self.producer.stop()

    def dead(self) -> str | None:
        return self.exited() or (None if self.producer is None else self.producer.failed())

    def stop(self) -> int | None:
        """Stop producing, then SIGTERM (graceful stop: final checkpoint and commit); the
        exit code."""
        if self.producer is not None:
            self.producer.stop(check=False)
        return self.stop_process()


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


def dashboard_queries(dashboard: dict[str, Any],
                      panels: list[dict[str, Any]] | None = None) -> list[tuple[str, str]]:
    """``(where, expr)`` for every PromQL expression of the dashboard (panels, variables),
    or of ``panels`` only (no variables) when given."""
    queries = []
    for panel in dashboard_panels(dashboard) if panels is None else panels:
        for target in panel.get("targets", []):
            where = f"panel {panel['id']} {panel['title']!r} target {target.get('refId')}"
            queries.append((where, target["expr"]))
    if panels is not None:
        return queries
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


# ---------------------------------------------------------------------------- shared checks

#: Prefix of the metrics a service registers only when its source or sinks use Kafka.
KAFKA_PREFIX = "streamkm_kafka_"
#: The source lag of a Kafka source (records); only a Kafka-source service exports it.
KAFKA_SOURCE_LAG = "streamkm_source_lag_records"
#: Metrics only a file-source service exports: its lag in bytes.
FILE_SOURCE_METRICS = frozenset({"streamkm_source_lag_bytes"})


def scaleout_sample_names() -> frozenset[str]:
    """Sample names of the metrics only scale-out processes register (``streamkm_leader``,
    ``streamkm_updates_dropped_total``, ``streamkm_leader_apply_seconds_bucket``, ...), read
    from :class:`streamkm.scaleout.metrics.ScaleoutMetrics` itself."""
    from prometheus_client import CollectorRegistry, generate_latest

    from streamkm.scaleout.metrics import ScaleoutMetrics

    registry = CollectorRegistry()
    ScaleoutMetrics(registry, "probe")
    return frozenset(exported_sample_names(generate_latest(registry).decode()))


def scaleout_metrics_in_ops_files() -> set[str]:
    """The scale-out-only metric names the dashboard and the alert rules reference."""
    text = DASHBOARD.read_text() + RULES_FILE.read_text()
    return set(re.findall(r"\bstreamkm_\w+", text)) & scaleout_sample_names()


def row_panels(dashboard: dict[str, Any], title: str) -> list[dict[str, Any]]:
    """The panels of the row titled ``title`` (nested in it when collapsed, else the panels
    after it up to the next row)."""
    out: list[dict[str, Any]] = []
    inside = False
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            if inside:
                break
            if panel.get("title") == title:
                inside = True
                out.extend(panel.get("panels", []))
        elif inside:
            out.append(panel)
    assert out, f"no panels in a row titled {title!r}"
    return out


def kafka_metrics_in_ops_files() -> set[str]:
    """The Kafka-only metric names the dashboard and the alert rules reference (the Kafka
    client metrics and the Kafka source's lag in records)."""
    text = DASHBOARD.read_text() + RULES_FILE.read_text()
    names = set(re.findall(r"\b" + KAFKA_PREFIX + r"\w+", text))
    return names | ({KAFKA_SOURCE_LAG} & set(re.findall(r"\bstreamkm_\w+", text)))


def dashboard_query_problems(prometheus: PrometheusServer, exported: set[str],
                             not_registered: set[str] | frozenset[str] = frozenset(),
                             queries: list[tuple[str, str]] | None = None) -> list[str]:
    """Every dashboard expression, evaluated by ``prometheus``: the problems found.

    An expression must only use metrics in ``exported`` (a live scrape of the service) and
    return data; one on a metric in ``not_registered`` (metrics this kind of service does
    not register, e.g. Kafka ones for a file source) must return nothing instead (another
    test runs it against a service that has them). ``queries``: only these ``(where,
    expr)`` (default: all of :func:`dashboard_queries`).
    """
    problems = []
    for where, expr in dashboard_queries(load_dashboard()) if queries is None else queries:
        names = metric_names_in(expr)
        missing = sorted(names - exported - set(not_registered))
        if missing:
            problems.append(f"{where}: references {missing}, not exported by the service")
            continue
        query = substitute_grafana_variables(expr)
        try:
            result = prometheus.query(query)
        except PromQLError as exc:
            problems.append(f"{where}: invalid query {query!r}: {exc}")
            continue
        if names & set(not_registered):
            if result:
                problems.append(f"{where}: expected no data (metrics "
                                f"{sorted(names & set(not_registered))} not registered here) "
                                f"but got {result}")
        elif not result:
            problems.append(f"{where}: no data for {query!r}")
    return problems


def alerting_rules(prometheus: PrometheusServer) -> list[dict[str, Any]]:
    groups = prometheus.api("rules", type="alert")["groups"]
    return [rule for group in groups for rule in group["rules"]]


def rule_problems(prometheus: PrometheusServer, exported: set[str], *,
                  expected_active: set[str], undetermined: set[str],
                  not_registered: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Every loaded alert rule's expression, evaluated now: it must be a valid query on
    exported metrics (or on ``not_registered`` ones), return data for the alerts in
    ``expected_active`` and nothing for the others (except ``undetermined``)."""
    problems = []
    for rule in alerting_rules(prometheus):
        name, expr = rule["name"], rule["query"]
        unknown = sorted(metric_names_in(expr) - exported - set(not_registered))
        if unknown:
            problems.append(f"{name}: references {unknown}, not exported by the service")
        try:
            result = prometheus.query(expr)
        except PromQLError as exc:
            problems.append(f"{name}: invalid query: {exc}")
            continue
        if name in expected_active and not result:
            problems.append(f"{name}: its condition holds in this test but {expr!r} "
                            f"returned nothing")
        if name not in expected_active | undetermined and result:
            problems.append(f"{name}: {expr!r} returned {result} for a healthy service")
    return problems


def wait_until_rules_evaluated(prometheus: PrometheusServer,
                               alive: Callable[[], str | None]) -> None:
    wait_for(lambda: all(r.get("lastEvaluation", "").startswith("20")
                         for r in alerting_rules(prometheus)), 10,
             "every rule to be evaluated", alive)


def unhealthy_rules(prometheus: PrometheusServer) -> list[tuple[str, str, str]]:
    return [(r["name"], r.get("health"), r.get("lastError")) for r in alerting_rules(prometheus)
            if r.get("health") != "ok"]


def metric_families(metrics_text: str) -> dict[str, set[str]]:
    """``{family: sample names}`` of a text exposition (the ``_created`` timestamps that
    prometheus_client adds to counters and histograms left out)."""
    families: dict[str, set[str]] = {}
    for line in metrics_text.splitlines():
        if line.startswith("# TYPE ") and not line.split()[2].endswith("_created"):
            families.setdefault(line.split()[2], set())
    for name in exported_sample_names(metrics_text):
        if name.endswith("_created"):
            continue
        family = max((f for f in families if name == f or name.startswith(f + "_")),
                     key=len, default=None)
        if family is not None:
            families[family].add(name)
    return families
