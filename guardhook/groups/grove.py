"""NVIDIA Grove (ai-dynamo/grove, `grove.io/v1alpha1`): a PodCliqueSet replica is one gang.

A PodCliqueSet `P` with `spec.replicas: R` runs R replicas; replica r is a gang of PodCliques
(frontend, prefill, decode leader and workers...), each named `P-<r>-<clique>`, either owned by
`P` or, for the cliques of a PodCliqueScalingGroup `P-<r>-<sg>`, by that scaling group and named
`P-<r>-<sg>-<sg replica>-<clique>` (grove operator/api/common/namegen.go GeneratePodCliqueName,
GeneratePodCliqueScalingGroupName). Every pod is created by its PodClique (controller
ownerReference, `generateName: <podclique>-`) and labelled (operator/internal/controller/
podclique/components/pod/pod.go getLabels; operator/api/common/labels.go):

| label | value |
|---|---|
| `app.kubernetes.io/managed-by` | `grove-operator` |
| `app.kubernetes.io/part-of` | the PodCliqueSet's name |
| `grove.io/podclique` | the PodClique's name |
| `grove.io/podcliqueset-replica-index` | r |
| `grove.io/podclique-pod-index` | the pod's index in its clique |
| `grove.io/podgang` | its PodGang: `P-<r>` (the base gang), or `P-<r>-<sg>-<n>` for a |
| | scaling-group replica beyond the group's `minAvailable` |

guardhook's group is the PodCliqueSet replica: set = the PodCliqueSet, key = r (the scaled
PodGangs of a replica are counted in it: one of their pods gone costs that replica). Membership
is read from the controller ownerReference first (a PodClique of group `grove.io`, whose name
must begin `P-<r>-`) and labels second: labels that disagree with the owner are judged by the
owner's name, as the LWS ones are. A replica's size is what the view shows of it: per clique,
the pods held or the highest `grove.io/podclique-pod-index` plus one, whichever is more (the view
holds no PodCliqueSets). Nothing on guardhook's behalf recreates a gang: the Grove operator
replaces lost pods and, when a clique falls below its `minAvailable` for longer than the
PodCliqueSet's `terminationDelay`, terminates and recreates the whole replica (gang termination).

Scalers: the PodCliqueSet's `/scale` counts replicas (`.spec.replicas`) with the selector
`.status.hpaPodSelector`, which matches every pod of every clique of every replica (grove #744),
and a PodCliqueScalingGroup's counts scaling-group replicas with `.status.selector` (its
cliques' pods): see `SCALED_KINDS`. `GroveMaker.new_gangs` reads a scale-up of either as whole
new gangs to place (group-capacity), and `scaled_target` what their `/scale` counts
(pod-counted-scaler).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.model import OwnerRef, PodRecord, as_dict, as_list, spec_replicas
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.maker import GangPods, NewGangs, ScaledTarget, ScaleRequest
from guardhook.groups.podgangs import PodReadMaker
from guardhook.groups.ref import GROVE, Recreator, SetRef

GROVE_API_GROUP = "grove.io"
GROVE_API_VERSION = "grove.io/v1alpha1"
PODCLIQUESET_KIND = "PodCliqueSet"
PODCLIQUE_KIND = "PodClique"
SCALING_GROUP_KIND = "PodCliqueScalingGroup"
SCALED_KINDS = (PODCLIQUESET_KIND, SCALING_GROUP_KIND)
"""Grove kinds whose `/scale` counts whole gangs (PodCliqueSet replicas) or scaling-group
replicas, while their selectors match the pods of several cliques (grove CRDs' `subresources.scale`)."""

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_GROVE = "grove-operator"
PART_OF_LABEL = "app.kubernetes.io/part-of"
PODCLIQUE_LABEL = "grove.io/podclique"
REPLICA_INDEX_LABEL = "grove.io/podcliqueset-replica-index"
POD_INDEX_LABEL = "grove.io/podclique-pod-index"
PODGANG_LABEL = "grove.io/podgang"
SCALING_GROUP_LABEL = "grove.io/podcliquescalinggroup"

GROVE_OPERATOR = "system:serviceaccount:grove-system:grove-operator"
"""The Grove operator as installed: the Helm chart's service account `grove-operator`
(operator/charts/values.yaml serviceAccount.name) in the release namespace, `grove-system` in
Grove's own installs (operator/e2e/setup/constants.go OperatorNamespace)."""

_INDEX = re.compile(r"-(\d+)-")


@dataclass(frozen=True, slots=True)
class GroveMember:
    """Where a Grove pod stands: its PodCliqueSet, replica (the gang's key), PodClique and pod
    index; `inconsistent` says how its labels disagreed with its controller ("" when they agree)."""

    namespace: str
    pcs: str
    replica: str
    clique: str
    pod_index: int | None
    inconsistent: str = ""


def _podclique_owner(pod: PodRecord) -> OwnerRef | None:
    """The pod's controller ownerReference when it is a Grove PodClique, else None."""
    for owner in pod.owners:
        if (
            owner.controller
            and owner.kind == PODCLIQUE_KIND
            and owner.api_version.startswith(GROVE_API_GROUP + "/")
        ):
            return owner
    return None


def _pod_index(pod: PodRecord) -> int | None:
    raw = pod.labels.get(POD_INDEX_LABEL, "")
    return int(raw) if raw.isdigit() else None


def _from_owner_name(view: ClusterView | None, namespace: str, clique: str) -> tuple[str, str] | None:
    """(PodCliqueSet, replica) read from a PodClique's name `P-<r>-...`: among the splits at a
    `-<digits>-`, the one a PodCliqueSet the view's other Grove pods name (by their labels), else the
    leftmost (a PodCliqueSet's name may itself hold `-<digits>-`)."""
    splits = [(clique[: m.start()], m.group(1)) for m in _INDEX.finditer(clique)]
    if not splits:
        return None
    if view is not None:
        named = {
            p.labels.get(PART_OF_LABEL) for p in view.pods_in_namespace(namespace) if _podclique_owner(p)
        }
        for pcs, replica in splits:
            if pcs in named:
                return pcs, replica
    return splits[0]


def grove_member(pod: PodRecord, view: ClusterView | None = None) -> GroveMember | None:
    """The PodCliqueSet replica `pod` belongs to, or None for a pod no Grove PodClique controls.
    The labels are believed when the PodClique's name agrees with them (begins `P-<r>-`); else
    the PodClique's name decides (see `_from_owner_name`) and `inconsistent` says so."""
    owner = _podclique_owner(pod)
    if owner is None:
        return None
    pcs = pod.labels.get(PART_OF_LABEL, "")
    replica = pod.labels.get(REPLICA_INDEX_LABEL, "")
    if pcs and replica.isdigit() and owner.name.startswith(f"{pcs}-{replica}-"):
        return GroveMember(pod.namespace, pcs, replica, owner.name, _pod_index(pod))
    found = _from_owner_name(view, pod.namespace, owner.name)
    if found is None:
        return None
    said = f"{PART_OF_LABEL}={pcs or '(none)'}, {REPLICA_INDEX_LABEL}={replica or '(none)'}"
    why = f"{said}, but its controller is PodClique {owner.name}"
    return GroveMember(pod.namespace, found[0], found[1], owner.name, _pod_index(pod), why)


def replica_size(pods: list[PodRecord], view: ClusterView | None = None) -> int:
    """A replica's size from its pods (terminal ones aside): per PodClique the pods held or the
    highest pod index plus one, whichever is more; at least 1."""
    held: dict[str, int] = {}
    highest: dict[str, int] = {}
    for pod in pods:
        if pod.terminal:
            continue
        member = grove_member(pod, view)
        clique = member.clique if member is not None else ""
        held[clique] = held.get(clique, 0) + 1
        if member is not None and member.pod_index is not None:
            highest[clique] = max(highest.get(clique, -1), member.pod_index)
    return max(1, sum(max(n, highest.get(c, -1) + 1) for c, n in held.items()))


SCALING_GROUP_REPLICA_LABEL = "grove.io/podcliquescalinggroup-replica-index"


def pods_per_scaled_replica(view: ClusterView, namespace: str, kind: str, name: str) -> list[int]:
    """The live pods of each replica the `/scale` of Grove object `kind` `namespace/name` counts,
    as the view holds them: a PodCliqueSet's replicas (its gangs), or a PodCliqueScalingGroup's
    replicas (its pods by `grove.io/podcliquescalinggroup-replica-index`); empty when the view
    holds none."""
    if kind == PODCLIQUESET_KIND:
        replicas = GROVE_MAKER.members(view, namespace, name).values()
        return [sum(not p.terminal for p in pods) for pods in replicas]
    counts: dict[str, int] = {}
    for pod in view.pods_in_namespace(namespace):
        if pod.labels.get(SCALING_GROUP_LABEL) == name and _podclique_owner(pod) and not pod.terminal:
            index = pod.labels.get(SCALING_GROUP_REPLICA_LABEL, "")
            counts[index] = counts.get(index, 0) + 1
    return list(counts.values())


def _place(pod: PodRecord, view: ClusterView | None) -> tuple[str, str, str] | None:
    member = grove_member(pod, view)
    return None if member is None else (member.pcs, member.replica, member.inconsistent)


PODCLIQUESETS = "podcliquesets"
SCALING_GROUPS = "podcliquescalinggroups"
PODGANG_GATE = "grove.io/podgang-pending-creation"
"""The scheduling gate the PodClique controller puts on every pod it creates, lifted once the
pod's PodGang exists (operator/internal/controller/podclique/components/pod/pod.go)."""
PLACED_BY = (
    f"Grove's gang scheduling (each pod gated by {PODGANG_GATE} until its PodGang exists, then placed "
    "whole by the scheduler backend)"
)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def template_gang(spec: Mapping[str, Any]) -> tuple[GangPods, ...]:
    """The pods of one PodCliqueSet replica from its `spec.template` (grove operator/api/core/
    v1alpha1 podcliqueset.go): per clique of `cliques`, `spec.replicas` pods of `spec.podSpec`
    (with the clique's labels and annotations), times the `replicas` (default 1) of the
    `podCliqueScalingGroups` entry naming the clique in `cliqueNames`."""
    template = as_dict(spec.get("template"))
    per_group: dict[str, int] = {}
    for group in as_list(template.get("podCliqueScalingGroups")):
        group = as_dict(group)
        for name in as_list(group.get("cliqueNames")):
            per_group[str(name)] = max(0, _int(group.get("replicas"), 1))
    pods = []
    for clique in as_list(template.get("cliques")):
        clique = as_dict(clique)
        clique_spec = as_dict(clique.get("spec"))
        name = str(clique.get("name") or "")
        count = max(0, _int(clique_spec.get("replicas"), 1)) * per_group.get(name, 1)
        meta = {"labels": as_dict(clique.get("labels")), "annotations": as_dict(clique.get("annotations"))}
        pods.append(GangPods(name, count, {"metadata": meta, "spec": as_dict(clique_spec.get("podSpec"))}))
    return tuple(p for p in pods if p.count > 0)


def _role(pod: PodRecord, view: ClusterView) -> str:
    """The clique's template name of a Grove pod: its PodClique's name past `<pcs>-<r>-`."""
    member = grove_member(pod, view)
    if member is None:
        return ""
    return member.clique.removeprefix(f"{member.pcs}-{member.replica}-")


def pods_like(pods: list[PodRecord], view: ClusterView) -> tuple[GangPods, ...]:
    """One gang's pods read from the pods of an existing one the view holds: per clique, as many
    as `replica_size` counts (held, or the highest pod index plus one), like one of its live pods."""
    by_clique: dict[str, list[PodRecord]] = {}
    for pod in pods:
        if not pod.terminal:
            by_clique.setdefault(_role(pod, view), []).append(pod)
    return tuple(
        GangPods(role, replica_size(members, view), like=members[0])
        for role, members in sorted(by_clique.items())
    )


def _fullest(groups: Mapping[str, list[PodRecord]]) -> tuple[str, list[PodRecord]] | None:
    """The group with the most live pods (lowest key on ties), or None when none has one."""
    ranked = sorted(
        ((sum(not p.terminal for p in pods), key) for key, pods in groups.items()),
        key=lambda item: (-item[0], len(item[1]), item[1]),
    )
    if not ranked or ranked[0][0] == 0:
        return None
    return ranked[0][1], list(groups[ranked[0][1]])


@dataclass
class GroveMaker(PodReadMaker):
    """Grove PodCliqueSet replicas as groups, and their scale-ups as whole gangs to place
    (guardhook.groups.maker.ScaleUps): a PodCliqueSet CREATE or UPDATE raising `spec.replicas`
    (each new replica's pods from the object's own template), its `/scale`, and a
    PodCliqueScalingGroup UPDATE or `/scale` raising `spec.replicas` (pods read from an existing
    replica the view holds: the view holds no Grove objects, only their pods)."""

    scale_resources: tuple[tuple[str, str, str], ...] = (
        (GROVE_API_GROUP, PODCLIQUESETS, ""),
        (GROVE_API_GROUP, PODCLIQUESETS, "scale"),
        (GROVE_API_GROUP, SCALING_GROUPS, ""),
        (GROVE_API_GROUP, SCALING_GROUPS, "scale"),
    )

    def new_gangs(self, view: ClusterView, request: ScaleRequest) -> NewGangs | str:
        """See the class docstring; a string when the pods cannot be read ("" for no scale-up)."""
        new = spec_replicas(request.object)
        old = spec_replicas(request.old_object) if request.old_object else 0
        if request.operation == "CREATE":
            old = 0
        if new is None or new <= (old or 0):
            return ""
        old = old or 0
        if request.resource == PODCLIQUESETS and not request.subresource:
            target = SetRef(request.namespace, PODCLIQUESET_KIND, request.name)
            pods = template_gang(as_dict(request.object.get("spec")))
            return NewGangs(target, old, new, pods, "replica", "the PodCliqueSet's template", PLACED_BY)
        if request.resource == PODCLIQUESETS:
            return self._like_existing(view, request, old, new)
        return self._scaling_group(view, request, old, new)

    def _like_existing(self, view: ClusterView, request: ScaleRequest, old: int, new: int) -> NewGangs | str:
        target = SetRef(request.namespace, PODCLIQUESET_KIND, request.name)
        with view.lock:
            fullest = _fullest(self.members(view, request.namespace, request.name))
            if fullest is None:
                return f"{target} has no pods in guardhook's view; capacity was not checked"
            key, pods = fullest
            like = pods_like(pods, view)
        return NewGangs(target, old, new, like, "replica", f"the pods of its replica {key}", PLACED_BY)

    def _scaling_group(self, view: ClusterView, request: ScaleRequest, old: int, new: int) -> NewGangs | str:
        """A PodCliqueScalingGroup's new replicas, each like the view's fullest replica of it (its
        pods labelled `grove.io/podcliquescalinggroup: <name>`, by
        `grove.io/podcliquescalinggroup-replica-index`)."""
        name = f"{SCALING_GROUP_KIND} {request.namespace}/{request.name}"
        with view.lock:
            replicas: dict[str, list[PodRecord]] = {}
            for pod in view.pods_in_namespace(request.namespace):
                if pod.labels.get(SCALING_GROUP_LABEL) == request.name and _podclique_owner(pod):
                    replicas.setdefault(pod.labels.get(SCALING_GROUP_REPLICA_LABEL, ""), []).append(pod)
            fullest = _fullest(replicas)
            if fullest is None:
                return f"{name} has no pods in guardhook's view; capacity was not checked"
            key, pods = fullest
            like = pods_like(pods, view)
            member = grove_member(pods[0], view)
        pcs = member.pcs if member is not None else request.name
        target = SetRef(request.namespace, PODCLIQUESET_KIND, pcs)
        read = f"the pods of {name} replica {key}"
        return NewGangs(target, old, new, like, "scaling-group replica", read, PLACED_BY)

    def scaled_target(
        self, view: ClusterView, namespace: str, api_version: str, kind: str, name: str
    ) -> ScaledTarget | None:
        """A PodCliqueSet's `/scale` counts gangs, a PodCliqueScalingGroup's its replicas
        (`pods_per_scaled_replica`; guardhook.groups.maker.ScaledReplicas); None for other kinds."""
        if api_version.split("/")[0] != GROVE_API_GROUP or kind not in SCALED_KINDS or not name:
            return None
        each = "gang (every pod of every clique of one replica)" if kind == PODCLIQUESET_KIND else "replica"
        return ScaledTarget(each, tuple(pods_per_scaled_replica(view, namespace, kind, name)))


GROVE_MAKER = GroveMaker(
    name="Grove",
    flavour=GROVE,
    kind=PODCLIQUESET_KIND,
    # The operator replaces a lost pod; a clique below its minAvailable for longer than the
    # PodCliqueSet's terminationDelay gets the whole replica terminated and recreated.
    recreator=Recreator("Grove operator", "a PodCliqueSet's", "terminationDelay", True),
    place=_place,
    size=replica_size,
    gang_controllers=(GROVE_OPERATOR,),
)
"""Grove PodCliqueSet replicas as groups (guardhook.groups.maker.GroupMaker)."""
