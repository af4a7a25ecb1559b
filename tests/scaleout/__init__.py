"""Tests of streamkm.scaleout: merge leader and workers in-process, and scale-out processes
against a real broker."""
