"""Policy `group-capacity`: deny a LeaderWorkerSet scale-up whose new groups cannot all be placed.

Sees LWS CREATE, LWS UPDATE and `leaderworkersets/scale` UPDATE. New groups are
`new replicas − old replicas`; a size change re-shapes every group, and since the LWS rolls groups
out under `rolloutStrategy.rollingUpdateConfiguration`, `maxSurge` (an int or a percentage of
replicas, rounded up, as in the LWS controller) groups of the new shape must also fit beside the
old ones. A reserve of `spareGroups` more groups (config, overridden per LWS by the annotation
`guardhook.io/spare-groups`) must fit too. Scale-downs (neither replicas nor size raised) are
always allowed. The feasibility answer comes from guardhook.capacity (exact within its model).

Capacity as GPU clusters provide it (issue 14): DRA devices of DeviceClasses are counted for the
extended resources they map and for the templates' ResourceClaimTemplates (guardhook.capacity.
claims / devices); scheduling-gated pods claim nothing, but the gated leaders of a Hash LWS
(lws KEP-898: held until the group they replace is gone) are groups to place, counted as demand;
nodes are filtered as kube-scheduler does
(a cordon is the unschedulable taint, NotReady only through its taints). When not every group
fits, a Karpenter NodePool or configured `autoscaledPools` entry that could add the nodes turns the
denial into a warning naming the pool and the nodes it needs (guardhook.capacity.provision), and
an LWS that Kueue admits or a gang scheduler places gets its fit as a warning (`kueueManaged`,
`gangScheduled`: Warn or Deny). Every answer states the model it used: in the message and in the
audit annotation `group-capacity-model`. The LWS controller's account is judged too
(`judges_lws_controller`): the DisaggregatedSet controller scales LWSs as that account.

Skipped, with an advisory, when the view holds no nodes (an offline check of manifests), and for a
`/scale` of an LWS the view does not hold. A size change with `maxSurge: 0` replaces groups in
place; that replacement is not checked (advisory).

A gang maker's scale-up (guardhook.groups.new_gangs: a Grove PodCliqueSet CREATE/UPDATE or
`/scale`, a PodCliqueScalingGroup UPDATE or `/scale`) is judged the same way with each new gang's
pods as one unit to place (guardhook.capacity.fit_gangs: exact for an LWS group's shapes, greedy for
more); its placement is the maker's gang scheduling (`gangScheduled`).

Fail mode: open. With a stale view the request is allowed with a warning: a scale-up that does
not fit leaves pods Pending, which the scheduler reports; it breaks nothing that runs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from guardhook.cluster.annotations import SPARE_GROUPS_ANNOTATION
from guardhook.cluster.lws import LWS_API_GROUP, LWS_KIND, LeaderWorkerSet, int_annotation
from guardhook.cluster.model import as_dict, scaled, spec_replicas
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import NewGangs, ScaleRequest, SetRef, new_gangs, scaled_resources, waiting_groups
from guardhook.groups.counts import populated_groups
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.wire import KubeObject

if TYPE_CHECKING:
    from guardhook.capacity import Fit, GangFit, GroupDemand
    from guardhook.capacity.index import CapacityIndex
    from guardhook.capacity.provision import Provision
    from guardhook.capacity.shapes import PodShape

MODEL_KEY = "model"
MODEL_ANNOTATION = "group-capacity-model"
"""auditAnnotations key of the model every answer states (the engine prefixes the policy id)."""
BASE_MODEL = "node allocatable less bound and pending pods' requests"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""Kueue's label on a workload (the LWS integration reads it from the LeaderWorkerSet)."""
GANG_TEMPLATE_FIELDS = ("schedulingGroup", "workloadRef")
"""Pod spec fields tying pods to a gang (KEP-4671, workload-aware scheduling): from 1.36
`spec.schedulingGroup.podGroupName`, naming the PodGroup of the Workload API (scheduling.k8s.io,
v1beta1 in 1.37; feature gate GenericWorkload), which replaced the 1.35 alpha `workloadRef`
(still read, for templates written against 1.35)."""
GANG_TEMPLATE_MARKS = ("scheduling.x-k8s.io/pod-group", "scheduling.k8s.io/group-name")
"""Template labels / annotations of out-of-tree gang schedulers: scheduler-plugins' coscheduling
PodGroup label and Volcano's PodGroup annotation."""
SOURCE_ACTIONS = ("Warn", "Deny")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


