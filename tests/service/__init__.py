"""Tests of streamkm.service: config, checkpoints, the runtime in-process and as a subprocess
(file source)."""
