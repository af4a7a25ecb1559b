"""The novelty columns of a batch's assignments (written next to cluster and distance).

Every step scores each record's novelty (``docs/novelty.md``); the service writes four more
fields per assignment: ``novelty``, ``outlier``, ``second_cluster`` and ``margin``. An
assignment sink receives them as one :class:`AssignmentNovelty` through the keyword
``novelty`` of ``write_assignments`` / ``write_record_assignments``; a sink whose method does
not take that keyword is called without it (it keeps writing the four base fields).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where a batch is built (config commands load none)
    import numpy as np

__all__ = ["AssignmentNovelty", "accepts_novelty"]


@dataclass(frozen=True)
class AssignmentNovelty:
    """Per-row novelty fields of one batch, aligned with its ids.

    Attributes
    ----------
    novelty : ndarray of shape (n,), float64
        The record's novelty score in (0, 1] (small is unusual).
    outliers : ndarray of shape (n,), bool
        Flagged at the model's ``outlier_alpha`` (all False when it is unset).
    second_cluster_ids : ndarray of shape (n,), int64
        Stable id of the second-nearest cluster (-1 when the model has one cluster).
    margins : ndarray of shape (n,), float64
        Squared kernel distance to the second-nearest center minus that to the nearest
        (+inf with one cluster, written as ``null``).
    """

    novelty: np.ndarray
    outliers: np.ndarray
    second_cluster_ids: np.ndarray
    margins: np.ndarray

    @classmethod
    def from_report(cls, report: Any) -> AssignmentNovelty | None:
        """The columns of a :class:`~streamkm.model.StepReport` (``None`` when the report
        carries no novelty)."""
        if report.novelty is None:
            return None
        import numpy as np

        n = len(report.novelty)
        outliers = (np.zeros(n, dtype=bool) if report.outliers is None
                    else np.asarray(report.outliers, dtype=bool))
        seconds = report.second_cluster_ids
        if seconds is None:
            seconds = report.second_labels
        seconds = (np.full(n, -1, dtype=np.int64) if seconds is None
                   else np.asarray(seconds, dtype=np.int64))
        margins = (np.full(n, np.inf) if report.margins is None
                   else np.asarray(report.margins, dtype=np.float64))
        return cls(np.asarray(report.novelty, dtype=np.float64), outliers, seconds, margins)

    def take(self, rows: Any) -> AssignmentNovelty:
        """The columns of ``rows`` only (a slice or an index list)."""
        return AssignmentNovelty(self.novelty[rows], self.outliers[rows],
                                 self.second_cluster_ids[rows], self.margins[rows])


def accepts_novelty(method: Any) -> bool:
    """Whether a sink's write method takes the ``novelty`` keyword (or ``**kwargs``)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "novelty" or p.kind is inspect.Parameter.VAR_KEYWORD
               for p in parameters)
