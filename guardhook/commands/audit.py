"""`guardhook audit`: judge a cluster's existing objects with the one Engine and report capacity in
groups per LeaderWorkerSet (design.md §4).

Objects come from a live cluster (listed once through guardhook.cluster.kube.api_client) or, offline,
from `--cluster-state` manifests. Each object is judged as a CREATE (guardhook.commands.scan), except by
`group-capacity`: an existing LWS judged as new would be counted twice against free capacity, so
capacity is reported as group counts instead (guardhook.groups.counts).

The groups table's SPARE column counts how many more whole groups of each LWS fit in free
capacity now (guardhook.planning.spare: the capacity solver, the spare reserve ignored).

The protection gaps (guardhook.cluster.coverage: LWS namespaces whose evictions are not guarded,
guardhook webhook entries that cannot reach it or fail open, unreadable LWS annotations) follow.

`--write-reports` writes the results as `wgpolicyk8s.io/v1alpha2` PolicyReport objects, one per
namespace (and one ClusterPolicyReport for the cluster-scoped gaps: webhook entries), the format of
the Policy Report API (kubernetes-sigs/wg-policy-prototypes) that Kyverno and policy-reporter read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from guardhook.commands.common import (
    LISTING,
    SourceError,
    add_view_flags,
    live_client,
    require_cluster,
    using_source,
    write_text,
)

if TYPE_CHECKING:
    from kubernetes import client

    from guardhook.cluster.coverage import FloorLayer, Gap
    from guardhook.cluster.going import StaleCondition
    from guardhook.cluster.sources import Source
    from guardhook.commands.scan import Finding, Located
    from guardhook.config import Config
    from guardhook.groups import GangSetGroups
    from guardhook.groups.counts import LwsGroups
    from guardhook.groups.stuck import StuckGroup
    from guardhook.leadersync.desired import Entry
    from guardhook.policies.base import Policy
    from guardhook.policies.shared.maker_guards import EvictionGuard
    from guardhook.wire import KubeObject


AUDIT_USER = "guardhook:audit"
REPORT_GROUP = "wgpolicyk8s.io"
REPORT_VERSION = "v1alpha2"
REPORT_PLURAL = "policyreports"
REPORT_NAME = "guardhook"
REPORT_SOURCE = "guardhook"
CLUSTER_REPORT_PLURAL = "clusterpolicyreports"
COVERAGE_POLICY = "coverage"
"""The `policy` of gap results in PolicyReports (each gap kind is its `rule`)."""
# Policy Report result values: pass, fail, warn, error, skip.
RESULT_OF_OUTCOME = {
    "allowed": "pass",
    "denied": "fail",
    "audited": "fail",
    "warned": "warn",
    "error": "error",
}


FLOOR_COMMAND = "guardhook export admission-policies | kubectl apply -f -"
FLOOR_COMPONENT_PATH = "manifests/components/admission-policy-floor"
HA_COMPONENT_PATH = "manifests/components/ha"


@dataclass(frozen=True)
class FloorCover:
    """The next step for the `webhook-fails-open` gaps (`gaps` of them): the admission-policy
    floor, ValidatingAdmissionPolicies the API server enforces while guardhook cannot be called.
    `covered`: gap name ("<configuration>/<entry>") -> the floor policies whose rules match some of
    the entry's requests (each covers its own policy's part); counted against the floor installed
    (`installed`, bound or not) or, when none is, against the floor `guardhook export` writes for
    the configuration."""

    gaps: int
    covered: dict[str, tuple[str, ...]]
    installed: bool
    bound: bool
    checked: bool = True
    """False when the floor's kinds could not be read: it may be installed already."""

    def lines(self) -> list[str]:
        """The words for people, under the gaps: what the floor covers and what is left."""
        named = ", ".join(
            f"{name.split('/', 1)[-1]} ({', '.join(ids)})" for name, ids in self.covered.items()
        )
        share = f"{len(self.covered)} of the {self.gaps} [webhook-fails-open] gaps"
        if self.installed:
            first = f"The admission-policy floor, installed, covers {share}" + (f": {named}" if named else "")
            if not self.bound:
                first += " once every floor policy is bound (see the floor line)"
        else:
            first = (
                f"Next step for the {self.gaps} [webhook-fails-open] gaps: install the admission-policy "
                f"floor{'' if self.checked else ' unless it is (it could not be checked)'} ({FLOOR_COMMAND}, "
                f"or the component {FLOOR_COMPONENT_PATH}), which the API server "
                f"enforces while guardhook cannot be called; it covers {len(self.covered)} of them"
                + (f": {named}" if named else "")
            )
        rest = self.gaps - len(self.covered)
        lines = [first]
        if rest:
            lines.append(
                f"  the other {rest} hold only while guardhook answers: run it highly available "
                f"({HA_COMPONENT_PATH})"
            )
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "gaps": self.gaps,
            "covered": {name: list(ids) for name, ids in self.covered.items()},
            "floorInstalled": self.installed,
            "nextStep": " ".join(line.strip() for line in self.lines()),
        }


