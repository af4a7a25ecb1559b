"""The dashboard's annotation queries, evaluated by promtool on synthetic series: the
process-start annotation marks every start of a process, a restart after a long outage and
the first start included, and nothing in between."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.prometheus_server import (
    load_dashboard,
    require_binary,
    substitute_grafana_variables,
)

DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}


def annotation(name: str) -> dict:
    (found,) = [a for a in load_dashboard()["annotations"]["list"] if a.get("name") == name]
    return found


@pytest.mark.unit
def test_annotations_query_the_dashboard_data_source() -> None:
    queries = [a for a in load_dashboard()["annotations"]["list"] if "expr" in a]
    assert {a["name"] for a in queries} >= {"Cluster splits", "Cluster merges", "Model woke",
                                             "Process starts"}
    for entry in queries:
        assert entry["datasource"] == DATASOURCE_REF, entry["name"]
        assert 'job=~"$job"' in entry["expr"] and 'instance=~"$instance"' in entry["expr"]
        assert entry["tagKeys"] == "instance" and entry["enable"], entry["name"]


@pytest.mark.prometheus
def test_process_start_annotation_marks_every_start(tmp_path: Path) -> None:
    expr = substitute_grafana_variables(annotation("Process starts")["expr"])
    # a: started at 0 s, down from minute 10 to 15 (scrapes fail), restarted at 900 s.
    # b: started long before the window (an hour before time 0), never restarted.
    series = [{"series": 'process_start_time_seconds{job="streamkm", instance="a:9108"}',
               "values": "0x9 _x4 900x10"},
              {"series": 'process_start_time_seconds{job="streamkm", instance="b:9108"}',
               "values": "-3600x24"}]
    started = [{"labels": '{job="streamkm", instance="a:9108"}', "value": 0}]
    tests = [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": expr, "eval_time": "0m", "exp_samples": started},
        {"expr": expr, "eval_time": "5m", "exp_samples": []},
        {"expr": expr, "eval_time": "15m",
         "exp_samples": [{"labels": '{job="streamkm", instance="a:9108"}', "value": 0}]},
        {"expr": expr, "eval_time": "20m", "exp_samples": []},
    ]}]
    test_file = tmp_path / "annotations_test.yml"  # JSON is YAML
    test_file.write_text(json.dumps({"evaluation_interval": "1m", "tests": tests}))
    result = subprocess.run([require_binary("promtool"), "test", "rules", test_file.name],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
