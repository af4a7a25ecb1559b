"""The process's HTTP listener: routes by path, ``/metrics`` serves the registry, an unknown
path is a 404 (never the metrics page), and it listens on loopback by default."""

from __future__ import annotations


import pytest
from prometheus_client import CollectorRegistry, Counter

from streamkm.config.schema import MetricsConfig
from streamkm.runtime.http import (
    HttpRequest,
    HttpResponse,
    HttpRouter,
    metrics_handler,
    start_http_server,
)
from tests.helpers.http import get

pytestmark = pytest.mark.unit


@pytest.fixture
def served() -> tuple[HttpRouter, str]:
    registry = CollectorRegistry()
    Counter("demo_things", "Things.", registry=registry).inc(3)
    router = HttpRouter()
    router.add("/metrics", metrics_handler(registry))
    server = start_http_server(router)
    yield router, server.base_url
    server.close()


def test_metrics_route_serves_the_registry(served: tuple[HttpRouter, str]) -> None:
    _router, base = served
    status, body, content_type = get(base + "/metrics")
    assert status == 200 and "text/plain" in content_type
    assert b"demo_things_total 3.0" in body


@pytest.mark.parametrize("path", ["/", "/metricsx", "/healthz", "/metrics/extra"])
def test_unknown_path_is_404_not_the_metrics_page(served: tuple[HttpRouter, str],
                                                   path: str) -> None:
    _router, base = served
    status, body, _ = get(base + path)
    assert status == 404 and b"demo_things" not in body
    assert repr(path).encode() in body


def test_routes_added_later_are_served(served: tuple[HttpRouter, str]) -> None:
    router, base = served
    router.add("/readyz", lambda request: HttpResponse(200, b"ready\n"))
    assert get(base + "/readyz")[:2] == (200, b"ready\n")
    assert router.paths == ["/metrics", "/readyz"]


def test_a_failing_handler_answers_500(served: tuple[HttpRouter, str]) -> None:
    router, base = served

    def broken(request: HttpRequest) -> HttpResponse:
        raise RuntimeError("boom")

    router.add("/broken", broken)
    status, body, _ = get(base + "/broken")
    assert status == 500 and b"boom" in body


def test_method_not_routed_is_405() -> None:
    router = HttpRouter()
    router.add("/x", lambda request: HttpResponse(200, b"x"))
    response = router.dispatch(HttpRequest("POST", "/x", {}, {}))
    assert response.status == 405 and response.headers["Allow"] == "GET, HEAD"


def test_route_path_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="'metrics'"):
        HttpRouter().add("metrics", lambda request: HttpResponse(200, b""))


def test_listens_on_loopback_by_default() -> None:
    assert MetricsConfig().address == "127.0.0.1"
    server = start_http_server(HttpRouter())
    try:
        assert server.server.server_address[0] == "127.0.0.1"
    finally:
        server.close()