def floor_cover(view: Any, gaps: Sequence[Gap], floor: FloorLayer, rules: Sequence[Any]) -> FloorCover | None:
    """Which `webhook-fails-open` `gaps` the floor covers (FloorCover): an entry is covered by each
    floor rule (guardhook.floor.rules.Rule, as exported for the configuration) whose resource rules
    match some request of the entry's; with a floor installed, only its policies count."""
    from guardhook.cluster.coverage import (
        FLOOR_NOT_BOUND,
        FLOOR_NOT_INSTALLED,
        FLOOR_UNCHECKED,
        WEBHOOK_FAILS_OPEN,
    )
    from guardhook.cluster.webhooks import overlap, rule_matches
    from guardhook.floor.export import NAME_PREFIX

    open_gaps = [gap for gap in gaps if gap.kind == WEBHOOK_FAILS_OPEN]
    if not open_gaps:
        return None
    installed = floor.state not in (FLOOR_UNCHECKED, FLOOR_NOT_INSTALLED)
    if installed:
        rules = [rule for rule in rules if NAME_PREFIX + rule.policy_id in floor.policies]
    entries = {
        (configuration.kind, f"{configuration.name}/{entry.name}"): entry.matches
        for configuration in view.webhook_configurations()
        for entry in configuration.entries
    }
    covered: dict[str, tuple[str, ...]] = {}
    for gap in open_gaps:
        matches = entries.get((gap.object_kind, gap.name), frozenset())
        ids = tuple(
            rule.policy_id for rule in rules if overlap(matches, rule_matches(list(rule.resource_rules)))
        )
        if ids:
            covered[gap.name] = ids
    return FloorCover(
        len(open_gaps), covered, installed, floor.state != FLOOR_NOT_BOUND, floor.state != FLOOR_UNCHECKED
    )


@dataclass
class AuditResult:
    """Every finding (passes included), group counts per LWS, and notes (skipped policies/lists).
    `spare`: more whole groups that fit now, per (namespace, LWS name) (guardhook.planning.spare;
    empty when the objects hold no nodes)."""

    findings: list[Finding]
    groups: list[LwsGroups]
    notes: list[str] = field(default_factory=list)
    spare: dict[tuple[str, str], int] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)
    draining: dict[str, str] = field(default_factory=dict)
    """node -> why, for the draining nodes (guardhook.cluster.going: cordoned or drain-tainted)."""
    stale: list[StaleCondition] = field(default_factory=list)
    """Maintenance conditions left True after the maintenance: ignored for judging
    (guardhook.cluster.going.stale_conditions)."""
    unchecked: list[str] = field(default_factory=list)
    """What the gap search could not read ("Namespaces", "webhook configurations"): its gaps were
    not looked for, so a count of them would claim a check that never ran."""
    floor: FloorLayer | None = None
    """The admission-policy floor as a coverage layer (guardhook.cluster.coverage.floor_layer)."""
    unnarrowed: list[Entry] = field(default_factory=list)
    """Services and InferencePools that can match LWS workers, with why they are not narrowed
    (guardhook.leadersync.desired: pending the reconciler, reported, opted out, cannot be)."""
    gangs: list[GangSetGroups] = field(default_factory=list)
    """Gang counts per set of every gang maker: Workload API `disruptionMode: all` PodGroups, Grove
    PodCliqueSet replicas, JobSet Jobs (guardhook.groups.each_gang_set)."""
    floor_cover: FloorCover | None = None
    """The `webhook-fails-open` gaps the admission-policy floor covers (None: no such gap)."""
    eviction_guards: list[EvictionGuard] = field(default_factory=list)
    """Other webhook entries on `pods/eviction` (guardhook.policies.shared.maker_guards): a second
    guard judging the same evictions with its own budget."""
    stuck: list[StuckGroup] = field(default_factory=list)
    """Groups down for good (guardhook.groups.stuck): restarts exhausted, or gated past
    group-eviction's `stuckAfterSeconds`."""

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.violated]


