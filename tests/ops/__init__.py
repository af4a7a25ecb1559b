"""Tests of ops/: Prometheus rules and Grafana dashboard files, and live against a real
Prometheus."""
