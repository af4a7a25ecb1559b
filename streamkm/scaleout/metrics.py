"""Prometheus metrics of scale-out mode (documented in ``docs/metrics.md``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from streamkm.scaleout.ledger import DROP_REASONS

__all__ = ["ScaleoutMetrics"]

_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0)


class ScaleoutMetrics:
    """Model version, staleness, update and leader metrics of one process."""

    def __init__(self, registry: CollectorRegistry, member: str) -> None:
        r = registry
        self.model_version = Gauge(
            "streamkm_model_version",
            "Version of the global model this process assigns with (updates-topic messages "
            "it reflects; -1 before the first version).", registry=r)
        self.model_versions_behind = Gauge(
            "streamkm_model_versions_behind",
            "Leader: model versions published after the version the last applied update was "
            "computed with. Workers (and a leader that stepped down): 0, a worker adopts every "
            "complete version as soon as it reads it.",
            registry=r)
        self.updates_sent = Counter(
            "streamkm_updates_sent", "Update messages this worker sent.", registry=r)
        self.fences_sent = Counter(
            "streamkm_fences_sent", "Partition fences this worker sent (one per assignment).",
            registry=r)
        self.updates_applied = Counter(
            "streamkm_updates_applied", "Update messages the leader applied to the model.",
            registry=r)
        self.updates_dropped = Counter(
            "streamkm_updates_dropped",
            "Update messages the leader dropped, by reason (stale_generation, duplicate, "
            "gap, corrupt).", ["reason"], registry=r)
        self.updates_reprojected = Counter(
            "streamkm_updates_reprojected",
            "Updates the leader applied after re-projecting their raw rows: they were "
            "projected with an older sketch epoch (sketching only).", registry=r)
        self.versions_published = Counter(
            "streamkm_model_versions_published", "Model versions this process published.",
            registry=r)
        self.leader = Gauge(
            "streamkm_leader", "1 while this process is the merge leader, else 0.", registry=r)
        self.leader_changes = Counter(
            "streamkm_leader_changes", "Times this process became or stopped being the leader.",
            registry=r)
        self.leader_apply_seconds = Histogram(
            "streamkm_leader_apply_seconds", "Leader time to apply one update, in seconds.",
            buckets=_SECONDS_BUCKETS, registry=r)
        self.leader_publish_seconds = Histogram(
            "streamkm_leader_publish_seconds",
            "Leader time to encode and publish one model version, in seconds.",
            buckets=_SECONDS_BUCKETS, registry=r)
        self.updates_lag = Gauge(
            "streamkm_updates_lag",
            "Leader: messages of the updates topic not applied yet (0 on workers, reset when "
            "a process steps down).", registry=r)
        self.member_info = Info(
            "streamkm_scaleout_member", "This process's member id in scale-out mode.",
            registry=r)
        self.member_info.info({"member": member})
        for reason in DROP_REASONS:
            self.updates_dropped.labels(reason=reason)
        self.model_version.set(-1)
        self.leader.set(0)
