"""Model hand-off to applications: the service publishes its current model to the model sink.

With ``[sinks] model = "state/model.npz"`` (a file, rewritten atomically) or
``[sinks] model_topic = "..."`` (Kafka, ``kind = "kafka"``), the service publishes the model
in the estimator's own save format (what ``streamkm checkpoint export`` writes; load it with
:meth:`streamkm.MiniBatchKernelKMeans.load`, or :meth:`streamkm.sketch.SketchedKernelKMeans.
load` when the service sketches its input):

* at start, when a model was restored;
* every ``sinks.model_every_batches`` batches;
* right after a batch that changed the clusters or the sketch (``split``, ``merge``,
  ``resketched`` events);
* at a graceful stop (SIGTERM, Ctrl-C), before the final checkpoint, so the model sink
  holds the model the checkpoint holds, however few batches the run processed.

The published model has taken ``S`` steps (``n_steps_``). The next batch is assigned with
exactly this model before the model learns from it, so its assignments carry ``step = S + 1``:
``model.cluster_ids_[model.predict(X)]`` of those records equals their ``cluster``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streamkm._core.state_io import encode_npz_bytes
from streamkm.exceptions import StreamkmError
from streamkm.logs import log_event
from streamkm.runtime.learner import RuntimeHook, RuntimeHost

if TYPE_CHECKING:
    from streamkm.io.batcher import Batch
    from streamkm.runtime.learner import Learned

__all__ = ["ModelPublisher", "DRIFT_EVENTS", "install_model_sink"]

_log = logging.getLogger("streamkm.service")

#: Events after which the model is published at once.
DRIFT_EVENTS = frozenset({"split", "merge", "born", "retired", "resketched"})


class ModelPublisher(RuntimeHook):
    """Publishes the runtime's model to ``runtime.sinks.model`` (see the module docstring).

    Parameters
    ----------
    every_batches : int
        Batches between two publications (drift events publish at once).
    """

    def __init__(self, every_batches: int) -> None:
        self.every_batches = every_batches
        self._batches = 0
        self.published_version: int | None = None

    def on_started(self, runtime: RuntimeHost) -> None:
        self.publish(runtime, "start")

    def on_finishing(self, runtime: RuntimeHost) -> None:
        self.publish(runtime, "shutdown")

    def on_batch(self, runtime: RuntimeHost, batch: Batch, learned: Learned) -> None:
        self._batches += 1
        kinds = {e.get("event") for e in (*learned.events, *learned.side_events)}
        if kinds & DRIFT_EVENTS:
            self.publish(runtime, "drift")
        elif self._batches >= self.every_batches:
            self.publish(runtime, "batches")

    def publish(self, runtime: RuntimeHost, reason: str) -> bool:
        """Publish the current model now (unless not fitted yet or already published);
        ``False`` when nothing was published."""
        model, sink = runtime.quiet_model(), runtime.sinks.model if runtime.sinks else None
        if sink is None or model is None or not model.is_fitted():
            return False
        version = int(model.n_steps_)
        if version == self.published_version:
            return False
        self._batches = 0
        try:
            sink.publish(encode_npz_bytes(*model.get_state()), version)
            sink.flush()
        except (OSError, StreamkmError) as exc:
            runtime.metrics.model_publication_failures.inc()
            log_event(_log, "warning", "model_publish_failed", version=version, reason=reason,
                      error=str(exc))
            return False
        self.published_version = version
        runtime.metrics.model_publications.inc()
        log_event(_log, "debug", "model_published", version=version, reason=reason,
                  model=type(model).__name__)
        return True


def install_model_sink(runtime: RuntimeHost) -> ModelPublisher | None:
    """Publish ``runtime``'s model when ``[sinks] model`` or ``model_topic`` is set."""
    sinks = runtime.config.sinks
    if not sinks.publishes_model:
        return None
    publisher = ModelPublisher(sinks.model_every_batches)
    runtime.add_hook(publisher)
    return publisher
