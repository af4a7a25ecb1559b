"""Tests of streamkm_connectors (connectors/): the file tailer, the Kafka source and sinks, and
the service against a real broker."""
