"""The long-running service: config, runtime loop, checkpoints, sinks, metrics."""
