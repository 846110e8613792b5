"""The floor's rules: each builds, from a policy's configured parameters, the CEL of one
ValidatingAdmissionPolicy that decides what the policy decides without the cluster view.

Every rule reads only the request (`object`, `oldObject`, `request`): no params, no lookups, no
`now()`. Where the webhook needs the view the floor is stricter (it denies what the webhook might
allow; each case is listed in `Rule.stricter` and in docs/policies.md), never looser, except where
a rule says it covers only part of its policy (`Rule.not_covered`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from guardhook.cluster.coverage import (
    BUDGET_ANNOTATION,
    GROUP_PDBS_ANNOTATION,
    GROUP_READINESS_ANNOTATION,
    SPARE_GROUPS_ANNOTATION,
)
from guardhook.cluster.lws import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    NAME_LABEL,
    SERVING_PODS_ANNOTATION,
    SERVING_PODS_VALUES,
    WORKER_INDEX_LABEL,
)
from guardhook.cluster.lws import (
    PREFIX as LWS_PREFIX,
)
from guardhook.cluster.model import DISRUPTION_CONDITIONS
from guardhook.floor.cel import quote, string_list
from guardhook.policies.group_spec import DEFAULT_WEIGHT_LOAD_SECONDS, POD_ALONE_POLICIES

DIGITS = "^[0-9]+$"
"""What guardhook.cluster.model.digits accepts, as RE2 (label values hold no newline)."""


@dataclass(frozen=True)
class Validation:
    """One VAP validation: `expression` true = allowed; `message` (static) and `message_expression`."""

    expression: str
    message: str
    message_expression: str = ""
    reason: str = "Forbidden"

    def document(self) -> dict[str, str]:
        """The `spec.validations[]` entry."""
        doc = {"expression": self.expression, "message": self.message}
        if self.message_expression:
            doc["messageExpression"] = self.message_expression
        doc["reason"] = self.reason
        return doc


@dataclass(frozen=True)
class Rule:
    """A policy's floor: what it matches (`resource_rules`, `object_selector`), its `variables`
    ((name, expression) in order), its `validations`, and in words what it covers, where it is
    stricter than the webhook, and what of the policy it leaves to the webhook."""

    policy_id: str
    resource_rules: tuple[Mapping[str, Any], ...]
    variables: tuple[tuple[str, str], ...]
    validations: tuple[Validation, ...]
    covers: str
    stricter: tuple[str, ...] = ()
    not_covered: tuple[str, ...] = ()
    object_selector: Mapping[str, Any] = field(default_factory=dict)


def _label(key: str) -> str:
    """The value of label `key` of the deleted pod ('' when absent), via the `labels` variable."""
    return f"({quote(key)} in variables.labels ? variables.labels[{quote(key)}] : '')"


def _first_condition_true(kind: str) -> str:
    """The first `status.conditions` entry of type `kind` has status "True" (as
    guardhook.cluster.model.conditions reads them: the first entry of a type wins)."""
    of_kind = f"variables.conditions.filter(c, has(c.type) && c.type == {quote(kind)})"
    return f"({of_kind}.size() > 0 && has({of_kind}[0].status) && {of_kind}[0].status == 'True')"


def _suffix_digits(name: str, prefix: str) -> str:
    """`name` is `<prefix>-<digits>` (guardhook.cluster.lws._suffix_index): without `substring`,
    the last size(name) - size(prefix) - 1 characters are digits preceded by the '-' at its end."""
    rest = f"({name}.size() - {prefix}.size() - 1)"
    return (
        f"{name}.startsWith({prefix} + '-') && {rest} > 0 && "
        f"{name}.matches('-[0-9]{{' + string({rest}) + '}}$')"
    )


def worker_delete(params: Mapping[str, Any]) -> Rule:
    """The worker-delete floor: a DELETE of a pod that `oldObject` places as a worker (by
    guardhook.groups.placement.group_member's rule: its controller ownerReference, then its labels,
    which cannot turn a worker into a leader; a worker StatefulSet's pod is a worker whatever its
    name label says), not terminating, carrying no DisruptionTarget or TerminationTarget True, and
    Ready, is denied, naming the leader to delete instead; and an UPDATE that removes or changes a
    `leaderworkerset.sigs.k8s.io/` label of a pod that carries one (issue 48). No objectSelector:
    the name label is a tenant's to remove."""
    ctrl = "variables.controllers[0]"
    group, worker = _label(GROUP_INDEX_LABEL), _label(WORKER_INDEX_LABEL)
    owned_worker = (
        f"variables.controllers.size() > 0 && has({ctrl}.kind) && {ctrl}.kind == 'StatefulSet' && "
        f"has({ctrl}.apiVersion) && {ctrl}.apiVersion.startsWith('apps/') && has({ctrl}.name) && "
        f"{ctrl}.name != variables.lws && {ctrl}.name.matches('-[0-9]+$') && "
        f"{_suffix_digits('variables.name', f'{ctrl}.name')} && !variables.name.matches('-0+$') && "
        # With a name label the controller fits, a worker StatefulSet's pod is a worker whatever its
        # labels say; without one (removed, or naming another LWS) a worker-index 0 says leader.
        f"(({_suffix_digits(f'{ctrl}.name', 'variables.lws')}) || !{worker}.matches('^0+$') || "
        f"!{group}.matches({quote(DIGITS)}))"
    )
    labelled_worker = (
        f"{group}.matches({quote(DIGITS)}) && {worker}.matches({quote(DIGITS)}) && !{worker}.matches('^0+$')"
    )
    disrupted = " || ".join(_first_condition_true(kind) for kind in DISRUPTION_CONDITIONS)
    prefix = quote(LWS_PREFIX)
    variables = (
        ("name", "has(oldObject.metadata.name) ? oldObject.metadata.name : ''"),
        ("labels", "has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}"),
        ("lws", _label(NAME_LABEL)),
        ("lwsPod", f"variables.labels.exists(k, k.startsWith({prefix}))"),
        (
            "controllers",
            "has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences.filter(r, "
            "has(r.controller) && r.controller == true) : []",
        ),
        (
            "conditions",
            "has(oldObject.status) && has(oldObject.status.conditions) ? oldObject.status.conditions : []",
        ),
        ("ownedWorker", owned_worker),
        (
            "worker",
            f"variables.lwsPod && (variables.ownedWorker || (variables.lws != '' && {labelled_worker}))",
        ),
        ("terminating", "has(oldObject.metadata.deletionTimestamp)"),
        ("disrupted", disrupted),
        ("ready", _first_condition_true("Ready")),
        (
            "leader",
            f"variables.ownedWorker ? {ctrl}.name : variables.lws + '-' + string(int({group}))",
        ),
        (
            "relabelled",
            f"variables.labels.exists(k, k.startsWith({prefix}) && !(has(object.metadata.labels) && "
            "k in object.metadata.labels && object.metadata.labels[k] == variables.labels[k]))",
        ),
    )
    message = (
        "pod is a Ready worker of a LeaderWorkerSet group: deleting one worker breaks the replica "
        "(the LWS controller then recreates the whole group, or under restartPolicy None it stays "
        "broken). Delete the group's leader instead, with --cascade=foreground"
    )
    message_expression = (
        "'pod ' + request.namespace + '/' + variables.name + ' is a Ready worker of ' + "
        "(variables.lws != '' ? 'LeaderWorkerSet ' + variables.lws : "
        "'the group of leader ' + variables.leader) + "
        "' (admission-policy floor: guardhook is not needed to decide this): deleting "
        "one worker breaks the replica (the LWS controller then recreates the whole group, or under "
        "restartPolicy None it stays broken). To restart the group, delete its leader instead: kubectl "
        "delete pod -n ' + request.namespace + ' ' + variables.leader + ' --cascade=foreground'"
    )
    relabel_message = (
        f"pod carries {LWS_PREFIX}* labels, which say which LeaderWorkerSet group it is in: only the "
        "LWS and StatefulSet controllers may remove or change them (they would take the pod out of "
        "its group guards). Change the LeaderWorkerSet template instead"
    )
    relabel_message_expression = (
        "'pod ' + request.namespace + '/' + variables.name + ' carries "
        f"{LWS_PREFIX}* labels, which say which LeaderWorkerSet group it is in (admission-policy "
        "floor): only the LWS and StatefulSet controllers may remove or change them (they would take "
        "the pod out of its group guards). Change the LeaderWorkerSet template instead'"
    )
    return Rule(
        policy_id="worker-delete",
        resource_rules=(
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "operations": ["DELETE", "UPDATE"],
            },
        ),
        variables=variables,
        validations=(
            Validation(
                "request.operation != 'DELETE' || !variables.worker || variables.terminating || "
                "variables.disrupted || !variables.ready",
                message,
                message_expression,
            ),
            Validation(
                "request.operation != 'UPDATE' || !variables.lwsPod || !variables.relabelled",
                relabel_message,
                relabel_message_expression,
            ),
        ),
        covers=(
            "DELETE of a Ready, not terminating, unmarked worker pod (leader named in the message); "
            f"UPDATE removing or changing a {LWS_PREFIX} label"
        ),
        stricter=(
            "a Ready worker of a group that is already broken (another pod missing, not Ready, "
            "terminating or marked for removal): the webhook allows it, the floor cannot see the group",
            "a worker whose group size neither the pod's size annotation nor the LWS gives: the "
            "webhook allows it, the floor cannot see the LWS",
            "a worker on a cordoned or drain-tainted node (a drain without evictions): the webhook "
            "allows it within the group budget, the floor cannot see nodes or the budget",
            f"an UPDATE changing a {LWS_PREFIX} label of a pod that carries one but is no group "
            "member (its labels place it nowhere and no LWS controller made it): the webhook allows it",
        ),
        not_covered=(
            "while guardhook's view is stale the webhook denies every worker delete (fail closed); the "
            "floor judges the deleted pod's own Ready condition from oldObject, so a not-Ready worker "
            "passes it",
            "a DELETE that carries no oldObject (API servers before 1.15, hand-written reviews) is "
            "judged by the webhook from its view; the floor sees no pod and allows it",
            "a member of a Workload API gang (a disruptionMode: all PodGroup), a Grove PodCliqueSet "
            "replica or a JobSet gang: the webhook judges its delete as a worker's of a whole gang from "
            "its view; the floor knows LWS workers only, sees no PodGroup or gang, and allows it",
        ),
    )


