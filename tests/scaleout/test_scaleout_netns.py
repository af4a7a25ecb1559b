"""Scale-out across real network faults: two ``streamkm run`` processes, each in a Linux
network namespace the test creates, reach the real (Tansu) broker through their own veth
link (``netns_lab``). Every test ends with the global model counting every valid record
exactly once and clustering within 0.02 ARI of one process that read everything.

* a slow link (``tbf``: rate and queueing latency) in front of one member;
* a worker's link silently cut for 20 s (no FIN, no RST): the worker reports the outage
  (``streamkm_kafka_broker_connected{client="scaleout"}`` 0 and ``kafka_broker_unavailable``)
  within a bounded time, its partitions move to the other member, and it comes back;
* the leader's link silently cut for 20 s: the other member takes the leader role over
  (claims it on the updates topic); the cut leader gives the role up and, healed, publishes
  no version after its successor's first one (one leadership move).

Needs root and iproute2 (CI runs as root); skipped with the reason otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import (TansuBroker, owned_partitions as owned,
                                        published_versions, start_tansu)
from tests.helpers.processes import kill, log_events, stop, wait_until
from tests.helpers.netns_lab import NetnsLab, unavailable
from tests.scaleout.test_scaleout_kafka import (
    ModelTopic,
    assert_quality_of_one_process,
    leaders,
    n_valid,
    produce_range,
    scaleout_configs,
    wait_for_exact_count,
)

from streamkm.scaleout.leader import ModelVersion

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.netns,
              pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

METRICS_PORT = 9464
CUT_S = 20.0
#: A silent cut must show as an outage within this long (probe every 1 s, 3 s timeout,
#: plus a loaded machine's scheduling).
DETECTION_BOUND_S = 10.0
CONNECTED = re.compile(r'^streamkm_kafka_broker_connected\{client="scaleout"\} (\S+)$', re.M)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NetnsLab, TansuBroker]]:
    """Namespaces ``a`` and ``b`` and a broker on the lab's address."""
    lab = NetnsLab()
    broker = None
    try:
        lab.add("a")
        lab.add("b")
        broker = start_tansu(tmp_path_factory.mktemp("tansu") / "tansu.log",
                             host=lab.broker_host)
        yield lab, broker
    finally:
        if broker is not None:
            broker.stop()
        lab.close()


class Group:
    """The two members of one test, each in its namespace."""

    def __init__(self, lab: NetnsLab, broker: TansuBroker, tmp: Path, prefix: str) -> None:
        self.lab, self.prefix = lab, prefix
        self.bootstrap = broker.bootstrap
        self.configs = scaleout_configs(tmp, broker.bootstrap, prefix, "ab",
                                        metrics_port=METRICS_PORT, publish_interval_ms=300)
        self.logs = {m: c.parent / "service.log" for m, c in self.configs.items()}
        self.procs = {m: lab.popen(m, [sys.executable, "-m", "streamkm.cli", "run", "-c",
                                       str(c)], self.logs[m])
                      for m, c in self.configs.items()}
        self.model_topic = (broker.bootstrap, f"{prefix}-model")
        self.model = ModelTopic(*self.model_topic)

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return list(self.procs.values())

    def connected(self, member: str) -> float | None:
        """``streamkm_kafka_broker_connected{client="scaleout"}`` of ``member``."""
        try:
            match = CONNECTED.search(self.lab.scrape(member, METRICS_PORT))
        except (RuntimeError, subprocess.TimeoutExpired):
            return None
        return float(match.group(1)) if match else None

    def wait_learning(self, count: int) -> None:
        wait_until(lambda: self.model.count() >= count and leaders(self.logs)
                   and all(owned(log) for log in self.logs.values()), 120,
                   "both members owning partitions under a leader", self.alive(),
                   interval=0.2)

    def cut_and_watch(self, member: str) -> float:
        """Cut ``member``'s link for :data:`CUT_S` seconds; the seconds until its metric
        showed the outage (checked through its namespace's loopback)."""
        self.lab.cut(member)
        t0 = time.monotonic()
        detected = None
        while time.monotonic() - t0 < CUT_S:
            if detected is None and self.connected(member) == 0:
                detected = time.monotonic() - t0
            time.sleep(0.25)
        self.lab.heal(member)
        assert detected is not None, f"{member}'s silent cut was never shown as an outage"
        return detected

    def finish(self, n: int) -> ModelVersion:
        """Wait for the exact count of ``n`` records, stop both members gracefully."""
        wait_for_exact_count(self.model, n_valid(n), self.alive(), timeout=120)
        for proc in self.procs.values():
            assert stop(proc) == 0
        version = self.model.latest
        assert version is not None
        assert version.counters["records_applied"] == n_valid(n)
        assert version.counters["updates_dropped"]["gap"] == 0
        return version

    def close(self) -> None:
        for proc in self.procs.values():
            kill(proc)
        self.model.close()


