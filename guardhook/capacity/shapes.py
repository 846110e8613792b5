"""What a pod template asks of a node: its requests and its node constraints.

A `PodShape` is read from a pod template (`{metadata, spec}`) the way kube-scheduler's filter
plugins read a pod: NodeResourcesFit (requests, see guardhook.cluster.resources, plus one `pods` slot),
TaintToleration (NoSchedule / NoExecute taints must be tolerated; PreferNoSchedule is a score, not
a filter), NodeAffinity (`spec.nodeSelector` and `requiredDuringSchedulingIgnoredDuringExecution`).
Pod affinity, anti-affinity and topology spread constraints are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.model import Taint, Toleration, as_dict, as_list
from guardhook.cluster.resources import container_total, pod_level_requests, shared_pod_requests
from guardhook.cluster.taints import tolerates

PODS = "pods"
"""Every pod takes one slot of the node's `pods` allocatable (the scheduler counts it so)."""

FILTERING_EFFECTS = ("NoSchedule", "NoExecute")
NODE_NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One node selector requirement: label `key` (or the node name for `metadata.name`)
    `operator` (In, NotIn, Exists, DoesNotExist, Gt, Lt) `values`."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False

    def matches(self, labels: Mapping[str, str], node_name: str | None = None) -> bool:
        """Whether a node with `labels` (and `node_name`, None for a node not made yet) meets this
        requirement, as the NodeAffinity filter judges it (unknown operators match nothing)."""
        if self.field:
            if self.key != NODE_NAME_FIELD or node_name is None:
                return self.operator == "NotIn"  # a node not made yet has none of the names listed
            return (node_name in self.values) == (self.operator == "In")
        value = labels.get(self.key)
        op = self.operator
        if op in ("In", "NotIn"):
            return (value is not None and value in self.values) == (op == "In")
        if op in ("Exists", "DoesNotExist"):
            return (value is not None) == (op == "Exists")
        if op in ("Gt", "Lt") and value is not None and len(self.values) == 1:
            try:
                number, bound = int(value), int(self.values[0])
            except ValueError:
                return False
            return number > bound if op == "Gt" else number < bound
        return False


Term = tuple[NodeRequirement, ...]
"""A nodeSelectorTerm: every requirement must hold."""


@dataclass(frozen=True, slots=True)
class PodShape:
    """The scheduling-relevant part of a pod template.

    `requests`: sorted (resource, amount) in guardhook.cluster.resources units, always with `pods` 1.
    `node_selector`: sorted (label, value) pairs that must all match.
    `affinity_terms`: required node affinity as ORed terms; None when the template has none.
    `tolerations`: the template's tolerations (guardhook.cluster.model.Toleration; the scheduler
    ignores `tolerationSeconds`).
    """

    requests: tuple[tuple[str, int], ...]
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[Term, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()

    @property
    def request_map(self) -> dict[str, int]:
        return dict(self.requests)

    @property
    def constraints(self) -> tuple[Any, ...]:
        """Everything but the requests: two shapes with equal constraints see the same nodes."""
        return (self.node_selector, self.affinity_terms, self.tolerations)

    def selects(self, labels: Mapping[str, str], node_name: str | None = None) -> bool:
        """Whether `spec.nodeSelector` and required node affinity select a node with `labels`."""
        if any(labels.get(key) != value for key, value in self.node_selector):
            return False
        if self.affinity_terms is None:
            return True
        return any(term and all(r.matches(labels, node_name) for r in term) for term in self.affinity_terms)

    def tolerates_all(self, taints: tuple[Taint, ...]) -> bool:
        """Whether every NoSchedule / NoExecute taint is tolerated (TaintToleration filter)."""
        return all(
            any(tolerates(t, taint) for t in self.tolerations)
            for taint in taints
            if taint.effect in FILTERING_EFFECTS
        )

    def describe_requests(self) -> str:
        """`cpu 90, memory 1500Gi, nvidia.com/gpu 8` (the pods slot left out); `no resources`
        for a pod that requests none, so a message never reads "each requesting  and"."""
        described = ", ".join(
            f"{name} {format_amount(name, amount)}" for name, amount in self.requests if name != PODS
        )
        return described or "no resources"


def shape_of_template(template: Mapping[str, Any]) -> PodShape:
    """Read a pod template (`{metadata, spec}`) into a PodShape. Malformed parts are ignored,
    as the API server would have rejected them before a template reaches a webhook."""
    spec = as_dict(template.get("spec"))
    requests = {name: amount for name, amount in shared_pod_requests(spec).items() if amount > 0}
    requests[PODS] = 1
    selector = as_dict(spec.get("nodeSelector"))
    return PodShape(
        requests=tuple(sorted(requests.items())),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        affinity_terms=_required_affinity(spec),
        tolerations=Toleration.parse_all_shared(spec),
    )


def _required_affinity(spec: Mapping[str, Any]) -> tuple[Term, ...] | None:
    node_affinity = as_dict(as_dict(spec.get("affinity")).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict):
        return None
    terms: list[Term] = []
    for raw_term in as_list(required.get("nodeSelectorTerms")):
        term = as_dict(raw_term)
        expressions = [_requirement(as_dict(e), False) for e in as_list(term.get("matchExpressions"))]
        fields = [_requirement(as_dict(e), True) for e in as_list(term.get("matchFields"))]
        terms.append(tuple(expressions + fields))
    return tuple(terms)


def _requirement(raw: Mapping[str, Any], field: bool) -> NodeRequirement:
    values = tuple(str(v) for v in as_list(raw.get("values")))
    return NodeRequirement(str(raw.get("key") or ""), str(raw.get("operator") or ""), values, field)


_BINARY_UNITS = (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


def format_amount(resource: str, amount: int) -> str:
    """A resource amount in Kubernetes quantity notation: cpu from millicores, memory-like
    amounts in the largest exact binary unit."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, factor in _BINARY_UNITS:
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def pod_level_note(template: Mapping[str, Any], role: str) -> str:
    """What a template's pod-level resources (`spec.resources`, KEP-2837) made its pods request,
    for the model line: "worker template: pod-level spec.resources counted (cpu 8, memory 64Gi;
    its containers ask cpu 4, memory 32Gi)"; "" for a template without them."""
    spec = as_dict(template.get("spec"))
    if not spec.get("resources"):
        return ""
    containers = container_total(spec)
    pod_level = pod_level_requests(spec, containers)
    if not pod_level:
        return ""
    counted = ", ".join(f"{name} {format_amount(name, amount)}" for name, amount in sorted(pod_level.items()))
    theirs = ", ".join(
        f"{name} {format_amount(name, containers[name])}" for name in sorted(pod_level) if name in containers
    )
    return (
        f"{role} template: pod-level spec.resources counted ({counted}"
        + (f"; its containers ask {theirs}" if theirs else "")
        + ")"
    )
