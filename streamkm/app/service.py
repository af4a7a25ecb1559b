"""The single-process service: the runtime shell running the local learner.

See :mod:`streamkm.runtime.shell` for the loop and :mod:`streamkm.runtime.local` for the
exactly-once rule.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from streamkm.app.kernel_shown import install_kernel_shown
from streamkm.app.model_sink import install_model_sink
from streamkm.app.progress import install_progress
from streamkm.config.schema import ServiceConfig
from streamkm.io.sources import Source
from streamkm.runtime.local import LocalLearner
from streamkm.runtime.shell import Runtime
from streamkm.runtime.status import ServiceStatus
from streamkm.view.hook import install_cluster_view

__all__ = ["Service", "ServiceStatus"]


class Service(Runtime):
    """One streamkm consumer process learning its own model.

    Parameters
    ----------
    config : ServiceConfig
        Validated configuration (paths already absolute).
    registry : CollectorRegistry, optional
        Where metrics go (a private registry by default).
    source : Source, optional
        Overrides the configured source (embedding, tests).
    serve_metrics : bool, optional
        Start the HTTP endpoint; defaults to ``config.metrics.enabled``.
    reset_model : bool, optional
        Start a fresh model over the latest checkpoint's input and output positions
        (``streamkm run --reset-model``; see :mod:`streamkm.config.diff`).
    resume_from_outputs : bool, optional
        Without a checkpoint, resume from the resume point beside the file outputs with a
        fresh model (``streamkm run --on-existing-output=resume``; see
        :mod:`streamkm.io.resume_point`).
    """

    def __init__(self, config: ServiceConfig, *, registry: CollectorRegistry | None = None,
                 source: Source | None = None, serve_metrics: bool | None = None,
                 reset_model: bool = False, resume_from_outputs: bool = False) -> None:
        super().__init__(config, LocalLearner(config), registry=registry, source=source,
                         serve_metrics=serve_metrics, reset_model=reset_model,
                         resume_from_outputs=resume_from_outputs)
        self.cluster_view = install_cluster_view(self)
        install_progress(self)  # status events and [warnings]
        self.model_publisher = install_model_sink(self)  # [sinks] model
        install_kernel_shown(self)  # kernel_chosen, streamkm_model_kernel, the page header
