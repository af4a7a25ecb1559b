"""Builds the runtime a configuration asks for (the CLI's entry into the runtime)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from streamkm.app.scaleout import ScaleoutService
from streamkm.app.service import Service
from streamkm.config.schema import ServiceConfig
from streamkm.runtime.shell import Runtime

__all__ = ["build_runtime"]


def build_runtime(config: ServiceConfig, *, registry: CollectorRegistry | None = None,
                  serve_metrics: bool | None = None) -> Runtime:
    """A scale-out member when ``scaleout.enabled`` (see ``docs/scaleout.md``), else the
    single-process service."""
    if config.scaleout.enabled:
        return ScaleoutService(config, registry=registry, serve_metrics=serve_metrics)
    return Service(config, registry=registry, serve_metrics=serve_metrics)
