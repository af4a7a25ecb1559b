"""Where connectors plug in: factories of sources, sinks and scale-out transports, by kind.

The core never imports its connectors. A connector package registers its factories in a
function named by an entry point of the group :data:`ENTRY_POINT_GROUP` (the built-in
``streamkm_connectors`` declares ``builtin = "streamkm_connectors.registration:register"`` in
``pyproject.toml``); :func:`load_connectors` calls every such function once, the first time
a factory is looked up. Embedding code and tests may call the ``register_*`` functions
directly.

A connector owns its configuration. It registers, with the factory of a source kind, the
pydantic model of that kind's ``[source]`` table and what the lag of its partitions counts
(the unit the status reports before any partition is open); it may add top-level TOML
sections of its own with :func:`register_config_section` (each one a pydantic model, loaded,
validated and overridden from the environment like the core's sections, and reached as an
attribute of the loaded configuration).

A source or sinks factory receives the section that names its kind, the ``[kafka]``
connection settings (:class:`~streamkm.config.schema.KafkaConfig`) and the
:class:`~streamkm.runtime.metrics.ServiceMetrics` of the process; a factory registered with
``whole_config=True`` receives the whole loaded configuration instead of ``[kafka]``, to read
its own sections::

    def file_source(section, kafka, metrics) -> Source: ...
    register_source("file", file_source, section=FileSourceConfig, lag_unit="bytes")
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
           "load_connectors", "register_config_section", "config_sections",
           "source_sections", "source_lag_unit", "wants_whole_config", "scaleout_kinds"]

#: Entry-point group of connector packages (each entry point: a ``register()`` function).
ENTRY_POINT_GROUP = "streamkm.connectors"

Factory = Callable[..., Any]

_sources: dict[str, Factory] = {}
_sinks: dict[str, Factory] = {}
_transports: dict[str, Factory] = {}
_settings_checks: dict[str, Callable[[str, dict[str, Any]], None]] = {}
_source_sections: dict[str, type] = {}
_lag_units: dict[str, str] = {}
_whole_config: set[Factory] = set()
_config_sections: dict[str, type] = {}
_loaded = False
_lock = threading.Lock()


def register_source(kind: str, factory: Factory, *, section: type | None = None,
                    lag_unit: str = "records", whole_config: bool = False) -> None:
    """``factory(source_section, kafka, metrics) -> Source`` for ``[source] kind = kind``.

    Parameters
    ----------
    kind : str
        The ``[source] kind`` value.
    factory : callable
        Builds the source; with ``whole_config`` its second argument is the whole loaded
        configuration (its own top-level sections included) instead of ``[kafka]``.
    section : pydantic model, optional
        The model of the ``[source]`` table of this kind (its ``kind`` field a
        ``Literal[kind]``); without one the kind cannot be loaded from TOML.
    lag_unit : str
        What the lag of this kind's partitions counts (``"bytes"``, ``"records"``).
    whole_config : bool
        Pass the whole configuration to ``factory`` (see ``factory``).
    """
    _sources[kind] = factory
    _lag_units[kind] = lag_unit
    if section is not None:
        _source_sections[kind] = section
    if whole_config:
        _whole_config.add(factory)


def register_config_section(name: str, model: type) -> None:
    """Add the top-level TOML table ``[name]``, validated by the pydantic ``model``.

    The table is optional when ``model()`` needs no argument (that is its default) and
    required otherwise. A name the core already uses raises :class:`ConfigError`.
    """
    _config_sections[name] = model


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


def source_sections() -> dict[str, type]:
    """The ``[source]`` model of every registered kind that has one, by kind."""
    load_connectors()
    return dict(_source_sections)


def config_sections() -> dict[str, type]:
    """The top-level sections connectors added, by name."""
    load_connectors()
    return dict(_config_sections)


def source_lag_unit(kind: str) -> str:
    """What the lag of a ``kind`` source's partitions counts (``"records"`` if unknown)."""
    load_connectors()
    return _lag_units.get(kind, "records")


def wants_whole_config(factory: Factory) -> bool:
    """Whether ``factory`` was registered with ``whole_config=True``."""
    return factory in _whole_config


def source_factory(kind: str) -> Factory:
    """The source factory of ``kind``; :class:`ConfigError` if none is registered."""
    return _lookup(_sources, kind, "source")


def sinks_factory(kind: str) -> Factory:
    """The sinks factory of ``kind``; :class:`ConfigError` if none is registered."""
    return _lookup(_sinks, kind, "sinks")


def scaleout_kinds() -> list[str]:
    """The source kinds that have a scale-out transport, sorted."""
    load_connectors()
    return sorted(_transports)


def scaleout_transport_factory(kind: str) -> Factory:
    """The scale-out transport factory for a ``kind`` source; :class:`ConfigError` if none."""
    return _lookup(_transports, kind, "scale-out transport")


def client_settings_check(kind: str) -> Callable[[str, dict[str, Any]], None] | None:
    """The settings check of the ``kind`` client library, or ``None`` if none is registered."""
    load_connectors()
    return _settings_checks.get(kind)
