"""The process's HTTP listener: a small router from paths to handlers.

``/metrics`` (the Prometheus exposition of the process's registry) is the first route,
``/healthz`` and ``/readyz`` (:mod:`streamkm.runtime.health`) come next; other features add
theirs with :meth:`HttpRouter.add`. An unknown path answers 404. The listener binds to
loopback unless configured otherwise.

Example
-------
>>> router = HttpRouter()
>>> router.add("/ping", lambda request: HttpResponse(200, b"pong", "text/plain"))
>>> router.dispatch(HttpRequest("GET", "/ping", {}, {})).body
b'pong'
>>> router.dispatch(HttpRequest("GET", "/nope", {}, {})).status
404
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

__all__ = ["HttpRequest", "HttpResponse", "Handler", "HttpRouter", "HttpServer",
           "WithoutCreated", "metrics_handler", "json_response", "start_http_server"]


@dataclass(frozen=True)
class HttpRequest:
    """One request: method, path (without the query), query parameters, headers
    (lower-case names)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass(frozen=True)
class HttpResponse:
    """What a handler returns."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], HttpResponse]


class HttpRouter:
    """Exact-path routes to handlers (``GET`` and ``HEAD`` unless told otherwise)."""

    def __init__(self) -> None:
        self._routes: dict[str, tuple[Handler, frozenset[str]]] = {}

    def add(self, path: str, handler: Handler, *, methods: tuple[str, ...] = ("GET",)) -> None:
        """Serve ``path`` with ``handler``; a path added twice keeps the last handler."""
        if not path.startswith("/"):
            raise ValueError(f"a route path starts with '/', got {path!r}")
        allowed = {m.upper() for m in methods}
        if "GET" in allowed:
            allowed.add("HEAD")
        self._routes[path] = (handler, frozenset(allowed))

    @property
    def paths(self) -> list[str]:
        """The routed paths, sorted."""
        return sorted(self._routes)

    def dispatch(self, request: HttpRequest) -> HttpResponse:
        """The response of the route of ``request.path``: 404 for an unknown path, 405 for a
        method the route does not take."""
        route = self._routes.get(request.path)
        if route is None:
            return HttpResponse(404, f"no such path {request.path!r}\n".encode())
        handler, allowed = route
        if request.method not in allowed:
            return HttpResponse(405, f"method {request.method!r} not allowed\n".encode(),
                                headers={"Allow": ", ".join(sorted(allowed))})
        return handler(request)


_CREATED_TYPES = frozenset({"counter", "histogram", "summary", "gaugehistogram"})


class WithoutCreated:
    """A view of a registry without the ``<name>_created`` samples of counters, histograms
    and summaries (creation times of the series, useless next to
    ``process_start_time_seconds`` and doubling the series count).

    prometheus_client's ``disable_created_metrics()`` does the same for the whole process,
    including the registries of an application that embeds streamkm; this view changes
    only what the service's own listener serves.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        """The registry's metrics, ``_created`` samples left out."""
        for metric in self._registry.collect():
            if metric.type not in _CREATED_TYPES:
                yield metric
                continue
            created = metric.name + "_created"
            kept = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            kept.samples = [s for s in metric.samples if s.name != created]
            yield kept


def metrics_handler(registry: CollectorRegistry) -> Handler:
    """The Prometheus exposition of ``registry`` without ``_created`` series (see
    :class:`WithoutCreated`; OpenMetrics when asked for, gzip when accepted)."""
    view = WithoutCreated(registry)

    def handle(request: HttpRequest) -> HttpResponse:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        body = encoder(view)  # type: ignore[arg-type]
        headers = {}
        if "gzip" in request.headers.get("accept-encoding", ""):
            body, headers = gzip.compress(body), {"Content-Encoding": "gzip"}
        return HttpResponse(200, body, content_type, headers)

    return handle


def json_response(status: int, body: Any) -> HttpResponse:
    """``body`` as a JSON response (never cached)."""
    return HttpResponse(status, (json.dumps(body, sort_keys=True) + "\n").encode(),
                        "application/json", {"Cache-Control": "no-store"})


class _RequestHandler(BaseHTTPRequestHandler):
    router: HttpRouter

    def _serve(self) -> None:
        url = urlsplit(self.path)
        request = HttpRequest(self.command, url.path, parse_qs(url.query),
                              {k.lower(): v for k, v in self.headers.items()})
        try:
            response = self.router.dispatch(request)
        except Exception as exc:  # noqa: BLE001 - a failing handler answers 500, never kills
            response = HttpResponse(500, f"internal error: {exc!r}\n".encode())
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Silent: requests are not logged."""


@dataclass
class HttpServer:
    """A running listener (a daemon thread)."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    address: str
    port: int
    router: HttpRouter

    @property
    def base_url(self) -> str:
        """``http://address:port``."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The scrape URL (``/metrics``)."""
        return self.base_url + "/metrics"

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_http_server(router: HttpRouter, address: str = "127.0.0.1",
                      port: int = 0) -> HttpServer:
    """Serve ``router`` on ``address:port`` (0 = a free port) in a daemon thread."""
    family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0][0]
    handler = type("RoutedHandler", (_RequestHandler,), {"router": router})
    server_class = type("RoutedServer", (ThreadingHTTPServer,),
                        {"address_family": family, "daemon_threads": True})
    server = server_class((address, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="streamkm-http", daemon=True)
    thread.start()
    return HttpServer(server=server, thread=thread, address=address,
                      port=int(server.server_address[1]), router=router)
