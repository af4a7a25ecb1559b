"""The service's feature sketching: builds the pipeline from ``[sketch]``, steps it, reports
re-sketches (metrics, events), and splits its state between the checkpoint's namespaces.

With ``[sketch] kind = "none"`` the service steps the engine directly (sparse batches are
densified one batch at a time). Otherwise the model is a
:class:`~streamkm.sketch.SketchedKernelKMeans`; the checkpoint keeps the engine's state
where it always is (``model.*``, meta ``"model"``) and the sketch next to it (``sketch.*``,
meta ``"sketch"``), so a restore transforms bit-identically and continues re-sketching
exactly as an uninterrupted run.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from streamkm._core.sparse import is_sparse
from streamkm.cluster import MiniBatchKernelKMeans
from streamkm.config.schema import ServiceConfig, SketchConfig
from streamkm.exceptions import StateError
from streamkm.io.checkpoint import Checkpoint
from streamkm.logs import log_event
from streamkm.model import StepReport, StreamModel
from streamkm.runtime.metrics import ServiceMetrics
from streamkm.sketch import (
    PROJECTION_KINDS,
    ApproxSVD,
    BaseSketcher,
    LeverageScoreSelector,
    RandomProjection,
    SketchedKernelKMeans,
)

__all__ = ["ServiceSketching", "build_sketcher", "DRIFT_EVENTS"]

#: Model events that mean the stream drifted: a data-dependent sketch is refit after them
#: (``[sketch] resketch_on_drift``).
DRIFT_EVENTS = frozenset({"woke", "split", "born"})

_log = logging.getLogger("streamkm.service")


def build_sketcher(config: SketchConfig, n_clusters: int) -> BaseSketcher:
    """The unfitted sketcher template of a ``[sketch]`` section (kind other than none)."""
    if config.kind in PROJECTION_KINDS:
        return RandomProjection(n_components=config.n_components, kind=config.kind,
                                eps=config.eps, n_clusters=n_clusters,
                                random_state=config.random_state)
    if config.kind == "svd":
        return ApproxSVD(config.svd_rank(n_clusters), eps=config.eps,
                         random_state=config.random_state)
    if config.kind == "leverage":
        return LeverageScoreSelector(n_components=config.n_components, eps=config.eps,
                                     n_clusters=n_clusters, random_state=config.random_state)
    raise ValueError(f"no sketcher for sketch.kind = {config.kind!r}")


class ServiceSketching:
    """Feature sketching as the service runs it.

    Parameters
    ----------
    config : ServiceConfig
        The service configuration (``[sketch]``, ``[model]``).
    metrics : ServiceMetrics
        Receives ``streamkm_sketch_epoch``, ``streamkm_resketches_total`` and
        ``streamkm_resketch_seconds``.
    """

    def __init__(self, config: ServiceConfig, metrics: ServiceMetrics) -> None:
        self.config = config.sketch
        self.n_clusters = config.model.n_clusters
        self.metrics = metrics

    @property
    def enabled(self) -> bool:
        """Whether records are sketched before the model."""
        return self.config.kind != "none"

    @property
    def min_first_batch(self) -> int:
        """Fewest valid records the first batch needs (n_clusters, or the SVD rank)."""
        if self.config.kind == "svd":
            return max(self.n_clusters, self.config.svd_rank(self.n_clusters))
        return self.n_clusters

    def wrap(self, model: MiniBatchKernelKMeans) -> StreamModel:
        """The model the service steps: ``model`` itself, or the sketch pipeline around it."""
        if not self.enabled:
            return model
        return SketchedKernelKMeans(build_sketcher(self.config, self.n_clusters), model,
                                    resketch_every=self.config.resketch_every,
                                    reservoir_size=self.config.reservoir_size,
                                    random_state=self.config.random_state)

    def restore(self, checkpoint: Checkpoint) -> StreamModel:
        """The model saved in ``checkpoint`` (which has one), sketch included.

        Raises
        ------
        StateError
            The checkpoint was written with sketching and ``[sketch]`` is off, or the
            other way round.
        """
        from streamkm.io.model_export import model_from_checkpoint

        sketch_meta = checkpoint.sketch_meta
        if not self.enabled and sketch_meta is not None:
            raise StateError(
                f"checkpoint {str(checkpoint.path)!r} holds a sketched model but "
                f"[sketch] kind = 'none': set the kind it was written with or use an empty "
                f"checkpoint dir")
        if self.enabled and sketch_meta is None:
            raise StateError(
                f"checkpoint {str(checkpoint.path)!r} holds a model of unsketched records but "
                f"[sketch] kind = {self.config.kind!r}: set kind = 'none' or use an empty "
                f"checkpoint dir")
        model = model_from_checkpoint(checkpoint)
        if self.enabled:
            model.resketch_every = self.config.resketch_every
        return model

    def step(self, model: StreamModel, X: Any, *, sample_weight: Any = None,
             features: Any = None) -> tuple[StepReport, list[dict[str, Any]]]:
        """Step ``model`` on the batch ``X``; return its report and the re-sketch events.

        ``sample_weight``: row multiplicities; ``features``: ``X`` already projected with
        the model's current sketch (see :meth:`SketchedKernelKMeans.step`).
        """
        if not isinstance(model, SketchedKernelKMeans):
            if is_sparse(X):
                X = X.toarray()
            if sample_weight is None:
                return model.step(X), []
            return model.step(X, sample_weight=sample_weight), []
        report = model.step(X, sample_weight=sample_weight, features=features)
        events = []
        if model.resketched_:
            events.append(self._resketched(model, "schedule", report.step))
        kinds = {e["event"] for e in report.events}
        if (kinds & DRIFT_EVENTS and self.config.resketch_on_drift
                and not model.resketched_ and model.notify_drift()):
            events.append(self._resketched(model, "drift", report.step))
        return report, events

    def _resketched(self, model: SketchedKernelKMeans, trigger: str, step: int) -> dict[str, Any]:
        m = self.metrics
        m.resketches.labels(trigger=trigger).inc()
        if model.last_resketch_seconds_ is not None:
            m.resketch_seconds.observe(model.last_resketch_seconds_)
        m.sketch_epoch.set(model.sketch_epoch_)
        event = {"event": "resketched", "trigger": trigger,
                 "sketch_epoch": int(model.sketch_epoch_), "step": int(step)}
        log_event(_log, "info", "model_resketched", seconds=model.last_resketch_seconds_,
                  **{k: v for k, v in event.items() if k != "event"})
        return event

    def state_parts(self, model: StreamModel
                    ) -> tuple[dict[str, np.ndarray], dict[str, Any] | None, dict[str, Any]]:
        """``(model_arrays, model_meta, sketch keyword arguments)`` for
        :meth:`CheckpointStore.write` (empty before the first batch)."""
        if not model.is_fitted():
            return {}, None, {}
        parts = model.state_parts()
        arrays, meta = parts["model"]
        if "sketch" not in parts:
            return arrays, meta, {}
        sketch_arrays, sketch_meta = parts["sketch"]
        return arrays, meta, {"sketch_arrays": sketch_arrays, "sketch_meta": sketch_meta}

    def refresh_metrics(self, model: StreamModel) -> None:
        """Set the sketch epoch gauge from ``model`` (after a restore)."""
        fitted = isinstance(model, SketchedKernelKMeans) and model.is_fitted()
        self.metrics.sketch_epoch.set(int(model.sketch_epoch_) if fitted else 0)
