"""RoleBasedGroups (sgl-project/rbg, workloads.x-k8s.io/v1alpha2) that run their roles as
LeaderWorkerSets: the RBG owns each role's LWS and drives its replicas.

Facts from the rbg source (api/workloads/v1alpha2 helper.go, api/workloads/constants/label.go,
pkg/reconciler/lws_reconciler.go): a role's workload (here a LeaderWorkerSet) is named
`<rbg>-<role>` (GetWorkloadName), controller-owned by the RoleBasedGroup, labelled
`rbg.workloads.x-k8s.io/group-name: <rbg>` and `rbg.workloads.x-k8s.io/role-name: <role>`, and its
`spec.replicas` is server-side-applied on every reconcile; a role's scaler is the
RoleBasedGroupScalingAdapter named `<rbg>-<role>` (GenerateScalingAdapterName). A RoleBasedGroupSet
runs a number of whole RoleBasedGroups (`spec.replicas`: RBG copies, each with every role).
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.model import OwnerRef, metadata, str_map
from guardhook.wire import KubeObject

RBG_API_GROUP = "workloads.x-k8s.io"
RBG_API_VERSION = f"{RBG_API_GROUP}/v1alpha2"
RBG_KIND = "RoleBasedGroup"
RBG_SET_KIND = "RoleBasedGroupSet"
SCALING_ADAPTER_KIND = "RoleBasedGroupScalingAdapter"
RBG_PREFIX = "rbg.workloads.x-k8s.io/"
GROUP_NAME_LABEL = RBG_PREFIX + "group-name"
ROLE_NAME_LABEL = RBG_PREFIX + "role-name"


@dataclass(frozen=True, slots=True)
class RbgRole:
    """The RoleBasedGroup that owns an LWS and the role the LWS runs."""

    rbg: str
    role: str

    @property
    def adapter_name(self) -> str:
        """The role's RoleBasedGroupScalingAdapter: `<rbg>-<role>` (GenerateScalingAdapterName)."""
        return f"{self.rbg}-{self.role}"


def rbg_role(lws: KubeObject) -> RbgRole | None:
    """Which RoleBasedGroup (controller ownerReference, workloads.x-k8s.io) runs `lws` and for which
    role (the role-name label, else the name's rest after `<rbg>-`); None when no RBG owns it."""
    meta = metadata(lws)
    for owner in OwnerRef.parse_all(meta):
        if owner.controller and owner.kind == RBG_KIND and owner.api_version.startswith(RBG_API_GROUP + "/"):
            role = str_map(meta.get("labels")).get(ROLE_NAME_LABEL, "")
            name = str(meta.get("name") or "")
            if not role and name.startswith(owner.name + "-"):
                role = name[len(owner.name) + 1 :]
            return RbgRole(owner.name, role)
    return None


def is_rbg_set(api_version: str, kind: str) -> bool:
    """Whether a scale target reference names a RoleBasedGroupSet."""
    return kind == RBG_SET_KIND and api_version.split("/")[0] == RBG_API_GROUP
