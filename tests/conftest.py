"""Fixtures for what the tests start, and the rule that every test says what it needs.

Every test carries at least one category marker (registered in pyproject.toml):

- ``unit``: in-process and fast; no broker, no Prometheus, no subprocess, no network;
- ``integration``: starts real processes (``streamkm run``/``demo``, the console script,
  ``systemd-analyze``) but needs no broker and no Prometheus;
- ``kafka``: uses a Tansu broker; ``prometheus``: uses the real Prometheus or promtool;
- ``slow``: long (quality, recovery, live stacks); combined with the others;
- ``netns``: creates Linux network namespaces (root); combined with the others.

Modules set them with ``pytestmark``; collection fails when a test has none, or is marked both
``unit`` and ``slow`` (a slow in-process test is ``slow`` only: ``-m unit`` stays fast).

Parallel runs (``scripts/test.sh``: ``-n 4``, pytest-xdist): each test runs in one of several
worker processes, beside the tests of the others (:mod:`tests.helpers.parallel`). A test must

- listen only on ports from :func:`tests.helpers.processes.free_port` (each worker has its own
  block, below the kernel's ephemeral range) or ``port = 0``, never on a fixed port of the
  root network namespace (inside a namespace the test creates, any port);
- write only under ``tmp_path``, never into the checkout; give any global resource it
  creates (network namespace, address) a random part in its name;
- use its own topics and groups on the ``kafka_broker`` fixture (one broker per worker);
- wait for conditions with deadlines, never on fixed sleeps (the machine is shared);
- if it shares state with other tests that must not run at the same time, carry
  ``pytest.mark.xdist_group("name")``: the tests of a group run on one worker, one after
  the other (the tests of a module with a module- or class-scoped fixture are one group);
- if its timing bounds do not hold beside other load, carry ``pytest.mark.alone``: it runs
  while no other test runs (``netns`` tests are alone and one group already).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.helpers.kafka_broker import TansuBroker, create_topics, start_tansu
from tests.helpers.processes import ServiceStarter, kill, start_service
from tests.helpers.prometheus_server import (
    PrometheusServer,
    PrometheusStarter,
    scrape_config_for_target,
)

pytest_plugins = ["tests.helpers.parallel"]

CATEGORY_MARKERS = ("unit", "integration", "kafka", "prometheus", "slow")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Fail the run when a collected test has no category marker, or is both ``unit`` and
    ``slow`` (see the docstring)."""
    unmarked = [item.nodeid for item in items
                if not any(item.get_closest_marker(name) for name in CATEGORY_MARKERS)]
    if unmarked:
        raise pytest.UsageError(
            f"{len(unmarked)} test(s) have none of the markers {', '.join(CATEGORY_MARKERS)}; "
            f"set pytestmark = pytest.mark.unit (or the right one) in their module: "
            + ", ".join(unmarked[:20]) + (" ..." if len(unmarked) > 20 else ""))
    slow_units = [item.nodeid for item in items
                  if item.get_closest_marker("unit") and item.get_closest_marker("slow")]
    if slow_units:
        raise pytest.UsageError(
            f"{len(slow_units)} test(s) are marked both unit (fast) and slow; "
            f"mark a slow in-process test slow only: " + ", ".join(slow_units[:20]))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """One in-memory Tansu broker on a free loopback port for the whole session (tests use
    their own topics and groups). Tests that cut the broker start their own with
    :func:`~tests.helpers.kafka_broker.start_tansu`."""
    broker = start_tansu(tmp_path_factory.mktemp("tansu") / "tansu.log")
    try:
        create_topics(broker.bootstrap, {"streamkm-probe": 1})  # the broker answers
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def service_process() -> Iterator[ServiceStarter]:
    """Start ``streamkm`` subprocesses: ``service_process(config, log, command="run",
    args=(), cwd=None)`` (see :func:`~tests.helpers.processes.start_service`). Every process
    started is killed at teardown if the test left it running."""
    started: list[subprocess.Popen[bytes]] = []

    def start(config: Path, log: Path, *, command: str = "run", args: Sequence[str] = (),
              cwd: Path | None = None) -> subprocess.Popen[bytes]:
        proc = start_service(config, log, command=command, args=args, cwd=cwd)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        kill(proc)


@pytest.fixture(scope="module")
def start_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusStarter]:
    """Start a real Prometheus with the shipped configuration and rules, scraping the given
    ``host:port`` target(s) every second: ``start_prometheus(targets)`` returns the ready
    :class:`~tests.helpers.prometheus_server.PrometheusServer`. Stopped at the end of the
    module (tests may stop it earlier)."""
    started: list[PrometheusServer] = []

    def start(targets: str | Sequence[str]) -> PrometheusServer:
        workdir = tmp_path_factory.mktemp("prometheus")
        server = PrometheusServer(scrape_config_for_target(workdir, targets), workdir)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
