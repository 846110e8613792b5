"""Where the cluster view comes from (design.md §4), in this order: `--cluster-state PATH`,
`--kubeconfig FILE`, in-cluster config, `$KUBECONFIG` / `~/.kube/config`, else the bundled sample
fleet. A configured cluster that cannot be reached never falls back to the sample fleet.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from guardhook.cluster.view.static import embedded_fleet_view, view_from_paths
from guardhook.cluster.view.store import ClusterView

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

STATE = "cluster-state"
KUBECONFIG = "kubeconfig"
IN_CLUSTER = "in-cluster"
EMBEDDED = "embedded"


@dataclass(frozen=True)
class Source:
    """A resolved source: `kind` is one of STATE, KUBECONFIG, IN_CLUSTER, EMBEDDED; `paths` holds
    the manifest paths (STATE) or the kubeconfig file (KUBECONFIG)."""

    kind: str
    paths: tuple[str, ...] = ()

    @property
    def live(self) -> bool:
        return self.kind in (KUBECONFIG, IN_CLUSTER)

    def describe(self) -> str:
        if self.kind == EMBEDDED:
            return "the bundled sample fleet (no cluster configured)"
        return f"{self.kind} {', '.join(self.paths)}".strip()


def in_cluster(env: Mapping[str, str] | None = None) -> bool:
    """Whether in-cluster config is present (service env vars and a mounted token)."""
    env = os.environ if env is None else env
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT_DIR / "token").is_file()


def choose_source(
    cluster_state: Sequence[str] = (),
    kubeconfig: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Source:
    """Resolve the source from flags and environment, in the documented order."""
    env = os.environ if env is None else env
    if cluster_state:
        return Source(STATE, tuple(cluster_state))
    if kubeconfig:
        return Source(KUBECONFIG, (kubeconfig,))
    if in_cluster(env):
        return Source(IN_CLUSTER)
    if env.get("KUBECONFIG"):
        return Source(KUBECONFIG, (env["KUBECONFIG"],))
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return Source(KUBECONFIG, (str(default),))
    return Source(EMBEDDED)


def in_cluster_namespace(default: str = "guardhook-system") -> str:
    """The pod's namespace inside a cluster, else `default`."""
    try:
        return (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip() or default
    except OSError:
        return default


def static_view(source: Source, stale_after_seconds: float = 60.0) -> ClusterView:
    """The view of a non-live source. Raises ManifestError on unreadable manifests."""
    if source.kind == STATE:
        view = view_from_paths(source.paths)
    elif source.kind == EMBEDDED:
        log.warning("no cluster configured: using the bundled sample fleet as the cluster view")
        view = embedded_fleet_view()
    else:
        raise ValueError(f"{source.kind} is a live source")
    view.stale_after_seconds = stale_after_seconds
    return view
