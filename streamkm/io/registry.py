"""Where connectors plug in: factories of sources, sinks and scale-out transports, by kind.

The core never imports its connectors. A connector package registers its factories in a
function named by an entry point of the group :data:`ENTRY_POINT_GROUP` (the built-in
``streamkm_connectors`` declares ``builtin = "streamkm_connectors.registration:register"`` in
``pyproject.toml``); :func:`load_connectors` calls every such function once, the first time
a factory is looked up. Embedding code and tests may call the ``register_*`` functions
directly.

A connector owns its configuration. It registers, with the factory of a source or sinks
kind, the pydantic model of that kind's ``[source]`` or ``[sinks]`` table (its ``kind``
field a ``Literal[kind]``; the one kind whose ``kind`` has a default is used when a table
names none), what the lag of its source partitions counts (the unit the status reports
before any partition is open), and the :class:`KindHooks` the core asks about the kind
(its files, whether ``--from-start`` can re-read it, how to check its servers are
reachable). It may add top-level TOML sections of its own with
:func:`register_config_section` (each one a pydantic model, loaded, validated and
overridden from the environment like the core's sections, and reached as an attribute of
the loaded configuration), with a check across the whole configuration.

A source or sinks factory receives the section that names its kind, the whole loaded
configuration (to read its own sections) and the
:class:`~streamkm.runtime.metrics.ServiceMetrics` of the process::

    def file_source(section, config, metrics) -> Source: ...
    register_source("file", file_source, section=FileSourceConfig, lag_unit="bytes")
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from streamkm.exceptions import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "KindHooks", "register_source", "register_sinks",
           "register_scaleout_transport", "source_factory", "sinks_factory",
           "scaleout_transport_factory", "load_connectors", "register_config_section",
           "config_sections", "config_checks", "source_sections", "sinks_sections",
           "source_hooks", "sinks_hooks", "input_files", "output_files", "source_lag_unit", "scaleout_kinds",
           "scaleout_retry_backoff", "scaleout_connection_gauge"]

#: Entry-point group of connector packages (each entry point: a ``register()`` function).
ENTRY_POINT_GROUP = "streamkm.connectors"

Factory = Callable[..., Any]
#: ``(config key, path)`` pairs, e.g. ``("sinks.events", Path("state/events.jsonl"))``.
KeyedPaths = list[tuple[str, Path]]


@dataclass(frozen=True)
class KindHooks:
    """What the core asks a source or sinks kind, besides building it (every hook optional).

    Attributes
    ----------
    input_files : callable, optional
        ``input_files(source_section) -> [(key, path or pattern)]``: the files a source
        reads. ``streamkm run`` checks they are readable (a missing one is a warning) and
        the warnings monitor watches that the patterns match files.
    output_files : callable, optional
        ``output_files(sinks_section) -> [(key, path)]``: the files the sinks write
        assignments, events and dead letters to, whose lengths the checkpoint holds.
        ``streamkm run`` probes that they can be written and refuses non-empty ones without
        a checkpoint, ``--from-start`` empties them, the demo bounds their size, and the
        resume point lives beside the first.
    start_over_refusal : callable, optional
        ``start_over_refusal(section) -> str | None``: why ``--from-start`` cannot read this
        input again from its beginning or empty these outputs (``None``: it can).
    reachability : callable, optional
        ``reachability(config, timeout_s) -> [message]``: the servers the kind talks to
        that accept no connection (``streamkm config check``/``run`` with the network
        checks); a hook shared by a source and a sinks kind runs once.
    """

    input_files: Callable[[Any], KeyedPaths] | None = None
    output_files: Callable[[Any], KeyedPaths] | None = None
    start_over_refusal: Callable[[Any], str | None] | None = None
    reachability: Callable[[Any, float], list[str]] | None = None


@dataclass(frozen=True)
class _ScaleoutKind:
    factory: Factory
    retry_backoff: Callable[[Any], tuple[float, float]] | None
    connection_gauge: Callable[[Any], Any] | None


_NO_HOOKS = KindHooks()
_sources: dict[str, Factory] = {}
_sinks: dict[str, Factory] = {}
_transports: dict[str, _ScaleoutKind] = {}
_source_sections: dict[str, type] = {}
_sinks_sections: dict[str, type] = {}
_source_hooks: dict[str, KindHooks] = {}
_sinks_hooks: dict[str, KindHooks] = {}
_lag_units: dict[str, str] = {}
_config_sections: dict[str, type] = {}
_config_checks: dict[str, Callable[[Any], None]] = {}
_loaded = False
_lock = threading.Lock()


def register_source(kind: str, factory: Factory, *, section: type | None = None,
                    lag_unit: str = "records", hooks: KindHooks = _NO_HOOKS) -> None:
    """``factory(source_section, config, metrics) -> Source`` for ``[source] kind = kind``.

    Parameters
    ----------
    kind : str
        The ``[source] kind`` value.
    factory : callable
        Builds the source from its section, the whole loaded configuration (its own
        top-level sections included) and the process's metrics.
    section : pydantic model, optional
        The model of the ``[source]`` table of this kind (its ``kind`` field a
        ``Literal[kind]``); without one the kind cannot be loaded from TOML.
    lag_unit : str
        What the lag of this kind's partitions counts (``"bytes"``, ``"records"``).
    hooks : KindHooks
        What the core may ask about this kind (``input_files``, ``start_over_refusal``,
        ``reachability``).
    """
    _sources[kind] = factory
    _lag_units[kind] = lag_unit
    _source_hooks[kind] = hooks
    if section is not None:
        _source_sections[kind] = section


def register_sinks(kind: str, factory: Factory, *, section: type | None = None,
                   hooks: KindHooks = _NO_HOOKS) -> None:
    """``factory(sinks_section, config, metrics) -> SinkSet`` for ``[sinks] kind = kind``.

    ``section`` is the model of this kind's ``[sinks]`` table (a subclass of
    :class:`streamkm.config.sections.SinksSection`, its ``kind`` a ``Literal[kind]``);
    ``hooks`` what the core may ask about it (``output_files``, ``start_over_refusal``,
    ``reachability``).
    """
    _sinks[kind] = factory
    _sinks_hooks[kind] = hooks
    if section is not None:
        _sinks_sections[kind] = section


def register_config_section(name: str, model: type, *,
                            check: Callable[[Any], None] | None = None) -> None:
    """Add the top-level TOML table ``[name]``, validated by the pydantic ``model``.

    The table is optional when ``model()`` needs no argument (that is its default) and
    required otherwise. A name the core already uses raises :class:`ConfigError`.
    ``check(config)`` runs on every loaded configuration and raises ``ValueError`` (its
    message naming the keys) for a combination of sections the connector cannot serve.
    """
    _config_sections[name] = model
    if check is not None:
        _config_checks[name] = check


def register_scaleout_transport(
        kind: str, factory: Factory, *,
        retry_backoff: Callable[[Any], tuple[float, float]] | None = None,
        connection_gauge: Callable[[Any], Any] | None = None) -> None:
    """``factory(config, metrics) -> ScaleoutTransport`` for scale-out mode over a ``kind``
    source (see :mod:`streamkm.scaleout.transport`).

    ``retry_backoff(config) -> (initial_s, max_s)``: the delays between a member's retries
    while the transport's servers are away; ``connection_gauge(metrics)``: the gauge, with a
    ``client`` label, that shows whether the member's clients hold a connection.
    """
    _transports[kind] = _ScaleoutKind(factory, retry_backoff, connection_gauge)


def load_connectors() -> None:
    """Call the ``register`` function of every installed connector package (once)."""
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            entry.load()()


def _lookup(table: dict[str, Any], kind: str, what: str) -> Any:
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


def sinks_sections() -> dict[str, type]:
    """The ``[sinks]`` model of every registered kind that has one, by kind."""
    load_connectors()
    return dict(_sinks_sections)


def config_sections() -> dict[str, type]:
    """The top-level sections connectors added, by name."""
    load_connectors()
    return dict(_config_sections)


def config_checks() -> list[Callable[[Any], None]]:
    """The checks across the whole configuration registered with connectors' sections."""
    load_connectors()
    return list(_config_checks.values())


