"""The ops files against a real Prometheus scraping two scale-out processes on a real broker.

One module-scoped stack: a Tansu broker (a real Kafka-protocol broker, see
``helpers/kafka_broker.py``), two ``streamkm run`` processes with ``[scaleout] enabled = true``
(members ``a`` and ``b``, as in ``test_scaleout_kafka.py``) sharing the consumer group of a
3-partition topic, each serving metrics on a free loopback port, a producer thread feeding
the topic, and ``prometheus`` running the shipped configuration and rules (only the targets,
both processes, and the intervals, 1 s, changed). Once one process leads, both adopt model
versions and Prometheus has a few scrapes:

* every PromQL expression of the dashboard's "Scale-out" row returns data (and every other
  expression of the dashboard is a valid query on exported metrics that returns data too),
* the Leader panel shows exactly one leader (the process whose log says it was elected),
  the Leaders stat shows 1, model versions and versions behind are real numbers,
* every ``streamkm_*`` metric family either process exports is shown by some panel,
* every alert rule evaluates without error and stays quiet for this healthy group.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import create_topics, start_tansu
from tests.helpers.processes import count_events
from tests.helpers.prometheus_server import (
    FILE_SOURCE_METRICS,
    PROMETHEUS_SERIES,
    KafkaStreamkmService,
    PrometheusServer,
    PrometheusStarter,
    TopicProducer,
    alerting_rules,
    dashboard_queries,
    dashboard_query_problems,
    exported_sample_names,
    load_dashboard,
    metric_families,
    metric_names_in,
    row_panels,
    rule_problems,
    scaleout_sample_names,
    substitute_grafana_variables,
    unhealthy_rules,
    wait_for,
    wait_until_rules_evaluated,
)

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.prometheus]

TOPIC = "ops-scaleout"
PARTITIONS = 3
MEMBERS = ("a", "b")
#: Lag of a consumer fed in 0.1 s bursts jitters, so a short-range derivative can be
#: positive: these are only checked to be valid queries.
UNDETERMINED = {"StreamkmSourceLagGrowing", "StreamkmKafkaConsumerLagGrowing"}


def scaleout_section(member: str) -> str:
    return f"""[scaleout]
