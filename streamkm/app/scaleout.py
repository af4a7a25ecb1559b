"""One process of a scale-out group: the runtime shell running the scale-out worker (and
the merge leader while elected). See :mod:`streamkm.scaleout.worker` and
``docs/scaleout.md``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from streamkm.app.kernel_shown import install_kernel_shown
from streamkm.app.progress import install_progress
from streamkm.config.schema import ServiceConfig
from streamkm.exceptions import ParameterError
from streamkm.io import registry as connectors
from streamkm.runtime.shell import Runtime
from streamkm.scaleout.transport import ScaleoutTransport
from streamkm.scaleout.worker import ScaleoutWorker
from streamkm.view.hook import install_cluster_view

__all__ = ["ScaleoutService"]


class ScaleoutService(Runtime):
    """A scale-out member (same lifecycle as :class:`streamkm.app.service.Service`).

    Parameters
    ----------
    config : ServiceConfig
        With ``scaleout.enabled`` and a Kafka source.
    registry : CollectorRegistry, optional
        Where metrics go.
    serve_metrics : bool, optional
        Start the HTTP endpoint; defaults to ``config.metrics.enabled``.
    transport : ScaleoutTransport, optional
        The broker clients (default: the connector registered for ``source.kind``).
    """

    learner: ScaleoutWorker

    def __init__(self, config: ServiceConfig, *, registry: CollectorRegistry | None = None,
                 serve_metrics: bool | None = None,
                 transport: ScaleoutTransport | None = None) -> None:
        if (not config.scaleout.enabled
                or config.source.kind not in connectors.scaleout_kinds()):
            raise ParameterError("ScaleoutService needs scaleout.enabled = true and a source "
                                 f"kind with a scale-out transport "
                                 f"{connectors.scaleout_kinds()!r}, got "
                                 f"enabled={config.scaleout.enabled!r} "
                                 f"source.kind={config.source.kind!r}")
        super().__init__(config, ScaleoutWorker(config, transport), registry=registry,
                         serve_metrics=serve_metrics)
        self.cluster_view = install_cluster_view(self)  # this member's records, global model
        install_progress(self)  # status events and [warnings]
        install_kernel_shown(self)  # kernel_chosen, streamkm_model_kernel, the page header
        self.health.register("model", self._model_readiness)
        self.health.register("scaleout_broker", self._broker_readiness)

    def _model_readiness(self) -> tuple[bool, str]:
        """Ready once a version of the group's model was adopted (workers assign with it)."""
        version = self.learner.model_version
        if version < 0:
            return False, "no model version adopted yet (reading the model topic)"
        if self.learner.model is None:
            return False, (f"model version {version} adopted but it has no centers yet (the "
                           f"leader initialises them from the first records)")
        return True, f"model version {version} adopted, {self.status.clusters} clusters"

    def _broker_readiness(self) -> tuple[bool, str]:
        """The updates producer and model reader reach the broker (the scale-out probe)."""
        connected = self.learner.link.connected
        if connected:
            return True, "updates producer and model reader connected"
        return False, ("the updates producer or the model reader has no broker connection"
                       if connected is False else "not connected to the broker yet")

    @property
    def member(self) -> str:
        """This process's member id."""
        return self.learner.member

    @property
    def scaleout_metrics(self) -> object:
        """The scale-out metrics (model version, leader, updates)."""
        return self.learner.metrics
