"""The cluster view: the one place guardhook learns what the cluster holds."""

from guardhook.cluster.view.store import ClusterView

__all__ = ["ClusterView"]
