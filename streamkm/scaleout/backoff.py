"""Exponential backoff for the retries of a scale-out process (broker outages)."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Delays that double after every failure, from ``initial_s`` up to ``max_s``.

    Parameters
    ----------
    initial_s : float
        Delay after the first failure.
    max_s : float
        Longest delay.
    clock : callable, optional
        Monotonic clock (tests).
    """

    def __init__(self, initial_s: float = 0.5, max_s: float = 5.0, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.initial_s = float(initial_s)
        self.max_s = max(float(max_s), self.initial_s)
        self._clock = clock
        self._delay_s = self.initial_s
        self._next = 0.0
        self.failures = 0

    def ready(self) -> bool:
        """True once the delay after the last failure has passed (always after a success)."""
        return self._clock() >= self._next

    def failed(self) -> float:
        """Record a failure; returns the delay before the next attempt."""
        delay = self._delay_s
        self.failures += 1
        self._next = self._clock() + delay
        self._delay_s = min(self._delay_s * 2, self.max_s)
        return delay

    def succeeded(self) -> None:
        """Record a success: the next failure waits ``initial_s`` again."""
        self.failures = 0
        self._delay_s = self.initial_s
        self._next = 0.0
