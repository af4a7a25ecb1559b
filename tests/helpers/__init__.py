"""Helpers the tests share: the Tansu Kafka broker (:mod:`.kafka_broker`), the real
Prometheus server and the ops checks (:mod:`.prometheus_server`), and starting and watching
``streamkm`` processes (:mod:`.processes`). Fixtures built on them are in
``tests/conftest.py``."""
