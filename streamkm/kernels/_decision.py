"""The decision of ``gamma="auto"``: a pure function of the candidates' scores.

Every candidate kernel's partition of the decision rows gets the same score (lower is
better: the normalised cut of one common graph, :mod:`streamkm.kernels._auto`); the
decision takes the lowest, and keeps the reference kernel (the median-width one) unless
another candidate scores lower by more than the ``tolerance`` (the score's resolution:
one row's share of a cut, so a difference of a row or two never changes the kernel). A
candidate without a score (e.g. no level set of k pieces exists) is listed with ``None``
and never chosen.

:class:`AutoDecision` holds the inputs and the outcome as plain types (str, float, None,
lists), so it round-trips through the JSON part of the model state unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamkm.exceptions import StateError

__all__ = ["AutoDecision", "decide", "not_considered"]


@dataclass(frozen=True)
class AutoDecision:
    """What ``gamma="auto"`` compared and what it chose.

    Attributes
    ----------
    candidates : tuple of str
        The kernels compared, reference first.
    scores : dict
        Candidate -> score (lower is better), None for a candidate that could not be
        scored.
    chosen : str
        The kernel the model uses.
    reason : str
        Why, in one sentence.
    tolerance : float
        Score differences up to this are ties (the reference wins ties).
    """

    candidates: tuple[str, ...]
    scores: dict[str, float | None]
    chosen: str
    reason: str
    tolerance: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able types (see :meth:`from_dict`)."""
        return {
            "candidates": list(self.candidates),
            "scores": {name: (None if v is None else float(v)) for name, v in self.scores.items()},
            "chosen": self.chosen,
            "reason": self.reason,
            "tolerance": float(self.tolerance),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AutoDecision:
        """Rebuild a decision written by :meth:`to_dict`."""
        try:
            candidates = tuple(str(c) for c in data["candidates"])
            stored = dict(data["scores"])
            # in the candidates' order (a JSON writer may sort the keys)
            scores = {c: (None if stored[c] is None else float(stored[c])) for c in candidates}
            decision = cls(candidates, scores, str(data["chosen"]), str(data["reason"]),
                           float(data.get("tolerance", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"malformed auto_decision in the state: {exc!r}") from exc
        if decision.chosen not in candidates:
            raise StateError(f"auto_decision chose {decision.chosen!r}, not one of {candidates}")
        return decision


def not_considered(reference: str, reason: str) -> AutoDecision:
    """The decision when no other kernel may be compared: the reference, for ``reason``."""
    return AutoDecision((reference,), {reference: None}, reference, reason)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def decide(scores: Mapping[str, float | None], reference: str,
           tolerance: float = 0.0) -> AutoDecision:
    """The candidate with the lowest score; the ``reference`` unless beaten by more than
    ``tolerance``.

    Parameters
    ----------
    scores : mapping
        Candidate -> score (lower is better); None or NaN: not scored, never chosen.
        Ties between other candidates go to the one listed first.
    reference : str
        The candidate kept on ties and when no other is scored (must be in ``scores``).
    tolerance : float
        Non-negative; differences up to it are ties.
    """
    if reference not in scores:
        raise ValueError(f"reference {reference!r} is not a candidate of {sorted(scores)}")
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise ValueError(f"tolerance must be finite and >= 0, got {tolerance!r}")
    candidates = (reference, *(name for name in scores if name != reference))
    table = {name: (None if not _finite(scores[name]) else float(scores[name]))
             for name in candidates}

    def done(chosen: str, reason: str) -> AutoDecision:
        return AutoDecision(candidates, table, chosen, reason, float(tolerance))

    scored = [name for name in candidates if table[name] is not None]
    if not scored:
        return done(reference, "no candidate could be scored: the reference is kept")
    best = min(scored, key=lambda name: table[name])  # first listed among equal scores
    if table[reference] is None:
        return done(best, f"{best} scores lowest ({table[best]:.6g}); the reference "
                          f"{reference} could not be scored")
    if best == reference or table[reference] - table[best] <= tolerance:
        return done(reference, f"no candidate scores below {reference}'s "
                               f"{table[reference]:.6g} by more than {tolerance:.3g}")
    return done(best, f"{best} scores lowest: {table[best]:.6g} against {reference}'s "
                      f"{table[reference]:.6g}")