def group_pdb(params: Mapping[str, Any]) -> Rule:
    """The group-pdb floor: a PodDisruptionBudget whose selector names an LWS
    (`leaderworkerset.sigs.k8s.io/name` in matchLabels, or In with one value) and pins no group
    (no group-index or group-key in matchLabels, nor an In of one value on either) is denied."""
    pins = string_list((GROUP_INDEX_LABEL, GROUP_KEY_LABEL))
    variables = (
        # Maps and lists only: a ternary that joins a typed object (LabelSelector) with a map
        # literal does not type-check on the API server.
        (
            "matchLabels",
            "has(object.spec) && has(object.spec.selector) && has(object.spec.selector.matchLabels) ? "
            "object.spec.selector.matchLabels : {}",
        ),
        (
            "expressions",
            "has(object.spec) && has(object.spec.selector) && has(object.spec.selector.matchExpressions) ? "
            "object.spec.selector.matchExpressions : []",
        ),
        (
            "lws",
            f"{quote(NAME_LABEL)} in variables.matchLabels ? variables.matchLabels[{quote(NAME_LABEL)}] : "
            f"(variables.expressions.exists(e, has(e.key) && e.key == {quote(NAME_LABEL)} && "
            "has(e.operator) && e.operator == 'In' && has(e.values) && e.values.size() == 1) ? "
            f"variables.expressions.filter(e, has(e.key) && e.key == {quote(NAME_LABEL)} && "
            "has(e.operator) && e.operator == 'In' && has(e.values) && e.values.size() == 1)[0].values[0] "
            ": '')",
        ),
        (
            "pinned",
            f"variables.matchLabels.exists(k, k in {pins}) || variables.expressions.exists(e, "
            f"has(e.key) && e.key in {pins} && has(e.operator) && e.operator == 'In' && "
            "has(e.values) && e.values.size() == 1)",
        ),
    )
    message = (
        "PodDisruptionBudget selects a LeaderWorkerSet's pods across groups: a PDB counts pods, not "
        f"replicas, so one eviction in each of two groups takes two replicas down. Pin {GROUP_INDEX_LABEL} "
        "or group-key (one budget per group), or annotate the LeaderWorkerSet "
        f'{GROUP_PDBS_ANNOTATION}: "true" to have guardhook keep them'
    )
    message_expression = (
        "'PodDisruptionBudget ' + request.namespace + '/' + request.name + ' selects pods of every group "
        "of LeaderWorkerSet ' + variables.lws + ' (admission-policy floor): a PDB counts pods, not "
        "replicas, so one eviction in each of two groups takes two replicas down. Use one budget per "
        f"group (selector {{{NAME_LABEL}: ' + variables.lws + ', {GROUP_INDEX_LABEL}: \"0\"}} with an "
        f'integer minAvailable), or annotate the LeaderWorkerSet {GROUP_PDBS_ANNOTATION}: "true"\''
    )
    return Rule(
        policy_id="group-pdb",
        resource_rules=(
            {
                "apiGroups": ["policy"],
                "apiVersions": ["v1"],
                "resources": ["poddisruptionbudgets"],
                "operations": ["CREATE", "UPDATE"],
            },
        ),
        variables=variables,
        validations=(
            Validation(
                "variables.lws == '' || variables.pinned",
                message,
                message_expression,
            ),
        ),
        covers="a PDB whose selector names an LWS and pins no group",
        stricter=(
            "the named LWS has one replica, or is not in the namespace: the webhook allows the PDB "
            "(it reaches at most one group), the floor cannot see the LWS",
            "the selector also requires labels no pod of the LWS carries, or a group-index set "
            "(NotIn, Exists, In of several values) that at most one existing group fits",
            "while guardhook's view is stale the webhook allows a PDB (fail open); the floor denies it",
        ),
        not_covered=(
            "a selector that does not name the LWS but reaches its pods through their template labels "
            "(e.g. app: llm-xl), or an empty selector: the webhook judges it against the LWS pod "
            "templates; the floor cannot see them and allows it (audit reports such PDBs)",
        ),
    )