def audit(
    objects: Sequence[Located],
    config: Config,
    policies: Sequence[Policy] | None = None,
    notes: Sequence[str] = (),
    unreadable: Sequence[str] | None = None,
) -> AuditResult:
    """Judge `objects` (an existing cluster's), count their groups, find the protection gaps and
    name the draining nodes. `unreadable`: the kinds a cluster listing could not read (None for
    manifests)."""
    from guardhook.cluster.coverage import coverage_gaps, floor_layer, unchecked
    from guardhook.cluster.going import draining_nodes, stale_in_view
    from guardhook.cluster.view.static import view_from_objects
    from guardhook.cluster.view.store import NAMESPACES, WEBHOOK_KINDS
    from guardhook.commands.scan import scan, usable_policies
    from guardhook.floor.export import export_floor
    from guardhook.groups import each_gang_set
    from guardhook.groups.counts import all_groups
    from guardhook.planning.spare import spare_by_lws
    from guardhook.policies import REGISTRY
    from guardhook.policies.shared.maker_guards import eviction_guards
    from guardhook.policies.worker_delete import POLICY as WORKER_DELETE
    from guardhook.policies.worker_delete import drain_conditions, drain_taint_keys

    policies = REGISTRY if policies is None else policies
    view = view_from_objects([o.obj for o in objects], source="audit", unreadable=unreadable)
    usable = usable_policies(policies, view, skip_node_readers=True)
    all_notes = list(notes)
    for policy in policies:
        if policy not in usable:
            all_notes.append(f"{policy.id} skipped: existing groups are counted in the groups table instead")
    findings = scan(view, config, usable, objects, username=AUDIT_USER)
    findings += held_findings(view, config, objects)
    budget = config.settings("group-eviction").params.get("maxDisruptedGroups")
    spare = config.settings("group-capacity").params.get("spareGroups")
    gaps = coverage_gaps(view, budget_default=budget, spare_default=spare)
    all_notes += unchecked(view)
    not_read = [] if view.readable(NAMESPACES) else ["Namespaces"]
    if not all(view.readable(kind) for kind in WEBHOOK_KINDS):
        not_read.append("webhook configurations")
    params = config.settings(WORKER_DELETE.id).params
    draining = draining_nodes(view, drain_taint_keys(params), drain_conditions(params))
    stale = stale_in_view(view, drain_taint_keys(params))
    exported = export_floor(config)
    floor = floor_layer(view, exported.digest)
    return AuditResult(
        findings,
        all_groups(view),
        all_notes,
        spare_by_lws(view),
        draining=draining,
        stale=stale,
        gaps=gaps,
        unchecked=not_read,
        floor=floor,
        unnarrowed=unnarrowed(view, objects, config),
        gangs=list(each_gang_set(view)),
        floor_cover=floor_cover(view, gaps, floor, exported.rules),
        eviction_guards=eviction_guards(view),
        stuck=stuck_in_view(view, config),
    )


def stuck_in_view(view: Any, config: Config) -> list[StuckGroup]:
    """The groups of `view` down for good, gated ones counted after group-eviction's
    `stuckAfterSeconds` (guardhook.groups.stuck)."""
    import time

    from guardhook.groups.stuck import stuck_after, stuck_groups

    return list(stuck_groups(view, time.time(), stuck_after(config.settings("group-eviction").params)))


