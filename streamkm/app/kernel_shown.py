"""A running service shows which kernel its model runs, and why, once the model has chosen
it: the ``kernel_chosen`` log event, the ``streamkm_model_kernel`` info metric (labels
``configured``, ``kernel``, ``label``, ``reason``) and the live page's header
(:mod:`streamkm.app.kernel_label` makes the label, e.g. ``"auto -> heat"``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streamkm.app.kernel_label import kernel_label, model_kernel
from streamkm.logs import log_event
from streamkm.runtime.learner import RuntimeHook

if TYPE_CHECKING:
    from streamkm.io.batcher import Batch
    from streamkm.runtime.learner import Learned
    from streamkm.runtime.shell import Runtime

__all__ = ["KernelShownHook", "install_kernel_shown"]

_log = logging.getLogger("streamkm.service")


class KernelShownHook(RuntimeHook):
    """Once the model has its kernel: logs ``kernel_chosen`` (configured kernel, kernel in
    use, label, reason), sets ``streamkm_model_kernel`` and the live view's header."""

    def __init__(self, runtime: Runtime) -> None:
        from prometheus_client import Info

        self.metric = Info("streamkm_model_kernel", "The kernel the model runs: configured "
                           "(model.kernel), in use, and the label shown (auto -> ...)",
                           registry=runtime.metrics.registry)
        self.shown: tuple[str, str | None] | None = None

    def _show(self, runtime: Runtime) -> None:
        name, reason = model_kernel(runtime.model)
        if name is None or (name, reason) == self.shown:
            return
        self.shown = (name, reason)
        cfg = runtime.config.model
        label = kernel_label(cfg.kernel, cfg.gamma, name)
        self.metric.info({"configured": cfg.kernel, "kernel": name, "label": label,
                          "reason": reason or ""})
        view = getattr(runtime, "cluster_view", None)
        if view is not None:
            view.view.kernel = label
        log_event(_log, "info", "kernel_chosen", configured=cfg.kernel, gamma=cfg.gamma,
                  kernel=name, label=label, reason=reason)

    def on_started(self, runtime: Runtime) -> None:
        self._show(runtime)

    def on_batch(self, runtime: Runtime, batch: Batch, learned: Learned) -> None:
        self._show(runtime)


def install_kernel_shown(runtime: Runtime) -> KernelShownHook:
    """Show ``runtime``'s kernel in its log, metrics and live view (see the module)."""
    hook = KernelShownHook(runtime)
    runtime.add_hook(hook)
    return hook
