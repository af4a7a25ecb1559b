"""The process's HTTP listener: a small router from paths to handlers.

``/metrics`` (the Prometheus exposition of the process's registry) is the first route,
``/healthz`` and ``/readyz`` (:mod:`streamkm.runtime.health`) come next; other features add
theirs with :meth:`HttpRouter.add`. An unknown path answers 404. The listener binds to
loopback unless configured otherwise.

The listener does not trust its clients (:class:`ListenerLimits`): a connection that sends
nothing for ``idle_timeout_s`` or has not finished its request line and headers within
``header_timeout_s`` is closed; at most ``max_connections`` are served at once, and when all
are taken a new one closes the connection that has been reading its headers longest if that
is over ``evict_after_s`` (slow clients cannot lock a scrape out), else it waits in the listen backlog
(``backlog`` connections) until one finishes. A request line and headers over
``max_header_bytes`` answer 431, a declared body over ``max_body_bytes`` answers 413 (the
routes take no body). A client that goes away before its answer is written (a scrape that
timed out, a closed tab) is one JSON log line at debug level (``http_client_gone``), never a
traceback; any other failure of a connection is one ``http_connection_failed`` warning line.

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

import contextlib
import gzip
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from streamkm.logs import log_event

__all__ = ["HttpRequest", "HttpResponse", "Handler", "HttpRouter", "HttpServer",
           "ListenerLimits", "WithoutCreated", "metrics_handler", "json_response",
           "start_http_server"]

_log = logging.getLogger("streamkm.http")

#: Errors of a client that went away (reset, closed, timed out): not the service's fault.
_CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


@dataclass(frozen=True)
class ListenerLimits:
    """What the listener allows a client (see the module docstring).

    Attributes
    ----------
    max_connections : int
        Connections served at once (one thread each).
    backlog : int
        Connections the kernel queues while all are taken.
    idle_timeout_s : float
        Longest silence of a client while its request is read or its answer written.
    header_timeout_s : float
        Longest time from accepting a connection to the end of its headers.
    evict_after_s : float
        A connection still reading its headers after this long loses its slot to a new
        connection when all slots are taken.
    max_header_bytes : int
        Request line and headers together; more answers 431.
    max_body_bytes : int
        Declared request body (``Content-Length``); more answers 413.
    """

    max_connections: int = 64
    backlog: int = 256
    idle_timeout_s: float = 10.0
    header_timeout_s: float = 10.0
    evict_after_s: float = 1.0
    max_header_bytes: int = 16 << 10
    max_body_bytes: int = 64 << 10

    def __post_init__(self) -> None:
        for name in ("max_connections", "backlog", "max_header_bytes", "max_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ListenerLimits.{name} must be a positive int, got {value!r}")
        for name in ("idle_timeout_s", "header_timeout_s", "evict_after_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"ListenerLimits.{name} must be a positive number of "
                                 f"seconds, got {value!r}")


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


class _HeadersTooLarge(Exception):
    """The request line and headers exceed ``ListenerLimits.max_header_bytes``."""


class _CappedReader:
    """The connection's input, refusing to read more than ``limit`` bytes of request line and
    headers (all that the listener reads: the routes take no body)."""

    def __init__(self, raw: Any, limit: int) -> None:
        self._raw = raw
        self._limit = limit
        self.used = 0

    def readline(self, size: int = -1) -> bytes:
        return self._counted(self._raw.readline(self._room(size)))

    def read(self, size: int = -1) -> bytes:
        return self._counted(self._raw.read(self._room(size)))

    def _room(self, size: int) -> int:
        # one byte past the limit, so that going over it is seen
        room = self._limit - self.used + 1
        return room if size < 0 else min(size, room)

    def _counted(self, data: bytes) -> bytes:
        self.used += len(data)
        if self.used > self._limit:
            raise _HeadersTooLarge
        return data

    def close(self) -> None:
        self._raw.close()


class _RequestHandler(BaseHTTPRequestHandler):
    router: HttpRouter
    limits: ListenerLimits

    def setup(self) -> None:
        self.timeout = self.limits.idle_timeout_s
        super().setup()
        self.rfile = _CappedReader(self.rfile, self.limits.max_header_bytes)  # type: ignore[assignment]

    def handle(self) -> None:
        try:
            super().handle()
        except _HeadersTooLarge:
            self._refuse(431, f"request line and headers exceed "
                              f"{self.limits.max_header_bytes} bytes")
        finally:
            self.server.headers_done(self.connection)  # type: ignore[attr-defined]

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.server.headers_done(self.connection)  # type: ignore[attr-defined]
        if not ok:
            return False
        declared = self.headers.get("Content-Length")
        try:
            length = int(declared) if declared is not None else 0
        except ValueError:
            self.send_error(400, f"bad Content-Length {declared!r}")
            return False
        if length > self.limits.max_body_bytes:
            self.send_error(413, f"request body of {length} bytes exceeds "
                                 f"{self.limits.max_body_bytes}")
            return False
        return True

    def _refuse(self, status: int, message: str) -> None:
        try:
            self.close_connection = True
            self.send_error(status, message)
        except OSError:
            pass  # the client is gone as well

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


class _LimitedServer(ThreadingHTTPServer):
    """A threading HTTP server that applies :class:`ListenerLimits` (module docstring)."""

    daemon_threads = True
    limits: ListenerLimits

    def __init__(self, address: tuple[str, int], handler: type[_RequestHandler],
                 limits: ListenerLimits) -> None:
        self.limits = limits
        self.request_queue_size = limits.backlog
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._lock = threading.Lock()
        self._reading: dict[socket.socket, float] = {}  # connection -> headers deadline
        self._closing = threading.Event()
        super().__init__(address, handler)
        self._reaper = threading.Thread(target=self._reap, name="streamkm-http-reaper",
                                        daemon=True)
        self._reaper.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve ``request`` in a thread once a slot is free (see the module docstring)."""
        while not self._slots.acquire(blocking=False):
            if self._closing.is_set():
                self.shutdown_request(request)
                return
            self._drop_slowest_reader()
            if self._slots.acquire(timeout=0.05):
                break
        with self._lock:
            self._reading[request] = time.monotonic() + self.limits.header_timeout_s
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def headers_done(self, request: socket.socket) -> None:
        """The request's headers were read (or it ended): no header deadline any more."""
        with self._lock:
            self._reading.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line, never a traceback (socketserver would print one on stderr)."""
        exc = sys.exc_info()[1]
        peer = f"{client_address[0]}:{client_address[1]}" if client_address else None
        if isinstance(exc, _CLIENT_GONE):
            log_event(_log, "debug", "http_client_gone", peer=peer,
                      error=f"{type(exc).__name__}: {exc}")
        else:
            log_event(_log, "warning", "http_connection_failed", peer=peer, error=repr(exc))

    def shutdown(self) -> None:
        self._closing.set()  # first: a connection waiting for a slot gives up
        super().shutdown()

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()

    def _release(self, request: Any) -> None:
        self.headers_done(request)
        self._slots.release()

    def _drop_slowest_reader(self) -> None:
        started_before = (time.monotonic() - self.limits.evict_after_s
                          + self.limits.header_timeout_s)
        with self._lock:
            if not self._reading:
                return
            slowest = min(self._reading, key=self._reading.__getitem__)
            if self._reading[slowest] > started_before:
                return  # every reader is young: wait for one to finish
            del self._reading[slowest]
        log_event(_log, "debug", "http_client_too_slow", limit="evicted")
        _cut(slowest)

    def _reap(self) -> None:
        while not self._closing.wait(0.25):
            now = time.monotonic()
            with self._lock:
                late = [conn for conn, deadline in self._reading.items() if deadline <= now]
                for conn in late:
                    del self._reading[conn]
            for conn in late:
                log_event(_log, "debug", "http_client_too_slow", limit="header_timeout_s")
                _cut(conn)


def _cut(conn: socket.socket) -> None:
    """Wake the thread blocked reading ``conn``: its read ends, the connection closes."""
    with contextlib.suppress(OSError):  # the client closed it already
        conn.shutdown(socket.SHUT_RDWR)


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


def start_http_server(router: HttpRouter, address: str = "127.0.0.1", port: int = 0, *,
                      limits: ListenerLimits | None = None) -> HttpServer:
    """Serve ``router`` on ``address:port`` (0 = a free port) in a daemon thread, within
    ``limits`` (:class:`ListenerLimits` defaults)."""
    limits = limits or ListenerLimits()
    family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0][0]
    handler = type("RoutedHandler", (_RequestHandler,), {"router": router, "limits": limits})
    server_class = type("RoutedServer", (_LimitedServer,), {"address_family": family})
    server = server_class((address, port), handler, limits)
    thread = threading.Thread(target=server.serve_forever, name="streamkm-http", daemon=True)
    thread.start()
    return HttpServer(server=server, thread=thread, address=address,
                      port=int(server.server_address[1]), router=router)
