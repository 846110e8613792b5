"""DisaggregatedSet (disaggregatedset.x-k8s.io/v1, released with LWS v0.10): a set of roles
(e.g. prefill, decode), each run as a LeaderWorkerSet the DisaggregatedSet controller creates.

Facts from the LWS source (api/disaggregatedset/v1, pkg/controllers/disaggregatedset, KEP-849):

- each role's LWS is named `<ds>-<slice>-<revision>-<role>` (older: `<ds>-<revision>-<role>`), the
  revision a hash of the roles' specs, so a rollout creates a new LWS and drains the old one; the
  controller drives every such LWS's `spec.replicas`;
- the LWS carries a controller ownerReference (apiVersion `disaggregatedset.x-k8s.io/v1`, kind
  `DisaggregatedSet`) and the labels `disaggregatedset.x-k8s.io/name`, `role`, `slice`, `revision`;
- a role with `scaling.mode: External` gets a `DisaggregatedSetRoleScaler` named `<ds>-<role>`
  (same API group, a `/scale` subresource), the stable target for an HPA or KEDA ScaledObject;
- per-role headless Services (`<lws>-prv`, clusterIP None) are owned by the DisaggregatedSet.
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.model import OwnerRef, metadata, str_map
from guardhook.wire import KubeObject

DS_API_GROUP = "disaggregatedset.x-k8s.io"
DS_API_VERSION = f"{DS_API_GROUP}/v1"
DS_KIND = "DisaggregatedSet"
ROLE_SCALER_KIND = "DisaggregatedSetRoleScaler"
DS_NAME_LABEL = DS_API_GROUP + "/name"
DS_ROLE_LABEL = DS_API_GROUP + "/role"


@dataclass(frozen=True)
class RoleOf:
    """The DisaggregatedSet that owns an object, and the role it runs ("" when unlabelled)."""

    disaggregated_set: str
    role: str

    @property
    def scaler_name(self) -> str:
        """The role's DisaggregatedSetRoleScaler: `<disaggregatedset>-<role>` (KEP-849)."""
        return f"{self.disaggregated_set}-{self.role}"


def ds_owner(obj: KubeObject) -> OwnerRef | None:
    """The DisaggregatedSet among `obj`'s ownerReferences (kind and API group both match), or None."""
    for owner in OwnerRef.parse_all(metadata(obj)):
        if owner.kind == DS_KIND and owner.api_version.startswith(DS_API_GROUP + "/"):
            return owner
    return None


def role_of(obj: KubeObject) -> RoleOf | None:
    """Which DisaggregatedSet and role an LWS (or Service) belongs to, from its ownerReference and
    role label; None when no DisaggregatedSet owns it."""
    owner = ds_owner(obj)
    if owner is None:
        return None
    return RoleOf(owner.name, str_map(metadata(obj).get("labels")).get(DS_ROLE_LABEL, ""))
