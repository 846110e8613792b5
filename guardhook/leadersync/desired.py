"""The leader-service-sync plan: which Services and InferencePools reach workers of an LWS, and
what to do about each, computed purely from a ClusterView, the InferencePools listed, and the
configuration (issue 38: "mutate existing", what admission could not see).

Admission judges a Service or InferencePool only at CREATE and UPDATE, against the LWSs the view
holds then. One created before its LWS, in the same `kubectl apply` as its LWS (before the view
heard of it), while guardhook was down, or before the LWS CRD was served, is never judged again.
This plan judges every such object of every namespace holding an LWS with the policy itself
(`guardhook.policies.leader_service`: the same reach from the LWS spec, 0 replicas included, and the
same patch), level-based, so an LWS that appears, changes its templates or scales from 0 is covered
as soon as the view holds it.

For each object whose selector can match workers of an LWS that does not serve from every pod:

- PATCH: leader-service runs as Mutate: the policy's patch, preceded by a JSONPatch `test` of the
  selector map as judged (a selector changed meanwhile makes the API server answer 422, and the
  next round judges the new one);
- REPORT: leader-service runs as Deny/Warn/Audit (or is off): named, counted, not changed;
- OPTED_OUT: the object is annotated `guardhook.io/leader-service: "ignore"`;
- CANNOT_NARROW: the policy has no patch for it (it pins a non-zero worker-index, spans a
  data-parallel LWS too, or a v1 pool's matchLabels is full): reported with the policy's reason.

Never judged: headless, ExternalName and selector-less Services, the discovery Services LWS and
DisaggregatedSet own (`traffic_selector` is None), namespaces exempt from leader-service
(`policies.leader-service.exemptions.namespaces` and the global ones), the namespaces every webhook
entry leaves out (`kube-system`, `kube-node-lease`, `guardhook-system`: guardhook.cluster.coverage
.EXCLUDED_NAMESPACES; issue 48: the reconciler acts only where admission would), namespaces not in
leader-service's `syncNamespaces` when it lists any (namespaced RBAC), LWSs being deleted.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from guardhook.cluster.coverage import EXCLUDED_NAMESPACES
from guardhook.cluster.lws import SERVING_ALL, LeaderWorkerSet
from guardhook.cluster.model import metadata
from guardhook.cluster.view.store import SERVICES, ClusterView
from guardhook.config import Config
from guardhook.policies.base import PolicyContext
from guardhook.policies.leader_service import POLICY, SYNC_NAMESPACES_PARAM, opted_out, workers_reached
from guardhook.policies.shared.traffic import lws_owner_check, traffic_selector
from guardhook.wire import JSONPatchOp, KubeObject

PATCH = "patch"
REPORT = "report"
OPTED_OUT = "opted-out"
CANNOT_NARROW = "cannot-narrow"
STATES = (PATCH, REPORT, OPTED_OUT, CANNOT_NARROW)
"""What an entry asks for; the last three are the reasons an object stays unnarrowed."""


@dataclass(frozen=True)
class Entry:
    """One object whose selector reaches workers: its identity, the LWSs whose workers it
    reaches, the state (STATES), why (a sentence), and for PATCH the JSONPatch to send."""

    kind: str
    api_version: str
    namespace: str
    name: str
    lws: tuple[str, ...]
    state: str
    why: str
    patch: tuple[JSONPatchOp, ...] = ()

    @property
    def subject(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def line(self) -> str:
        """One line: `<state> <Kind> <namespace>/<name> (LeaderWorkerSet a, b): why`."""
        return f"{self.state} {self.subject} (LeaderWorkerSet {', '.join(self.lws)}): {self.why}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form printed by `guardhook leader-service-sync --dry-run`."""
        return {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "namespace": self.namespace,
            "name": self.name,
            "leaderWorkerSets": list(self.lws),
            "state": self.state,
            "why": self.why,
            "patch": list(self.patch),
        }


@dataclass
class Plan:
    """Every entry, sorted by (namespace, kind, name), and warnings (a stale view)."""

    entries: list[Entry] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def by_state(self, state: str) -> list[Entry]:
        return [e for e in self.entries if e.state == state]