@dataclass(frozen=True)
class ScaleUp:
    """The LWS as it will be (`lws`), and its replicas and group size before and after."""

    lws: LeaderWorkerSet
    old_replicas: int
    new_replicas: int
    old_size: int
    new_size: int

    @property
    def raised(self) -> bool:
        return self.new_replicas > self.old_replicas or self.new_size > self.old_size

    @property
    def reshaped(self) -> bool:
        return self.old_replicas > 0 and self.new_size != self.old_size

    def new_groups(self) -> int:
        """Groups of the new shape that must be placed beside what runs now."""
        added = max(0, self.new_replicas - self.old_replicas)
        return added + (surge_groups(self.lws.rollout, self.new_replicas) if self.reshaped else 0)


def surge_groups(rollout: dict[str, Any], replicas: int) -> int:
    """`maxSurge` resolved against `replicas` (LWS: int or "N%", percentages rounded up; default
    0), capped at `replicas`."""
    value = scaled(rollout.get("maxSurge"), replicas, round_up=True, default=0)
    return max(0, min(value, replicas))


class GroupCapacity(Policy):
    id = "group-capacity"
    targets = (
        target(LWS_API_GROUP, "leaderworkersets", "", "CREATE", "UPDATE"),
        target(LWS_API_GROUP, "leaderworkersets", "scale", "UPDATE"),
        # gang makers' scale-ups (guardhook.groups.maker.ScaleUps: Grove's PodCliqueSets and
        # PodCliqueScalingGroups), read through the group model
        *(
            target(group, resource, sub, *(("UPDATE",) if sub else ("CREATE", "UPDATE")))
            for group, resource, sub in scaled_resources()
        ),
    )
    default_actions = ("Deny",)
    fail_closed = False
    reads_nodes = True
    judges_lws_controller = True  # LWS spec changes are judged whoever makes them (DisaggregatedSet)
    params = {
        "spareGroups": 0,
        "kueueManaged": "Warn",
        "gangScheduled": "Warn",
        "autoscaledPools": [],
    }

    def param_problem(self, name: str, value: Any) -> str | None:
        if name in ("kueueManaged", "gangScheduled") and value not in SOURCE_ACTIONS:
            return f"must be one of {', '.join(SOURCE_ACTIONS)}, got {value!r}"
        if name == "autoscaledPools":
            return _pools_problem(value)
        return None

    def already_running(self, view: ClusterView, obj: KubeObject) -> bool:
        """An LWS whose pods the view holds is running: judged as a CREATE, its own groups would
        be counted as new demand against free capacity."""
        if obj.get("kind") != "LeaderWorkerSet":
            return False
        lws = LeaderWorkerSet(obj)
        return bool(populated_groups(view, lws))

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Deny when not every new whole group (plus the spare reserve) fits; see the module
        docstring."""
        if as_dict(ctx.request.get("resource")).get("group") != LWS_API_GROUP:
            return self.judge_gangs(ctx)
        change = read_scale_up(ctx)
        if isinstance(change, str):
            return Judgement(advisories=(change,)) if change else ALLOW
        if not change.raised:
            return ALLOW
        new_groups = change.new_groups()
        if new_groups == 0:
            return Judgement(
                advisories=(
                    f"LeaderWorkerSet {change.lws.name} changes its group size with maxSurge 0: groups are "
                    "replaced in place and the replacements were not checked for capacity",
                )
            )
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        capacity = _capacity()
        index = capacity.index_for(ctx.view)
        if index.node_count == 0:
            return Judgement(advisories=("the cluster view holds no nodes; group capacity was not checked",))
        lws = change.lws
        spare = int_annotation(lws.annotations, SPARE_GROUPS_ANNOTATION, int(ctx.params["spareGroups"]))
        namespace = lws.namespace or ctx.namespace
        leader, worker, notes = template_shapes(lws, namespace, ctx.view, index)
        waiting = waiting_groups(ctx.view, SetRef(namespace, LWS_KIND, lws.name))
        if waiting:
            notes = (
                *notes,
                f"{waiting} scheduling-gated Hash leader{'s' if waiting > 1 else ''} counted as "
                "groups to place",
            )
        demand: GroupDemand = capacity.GroupDemand(
            leader=leader,
            worker=worker,
            size=max(1, change.new_size),
            count=new_groups + spare + waiting,
            namespace=namespace,
            exclusive_key=lws.exclusive_topology,
        )
        fit: Fit = capacity.fit_groups(index, demand)
        model = describe_model(fit, notes)
        audit = ((MODEL_KEY, model),)
        name = lws.name or ctx.name
        if fit.all_fit:
            advisories: tuple[str, ...] = ()
            if fit.needs_flagged_nodes:
                advisories = (
                    f"the new groups of LeaderWorkerSet {name} fit only with cordoned, NotReady or draining "
                    f"nodes (node lifecycle conditions such as MaintenancePlanned or DrainInProgress), "
                    f"which its templates tolerate (kube-scheduler places pods there too). Model: {model}",
                )
            return Judgement(advisories=advisories, audit_annotations=audit)
        shortfall = shortfall_message(fit, name, new_groups)
        pools = capacity.provision.pools_of(ctx.view, ctx.params["autoscaledPools"])
        answers = capacity.provision.provision(index, ctx.view, demand, pools) if pools else []
        grown = autoscaled(answers, shortfall, model) if answers else None
        if grown is not None:
            return Judgement(advisories=(grown,), audit_annotations=audit)
        if answers:
            shortfall += "; node autoscaling does not help: " + "; ".join(
                capacity.provision.describe(a) for a in answers
            )
        message = f"{shortfall}. Model: {model}"
        placement = placed_by(lws)
        if placement is not None and ctx.params[placement[0]] == "Warn":
            note = f"{placement[1]} decides its placement, so its fit is reported, not enforced: {message}"
            return Judgement(advisories=(note,), audit_annotations=audit)
        return Judgement(violation=Violation(message), audit_annotations=audit)

    def judge_gangs(self, ctx: PolicyContext) -> Judgement:
        """A gang maker's scale-up (guardhook.groups.new_gangs): each new gang's pods (every
        role's pods of its template, or like an existing gang's) placed as one unit; denied when
        not every new gang (plus the spare reserve, `spareGroups`) fits. Who places the gangs
        whole (Grove's PodGang scheduling) makes it a warning under `gangScheduled: Warn`."""
        request = scale_request(ctx)
        change = new_gangs(ctx.view, request)
        if change is None or change == "":
            return ALLOW
        if isinstance(change, str):
            return Judgement(advisories=(change,))
        if change.count == 0 or not change.pods:
            return ALLOW
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        capacity = _capacity()
        index = capacity.index_for(ctx.view)
        if index.node_count == 0:
            return Judgement(advisories=("the cluster view holds no nodes; group capacity was not checked",))
        spare = int(ctx.params["spareGroups"])
        members = gang_members(change)
        demand = capacity.GangDemand(members, change.count + spare, change.set.namespace)
        fit: GangFit = capacity.fit_gangs(index, demand)
        model = "; ".join((BASE_MODEL, *fit.model, f"pods read from {change.read_from}"))
        audit = ((MODEL_KEY, model),)
        if fit.fits >= fit.demand.count:
            return Judgement(audit_annotations=audit)
        message = f"{gang_shortfall(change, fit, spare)}. Model: {model}"
        if change.placed_by and ctx.params["gangScheduled"] == "Warn":
            note = f"{change.placed_by} decides its placement, so its fit is reported, not enforced: "
            note += message
            return Judgement(advisories=(note,), audit_annotations=audit)
        return Judgement(violation=Violation(message), audit_annotations=audit)


def scale_request(ctx: PolicyContext) -> ScaleRequest:
    """The request as the group model reads a scale-up (guardhook.groups.ScaleRequest)."""
    resource = as_dict(ctx.request.get("resource"))
    return ScaleRequest(
        group=str(resource.get("group") or ""),
        resource=str(resource.get("resource") or ""),
        subresource=str(ctx.request.get("subResource") or ""),
        operation=ctx.operation,
        namespace=ctx.namespace,
        name=ctx.name,
        object=ctx.object,
        old_object=ctx.old_object,
    )


def gang_members(change: NewGangs) -> tuple[tuple[PodShape, int], ...]:
    """(pod shape, pods per gang) of each role of `change`: from its pod template, else from the
    view's pod it is like (its requests and tolerations)."""
    capacity = _capacity()
    shape_of_template, pod_shape, pods_resource = (
        capacity.shape_of_template,
        capacity.PodShape,
        capacity.shapes.PODS,
    )
    members = []
    for pods in change.pods:
        if pods.template is not None:
            shape = shape_of_template(pods.template)
        elif pods.like is not None:
            requests = {name: amount for name, amount in pods.like.requests.items() if amount > 0}
            requests[pods_resource] = 1
            shape = pod_shape(tuple(sorted(requests.items())), tolerations=pods.like.tolerations)
        else:
            continue
        members.append((shape, pods.count))
    return tuple(members)


def gang_shortfall(change: NewGangs, fit: GangFit, spare: int) -> str:
    """Say how many new gangs fit and what each needs, e.g. "1 of 2 new replicas of PodCliqueSet
    infer/disagg fit on free capacity; each is a gang of 3 pods placed whole: 1 prefill (cpu 8,
    ...), 2 decode (...)"."""
    unit = change.unit
    new = change.count
    plural = "s" if new != 1 else ""
    needs = ", ".join(
        f"{count} {pods.role or 'pod'} ({shape.describe_requests()})"
        for pods, (shape, count) in zip(change.pods, fit.demand.members, strict=False)
    )
    head = (
        f"{change.set} scales from {change.old} to {change.new} {unit}s: "
        f"{min(fit.fits, new)} of {new} new {unit}{plural} fit on free capacity"
    )
    text = f"{head}; each is a gang of {fit.demand.size} pods placed whole: {needs}"
    if fit.fits >= new:
        text = f"{head}, but the reserve of {spare} spare {unit}s (spareGroups) does not"
    elif 0 <= fit.short < len(change.pods):
        text += f"; the next gang's {change.pods[fit.short].role or 'pods'} find no room"
    if not fit.exact:
        text += " (pods placed greedily, largest first: another placement might fit more)"
    return text


def template_shapes(
    lws: LeaderWorkerSet, namespace: str, view: ClusterView, index: CapacityIndex
) -> tuple[PodShape, PodShape, tuple[str, ...]]:
    """The (leader, worker) pod shapes of `lws`'s templates with their DRA devices counted, and
    the notes on what was not counted (each once)."""
    capacity = _capacity()
    with_devices, pod_level_note = capacity.claims.with_devices, capacity.shapes.pod_level_note
    leader_shape, worker_shape = _template_shapes(_same_templates_in_view(lws, namespace, view))
    with view.lock:
        devices = index.devices()
        worker, worker_notes = with_devices(worker_shape, lws.worker_template, namespace, view, devices)
        if leader_shape is worker_shape:  # one template for both: counted once
            level = pod_level_note(lws.worker_template, "leader and worker")
            return worker, worker, tuple(dict.fromkeys((*worker_notes, *filter(None, (level,)))))
        leader, leader_notes = with_devices(leader_shape, lws.leader_template, namespace, view, devices)
    levels = (pod_level_note(lws.leader_template, "leader"), pod_level_note(lws.worker_template, "worker"))
    return leader, worker, tuple(dict.fromkeys((*leader_notes, *worker_notes, *filter(None, levels))))


def _same_templates_in_view(lws: LeaderWorkerSet, namespace: str, view: ClusterView) -> LeaderWorkerSet:
    """The view's copy of `lws` when its leaderWorkerTemplate is the same (a `/scale`, or an update
    of replicas alone: what autoscalers and most applies send), so shapes read once are reused;
    else `lws` itself."""
    held = view.lws(namespace, lws.name)
    if held is not None and (held is lws or held.template == lws.template):
        return held
    return lws


def _template_shapes(lws: LeaderWorkerSet) -> tuple[PodShape, PodShape]:
    """(leader, worker) PodShapes of `lws`'s templates, read once per LeaderWorkerSet object (kept
    in its `derived`). An LWS without a leader template runs its leaders from the worker template
    (LWS API), so that shape is read once for both."""
    shapes = lws.derived.get("pod shapes")
    if shapes is None:
        shape_of_template = _capacity().shape_of_template
        worker = shape_of_template(lws.worker_template)
        leader = (
            worker if lws.leader_template is lws.worker_template else shape_of_template(lws.leader_template)
        )
        shapes = lws.derived["pod shapes"] = (leader, worker)
    return shapes


def autoscaled(answers: list[Provision], shortfall: str, model: str) -> str | None:
    """The warning for a shortfall an autoscaled pool could provision (the pool needing the fewest
    new nodes), or for one a pool of unknown shape might; None when no pool helps."""
    describe = _capacity().provision.describe
    helping = sorted((a for a in answers if a.helps), key=lambda a: a.nodes_needed or 0)
    if helping:
        return (
            f"{shortfall}; the group {describe(helping[0])}: allowed, since an autoscaler adds nodes only "
            f"for Pending pods. Model: {model}"
        )
    possible = [a for a in answers if a.possible]
    if possible:
        return (
            f"{shortfall}; {possible[0].pool.title} may add nodes for them ({possible[0].why}; not checked): "
            f"allowed, since an autoscaler adds nodes only for Pending pods. Model: {model}"
        )
    return None


def _pools_problem(value: Any) -> str | None:
    """What is wrong with an `autoscaledPools` list: entries `{name, nodeSelector, maxNodes}`."""
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or set(entry) != {"name", "nodeSelector", "maxNodes"}:
            return f"entry {i} must have exactly name, nodeSelector and maxNodes"
        selector, max_nodes = entry["nodeSelector"], entry["maxNodes"]
        if not isinstance(entry["name"], str) or not entry["name"]:
            return f"entry {i}: name must be a non-empty string"
        if (
            not isinstance(selector, dict)
            or not selector
            or not all(isinstance(v, str) for v in selector.values())
        ):
            return f"entry {i}: nodeSelector must be a non-empty map of label to value"
        if not isinstance(max_nodes, int) or isinstance(max_nodes, bool) or max_nodes < 0:
            return f"entry {i}: maxNodes must be a non-negative integer"
    return None


def placed_by(lws: LeaderWorkerSet) -> tuple[str, str] | None:
    """Who places this LWS's groups whole instead of the default scheduler, as (parameter,
    description): Kueue (the queue-name label: quota and topology-aware scheduling admit it) or a
    gang scheduler (LWS `spec.scheduling`, a template's `schedulingGroup.podGroupName` or the
    1.35 `workloadRef`, or a coscheduling / Volcano pod-group mark); None for neither."""
    queue = str(as_dict(lws.meta.get("labels")).get(KUEUE_QUEUE_LABEL) or "")
    if queue:
        return (
            "kueueManaged",
            f"LeaderWorkerSet {lws.name} is managed by Kueue (queue {queue}): Kueue's admission",
        )
    if "scheduling" in lws.spec:
        return (
            "gangScheduled",
            f"LeaderWorkerSet {lws.name} is gang-scheduled (spec.scheduling): the gang scheduler",
        )
    for template in (lws.leader_template, lws.worker_template):
        spec = as_dict(template.get("spec"))
        meta = as_dict(template.get("metadata"))
        marks = {**as_dict(meta.get("labels")), **as_dict(meta.get("annotations"))}
        field = next((f for f in GANG_TEMPLATE_FIELDS if spec.get(f)), None) or next(
            (m for m in GANG_TEMPLATE_MARKS if marks.get(m)), None
        )
        if field == "schedulingGroup":
            group = as_dict(spec.get(field)).get("podGroupName")
            field = f"spec.schedulingGroup.podGroupName {group}" if group else "spec.schedulingGroup"
        if field:
            return (
                "gangScheduled",
                f"LeaderWorkerSet {lws.name}'s pods are gang-scheduled ({field}): the gang scheduler",
            )
    return None


def describe_model(fit: Fit, notes: tuple[str, ...]) -> str:
    """The model an answer used, in a few words: the base count, then DRA devices, gated pods and
    whatever of the templates' DRA requests was not counted."""
    return "; ".join((BASE_MODEL, *fit.model, *notes))


def read_scale_up(ctx: PolicyContext) -> ScaleUp | str:
    """Replicas and size before and after this request, with the LWS as it will be; or a string:
    an advisory ("" for nothing to say) when the request cannot be read as a scale."""
    if (ctx.request.get("subResource") or "") == "scale":
        name = ctx.name
        lws = ctx.view.lws(ctx.namespace, name)
        if lws is None:
            return (
                f"LeaderWorkerSet {ctx.namespace}/{name} is not in guardhook's view; capacity was not checked"
            )
        new, old = spec_replicas(ctx.object), spec_replicas(ctx.old_object)
        new_replicas = lws.replicas if new is None else new
        old_replicas = lws.replicas if old is None else old
        return ScaleUp(lws, old_replicas, new_replicas, lws.size, lws.size)
    if not ctx.object:
        return ""
    updated = LeaderWorkerSet(ctx.object)
    if ctx.operation == "CREATE":
        return ScaleUp(updated, 0, updated.replicas, updated.size, updated.size)
    before = LeaderWorkerSet(ctx.old_object) if ctx.old_object else updated
    return ScaleUp(updated, before.replicas, updated.replicas, before.size, updated.size)


def _ordinal(n: int) -> str:
    return ORDINALS[n - 1] if 0 < n <= len(ORDINALS) else f"#{n}"


def _groups(n: int) -> str:
    return f"{n} new group" + ("" if n == 1 else "s")


def shortfall_message(fit: Fit, lws_name: str, new_groups: int) -> str:
    """Say how many groups fit and what the next one lacks, e.g. "1 of 2 new groups fits; the
    second needs 4 pods (each nvidia.com/gpu 8, ...) and the 20 eligible nodes have room for 0"."""
    demand = fit.demand
    spare = demand.count - new_groups
    if fit.fits >= new_groups:
        return (
            f"all {_groups(new_groups)} of LeaderWorkerSet {lws_name} fit, but the reserve of {spare} spare "
            f"groups ({SPARE_GROUPS_ANNOTATION} / spareGroups) does not: room for {fit.fits - new_groups} "
            f"of them beside the new ones"
        )
    verb = "fits" if fit.fits == 1 else "fit"
    head = f"{fit.fits} of {_groups(new_groups)} of LeaderWorkerSet {lws_name} {verb} on free capacity"
    needs = f"the {_ordinal(fit.fits + 1)} needs {_pods(demand)}"
    if demand.exclusive_key:
        why = (
            f"with exclusive topology on node label {demand.exclusive_key} each group needs a domain of its "
            f"own: {fit.domains} domains, {fit.domains_taken} already hold a group, "
            f"{fit.domains_free_fitting} of the others can host a whole group"
        )
    elif fit.pod_slots >= 0:
        why = f"the {fit.eligible_worker} eligible nodes have room for {fit.pod_slots} more such pods"
        if fit.limiting:
            why += f" (short of {fit.limiting})"
    else:
        # mixed shapes: no pod count to give; with none placed there is no "first" to fit beside
        beside = f" beside the first {fit.fits}" if fit.fits else ""
        why = f"they do not fit{beside} on the eligible nodes"
        if fit.limiting:
            why += f" (short of {fit.limiting})"
    text = f"{head}; {needs} and {why}"
    if fit.eligible_worker < fit.nodes or fit.eligible_leader < fit.nodes:
        text += (
            f". Eligible: {fit.eligible_leader} of {fit.nodes} nodes for leaders and "
            f"{fit.eligible_worker} for workers (Ready, schedulable, taints tolerated, nodeSelector and "
            "required node affinity matched)"
        )
    if spare:
        text += f"; {spare} spare groups are reserved on top ({SPARE_GROUPS_ANNOTATION} / spareGroups)"
    return text


def _pods(demand: GroupDemand) -> str:
    if demand.size == 1:
        return f"1 pod ({demand.leader.describe_requests()})"
    if demand.leader.requests == demand.worker.requests:
        return f"{demand.size} pods, each requesting {demand.worker.describe_requests()}"
    workers = demand.size - 1
    return (
        f"a leader requesting {demand.leader.describe_requests()} and {workers} worker"
        f"{'' if workers == 1 else 's'} requesting {demand.worker.describe_requests()} each"
    )


def warm_capacity_index(view: ClusterView) -> None:
    """Build the view's capacity index (guardhook.capacity) before the first request needs it."""
    from guardhook.capacity import index_for

    index_for(view)


@functools.cache
def _capacity() -> ModuleType:
    """guardhook.capacity with its claims, provision and shapes modules: imported on the first
    capacity decision, not with the policy registry (numpy comes with the index, so commands that
    never judge capacity, `review` of a delete, start faster), and then kept: an import statement
    run on every decision cost 2-3 µs each, five a decision (issue 53)."""
    import guardhook.capacity.claims
    import guardhook.capacity.provision
    import guardhook.capacity.shapes

    return guardhook.capacity


POLICY = GroupCapacity()
