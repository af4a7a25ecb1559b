"""Tests of streamkm.drift: RTMM, bisection, the drift controller and the engine with a drift
policy."""
