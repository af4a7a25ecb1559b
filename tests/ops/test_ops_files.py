"""Static checks of the ops files: promtool, the dashboard JSON, provisioning, systemd unit.

promtool must be installed (CI: ``apt-get install prometheus``); without it these tests
fail, they are never skipped. The live checks against a running Prometheus and service
are in ``test_ops_live.py``. The promtool checks are marked ``prometheus``, the systemd
one ``integration``, the others ``unit``.
"""

from __future__ import annotations

import configparser
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.prometheus_server import (
    DASHBOARD,
    OPS,
    PROMETHEUS_CONFIG,
    REPO,
    RULE_TESTS_DIR,
    RULES_FILE,
    dashboard_panels,
    load_dashboard,
    require_binary,
)

OPERATIONS_DOC = REPO / "docs" / "operations.md"
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}

def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("promtool"), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def alert_names() -> list[str]:
    return re.findall(r"(?m)^\s*- alert:\s*(\w+)\s*$", RULES_FILE.read_text())


def doc_anchors() -> set[str]:
    """GitHub-style anchors of the headings of docs/operations.md."""
    anchors = set()
    for heading in re.findall(r"(?m)^#+\s+(.+?)\s*$", OPERATIONS_DOC.read_text()):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


# ---------------------------------------------------------------------------- Prometheus


