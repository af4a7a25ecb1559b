"""The process's HTTP listener: a small router from paths to handlers.

``/metrics`` (the Prometheus exposition of the process's registry) is the first route; other
features add theirs with :meth:`HttpRouter.add`. An unknown path answers 404. The listener
binds to loopback unless configured otherwise.

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
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["HttpRequest", "HttpResponse", "Handler", "HttpRouter", "HttpServer",
           "metrics_handler", "start_http_server"]


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


def metrics_handler(registry: CollectorRegistry) -> Handler:
    """The Prometheus exposition of ``registry`` (OpenMetrics when asked for, gzip when
    accepted)."""
    def handle(request: HttpRequest) -> HttpResponse:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        body = encoder(registry)
        headers = {}
        if "gzip" in request.headers.get("accept-encoding", ""):
            body, headers = gzip.compress(body), {"Content-Encoding": "gzip"}
        return HttpResponse(200, body, content_type, headers)

    return handle


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
