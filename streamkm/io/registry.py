"""Where connectors plug in: factories of sources, sinks and scale-out transports, by kind.

The core never imports its connectors. A connector package registers its factories in a
function named by an entry point of the group :data:`ENTRY_POINT_GROUP` (the built-in
``streamkm_connectors`` declares ``builtin = "streamkm_connectors.registration:register"`` in
``pyproject.toml``); :func:`load_connectors` calls every such function once, the first time
a factory is looked up. Embedding code and tests may call the ``register_*`` functions
directly.

A source or sinks factory receives the section that names its kind, the ``[kafka]``
connection settings (:class:`~streamkm.config.schema.KafkaConfig`) and the
:class:`~streamkm.runtime.metrics.ServiceMetrics` of the process::

    def file_source(section, kafka, metrics) -> Source: ...
    register_source("file", file_source)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from streamkm.exceptions import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "register_source", "register_sinks",
           "register_scaleout_transport", "register_client_settings_check", "source_factory",
           "sinks_factory", "scaleout_transport_factory", "client_settings_check",
           "load_connectors"]

#: Entry-point group of connector packages (each entry point: a ``register()`` function).
ENTRY_POINT_GROUP = "streamkm.connectors"

Factory = Callable[..., Any]

_sources: dict[str, Factory] = {}
_sinks: dict[str, Factory] = {}
_transports: dict[str, Factory] = {}
_settings_checks: dict[str, Callable[[str, dict[str, Any]], None]] = {}
_loaded = False
_lock = threading.Lock()


def register_source(kind: str, factory: Factory) -> None:
    """``factory(source_section, kafka, metrics) -> Source`` for ``[source] kind = kind``."""
    _sources[kind] = factory


def register_sinks(kind: str, factory: Factory) -> None:
    """``factory(sinks_section, kafka, metrics) -> SinkSet`` for ``[sinks] kind = kind``."""
    _sinks[kind] = factory


def register_scaleout_transport(kind: str, factory: Factory) -> None:
    """``factory(config, metrics) -> ScaleoutTransport`` for scale-out mode over a ``kind``
    source (see :mod:`streamkm.scaleout.transport`)."""
    _transports[kind] = factory


def register_client_settings_check(kind: str,
                                   check: Callable[[str, dict[str, Any]], None]) -> None:
    """``check(role, settings)`` raises ``ValueError`` naming a client setting the ``kind``
    client library does not know (``role``: ``"consumer"`` or ``"producer"``)."""
    _settings_checks[kind] = check


def load_connectors() -> None:
    """Call the ``register`` function of every installed connector package (once)."""
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            entry.load()()


def _lookup(table: dict[str, Factory], kind: str, what: str) -> Factory:
    load_connectors()
    try:
        return table[kind]
    except KeyError:
        known = sorted(table)
        raise ConfigError(f"no {what} registered for kind {kind!r} (registered: {known!r}; "
                          f"is its connector package installed?)") from None


def source_factory(kind: str) -> Factory:
    """The source factory of ``kind``; :class:`ConfigError` if none is registered."""
    return _lookup(_sources, kind, "source")


def sinks_factory(kind: str) -> Factory:
    """The sinks factory of ``kind``; :class:`ConfigError` if none is registered."""
    return _lookup(_sinks, kind, "sinks")


def scaleout_transport_factory(kind: str) -> Factory:
    """The scale-out transport factory for a ``kind`` source; :class:`ConfigError` if none."""
    return _lookup(_transports, kind, "scale-out transport")


def client_settings_check(kind: str) -> Callable[[str, dict[str, Any]], None] | None:
    """The settings check of the ``kind`` client library, or ``None`` if none is registered."""
    load_connectors()
    return _settings_checks.get(kind)