enabled = true
updates_topic = "{TOPIC}-updates"
model_topic = "{TOPIC}-model"
coordination_topic = "{TOPIC}-coord"
member_id = "{member}"
publish_every_updates = 12
publish_interval_ms = 150
"""


class ScaleoutStack:
    def __init__(self, services: dict[str, KafkaStreamkmService], producer: TopicProducer,
                 prometheus: PrometheusServer) -> None:
        self.services = services
        self.producer = producer
        self.prometheus = prometheus
        self.metrics_texts: dict[str, str] = {}

    def alive(self) -> str | None:
        for member, service in self.services.items():
            if dead := service.dead():
                return f"member {member}: {dead}"
        return self.producer.failed() or self.prometheus.dead()

    def exported(self) -> set[str]:
        return set().union(*(exported_sample_names(t) for t in self.metrics_texts.values())
                           ) | PROMETHEUS_SERIES

    def query(self, expr: str) -> list[dict]:
        return self.prometheus.query(substitute_grafana_variables(expr))


def panel(title: str) -> dict:
    (found,) = [p for p in row_panels(load_dashboard(), "Scale-out") if p["title"] == title]
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory,
          start_prometheus: PrometheusStarter) -> Iterator[ScaleoutStack]:
    root: Path = tmp_path_factory.mktemp("ops_live_scaleout")
    broker = start_tansu(root / "tansu.log")
    bootstrap = broker.bootstrap
    services = {m: KafkaStreamkmService(root / m, bootstrap, TOPIC,
                                        extra_config=scaleout_section(m)) for m in MEMBERS}
    producer = TopicProducer(bootstrap, TOPIC, rate=200.0, partitions=PARTITIONS)
    prometheus: PrometheusServer | None = None
    codes: dict[str, int | None] = {}
    try:
        create_topics(bootstrap, {TOPIC: PARTITIONS, f"{TOPIC}-out-assignments": PARTITIONS,
                                  f"{TOPIC}-out-events": 1, f"{TOPIC}-out-dlq": 1})
        for service in services.values():
            service.launch()
        for service in services.values():
            service.wait_listening()
        prometheus = start_prometheus([s.target for s in services.values()])
        s = ScaleoutStack(services, producer, prometheus)
        producer.start()

        def ready() -> bool:
            # Both targets up with >= 6 scrapes each, both reading records and on a model
            # version, one leader applying updates and publishing versions.
            return bool(prometheus.query(
                'count(up{job="streamkm"} == 1) == 2'
                " and on () count(count_over_time(streamkm_model_version[1m]) >= 6) == 2"
                " and on () count(streamkm_model_version >= 0) == 2"
                " and on () count(rate(streamkm_records_read_total[1m]) > 0) == 2"
                " and on () count(streamkm_leader == 1) == 1"
                " and on () sum(rate(streamkm_updates_sent_total[1m])) > 0"
                " and on () sum(rate(streamkm_updates_applied_total[1m])) > 0"
                " and on () sum(rate(streamkm_model_versions_published_total[1m])) > 0"
                # the per-cluster series appear after the first batches on a model
                " and on () count(streamkm_cluster_records) > 0"))

        wait_for(ready, 60, "one leader and two busy scale-out processes in Prometheus",
                 s.alive, interval=0.5)
        s.metrics_texts = {m: service.scrape() for m, service in services.items()}
        yield s
    finally:
        producer.stop(check=False)
        if prometheus is not None:
            prometheus.stop()
        for service in services.values():
            service.request_stop()  # both at once: each waits for the other's group exit
        for member, service in services.items():
            codes[member] = service.stop()
        broker.stop()
    assert all(code == 0 for code in codes.values()), f"exit codes on SIGTERM: {codes}"


def test_both_scrape_targets_are_up(stack: ScaleoutStack) -> None:
    targets = stack.prometheus.api("targets")["activeTargets"]
    assert sorted((t["labels"]["job"], t["labels"]["instance"], t["health"]) for t in targets) \
        == sorted(("streamkm", s.target, "up") for s in stack.services.values()), targets


# ---------------------------------------------------------------------------- dashboard


def test_every_scaleout_panel_expression_returns_data(stack: ScaleoutStack) -> None:
    exported = stack.exported()
    scaleout = scaleout_sample_names()
    assert scaleout <= exported | {n for n in scaleout if n.endswith("_created")}
    queries = dashboard_queries(load_dashboard(), row_panels(load_dashboard(), "Scale-out"))
    assert len(queries) >= 12
    for where, expr in queries:
        assert metric_names_in(expr) & scaleout, f"{where}: no scale-out metric in {expr!r}"
    failures = dashboard_query_problems(stack.prometheus, exported, queries=queries)
    assert not failures, "scale-out panel queries failing:\n  " + "\n  ".join(failures)


def test_rest_of_the_dashboard_is_valid_for_scaleout_processes(stack: ScaleoutStack) -> None:
    """Scale-out processes export every metric (Kafka ones too, and the service metrics a
    single process sets: source lag, batch latency and objective): every other expression is
    a valid query on exported metrics and returns data as well."""
    assert {"streamkm_source_lag_records", "streamkm_batch_objective",
            "streamkm_batch_processing_seconds_count"} <= stack.exported()
    failures = dashboard_query_problems(stack.prometheus, stack.exported(), FILE_SOURCE_METRICS)
    assert not failures, "dashboard queries failing:\n  " + "\n  ".join(failures)


def test_leader_panel_shows_exactly_one_leader(stack: ScaleoutStack) -> None:
    (target,) = panel("Leader")["targets"]
    rows = stack.query(target["expr"])
    by_member = {r["metric"]["member"]: (r["metric"]["instance"], float(r["value"][1]))
                 for r in rows}
    assert sorted(by_member) == sorted(MEMBERS), rows
    leaders = [m for m, (_, value) in by_member.items() if value == 1]
    assert len(leaders) == 1 and all(v in (0, 1) for _, v in by_member.values()), by_member
    (leader,) = leaders
    assert by_member[leader][0] == stack.services[leader].target
    assert count_events(stack.services[leader].log_path, "scaleout_leader_elected") >= 1
    (stat,) = panel("Leaders")["targets"]
    assert [(r["metric"].get("job"), float(r["value"][1])) for r in stack.query(stat["expr"])] \
        == [("streamkm", 1.0)]


def test_model_version_panels_show_numbers(stack: ScaleoutStack) -> None:
    versions = {r["metric"]["instance"]: float(r["value"][1])
                for r in stack.query(panel("Model version")["targets"][0]["expr"])}
    assert sorted(versions) == sorted(s.target for s in stack.services.values())
    assert all(v >= 0 for v in versions.values()), versions
    behind = {r["metric"]["instance"]: float(r["value"][1]) for r in stack.query(
        panel("Versions behind the newest model")["targets"][0]["expr"])}
    assert behind.keys() == versions.keys() and all(v >= 0 for v in behind.values()), behind
    assert min(behind.values()) == 0
    backlog = stack.query(panel("Leader backlog")["targets"][0]["expr"])
    assert len(backlog) == 1 and float(backlog[0]["value"][1]) >= 0, backlog
    applied = stack.query('sum(rate(streamkm_updates_applied_total[$__rate_interval]))')
    assert float(applied[0]["value"][1]) > 0
    dropped = {r["metric"]["reason"] for r in stack.query(
        panel("Updates dropped by reason / s")["targets"][0]["expr"])}
    assert dropped == {"stale_generation", "duplicate", "gap", "corrupt"}
    apply_p50 = stack.query(panel("Leader apply / publish latency")["targets"][0]["expr"])
    assert 0 < float(apply_p50[0]["value"][1]) < 10 and not math.isnan(
        float(apply_p50[0]["value"][1]))


def test_every_exported_metric_is_on_the_dashboard(stack: ScaleoutStack) -> None:
    """A new metric needs a panel: every ``streamkm_*`` family either scale-out process
    exports (scale-out, Kafka and service metrics; families declared without samples
    left out) is used by some dashboard query."""
    used = set().union(*(metric_names_in(expr) for _, expr in dashboard_queries(
        load_dashboard())))
    families: dict[str, set[str]] = {}
    for text in stack.metrics_texts.values():
        for family, names in metric_families(text).items():
            if family.startswith("streamkm_") and names:
                families.setdefault(family, set()).update(names)
    assert {"streamkm_leader", "streamkm_model_version", "streamkm_updates_dropped_total",
            "streamkm_leader_apply_seconds", "streamkm_scaleout_member_info",
            "streamkm_kafka_consumer_lag_records", "streamkm_records_read_total"} <= set(families)
    unshown = sorted(f for f, names in families.items() if not names & used)
    assert not unshown, f"metrics exported but shown by no panel: {unshown}"


# ---------------------------------------------------------------------------- alert rules


def test_rules_evaluate_and_stay_quiet(stack: ScaleoutStack) -> None:
    names = {r["name"] for r in alerting_rules(stack.prometheus)}
    assert {"StreamkmScaleoutNoLeader", "StreamkmScaleoutSplitBrain",
            "StreamkmScaleoutWorkerBehind", "StreamkmScaleoutLeaderBehind",
            "StreamkmScaleoutUpdatesDropped"} <= names
    wait_until_rules_evaluated(stack.prometheus, stack.alive)
    assert not unhealthy_rules(stack.prometheus)
    # While the members join, one may own no partition yet (StreamkmNoRecords pending) or a
    # client may not have connected yet (StreamkmKafkaBrokerDisconnected pending): the rules
    # must go quiet once the group is healthy, within a deadline.
    deadline = time.monotonic() + 60
    while True:
        problems = rule_problems(stack.prometheus, stack.exported(), expected_active=set(),
                                 undetermined=UNDETERMINED, not_registered=FILE_SOURCE_METRICS)
        active = [a["labels"]["alertname"] for a in stack.prometheus.api("alerts")["alerts"]
                  if a["labels"]["alertname"] not in UNDETERMINED]
        if (not problems and not active) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert not problems, "\n".join(problems)
    assert not active, active
