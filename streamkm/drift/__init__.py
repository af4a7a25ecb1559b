"""Drift handling: RTMM initial pairs, kernel bisection, drift monitors and Ward merges (seeds 001, 003)."""
