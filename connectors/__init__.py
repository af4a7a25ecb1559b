"""Sources and sinks of streamkm (file tailer, Kafka), installed as ``streamkm_connectors``."""
