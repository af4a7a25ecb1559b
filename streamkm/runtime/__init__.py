"""The runtime shell shared by the single-process service and scale-out members.

* :class:`Runtime` (:mod:`.shell`): source, decoder, batcher, sinks, status, HTTP
  listener, lag, dead letters, hooks, checkpoint cadence.
* :class:`Learner` (:mod:`.learner`): the strategy it runs, :class:`LocalLearner`
  (:mod:`.local`) or ``streamkm.scaleout.worker.ScaleoutWorker``; :mod:`.stepping`: the
  ``streamkm-step`` thread that steps a batch while the next one is read.
* :class:`RuntimeHook`: observers of a runtime, which see it as a :class:`RuntimeHost`
  (learners: a :class:`LearnerHost`); :class:`HttpRouter` (:mod:`.http`): the
  listener's routes; :class:`HealthChecks` (:mod:`.health`): ``/healthz``, ``/readyz`` and
  the readiness checks (:mod:`.watchdog`: systemd's watchdog fed by the liveness check).

``streamkm.app.build.build_runtime`` picks the learner from a configuration.
"""

from __future__ import annotations

from streamkm.runtime.health import HealthChecks
from streamkm.runtime.http import HttpRequest, HttpResponse, HttpRouter, HttpServer
from streamkm.runtime.learner import (
    CheckpointContent,
    Learned,
    Learner,
    LearnerHost,
    RuntimeHook,
    RuntimeHost,
)
from streamkm.runtime.local import LocalLearner
from streamkm.runtime.shell import Runtime
from streamkm.runtime.status import ServiceStatus

__all__ = ["Runtime", "Learner", "Learned", "CheckpointContent", "RuntimeHook", "RuntimeHost",
           "LearnerHost", "LocalLearner", "ServiceStatus", "HttpRouter", "HttpRequest",
           "HttpResponse", "HttpServer", "HealthChecks"]
