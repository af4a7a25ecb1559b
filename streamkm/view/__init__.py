"""Looking at the clusters: the live page of a running service and PNG pictures."""

from __future__ import annotations

from streamkm.view.cluster_view import ClusterView

__all__ = ["ClusterView"]
