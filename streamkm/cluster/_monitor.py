"""Early-stop monitoring: converged is a state, not an end (DESIGN.md §2).

The rule (measured in ``docs/benchmarks.md``, section "Quality out of the box"):

1. Every batch updates an exponentially weighted moving average (EWMA) of the batch
   objective f_B(C_i), measured *before* the batch moves the centers, so it is an unbiased
   estimate of the current objective on fresh data.
2. While learning, a batch is *small* when the EWMA makes no new minimum by the relative
   margin ``tol`` (EWMA > best * (1 - tol)). ``patience`` small batches in a row make the
   model *converged* (``fit`` stops; streaming updates become assign-only), provided it
   has learned for at least ``dwell`` batches since it last woke.
   (The earlier rule compared f_B before and after the update on the *same* batch: with
   the non-decaying learning rate that improvement never shrinks below the batch noise,
   so it stopped after ``patience`` steps whatever the data.)
3. While converged, when the EWMA rises above ``(1 + wake_margin)`` times the level it had
   at convergence, the model *wakes* and learns again.
4. Hysteresis: after a wake the model learns for at least ``dwell`` batches before it may
   converge again. A wake that ends a convergence shorter than ``4 * 8 * patience``
   batches (the model converged on a stream that still drifts) sets ``dwell`` to
   ``8 * patience`` or, when it is already set, multiplies it by 4 (capped at
   ``2048 * patience``); a longer convergence resets it to ``8 * patience``. Measured on
   the demo's stream (2 minutes at 2,000 records/s, 468 batches): 21 transitions
   (10 wakes) with the old rule, see docs/benchmarks.md for the new count. A steadily drifting stream therefore keeps the model learning
   instead of flipping between the two states (without it: 21 flips in 2 minutes on a noisy stream).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ConvergenceMonitor"]

_DWELL_FACTOR = 8  # first dwell after a quick re-wake, in units of patience
_DWELL_GROWTH = 4  # factor of the dwell at each further quick re-wake
_MAX_DWELL = 2048  # cap, in units of patience
_QUICK_FACTOR = 4  # a convergence shorter than this many base dwells was a quick one


class ConvergenceMonitor:
    """Tracks the smoothed batch objective and decides converged / woke.

    Parameters
    ----------
    tol : float
        Relative new-minimum margin of the smoothed objective below which a batch is small.
    patience : int
        Consecutive small batches needed to converge.
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
        self.best = math.nan
        self.level = math.nan
        self.n_converged = 0
        self.n_woke = 0
        self.dwell = 0
        self.steps_in_state = 0

    def observe(self, objective: float, improvement: float | None) -> str | None:
        """Record one batch (its objective before the update); return ``"converged"``,
        ``"woke"`` or None. ``improvement`` is None for assign-only batches."""
        if math.isnan(self.ewma):
            self.ewma = objective
        else:
            self.ewma += self.smoothing * (objective - self.ewma)
        self.steps_in_state += 1
        if self.converged:
            if self.ewma > self.level * (1.0 + self.wake_margin):
                self._wake()
                return "woke"
            return None
        if improvement is None:
            return None
        if math.isnan(self.best) or self.ewma < self.best * (1.0 - self.tol):
            self.best = min(self.ewma, self.best) if not math.isnan(self.best) else self.ewma
            self.n_small = 0
        else:
            self.n_small += 1
        self.best = min(self.best, self.ewma)
        if self.n_small >= self.patience and self.steps_in_state >= self.dwell:
            self.converged = True
            self.level = self.ewma
            self.n_converged += 1
            self.steps_in_state = 0
            return "converged"
        return None

    def _wake(self) -> None:
        base = _DWELL_FACTOR * self.patience
        if self.steps_in_state < _QUICK_FACTOR * base:
            self.dwell = min(max(_DWELL_GROWTH * self.dwell, base), _MAX_DWELL * self.patience)
        else:
            self.dwell = base
        self.converged = False
        self.n_small = 0
        self.best = math.nan
        self.steps_in_state = 0
        self.n_woke += 1

    def wake(self) -> bool:
        """Leave the converged state from outside (drift handling saw a cluster drift).

        Returns True if the model was converged (counted as a wake), False otherwise.
        """
        if not self.converged:
            return False
        self._wake()
        return True

    def to_dict(self) -> dict[str, Any]:
        """JSON-able state (NaN written as None)."""
        def num(v: float) -> float | None:
            return None if math.isnan(v) else v

        return {
            "converged": self.converged,
            "n_small": self.n_small,
            "ewma": num(self.ewma),
            "best": num(self.best),
            "level": num(self.level),
            "n_converged": self.n_converged,
            "n_woke": self.n_woke,
            "dwell": self.dwell,
            "steps_in_state": self.steps_in_state,
        }

    def load_dict(self, data: dict[str, Any]) -> None:
        """Restore the state written by :meth:`to_dict` (older states lack the hysteresis
        fields: they start with none)."""
        def num(v: Any) -> float:
            return math.nan if v is None else float(v)

        self.converged = bool(data["converged"])
        self.n_small = int(data["n_small"])
        self.ewma = num(data["ewma"])
        self.best = num(data.get("best"))
        self.level = num(data["level"])
        self.n_converged = int(data["n_converged"])
        self.n_woke = int(data["n_woke"])
        self.dwell = int(data.get("dwell", 0))
        self.steps_in_state = int(data.get("steps_in_state", 0))
