"""PodGroups of the Workload API (Kubernetes 1.37, `scheduling.k8s.io/v1beta1`, feature gate
GenericWorkload): the raw record the view keeps of each.

Facts from the Kubernetes source (staging/src/k8s.io/api/scheduling/v1beta1/types.go; KEP-5710,
KEP-5832): a pod names its group in `spec.schedulingGroup.podGroupName`; a PodGroup's spec holds
`workloadRef` (`workloadName`, `templateName`; optional), `schedulingPolicy` (a union of `basic`
and `gang`, whose `minCount` is the gang's size) and `disruptionMode` (a union of `single` and
`all`; unset means single): `all` declares that its pods can only be disrupted together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guardhook.cluster.model import OwnerRef, as_dict, metadata, str_map
from guardhook.wire import KubeObject

SCHEDULING_API_GROUP = "scheduling.k8s.io"
SCHEDULING_API_VERSION = f"{SCHEDULING_API_GROUP}/v1beta1"
POD_GROUP_KIND = "PodGroup"
WORKLOAD_KIND = "Workload"


@dataclass(frozen=True, slots=True)
class PodGroupRecord:
    """A PodGroup: `workload` is `spec.workloadRef.workloadName` ("" without one), `all_mode`
    whether `spec.disruptionMode.all` is set, `min_count` the gang's `minCount` (None for a basic
    policy or an unset count), `owners` its ownerReferences, `annotations` its annotations,
    `terminating` whether it carries a deletionTimestamp (1.37's PodGroupProtection admission puts
    the finalizer `scheduling.k8s.io/podgroup-protection` on every PodGroup, so a deleted one
    stays, terminating, until its pods are gone)."""

    namespace: str
    name: str
    workload: str
    all_mode: bool
    min_count: int | None
    owners: tuple[OwnerRef, ...]
    annotations: dict[str, str]
    terminating: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @staticmethod
    def from_object(obj: KubeObject) -> PodGroupRecord:
        """The record of a decoded PodGroup; malformed fields read as absent (never raises)."""
        meta = metadata(obj)
        spec = as_dict(obj.get("spec"))
        gang = as_dict(as_dict(spec.get("schedulingPolicy")).get("gang"))
        count: Any = gang.get("minCount")
        return PodGroupRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            workload=str(as_dict(spec.get("workloadRef")).get("workloadName") or ""),
            all_mode="all" in as_dict(spec.get("disruptionMode")),
            min_count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None,
            owners=OwnerRef.parse_all(meta),
            annotations=str_map(meta.get("annotations")),
            terminating=bool(meta.get("deletionTimestamp")),
        )


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """A Workload (scheduling.k8s.io/v1beta1): what guardhook reads of it, its annotations (the
    set's `guardhook.io/max-disrupted-groups`)."""

    namespace: str
    name: str
    annotations: dict[str, str]

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @staticmethod
    def from_object(obj: KubeObject) -> WorkloadRecord:
        """The record of a decoded Workload (never raises)."""
        meta = metadata(obj)
        return WorkloadRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            annotations=str_map(meta.get("annotations")),
        )


def pod_group_name(spec: dict[str, Any]) -> str:
    """`spec.schedulingGroup.podGroupName` of a pod spec ("" when absent)."""
    return str(as_dict(spec.get("schedulingGroup")).get("podGroupName") or "")
