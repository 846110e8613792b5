"""Karpenter NodePools (`karpenter.sh/v1`) as the cluster view keeps them.

A NodePool says which nodes Karpenter may launch: `spec.template.spec.requirements` (node selector
requirements over well-known and custom labels), `spec.template.spec.taints`, extra labels in
`spec.template.metadata.labels`, and `spec.limits`, a ResourceList capping the total capacity of
the pool's nodes; `status.resources` is what its nodes hold now. Karpenter labels every node it
launches with `karpenter.sh/nodepool: <name>` (Karpenter v1 API, pkg/apis/v1/nodepool.go and
labels.go).
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.model import Taint, as_dict, as_list, metadata, str_map
from guardhook.cluster.resources import Resources, parse_resource_list
from guardhook.wire import KubeObject

KARPENTER_API_GROUP = "karpenter.sh"
KARPENTER_API_VERSION = "karpenter.sh/v1"
NODEPOOL_LABEL = "karpenter.sh/nodepool"


@dataclass(frozen=True, slots=True)
class NodePoolRecord:
    """A NodePool: `requirements` as (key, operator, values), `taints`, template `labels`,
    `limits` and `used` (status.resources) in guardhook.cluster.resources units."""

    name: str
    requirements: tuple[tuple[str, str, tuple[str, ...]], ...]
    taints: tuple[Taint, ...]
    labels: dict[str, str]
    limits: Resources
    used: Resources
    has_status: bool

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: ("", name), the object being cluster-scoped."""
        return ("", self.name)

    @staticmethod
    def from_object(obj: KubeObject) -> NodePoolRecord:
        """The record of a decoded Karpenter NodePool (`karpenter.sh/v1`); malformed fields become
        empty values (never raises)."""
        spec = as_dict(obj.get("spec"))
        template = as_dict(spec.get("template"))
        node_spec = as_dict(template.get("spec"))
        status = obj.get("status")
        requirements = tuple(
            (
                str(r.get("key") or ""),
                str(r.get("operator") or ""),
                tuple(str(v) for v in as_list(r.get("values"))),
            )
            for r in map(as_dict, as_list(node_spec.get("requirements")))
        )
        taints = tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
            for t in map(as_dict, as_list(node_spec.get("taints")))
        )
        return NodePoolRecord(
            name=str(metadata(obj).get("name") or ""),
            requirements=requirements,
            taints=taints,
            labels=str_map(as_dict(template.get("metadata")).get("labels")),
            limits=parse_resource_list(as_dict(spec.get("limits"))),
            used=parse_resource_list(as_dict(as_dict(status).get("resources"))),
            has_status=isinstance(status, dict) and isinstance(status.get("resources"), dict),
        )
