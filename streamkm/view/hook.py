"""The live cluster view of a running service: ``GET /`` (the page) and
``GET /api/clusters`` (its JSON), on the service's HTTP listener.

:class:`ClusterViewHook` observes the runtime: each processed batch adds a bounded sample of
its accepted rows with their assignments (:class:`~streamkm.view.cluster_view.ClusterView`),
each lifecycle event is kept with its time. The page is one static file shipped in the
package (no CDN, no script from elsewhere); it polls the JSON every two seconds.
"""

from __future__ import annotations

import json
import logging
from importlib import resources
from typing import TYPE_CHECKING, Any

from streamkm.logs import log_event
from streamkm.runtime.http import HttpRequest, HttpResponse
from streamkm.runtime.learner import Learned, RuntimeHook, RuntimeHost
from streamkm.view.cluster_view import ClusterView
from streamkm.view.sizes import RecentClusterSizes

if TYPE_CHECKING:
    from streamkm.io.batcher import Batch

__all__ = ["ClusterViewHook", "install_cluster_view", "PAGE_PATH", "API_PATH"]

_log = logging.getLogger("streamkm.service")
PAGE_PATH = "/"
API_PATH = "/api/clusters"


class ClusterSizesHook(RuntimeHook):
    """Exports ``streamkm_cluster_records{cluster}`` (see :mod:`streamkm.view.sizes`)."""

    def __init__(self, runtime: RuntimeHost) -> None:
        self.sizes = RecentClusterSizes(runtime.metrics.cluster_records)

    def on_batch(self, runtime: RuntimeHost, batch: Batch, learned: Learned) -> None:
        if learned.cluster_ids is not None:
            self.sizes.observe(learned.cluster_ids)


def install_cluster_view(runtime: RuntimeHost) -> ClusterViewHook | None:
    """Export per-cluster record counts, and serve the live view on ``runtime``'s listener
    when ``[ui] enabled`` (the default)."""
    runtime.add_hook(ClusterSizesHook(runtime))
    ui = runtime.config.ui
    if not ui.enabled:
        return None
    hook = ClusterViewHook(ui.sample_size)
    hook.install(runtime)
    return hook


class ClusterViewHook(RuntimeHook):
    """Keeps a :class:`ClusterView` of the runtime and serves it.

    Parameters
    ----------
    sample_size : int, default=2000
        Records kept for the scatter.
    """

    def __init__(self, sample_size: int = 2000) -> None:
        self.view = ClusterView(sample_size)
        self._page = resources.files("streamkm.view").joinpath("page.html").read_bytes()

    def install(self, runtime: RuntimeHost) -> None:
        """Observe ``runtime`` and add the page and the JSON to its HTTP router."""
        runtime.add_hook(self)
        runtime.router.add(PAGE_PATH, self._serve_page)
        runtime.router.add(API_PATH, self._serve_json)

    def on_started(self, runtime: RuntimeHost) -> None:
        if runtime.http_server is not None:
            log_event(_log, "info", "cluster_view_listening",
                      url=runtime.http_server.base_url + PAGE_PATH)

    def on_batch(self, runtime: RuntimeHost, batch: Batch, learned: Learned) -> None:
        if learned.cluster_ids is None or learned.sq_distances is None or batch.X is None:
            return
        status = runtime.status
        self.view.observe_batch(
            batch.X, learned.cluster_ids, learned.sq_distances,
            step=int(learned.step if learned.step is not None else status.step),
            objective=float(learned.objective if learned.objective is not None else 0.0),
            converged=bool(status.converged), n_clusters=int(status.clusters),
            outliers=None if learned.novelty is None else learned.novelty.outliers)

    def on_event(self, runtime: RuntimeHost, event: dict[str, Any]) -> None:
        self.view.observe_event(event)

    def _serve_page(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, self._page, "text/html; charset=utf-8",
                            {"Cache-Control": "no-store"})

    def _serve_json(self, request: HttpRequest) -> HttpResponse:
        body = json.dumps(self.view.to_dict(), separators=(",", ":")).encode()
        return HttpResponse(200, body, "application/json", {"Cache-Control": "no-store"})
