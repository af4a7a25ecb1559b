"""Early-stop monitoring: converged is a state, not an end (DESIGN.md §2)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ConvergenceMonitor"]


class ConvergenceMonitor:
    """Tracks batch improvements and the smoothed batch objective.

    While learning, a step whose relative improvement (f_B(C_i) - f_B(C_{i+1})) / f_B(C_i)
    is below ``tol`` counts as small; ``patience`` small steps in a row make the model
    *converged*: it stops moving centers (assign only) and remembers the smoothed objective
    at that moment as its reference level. While converged, when the exponentially weighted
    moving average of f_B rises above ``(1 + wake_margin)`` times that level, the model
    *wakes* and learns again.

    Parameters
    ----------
    tol : float
        Relative improvement below which a step counts as small.
    patience : int
        Consecutive small steps needed to converge.
    wake_margin : float
        Relative rise of the smoothed objective over the converged level that wakes the model.
    smoothing : float
        Weight of the newest batch objective in the moving average, in (0, 1].
    """

    def __init__(self, tol: float, patience: int, wake_margin: float, smoothing: float) -> None:
        self.tol = tol
        self.patience = patience
        self.wake_margin = wake_margin
        self.smoothing = smoothing
        self.converged = False
        self.n_small = 0
        self.ewma = math.nan
        self.level = math.nan
        self.n_converged = 0
        self.n_woke = 0

    def observe(self, objective: float, improvement: float | None) -> str | None:
        """Record one batch; return ``"converged"``, ``"woke"`` or None."""
        if math.isnan(self.ewma):
            self.ewma = objective
        else:
            self.ewma += self.smoothing * (objective - self.ewma)
        if self.converged:
            if self.ewma > self.level * (1.0 + self.wake_margin):
                self.converged = False
                self.n_small = 0
                self.n_woke += 1
                return "woke"
            return None
        if improvement is not None:
            relative = improvement / objective if objective > 0 else 0.0
            self.n_small = self.n_small + 1 if relative < self.tol else 0
            if self.n_small >= self.patience:
                self.converged = True
                self.level = self.ewma
                self.n_converged += 1
                return "converged"
        return None

    def wake(self) -> bool:
        """Leave the converged state from outside (drift handling saw a cluster drift).

        Returns True if the model was converged (counted as a wake), False otherwise.
        """
        if not self.converged:
            return False
        self.converged = False
        self.n_small = 0
        self.n_woke += 1
        return True

    def to_dict(self) -> dict[str, Any]:
        """JSON-able state (NaN written as None)."""
        return {
            "converged": self.converged,
            "n_small": self.n_small,
            "ewma": None if math.isnan(self.ewma) else self.ewma,
            "level": None if math.isnan(self.level) else self.level,
            "n_converged": self.n_converged,
            "n_woke": self.n_woke,
        }

    def load_dict(self, data: dict[str, Any]) -> None:
        """Restore the state written by :meth:`to_dict`."""
        self.converged = bool(data["converged"])
        self.n_small = int(data["n_small"])
        self.ewma = math.nan if data["ewma"] is None else float(data["ewma"])
        self.level = math.nan if data["level"] is None else float(data["level"])
        self.n_converged = int(data["n_converged"])
        self.n_woke = int(data["n_woke"])