def group_spec(params: Mapping[str, Any]) -> Rule:
    """The group-spec floor: the lints that read the LWS object alone and need no string parsing
    (each a validation, Warn by default): restartPolicy None, leader readiness, probes that restart
    during the weight load, unreadable guardhook annotations."""
    load = int(params.get("weightLoadSeconds", DEFAULT_WEIGHT_LOAD_SECONDS))

    def window(p: str) -> str:
        # guardhook.policies.group_spec.probe_window_seconds (Kubernetes defaults 0, 10, 3)
        return (
            f"((has({p}.initialDelaySeconds) ? {p}.initialDelaySeconds : 0) + "
            f"(has({p}.periodSeconds) ? {p}.periodSeconds : 10) * "
            f"(has({p}.failureThreshold) ? {p}.failureThreshold : 3))"
        )

    probes_ok = (
        f"variables.containers.all(c, has(c.startupProbe) ? {window('c.startupProbe')} >= {load} : "
        f"(!has(c.livenessProbe) || {window('c.livenessProbe')} >= {load}))"
    )
    annotation = "variables.annotations"
    readable = [
        f"(!({quote(BUDGET_ANNOTATION)} in {annotation}) || "
        f"{annotation}[{quote(BUDGET_ANNOTATION)}].matches({quote(DIGITS)}))",
        f"(!({quote(SPARE_GROUPS_ANNOTATION)} in {annotation}) || "
        f"{annotation}[{quote(SPARE_GROUPS_ANNOTATION)}].matches({quote(DIGITS)}))",
        f"(!({quote(SERVING_PODS_ANNOTATION)} in {annotation}) || "
        f"{annotation}[{quote(SERVING_PODS_ANNOTATION)}] in {string_list(SERVING_PODS_VALUES)})",
        f"(!({quote(GROUP_PDBS_ANNOTATION)} in {annotation}) || "
        f"{annotation}[{quote(GROUP_PDBS_ANNOTATION)}].matches('^(?i:true|false)$'))",
        f"(!({quote(GROUP_READINESS_ANNOTATION)} in {annotation}) || "
        f"{annotation}[{quote(GROUP_READINESS_ANNOTATION)}].matches('^\\\\s*(?i:true|false)\\\\s*$'))",
    ]
    template = "object.spec.leaderWorkerTemplate"
    has_template = f"has(object.spec) && has({template})"
    leader_spec = f"{has_template} && has({template}.leaderTemplate) && has({template}.leaderTemplate.spec)"
    worker_spec = f"{has_template} && has({template}.workerTemplate) && has({template}.workerTemplate.spec)"
    # Maps and lists only (no typed object joined with a map literal: that does not type-check on
    # the API server); the leader's containers fall back to the worker template's (LWS API).
    variables = (
        (
            "annotations",
            "has(object.metadata.annotations) ? object.metadata.annotations : {}",
        ),
        (
            "workerContainers",
            f"{worker_spec} && has({template}.workerTemplate.spec.containers) ? "
            f"{template}.workerTemplate.spec.containers : []",
        ),
        (
            "leaderContainers",
            f"{has_template} && has({template}.leaderTemplate) ? "
            f"({leader_spec} && has({template}.leaderTemplate.spec.containers) ? "
            f"{template}.leaderTemplate.spec.containers : []) : variables.workerContainers",
        ),
        ("containers", "variables.leaderContainers + variables.workerContainers"),
        (
            "readinessProbes",
            "variables.leaderContainers.filter(c, has(c.readinessProbe)).map(c, c.readinessProbe)",
        ),
    )
    restart_policy = (
        f"!({has_template} && has({template}.restartPolicy)) || "
        f"!({template}.restartPolicy in {string_list(POD_ALONE_POLICIES)})"
    )
    return Rule(
        policy_id="group-spec",
        resource_rules=(
            {
                "apiGroups": ["leaderworkerset.x-k8s.io"],
                "apiVersions": ["v1"],
                "resources": ["leaderworkersets"],
                "operations": ["CREATE", "UPDATE"],
            },
        ),
        variables=variables,
        validations=(
            Validation(
                restart_policy,
                "restartPolicy None restarts a failed pod alone and leaves its group broken; use "
                "RecreateGroupOnPodRestart",
                reason="Invalid",
            ),
            Validation(
                "variables.readinessProbes.size() > 0",
                "leader has no readinessProbe, so it is Ready (and takes Service traffic) as soon as its "
                "containers start, before its model is loaded; probe the server's health endpoint",
                reason="Invalid",
            ),
            Validation(
                "variables.readinessProbes.size() == 0 || variables.readinessProbes.exists(p, "
                "!has(p.tcpSocket) || has(p.httpGet) || has(p.exec) || has(p.grpc))",
                "leader readinessProbe only checks that a TCP port accepts connections, which does not "
                "show a loaded model; probe the server's health endpoint (httpGet) instead",
                reason="Invalid",
            ),
            Validation(
                probes_ok,
                f"a startupProbe, or a livenessProbe with no startupProbe, restarts its container (and "
                f"under RecreateGroupOnPodRestart its whole group) before a {load}s weight load can "
                f"finish (weightLoadSeconds {load}); raise periodSeconds × failureThreshold or add a "
                f"startupProbe",
                reason="Invalid",
            ),
            Validation(
                f"!({quote(BUDGET_ANNOTATION)} in {annotation}) || "
                f"!{annotation}[{quote(BUDGET_ANNOTATION)}].matches('^0+$')",
                f'{BUDGET_ANNOTATION}: "0" lets no group be disrupted, so every drain of a node its '
                "groups run on waits forever unless the cluster sets group-eviction's "
                "minMaxDisruptedGroups above it; allow at least 1",
                reason="Invalid",
            ),
            Validation(
                " && ".join(readable),
                "a guardhook annotation cannot be read (max-disrupted-groups and spare-groups take a "
                'non-negative integer, serving-pods "leaders" or "all", group-pdbs and group-readiness '
                '"true" or "false"): its default is used instead',
                reason="Invalid",
            ),
        ),
        covers="the group-spec lints that read the LWS alone (restartPolicy, leader readiness, "
        "probe windows, unreadable annotations, a budget of 0)",
        not_covered=(
            "the rollout lint (maxUnavailable/maxSurge as percentages of replicas): it needs string "
            "parsing that the CEL subset the floor keeps to (no substring) cannot do",
            "several unreadable annotations: the webhook names each with its value and the value used "
            "instead; the floor warns once and names none",
        ),
    )


RULES = {"worker-delete": worker_delete, "group-pdb": group_pdb, "group-spec": group_spec}
"""The policies the floor exports, by id."""

LEFT_OUT = {
    "group-eviction": "needs the view: the group budget counts groups already down across the LWS "
    "(and an Eviction carries no pod: the pod is looked up)",
    "group-taint": "needs the view: the taint's blast radius is the groups with a pod on the node or device",
    "group-capacity": "needs the view: whether new groups fit is solved against the nodes' free capacity",
    "group-resize": "needs the view: a resize is judged against the group's current pods and the nodes",
    "group-readiness": "needs the view: a leader's gate depends on its whole group's pods",
    "pod-counted-scaler": "needs the view: whether a scaler's target is a worker StatefulSet of an LWS "
    "is read from the StatefulSet's owner",
    "leader-service": "needs the view: which LWS pods a Service selector reaches is judged against the "
    "LWS pod templates (a MutatingAdmissionPolicy is not exported: see docs/policies.md)",
}
"""Why each policy not in RULES is not exported."""
