"""Tests of the service: config, checkpoints, the runtime in-process and as a subprocess
(file source)."""
