"""``STREAMKM_*`` environment variables the service ignores, found before they mislead.

A configuration key is overridden by ``STREAMKM_<SECTION>__<KEY>`` (a double underscore
between section and key). Any other ``STREAMKM_`` variable changes nothing:
``STREAMKM_MODEL_N_CLUSTERS=8`` (one underscore) leaves ``model.n_clusters`` as it was.
:func:`ignored_environment` names each variable meant as configuration and ignored: one
without the double underscore that starts with a section's name (``STREAMKM_MODEL_...``),
with the configuration variable whose key its rest resembles, if any.
Variables of other tools (``STREAMKM_TEST_WORKERS``) and the ones streamkm reads itself
(:data:`OTHER_VARIABLES`) are left alone.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterator, Mapping

from streamkm.config.preflight import Finding
from streamkm.config.schema import ENV_PREFIX, service_model

__all__ = ["ignored_environment", "config_keys", "OTHER_VARIABLES"]

#: ``STREAMKM_`` variables that are not configuration keys but are read by streamkm.
OTHER_VARIABLES = frozenset({"STREAMKM_NUM_THREADS"})

#: How alike (difflib ratio) a key and a configuration key must be to suggest it.
_SIMILAR = 0.8


def _section_models(annotation: typing.Any) -> Iterator[type]:
    """The pydantic models a section's annotation allows (a union for ``[source]``)."""
    if hasattr(annotation, "model_fields"):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _section_models(arg)


def config_keys() -> dict[str, list[str]]:
    """Every configuration key by section (``{"model": ["n_clusters", ...], ...}``)."""
    keys: dict[str, list[str]] = {}
    for section, field in service_model().model_fields.items():
        names: set[str] = set()
        for model in _section_models(field.annotation):
            names.update(model.model_fields)
        keys[section] = sorted(names)
    return keys


def _meant(name: str, keys: dict[str, list[str]]) -> tuple[str, str | None] | None:
    """``(section, closest key or None)`` when ``name`` starts with a section's name;
    the longest section name wins (``STREAMKM_SINKS_...`` is not ``STREAMKM_SINK...``)."""
    rest = name[len(ENV_PREFIX):].lower()
    for section in sorted(keys, key=len, reverse=True):
        if rest.startswith(section + "_"):
            key = rest[len(section) + 1:]
            close = difflib.get_close_matches(key, keys[section], n=1, cutoff=_SIMILAR)
            return section, (close[0] if close else None)
    return None


def ignored_environment(env: Mapping[str, str]) -> list[Finding]:
    """A warning per ``STREAMKM_`` variable in ``env`` meant as configuration and ignored.

    Examples
    --------
    >>> [str(f) for f in ignored_environment({"STREAMKM_MODEL_N_CLUSTERS": "8"})]
    ['warning: environment variable STREAMKM_MODEL_N_CLUSTERS is ignored: did you mean STREAMKM_MODEL__N_CLUSTERS (section and key are separated by two underscores)?']
    """
    keys = config_keys()
    findings = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or "__" in name or name in OTHER_VARIABLES:
            continue
        meant = _meant(name, keys)
        if meant is None:
            continue  # not meant as configuration
        section, key = meant
        prefix = f"{ENV_PREFIX}{section.upper()}__"
        hint = (f"did you mean {prefix}{key.upper()} (section and key are separated by two "
                f"underscores)?" if key else
                f"[{section}] has no such key; its variables are {prefix}<KEY>")
        findings.append(Finding("warning", f"environment variable {name} is ignored: {hint}"))
    return findings
