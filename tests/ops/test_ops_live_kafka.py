"""The ops files against a real Prometheus scraping a streamkm service that reads Kafka.

One module-scoped stack: a Tansu broker (a real Kafka-protocol broker, see
``helpers/kafka_broker.py``) behind a TCP proxy that can cut it off, ``streamkm run`` consuming a
3-partition topic in a consumer group and writing assignments, events and dead letters to
topics (so both the consumer and the producer client exist), a producer thread feeding the
topic, and ``prometheus`` running the shipped configuration and rules (target and intervals
changed, 1 s). After a few scrapes:

* every PromQL expression of the dashboard returns data, the Kafka panels included (lag of
  the three partitions, both clients connected, commits, the rebalance that assigned them),
  except the scale-out panels: a single process does not register those metrics, so they
  must return nothing (``test_ops_live_scaleout.py`` runs them),
* every ``streamkm_*`` metric family the service exports is shown by some panel, and every
  metric the dashboard and the rules use is exported,
* every alert rule evaluates without error and stays quiet for this healthy service,
* last, a broker outage (the proxy drops every connection): Prometheus sees both clients
  disconnected, ``StreamkmKafkaBrokerDisconnected`` becomes pending with its labels and
  annotations, and clears once the broker is reachable again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import (
    TansuBroker,
    TcpOutageProxy,
    create_topics,
    latest_checkpoint,
    start_tansu,
)
from tests.helpers.processes import free_port
from tests.helpers.prometheus_server import (
    FILE_SOURCE_METRICS,
    PROMETHEUS_SERIES,
    KafkaStreamkmService,
    PrometheusServer,
    PrometheusStarter,
    dashboard_query_problems,
    dashboard_queries,
    exported_sample_names,
    load_dashboard,
    metric_families,
    metric_names_in,
    rule_problems,
    scaleout_metrics_in_ops_files,
    substitute_grafana_variables,
    unhealthy_rules,
    wait_for,
    wait_until_rules_evaluated,
)

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.prometheus]

TOPIC = "ops-features"
PARTITIONS = 3
#: Lag of a consumer fed in 0.1 s bursts jitters, so a short-range derivative can be
#: positive: these are only checked to be valid queries.
UNDETERMINED = {"StreamkmSourceLagGrowing", "StreamkmKafkaConsumerLagGrowing"}
#: Registered only by scale-out processes (``test_ops_live_scaleout.py``).
SCALEOUT_METRICS = scaleout_metrics_in_ops_files()


class KafkaStack:
    def __init__(self, broker: TansuBroker, proxy: TcpOutageProxy,
                 service: KafkaStreamkmService, prometheus: PrometheusServer) -> None:
        self.broker = broker
        self.proxy = proxy
        self.proxy_cut = False
        self.service = service
        self.prometheus = prometheus
        self.metrics_text = ""

    def alive(self) -> str | None:
        return self.service.dead() or self.prometheus.dead()

    def value(self, expr: str) -> float:
        result = self.prometheus.query(substitute_grafana_variables(expr))
        assert len(result) == 1, f"{expr}: {result}"
        return float(result[0]["value"][1])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory,
          start_prometheus: PrometheusStarter) -> Iterator[KafkaStack]:
    root: Path = tmp_path_factory.mktemp("ops_live_kafka")
    proxy_port = free_port()
    broker = start_tansu(root / "tansu.log", advertised_port=proxy_port)
    proxy = TcpOutageProxy(proxy_port, broker.port).start()
    bootstrap = f"127.0.0.1:{proxy_port}"
    service = KafkaStreamkmService(root / "service", bootstrap, TOPIC)
    prometheus: PrometheusServer | None = None
    s: KafkaStack | None = None
    try:
        create_topics(bootstrap, {TOPIC: PARTITIONS, f"{TOPIC}-out-assignments": PARTITIONS,
                                  f"{TOPIC}-out-events": 1, f"{TOPIC}-out-dlq": 1})
        service.start()
        prometheus = start_prometheus(service.target)
        s = KafkaStack(broker, proxy, service, prometheus)
        service.start_producing()

        def enough_scrapes() -> bool:
            # >= 6 scrapes with records flowing, a checkpoint and an offset commit in the
            # window, lag known for every partition, both clients connected.
            return bool(prometheus.query(
                "count_over_time(streamkm_records_accepted_total[1m]) >= 6"
                " and rate(streamkm_records_accepted_total[1m]) > 0"
                " and on () increase(streamkm_checkpoints_total[1m]) > 0"
                " and on () increase(streamkm_kafka_commits_total[1m]) > 0"
                f" and on () count(streamkm_kafka_consumer_lag_records) == {PARTITIONS}"
                " and on () count(streamkm_kafka_broker_connected == 1) == 2"
                " and on () count(streamkm_cluster_records) > 0"))

        wait_for(enough_scrapes, 90, "6 scrapes of a busy Kafka-source service", s.alive,
                 interval=0.5)
        s.metrics_text = service.scrape()
        yield s
    finally:
        if s is not None and s.proxy_cut:
            proxy.restore()
        if prometheus is not None:
            prometheus.stop()
        code = service.stop()
        proxy.cut()
        broker.stop()
    assert code == 0, f"streamkm exited with {code} on SIGTERM"


def test_shipped_scrape_config_target_is_up(stack: KafkaStack) -> None:
    targets = stack.prometheus.api("targets")["activeTargets"]
    assert [(t["labels"]["job"], t["health"]) for t in targets] == [("streamkm", "up")], targets


# ---------------------------------------------------------------------------- dashboard


def test_every_dashboard_expression_returns_data(stack: KafkaStack) -> None:
    """All of them, Kafka panels included: a Kafka-source service exports every metric
    (the drift and sketch counters at 0) but the scale-out ones, whose panels are empty."""
    exported = exported_sample_names(stack.metrics_text) | PROMETHEUS_SERIES
    assert not exported & SCALEOUT_METRICS, "a single process registers scale-out metrics"
    failures = dashboard_query_problems(stack.prometheus, exported,
                                        SCALEOUT_METRICS | FILE_SOURCE_METRICS)
    assert not failures, "dashboard queries failing:\n  " + "\n  ".join(failures)


def test_kafka_panels_show_the_consumer_group(stack: KafkaStack) -> None:
    q = stack.prometheus.query
    lag = q(substitute_grafana_variables(
        'sum by (topic, partition) (streamkm_kafka_consumer_lag_records'
        '{job=~"$job", instance=~"$instance"})'))
    assert sorted((r["metric"]["topic"], r["metric"]["partition"]) for r in lag) == [
        (TOPIC, str(p)) for p in range(PARTITIONS)]
    assert all(float(r["value"][1]) >= 0 for r in lag)
    assert not q("streamkm_source_lag_bytes")  # a Kafka source's lag is in records
    source_lag = q("streamkm_source_lag_records")
    assert sorted(r["metric"]["partition"] for r in source_lag) == [
        f"{TOPIC}:{p}" for p in range(PARTITIONS)]
    connected = {r["metric"]["client"]: float(r["value"][1])
                 for r in q("streamkm_kafka_broker_connected")}
    assert connected == {"consumer": 1.0, "producer": 1.0}
    assert stack.value('sum(increase(streamkm_kafka_commits_total{job=~"$job"}'
                       '[$__rate_interval]))') > 0
    assert stack.value("streamkm_kafka_commit_failures_total") == 0
    assert stack.value("streamkm_kafka_rebalances_total") >= 1
    assert stack.value('sum(rate(streamkm_records_accepted_total[$__rate_interval]))') > 0


def test_every_exported_metric_is_on_the_dashboard(stack: KafkaStack) -> None:
    """A new metric needs a panel: every ``streamkm_*`` family of a live scrape of a service
    that has them all (file and Kafka metrics) is used by some dashboard query."""
    used = set().union(*(metric_names_in(expr) for _, expr in dashboard_queries(
        load_dashboard())))
    families = {f: names for f, names in metric_families(stack.metrics_text).items()
                if f.startswith("streamkm_")}
    assert len(families) >= 27
    unshown = sorted(f for f, names in families.items() if not names & used)
    assert not unshown, f"metrics exported but shown by no panel: {unshown}"


# ---------------------------------------------------------------------------- alert rules


def test_rules_evaluate_and_stay_quiet(stack: KafkaStack) -> None:
    wait_until_rules_evaluated(stack.prometheus, stack.alive)
    assert not unhealthy_rules(stack.prometheus)
    exported = exported_sample_names(stack.metrics_text) | PROMETHEUS_SERIES
    problems = rule_problems(stack.prometheus, exported, expected_active=set(),
                             undetermined=UNDETERMINED,
                             not_registered=SCALEOUT_METRICS | FILE_SOURCE_METRICS)
    assert not problems, "\n".join(problems)
    active = [a["labels"]["alertname"] for a in stack.prometheus.api("alerts")["alerts"]
              if a["labels"]["alertname"] not in UNDETERMINED]
    assert not active, active


def test_broker_outage_is_seen_and_alerted(stack: KafkaStack) -> None:
    """Runs last (it cuts the broker off): the consumer's connection gauge drops in
    Prometheus, the alert's expression holds (pending: 5m ``for``) with its labels and
    annotations, and both clear once the broker is back. (The consumer polls all the time,
    so it notices at once; an idle producer notices only when it next talks to the broker,
    which is not timed here.)"""
    stack.service.stop_producing()
    # Drained first: with output still unacknowledged, a checkpoint would wait for the
    # producer flush (sinks.flush_timeout_ms, 30 s) and delay every metric update.
    wait_for(lambda: latest_checkpoint(stack.service.workdir).counters.get("records_read", 0)
             >= stack.service.produced, 30, "a checkpoint holding every produced record",
             stack.alive)
    stack.proxy.cut()
    stack.proxy_cut = True

    def disconnected() -> set[str]:
        return {r["metric"]["client"] for r in
                stack.prometheus.query("streamkm_kafka_broker_connected == 0")}

    def pending() -> list[dict]:
        return [a for a in stack.prometheus.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "StreamkmKafkaBrokerDisconnected"
                and a["labels"]["client"] == "consumer"]

    wait_for(lambda: "consumer" in disconnected(), 30,
             "Prometheus to see the Kafka consumer disconnected", stack.alive, interval=0.2)
    (alert,) = wait_for(pending, 15, "StreamkmKafkaBrokerDisconnected to be pending",
                        stack.alive)
    target = stack.service.target
    assert alert["state"] == "pending"
    assert alert["labels"] == {"alertname": "StreamkmKafkaBrokerDisconnected",
                               "job": "streamkm", "instance": target, "client": "consumer",
                               "severity": "critical"}
    assert alert["annotations"]["summary"] == (
        f"streamkm {target}: Kafka consumer has no broker connection")
    assert alert["annotations"]["runbook"] == "docs/operations.md#streamkmkafkabrokerdisconnected"

    stack.proxy.restore()
    stack.proxy_cut = False
    wait_for(lambda: not disconnected() and not pending(), 30,
             "the clients to reconnect and the alert to clear", stack.alive, interval=0.2)