def unnarrowed(view: Any, objects: Sequence[Located], config: Config) -> list[Entry]:
    """The leader-service-sync plan over the audited objects: every Service and InferencePool that
    can match workers of an LWS and is not narrowed to leaders, with its state and why."""
    from guardhook.cluster.pools import POOL_KIND
    from guardhook.leadersync.desired import plan

    pools = [o.obj for o in objects if o.obj.get("kind") == POOL_KIND]
    return plan(view, pools, config).entries


UNNARROWED_STATE = {
    "patch": "pending: the leader-service-sync reconciler narrows it within its period (is it running?)",
    "report": "reported only",
    "opted-out": "opted out",
    "cannot-narrow": "cannot be narrowed",
}
"""How `audit` words each plan state (guardhook.leadersync.desired.STATES)."""


def held_findings(view: Any, config: Config, objects: Sequence[Located]) -> list[Finding]:
    """The group-readiness watchdog as findings: a gated pod whose containers are ready but whose
    guardhook.io/group-ready condition has been False (or never written, counted from the pod's
    creation) longer than the policy's
    `startupWindowSeconds` (guardhook.groups.ready.held_pods)."""
    from guardhook.commands.scan import Finding
    from guardhook.groups.ready import GATE, held_pods

    params = config.settings("group-readiness").params
    window = float(params.get("startupWindowSeconds", 1800))
    sources = {_key_of(o.obj): o.source for o in objects}
    findings = []
    for target, seconds in held_pods(view, bool(params.get("allLeaderWorkerSets", False)), window):
        pod = target.pod
        current = pod.gate_conditions.get(GATE)
        state = (
            f"{GATE}=False ({current.message or current.reason})"
            if current is not None
            else f"{GATE} never written (is a group-readiness reconciler running?)"
        )
        message = (
            f"held out of service for {int(seconds)} s (startup window {int(window)} s) with its "
            f"containers ready: {state}; group {target.group_index} of LeaderWorkerSet "
            f"{pod.namespace}/{target.lws.name} is not whole"
        )
        source = sources.get(("Pod", pod.namespace, pod.name), "cluster")
        findings.append(
            Finding(
                source,
                "Pod",
                pod.namespace,
                pod.name,
                pod.uid,
                "v1",
                "group-readiness",
                "Advisory",
                "warned",
                message,
            )
        )
    return findings