@pytest.mark.prometheus
def test_promtool_check_config() -> None:
    result = promtool("check", "config", str(PROMETHEUS_CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout + result.stderr


@pytest.mark.prometheus
def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", str(RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(alert_names())} rules found" in result.stdout


@pytest.mark.prometheus
def test_promtool_test_rules() -> None:
    files = sorted(RULE_TESTS_DIR.glob("*.yml"))
    assert files
    result = promtool("test", "rules", *[f.name for f in files], cwd=RULE_TESTS_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files), result.stdout


@pytest.mark.unit
def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    tests = "\n".join(f.read_text() for f in sorted(RULE_TESTS_DIR.glob("*.yml")))
    cases = re.findall(r"alertname:\s*(\w+)\s*\n\s*exp_alerts:\s*(\[\])?", tests)
    names = alert_names()
    assert len(names) == len(set(names)) >= 16
    for name in names:
        firing = [c for c in cases if c[0] == name and not c[1]]
        quiet = [c for c in cases if c[0] == name and c[1]]
        assert firing, f"{name}: no promtool test where it fires"
        assert quiet, f"{name}: no promtool test where it stays quiet"


@pytest.mark.unit
def test_every_alert_is_documented_with_a_runbook() -> None:
    text = RULES_FILE.read_text()
    anchors = doc_anchors()
    for name in alert_names():
        block = text.split(f"- alert: {name}", 1)[1].split("- alert:", 1)[0]
        assert re.search(r"severity:\s*(critical|warning|info)\b", block), name
        assert "summary:" in block and "description:" in block, name
        runbook = re.search(r'runbook:\s*"docs/operations\.md#([\w-]+)"', block)
        assert runbook and runbook.group(1) == name.lower(), name
        assert runbook.group(1) in anchors, f"{name}: no heading '{name}' in docs/operations.md"


@pytest.mark.unit
def test_rule_names_follow_conventions() -> None:
    text = RULES_FILE.read_text()
    for name in alert_names():
        assert re.fullmatch(r"Streamkm[A-Z][A-Za-z]+", name), name
    for metric in set(re.findall(r"\bstreamkm_\w+", text)):
        assert re.fullmatch(r"streamkm_[a-z0-9_]+", metric), metric


# ---------------------------------------------------------------------------- Grafana


@pytest.mark.unit
def test_dashboard_json_is_file_provisionable() -> None:
    raw = DASHBOARD.read_text()
    dashboard = json.loads(raw)
    assert "__inputs" not in dashboard and "__requires" not in dashboard
    assert "${DS_" not in raw, "import placeholders break file provisioning"
    assert dashboard.get("id") in (None,)
    assert dashboard["uid"] == "streamkm-service"
    assert isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    for var in variables.values():
        if var["type"] == "query":
            assert var["datasource"] == DATASOURCE_REF, var["name"]


@pytest.mark.unit
def test_dashboard_panels_ids_datasources_layout() -> None:
    dashboard = load_dashboard()
    everything = dashboard["panels"] + [p for row in dashboard["panels"]
                                        for p in row.get("panels", [])]
    ids = [p["id"] for p in everything]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {sorted(ids)}"
    panels = dashboard_panels(dashboard)
    assert len(panels) >= 15
    for panel in panels:
        where = f"panel {panel['id']} {panel['title']!r}"
        assert panel["datasource"] == DATASOURCE_REF, where
        assert panel.get("description"), f"{where}: no description"
        assert panel["targets"], f"{where}: no query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), where
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE_REF, f"{where} target {target['refId']}"
            assert target["expr"].strip(), where
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, where


@pytest.mark.unit
def test_dashboard_covers_the_required_views() -> None:
    exprs = "\n".join(t["expr"] for p in dashboard_panels(load_dashboard()) for t in p["targets"])
    for needle in ["rate(streamkm_records_accepted_total", "sum by (reason) (rate("
                   "streamkm_records_rejected_total", "histogram_quantile(0.99, sum by (le) "
                   "(rate(streamkm_batch_processing_seconds_bucket", "streamkm_batch_objective",
                   "streamkm_model_converged", "streamkm_clusters", "streamkm_source_lag_bytes{",
                   "streamkm_source_lag_records{",
                   "time() - streamkm_checkpoint_last_success_timestamp_seconds",
                   "increase(streamkm_cluster_splits_total",
                   "increase(streamkm_cluster_merges_total",
                   "avg_over_time(streamkm_outlier_ratio{", "5 * max by (instance) "
                   "(streamkm_outlier_alpha{",
                   "sum by (instance) (increase(streamkm_outliers_total{",
                   "streamkm_sketch_epoch", "sum by (trigger) (increase(streamkm_resketches_total",
                   "sum by (topic, partition) (streamkm_kafka_consumer_lag_records",
                   "streamkm_kafka_broker_connected", "increase(streamkm_kafka_commits_total",
                   "increase(streamkm_kafka_commit_failures_total",
                   "increase(streamkm_kafka_rebalances_total",
                   "streamkm_leader{", "sum by (job) (streamkm_leader",
                   "streamkm_model_version{", "max by (job) (streamkm_model_version",
                   "sum by (reason) (rate(streamkm_updates_dropped_total",
                   "rate(streamkm_updates_applied_total", "streamkm_updates_lag",
                   "streamkm_model_versions_behind"]:
        assert needle in exprs, needle


@pytest.mark.unit
def test_scaleout_row_covers_every_scaleout_metric() -> None:
    """Every metric of streamkm.scaleout.metrics has a panel in the "Scale-out" row, and
    only that row uses them (the other rows work for single processes too)."""
    from tests.helpers.prometheus_server import (dashboard_queries, metric_names_in,
                                                 row_panels, scaleout_sample_names)

    dashboard = load_dashboard()
    scaleout = scaleout_sample_names()
    row = row_panels(dashboard, "Scale-out")
    used = set().union(*(metric_names_in(e) for _, e in dashboard_queries(dashboard, row)))
    def family(name: str) -> str:
        return re.sub(r"_(total|created|bucket|count|sum)$", "", name)

    shown = {family(n) for n in used & scaleout}
    unshown = sorted({family(n) for n in scaleout} - shown)
    assert not unshown, f"scale-out metrics without a panel: {unshown}"
    row_ids = {p["id"] for p in row}
    for panel in dashboard_panels(dashboard):
        if panel["id"] not in row_ids:
            names = set().union(*(metric_names_in(t["expr"]) for t in panel["targets"]))
            assert not names & scaleout, f"panel {panel['title']!r} outside the Scale-out row"


@pytest.mark.unit
def test_grafana_provisioning_files() -> None:
    datasource = (OPS / "grafana" / "provisioning" / "datasources" / "streamkm.yml").read_text()
    assert re.search(r"(?m)^apiVersion: 1$", datasource)
    assert re.search(r"(?m)^\s+type: prometheus$", datasource)
    scrape = re.search(r"(?m)^\s+scrape_interval:\s*(\S+)", PROMETHEUS_CONFIG.read_text())
    assert scrape and re.search(rf"(?m)^\s+timeInterval:\s*{scrape.group(1)}$", datasource)
    provider = (OPS / "grafana" / "provisioning" / "dashboards" / "streamkm.yml").read_text()
    assert re.search(r"(?m)^apiVersion: 1$", provider)
    assert re.search(r"(?m)^\s+type: file$", provider)
    path = re.search(r"(?m)^\s+path:\s*(\S+)$", provider)
    assert path and path.group(1) in OPERATIONS_DOC.read_text()
    for text in (datasource, provider):
        assert "\t" not in text


# ---------------------------------------------------------------------------- systemd


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(OPS / "systemd" / "streamkm.service")
    return parser


@pytest.mark.unit
def test_systemd_unit_restart_stop_and_hardening() -> None:
    service = _unit()["Service"]
    assert service["ExecStart"].split()[1:3] == ["run", "-c"]
    assert service["Restart"] == "on-failure"
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= 60
    assert service["RestartPreventExitStatus"] == "2"
    # the watchdog is fed by the /healthz check (streamkm.runtime.watchdog)
    assert service["NotifyAccess"] == "main" and service["WatchdogSec"] == "30s"
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict",
                       "PrivateTmp": "yes", "ProtectKernelTunables": "yes"}.items():
        assert service[key] == value, key
    assert "MemoryDenyWriteExecute" not in service, "numba's JIT needs W+X memory"
    assert service["User"] != "root"
    assert _unit()["Install"]["WantedBy"] == "multi-user.target"


@pytest.mark.integration
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    """``systemd-analyze verify`` where systemd is installed (not a Prometheus tool: CI
    machines without systemd only get the static checks above)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    text = (OPS / "systemd" / "streamkm.service").read_text()
    unit = tmp_path / "streamkm.service"
    unit.write_text(re.sub(r"(?m)^ExecStart=\S+", f"ExecStart={sys.executable}", text))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and "streamkm.service" not in result.stderr, result.stderr