def events(log: Path, name: str) -> list[dict[str, object]]:
    return [e for e in log_events(log) if e.get("event") == name]


def test_slow_link_counts_exact(lab: tuple[NetnsLab, TansuBroker], tmp_path: Path) -> None:
    netns, broker = lab
    netns.shape("b", rate="8mbit", latency="100ms")
    group = Group(netns, broker, tmp_path, "ns-slow")
    try:
        produce_range(broker.bootstrap, "ns-slow", 0, 2500)
        group.wait_learning(300)
        produce_range(broker.bootstrap, "ns-slow", 2500, 4000)
        version = group.finish(4000)
    finally:
        group.close()
        netns.unshape("b")
    worked = {m: sum(int(e.get("records_accepted", 0))  # type: ignore[call-overload]
                     for e in events(log, "service_stopped"))
              for m, log in group.logs.items()}
    assert worked["b"] > 0, worked  # the member behind the slow link did its share
    assert_quality_of_one_process(version, 4000, group.model_topic)


def partition_mid_stream(group: Group, prefix: str, victim_of: dict[str, str]
                         ) -> tuple[str, str, float, ModelVersion]:
    """Learn from 2000 records; cut ``victim_of[leader]``'s link for 20 s while 1000 more
    arrive (its outage must show within :data:`DETECTION_BOUND_S`); heal, wait until it
    reconnected, add 1000 more and finish. Returns the leader before the cut, the victim,
    the cut's wall-clock time and the final version."""
    produce_range(group.bootstrap, prefix, 0, 2000)
    group.wait_learning(500)
    leader = leaders(group.logs)[-1][1]
    victim = victim_of[leader]
    cut_at = time.time()
    produce_range(group.bootstrap, prefix, 2000, 3000)
    assert group.cut_and_watch(victim) <= DETECTION_BOUND_S
    wait_until(lambda: group.connected(victim) == 1, 60, f"{victim} reconnecting",
               group.alive(), interval=0.5)
    produce_range(group.bootstrap, prefix, 3000, 4000)
    return leader, victim, cut_at, group.finish(4000)


def test_worker_partitioned_for_20s(lab: tuple[NetnsLab, TansuBroker], tmp_path: Path) -> None:
    netns, broker = lab
    group = Group(netns, broker, tmp_path, "ns-worker")
    try:
        leader, victim, cut_at, version = partition_mid_stream(
            group, "ns-worker", {"a": "b", "b": "a"})
    finally:
        group.close()
    outage = [e for e in events(group.logs[victim], "kafka_broker_unavailable")
              if float(e["ts"]) >= cut_at]  # type: ignore[arg-type]
    assert outage and float(outage[0]["ts"]) - cut_at <= DETECTION_BOUND_S + 2  # type: ignore
    assert events(group.logs[victim], "kafka_broker_connected")
    assert [m for _, m in leaders(group.logs)] == [leader]  # the leader never moved
    assert_quality_of_one_process(version, 4000, group.model_topic)


def test_leader_partitioned_for_20s(lab: tuple[NetnsLab, TansuBroker], tmp_path: Path) -> None:
    netns, broker = lab
    group = Group(netns, broker, tmp_path, "ns-leader")
    try:
        old, _, cut_at, version = partition_mid_stream(group, "ns-leader", {"a": "a", "b": "b"})
    finally:
        group.close()
    new = "b" if old == "a" else "a"
    # the other member took over during the cut, and kept the role after the heal
    confirmed = events(group.logs[new], "scaleout_leader_confirmed")
    assert confirmed and float(confirmed[0]["ts"]) < cut_at + CUT_S + 2  # type: ignore[arg-type]
    assert [m for _, m in leaders(group.logs)] == [old, new]  # one move, none back
    # the old leader learnt it was replaced, whichever it noticed first: its eviction from
    # the leader group (not_elected), the cut itself (cut_off) or its successor's claim on
    # the updates topic (fenced)
    assert (events(group.logs[old], "scaleout_leader_fenced")
            or events(group.logs[old], "scaleout_leader_stepped_down"))
    # fenced: the old leader published nothing after its successor's first version
    publishers = [(v.version, v.leader)
                  for v in published_versions(broker.bootstrap, "ns-leader-model")]
    first_new = min(v for v, p in publishers if p == new)
    assert not [v for v, p in publishers if p == old and v > first_new]
    assert version.leader == new and version.leadership.member == new
    assert_quality_of_one_process(version, 4000, group.model_topic)