def mutates(config: Config) -> bool:
    """Whether leader-service runs as Mutate (then the reconciler patches; else it reports)."""
    return "Mutate" in config.settings(POLICY.id).actions


def plan(view: ClusterView, pools: Iterable[KubeObject], config: Config) -> Plan:
    """The plan for every Service in `view` and every pool in `pools` (objects with `kind` and
    `apiVersion`) in a namespace holding an LWS. A stale or unsynced view yields an empty plan
    with a warning. Never raises on malformed objects."""
    result = Plan()
    if view.is_stale():
        result.warnings.append("cluster view is stale or not synced; Services and pools left as they are")
        return result
    settings = config.settings(POLICY.id)
    exempt = {*EXCLUDED_NAMESPACES, *config.exemptions.namespaces, *settings.exemptions.namespaces}
    only = set(settings.params.get(SYNC_NAMESPACES_PARAM) or ())
    lws_by_namespace: dict[str, list[LeaderWorkerSet]] = defaultdict(list)
    for lws in view.all_lws():
        if lws.namespace in exempt or (only and lws.namespace not in only):
            continue
        if not lws.meta.get("deletionTimestamp"):
            lws_by_namespace[lws.namespace].append(lws)
    patching = mutates(config)
    for obj in _candidates(view, pools, lws_by_namespace):
        entry = judge(view, obj, lws_by_namespace[str(metadata(obj).get("namespace"))], patching)
        if entry is not None:
            result.entries.append(entry)
    result.entries.sort(key=lambda e: (e.namespace, e.kind, e.name))
    return result


def _candidates(
    view: ClusterView, pools: Iterable[KubeObject], lws_by_namespace: dict[str, list[LeaderWorkerSet]]
) -> list[KubeObject]:
    found: list[KubeObject] = []
    for namespace, name in view.keys(SERVICES):
        if namespace in lws_by_namespace:
            service = view.service(namespace, name)
            if service is not None:  # list items carry no kind/apiVersion
                found.append({**service, "kind": "Service", "apiVersion": "v1"})
    found += [p for p in pools if str(metadata(p).get("namespace") or "") in lws_by_namespace]
    return found


def judge(
    view: ClusterView, obj: KubeObject, lws_list: list[LeaderWorkerSet], patching: bool
) -> Entry | None:
    """The entry for one object (None when its selector reaches no worker of an LWS in
    `lws_list` that serves from its leaders only): the policy's own judgement, as an UPDATE that
    changes nothing."""
    found = traffic_selector(obj, lws_owner_check(view, str(metadata(obj).get("namespace") or "")))
    if found is None:
        return None
    reached = [lws for lws in workers_reached(found.selector, lws_list) if lws.serving_pods != SERVING_ALL]
    if not reached:
        return None
    meta = metadata(obj)
    entry = Entry(
        kind=found.kind,
        api_version=str(obj.get("apiVersion") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        lws=tuple(sorted(lws.name for lws in reached)),
        state=REPORT,
        why="",
    )
    if opted_out(obj):
        return _with(entry, OPTED_OUT, "annotated guardhook.io/leader-service: ignore")
    judgement = POLICY.judge(_context(view, obj, entry))
    violation = judgement.violation
    if violation is None or not violation.patch:
        why = "; ".join(judgement.advisories) or "leader-service has no patch for it"
        return _with(entry, CANNOT_NARROW, why)
    if not patching:
        return _with(entry, REPORT, f"leader-service does not run as Mutate: {violation.message}")
    test: JSONPatchOp = {
        "op": "test",
        "path": jsonpatch.JsonPointer.from_parts(found.path).path,
        "value": dict(found.selector),
    }
    return dataclasses.replace(entry, state=PATCH, why=violation.message, patch=(test, *violation.patch))


def _with(entry: Entry, state: str, why: str) -> Entry:
    return dataclasses.replace(entry, state=state, why=why)


def _context(view: ClusterView, obj: KubeObject, entry: Entry) -> PolicyContext:
    request: dict[str, Any] = {
        "operation": "UPDATE",
        "namespace": entry.namespace,
        "name": entry.name,
        "object": obj,
        "oldObject": obj,
        "userInfo": {"username": "guardhook:leader-service-sync"},
    }
    return PolicyContext(request=request, view=view, params=POLICY.params)  # type: ignore[arg-type]
