"""``STREAMKM_*`` environment variables the service ignores, found before they mislead.

A configuration key is overridden by ``STREAMKM_<SECTION>__<KEY>`` (a double underscore
between section and key). Any other ``STREAMKM_`` variable, except the few streamkm reads
itself (:data:`OTHER_VARIABLES`), changes nothing: ``STREAMKM_MODEL_N_CLUSTERS=8`` (one
underscore) leaves ``model.n_clusters`` as it was. :func:`ignored_environment` names each
such variable, with the configuration variable it most resembles.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterator, Mapping

from streamkm.service.config import ENV_PREFIX, ServiceConfig
from streamkm.service.preflight import Finding

__all__ = ["ignored_environment", "config_variables", "OTHER_VARIABLES"]

#: ``STREAMKM_`` variables that are not configuration keys but are read by streamkm.
OTHER_VARIABLES = frozenset({"STREAMKM_NUM_THREADS"})

#: How alike (difflib ratio) a variable and a configuration variable must be to suggest it.
_SIMILAR = 0.8


def _section_models(annotation: typing.Any) -> Iterator[type]:
    """The pydantic models a section's annotation allows (a union for ``[source]``)."""
    if hasattr(annotation, "model_fields"):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _section_models(arg)


def config_variables() -> list[str]:
    """Every ``STREAMKM_<SECTION>__<KEY>`` variable the configuration knows."""
    names = set()
    for section, field in ServiceConfig.model_fields.items():
        for model in _section_models(field.annotation):
            names.update(f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
                         for key in model.model_fields)
    return sorted(names)


def ignored_environment(env: Mapping[str, str]) -> list[Finding]:
    """A warning per ``STREAMKM_`` variable in ``env`` that the service ignores.

    Examples
    --------
    >>> [str(f) for f in ignored_environment({"STREAMKM_MODEL_N_CLUSTERS": "8"})]
    ['warning: environment variable STREAMKM_MODEL_N_CLUSTERS is ignored: did you mean STREAMKM_MODEL__N_CLUSTERS (section and key are separated by two underscores)?']
    """
    known = config_variables()
    findings = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or "__" in name or name in OTHER_VARIABLES:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=_SIMILAR)
        hint = (f"did you mean {close[0]} (section and key are separated by two "
                f"underscores)?" if close else
                f"configuration keys are set with {ENV_PREFIX}<SECTION>__<KEY>, e.g. "
                f"{ENV_PREFIX}MODEL__N_CLUSTERS")
        findings.append(Finding("warning", f"environment variable {name} is ignored: {hint}"))
    return findings