def _key_of(obj: KubeObject) -> tuple[str, str, str]:
    raw = obj.get("metadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return (str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def render_text(result: AuditResult, out: TextIO, quiet: bool = False, err: TextIO | None = None) -> None:
    """The report on `out`: violations, one line each, then a table of groups per LWS, the gaps and
    the floor; the notes on `err` (default stderr) as `guardhook audit: note: …`, as `check` prints
    its own, so `out` holds the report alone. With `quiet` (`--quiet`), the violation lines alone."""
    if quiet:
        for finding in result.violations:
            print(finding.line(), file=out)
        return
    print(f"Violations ({len(result.violations)}):", file=out)
    for finding in result.violations:
        print("  " + finding.line(), file=out)
    print("Groups per LeaderWorkerSet:", file=out)
    header = ("NAMESPACE", "NAME", "DESIRED", "WHOLE", "BROKEN", "LEADER-READY-INCOMPLETE", "SPARE", "DOOMED")
    rows = [header] + [
        (
            g.namespace,
            g.name,
            str(g.desired),
            str(g.whole),
            str(g.broken),
            str(g.leader_ready_group_incomplete),
            _spare(result, g),
            str(g.doomed_by_taint),
        )
        for g in result.groups
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(),
            file=out,
        )
    render_gangs(result, out)
    print(f"Unnarrowed Services and InferencePools ({len(result.unnarrowed)}):", file=out)
    for entry in result.unnarrowed:
        lws = ", ".join(entry.lws)
        print(
            f"  {entry.subject} (LeaderWorkerSet {lws}): {UNNARROWED_STATE[entry.state]}: {entry.why}",
            file=out,
        )
    print(gaps_heading(result), file=out)
    for gap in result.gaps:
        print(f"  [{gap.kind}] {gap.message}", file=out)
    if result.floor_cover is not None:
        for line in result.floor_cover.lines():
            print(line, file=out)
    if result.floor is not None:
        print(f"Admission-policy floor: {result.floor.message}", file=out)
    if result.draining:
        print(f"Draining nodes ({len(result.draining)}):", file=out)
        for node, why in result.draining.items():
            print(f"  {node}: {why}", file=out)
    if result.stale:
        print(f"Stale node conditions ({len(result.stale)}):", file=out)
        for stale in result.stale:
            print(f"  {stale.describe()}", file=out)
    if result.eviction_guards:
        print(f"Other eviction guards ({len(result.eviction_guards)}):", file=out)
        for guard in result.eviction_guards:
            print(f"  {guard.describe()}: judges the same evictions with its own budget", file=out)
    if result.stuck:
        print(f"Groups down for good ({len(result.stuck)}):", file=out)
        for stuck in result.stuck:
            print(f"  {stuck.describe()}", file=out)
    for note in result.notes:
        print(f"guardhook audit: note: {note}", file=err or sys.stderr)


def render_gangs(result: AuditResult, out: TextIO) -> None:
    """The table of gangs per set, every gang maker's (guardhook.groups.each_gang_set: Workload API
    PodGroups with `disruptionMode: all`, Grove PodCliqueSet replicas, JobSet Jobs run as one),
    printed only when the objects hold such gangs."""
    if not result.gangs:
        return
    print("Gangs per set:", file=out)
    header = ("NAMESPACE", "SET", "GANGS", "WHOLE", "BROKEN", "BROKEN-GANGS")
    rows = [header] + [
        (
            g.namespace,
            f"{g.kind}/{g.name}",
            str(g.gangs),
            str(g.whole),
            str(g.broken),
            ",".join(g.broken_names) or "-",
        )
        for g in result.gangs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(),
            file=out,
        )


def gaps_heading(result: AuditResult) -> str:
    """`Protection gaps (N):`, saying what was not checked when something could not be read:
    `Protection gaps: not checked (Namespaces and webhook configurations could not be read; see
    the notes):` when nothing was found, else `Protection gaps (N; not checked: …):`."""
    if not result.unchecked:
        return f"Protection gaps ({len(result.gaps)}):"
    what = " and ".join(result.unchecked)
    if not result.gaps:
        return f"Protection gaps: not checked ({what} could not be read; see the notes):"
    return f"Protection gaps ({len(result.gaps)}; not checked: {what}, which could not be read):"


def render_json(result: AuditResult, out: TextIO) -> None:
    """`{"violations": [Finding…], "groups": [LwsGroups…], "gangs": [GangSetGroups…], "notes": […]}`
    on `out`, with camelCase keys throughout (`apiVersion`, `leaderReadyGroupIncomplete`), as
    Kubernetes writes JSON."""
    document = {
        "violations": [f.as_dict() for f in result.violations],
        "groups": [
            {
                "namespace": g.namespace,
                "name": g.name,
                "desired": g.desired,
                "whole": g.whole,
                "broken": g.broken,
                "leaderReadyGroupIncomplete": g.leader_ready_group_incomplete,
                "doomedByTaint": g.doomed_by_taint,
                "spare": result.spare.get((g.namespace, g.name)),
            }
            for g in result.groups
        ],
        "gangs": [g.as_dict() for g in result.gangs],
        "drainingNodes": result.draining,
        "staleConditions": [item.as_dict() for item in result.stale],
        "stuckGroups": [item.as_dict() for item in result.stuck],
        "otherEvictionGuards": [item.as_dict() for item in result.eviction_guards],
        "unnarrowed": [
            {k: v for k, v in e.as_dict().items() if k != "patch"} | {"state": UNNARROWED_STATE[e.state]}
            for e in result.unnarrowed
        ],
        "gaps": [
            {
                "gap": g.kind,
                "kind": g.object_kind,
                "namespace": g.namespace,
                "name": g.name,
                "severe": g.severe,
                "message": g.message,
            }
            for g in result.gaps
        ],
        "gapsNotChecked": result.unchecked,
        "failsOpen": result.floor_cover.as_dict() if result.floor_cover is not None else None,
        "admissionPolicyFloor": (
            {
                "state": result.floor.state,
                "message": result.floor.message,
                "policies": list(result.floor.policies),
            }
            if result.floor is not None
            else None
        ),
        "notes": result.notes,
    }
    json.dump(document, out, indent=2)
    out.write("\n")


def _spare(result: AuditResult, groups: LwsGroups) -> str:
    """The SPARE cell: a count, `64+` at the limit, `-` with no nodes to count against."""
    from guardhook.planning.spare import SPARE_LIMIT

    spare = result.spare.get((groups.namespace, groups.name))
    if spare is None:
        return "-"
    return f"{spare}+" if spare >= SPARE_LIMIT else str(spare)


def policy_reports(result: AuditResult, now: float | None = None) -> list[KubeObject]:
    """One `wgpolicyk8s.io/v1alpha2` PolicyReport per namespace holding a judged object or a gap,
    with a result per (object, policy, action), one per gap (policy `coverage`, rule the gap kind;
    an unguarded namespace's in that namespace's report) and the summary counts; cluster-scoped
    gaps (webhook entries) in one ClusterPolicyReport, last. Cluster-scoped findings are left out
    (guardhook judges none)."""
    seconds = int(time.time() if now is None else now)
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for finding in result.findings:
        if finding.namespace:
            by_namespace[finding.namespace].append(_report_result(finding, seconds))
    cluster: list[dict[str, Any]] = []
    for gap in result.gaps:
        namespace = gap.namespace or (gap.name if gap.object_kind == "Namespace" else "")
        (by_namespace[namespace] if namespace else cluster).append(_gap_result(gap, seconds))
    reports = [
        _report("PolicyReport", by_namespace[namespace], namespace) for namespace in sorted(by_namespace)
    ]
    if cluster:
        reports.append(_report("ClusterPolicyReport", cluster, None))
    return reports


def _report(kind: str, results: list[dict[str, Any]], namespace: str | None) -> KubeObject:
    summary = {key: 0 for key in ("pass", "fail", "warn", "error", "skip")}
    for entry in results:
        summary[entry["result"]] += 1
    meta: dict[str, Any] = {"name": REPORT_NAME, "labels": {"app.kubernetes.io/managed-by": "guardhook"}}
    if namespace is not None:
        meta = {"name": REPORT_NAME, "namespace": namespace, "labels": meta["labels"]}
    return {
        "apiVersion": f"{REPORT_GROUP}/{REPORT_VERSION}",
        "kind": kind,
        "metadata": meta,
        "summary": summary,
        "results": results,
    }


def _gap_result(gap: Gap, seconds: int) -> dict[str, Any]:
    api_version = "admissionregistration.k8s.io/v1" if gap.object_kind.endswith("Configuration") else "v1"
    if gap.object_kind == "LeaderWorkerSet":
        api_version = "leaderworkerset.x-k8s.io/v1"
    resource = {"apiVersion": api_version, "kind": gap.object_kind, "name": gap.name.split("/")[0]}
    if gap.namespace:
        resource["namespace"] = gap.namespace
    return {
        "source": REPORT_SOURCE,
        "policy": COVERAGE_POLICY,
        "rule": gap.kind,
        "result": "fail" if gap.severe else "warn",
        "resources": [resource] if resource["name"] else [],
        "timestamp": {"seconds": seconds, "nanos": 0},
        "message": gap.message,
    }


def _report_result(finding: Finding, seconds: int) -> dict[str, Any]:
    resource = {
        "apiVersion": finding.api_version,
        "kind": finding.kind,
        "name": finding.name,
        "namespace": finding.namespace,
    }
    if finding.uid:
        resource["uid"] = finding.uid
    entry: dict[str, Any] = {
        "source": REPORT_SOURCE,
        "policy": finding.policy,
        "rule": finding.policy,
        "result": RESULT_OF_OUTCOME.get(finding.outcome, "warn"),
        "resources": [resource],
        "timestamp": {"seconds": seconds, "nanos": 0},
    }
    if finding.message:
        entry["message"] = finding.message
    if finding.action:
        entry["properties"] = {"action": finding.action}
    return entry


def write_reports(api: client.ApiClient, reports: Sequence[KubeObject]) -> None:
    """Create each PolicyReport, or replace the one already there (keeping its resourceVersion).
    Raises ApiException on any API error (e.g. the PolicyReport CRD is not installed: 404)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(api)
    for report in reports:
        if report["kind"] == "ClusterPolicyReport":
            _write_cluster_report(custom, report)
            continue
        namespace = report["metadata"]["namespace"]
        try:
            existing = custom.get_namespaced_custom_object(
                REPORT_GROUP, REPORT_VERSION, namespace, REPORT_PLURAL, REPORT_NAME
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            custom.create_namespaced_custom_object(
                REPORT_GROUP, REPORT_VERSION, namespace, REPORT_PLURAL, report
            )
            continue
        body = dict(report)
        version = existing.get("metadata", {}).get("resourceVersion") if isinstance(existing, dict) else None
        body["metadata"] = {**report["metadata"], "resourceVersion": version}
        custom.replace_namespaced_custom_object(
            REPORT_GROUP, REPORT_VERSION, namespace, REPORT_PLURAL, REPORT_NAME, body
        )


def _write_cluster_report(custom: Any, report: KubeObject) -> None:
    from kubernetes.client.exceptions import ApiException

    group, version, plural = REPORT_GROUP, REPORT_VERSION, CLUSTER_REPORT_PLURAL
    try:
        existing = custom.get_cluster_custom_object(group, version, plural, REPORT_NAME)
    except ApiException as exc:
        if exc.status != 404:
            raise
        custom.create_cluster_custom_object(group, version, plural, report)
        return
    version_held = existing.get("metadata", {}).get("resourceVersion") if isinstance(existing, dict) else None
    body = {**report, "metadata": {**report["metadata"], "resourceVersion": version_held}}
    custom.replace_cluster_custom_object(group, version, plural, REPORT_NAME, body)


def add_parser(commands: Any) -> None:
    """Register `guardhook audit` on the CLI's subparsers."""
    audit_cmd = commands.add_parser("audit", help="judge a cluster's existing objects; report groups per LWS")
    audit_cmd.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    audit_cmd.add_argument(
        "--write-reports", action="store_true", help="write wgpolicyk8s.io PolicyReports into the cluster"
    )
    audit_cmd.add_argument("--reports-file", metavar="PATH", help="write the PolicyReports as YAML to PATH")
    add_view_flags(audit_cmd, "audit the cluster of this kubeconfig, listed once")
    audit_cmd.set_defaults(run=run_audit)


def run_audit(args: argparse.Namespace) -> int:
    """Print the audit; write PolicyReports when asked. Raises SourceError for an unusable source."""
    import yaml

    from guardhook.cluster.sources import choose_source
    from guardhook.config import load_config

    config = load_config(args.config, args.enforcement)
    source = choose_source(args.cluster_state, args.kubeconfig)
    require_cluster(source, "audit")
    # what cannot be done is refused before anything is listed or printed
    if args.write_reports and not source.live:
        raise SourceError("--write-reports needs a live cluster; use --reports-file PATH offline")
    if args.reports_file and not Path(args.reports_file).resolve().parent.is_dir():
        raise SourceError(f"cannot write {args.reports_file}: its folder does not exist")
    objects, notes, unreadable = _audit_objects(source)
    result = audit(objects, config, notes=notes, unreadable=unreadable)
    if args.format == "json":
        render_json(result, sys.stdout)
    else:
        render_text(result, sys.stdout, quiet=bool(getattr(args, "quiet", False)), err=sys.stderr)
    reports = policy_reports(result)
    if args.reports_file:
        write_text(args.reports_file, yaml.safe_dump_all(reports, sort_keys=False))
    if args.write_reports:
        api = live_client(source, retries=False)
        using_source(source, "write PolicyReports to", lambda: write_reports(api, reports))
    return 0


def _audit_objects(source: Source) -> tuple[list[Located], list[str], list[str] | None]:
    from guardhook.cluster.listing import list_cluster
    from guardhook.cluster.view.manifests import load_paths
    from guardhook.commands.scan import Located

    if not source.live:
        return [Located(m.source, m.obj) for m in load_paths(source.paths)], [], None
    api = live_client(source, retries=False)
    listed = using_source(source, LISTING, lambda: list_cluster(api))
    return [Located("cluster", obj) for obj in listed.objects], listed.notes, listed.unreadable