def source_hooks(kind: str) -> KindHooks:
    """The hooks of a ``kind`` source (none for an unknown kind)."""
    load_connectors()
    return _source_hooks.get(kind, _NO_HOOKS)


def sinks_hooks(kind: str) -> KindHooks:
    """The hooks of a ``kind`` sinks (none for an unknown kind)."""
    load_connectors()
    return _sinks_hooks.get(kind, _NO_HOOKS)


def input_files(source_section: Any) -> KeyedPaths:
    """The files a ``[source]`` section reads (:attr:`KindHooks.input_files`; none for a
    kind without them)."""
    hook = source_hooks(source_section.kind).input_files
    return hook(source_section) if hook is not None else []


def output_files(sinks_section: Any) -> KeyedPaths:
    """The output files a ``[sinks]`` section writes (:attr:`KindHooks.output_files`; none
    for a kind without them)."""
    hook = sinks_hooks(sinks_section.kind).output_files
    return hook(sinks_section) if hook is not None else []


def source_lag_unit(kind: str) -> str:
    """What the lag of a ``kind`` source's partitions counts (``"records"`` if unknown)."""
    load_connectors()
    return _lag_units.get(kind, "records")


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
    return _lookup(_transports, kind, "scale-out transport").factory


#: Retry delays of a scale-out member whose transport registered none: 0.1 s up to 5 s.
DEFAULT_RETRY_BACKOFF_S = (0.1, 5.0)


def scaleout_retry_backoff(config: Any) -> tuple[float, float]:
    """``(initial_s, max_s)`` between a scale-out member's retries, from the transport of
    ``config.source.kind`` (:data:`DEFAULT_RETRY_BACKOFF_S` if it registered none)."""
    load_connectors()
    found = _transports.get(config.source.kind)
    if found is None or found.retry_backoff is None:
        return DEFAULT_RETRY_BACKOFF_S
    return found.retry_backoff(config)


def scaleout_connection_gauge(kind: str, metrics: Any) -> Any:
    """The connection gauge (``client`` label) of the ``kind`` scale-out transport on
    ``metrics``, or ``None`` if it registered none."""
    load_connectors()
    found = _transports.get(kind)
    if found is None or found.connection_gauge is None:
        return None
    return found.connection_gauge(metrics)
