"""The in-memory cluster view: compact records with the indexes the policies read.

One `ClusterView` serves every source: the static one built from manifests and the live one fed
by watches. Writers call `upsert`/`remove`/`replace_kind`; readers call the lookup methods. All
mutations and compound reads take one lock, so a decision never sees half an update.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Container, Iterable
from typing import Any, Protocol, cast, runtime_checkable

from guardhook.cluster.dra import (
    Device,
    DeviceClassRecord,
    DeviceId,
    DeviceTaintRuleRecord,
    ResourceClaimRecord,
    ResourceClaimTemplateRecord,
    ResourceSliceRecord,
    allocated_devices,
    devices_by_node,
    published_devices,
)
from guardhook.cluster.jobsets import JobSetRecord
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.model import TERMINAL_PHASES, NodeRecord, PodRecord, StatefulSetRecord, metadata
from guardhook.cluster.nodepools import NodePoolRecord
from guardhook.cluster.podgroups import PodGroupRecord, WorkloadRecord
from guardhook.cluster.podwire import PodWire, pod_record, pod_records
from guardhook.cluster.resources import Resources
from guardhook.cluster.webhooks import AdmissionPolicyRecord, NamespaceRecord, WebhookConfigurationRecord
from guardhook.wire import KubeObject

# The kinds the view holds, by the resource name the API uses.
PODS = "pods"
NODES = "nodes"
LEADERWORKERSETS = "leaderworkersets"
STATEFULSETS = "statefulsets"
SERVICES = "services"
PODDISRUPTIONBUDGETS = "poddisruptionbudgets"
RESOURCESLICES = "resourceslices"
RESOURCECLAIMS = "resourceclaims"
RESOURCECLAIMTEMPLATES = "resourceclaimtemplates"
DEVICECLASSES = "deviceclasses"
DEVICETAINTRULES = "devicetaintrules"
DRA_KINDS = (RESOURCESLICES, RESOURCECLAIMS, RESOURCECLAIMTEMPLATES, DEVICECLASSES, DEVICETAINTRULES)
"""resource.k8s.io kinds (guardhook.cluster.dra), kept as compact records."""
NODEPOOLS = "nodepools"
"""Karpenter NodePools (guardhook.cluster.nodepools)."""
PODGROUPS = "podgroups"
"""Workload API PodGroups (scheduling.k8s.io/v1beta1; guardhook.cluster.podgroups)."""
WORKLOADS = "workloads"
"""Workload API Workloads (scheduling.k8s.io/v1beta1): read for a gang set's budget annotation."""
JOBSETS = "jobsets"
"""JobSets (jobset.x-k8s.io/v1alpha2; guardhook.cluster.jobsets): read for their failure policy."""
NAMESPACES = "namespaces"
VALIDATINGWEBHOOKCONFIGURATIONS = "validatingwebhookconfigurations"
MUTATINGWEBHOOKCONFIGURATIONS = "mutatingwebhookconfigurations"
WEBHOOK_KINDS = (VALIDATINGWEBHOOKCONFIGURATIONS, MUTATINGWEBHOOKCONFIGURATIONS)
COVERAGE_KINDS = (NAMESPACES, *WEBHOOK_KINDS)
VALIDATINGADMISSIONPOLICIES = "validatingadmissionpolicies"
VALIDATINGADMISSIONPOLICYBINDINGS = "validatingadmissionpolicybindings"
FLOOR_KINDS = (VALIDATINGADMISSIONPOLICIES, VALIDATINGADMISSIONPOLICYBINDINGS)
"""Kinds read only to report guardhook's admission-policy floor as a coverage layer: like the
coverage kinds, one the view cannot read (RBAC 403, or 404 before Kubernetes 1.30) is empty and
`readable(kind)` False."""
"""Kinds read only to report where guardhook does not protect (guardhook.cluster.coverage); one
the view cannot read (RBAC: 403) is empty and `readable(kind)` False, never a reason to be unready."""
RECORD_KINDS = (*DRA_KINDS, NODEPOOLS, PODGROUPS, WORKLOADS, JOBSETS, *COVERAGE_KINDS, *FLOOR_KINDS)
"""Kinds kept as compact records in one generic table (no listeners, no secondary indexes)."""
KINDS = (NODES, PODS, LEADERWORKERSETS, STATEFULSETS, SERVICES, PODDISRUPTIONBUDGETS, *RECORD_KINDS)
NOTIFIED_RECORD_KINDS = (RESOURCESLICES, RESOURCECLAIMS)
"""Record kinds whose changes listeners hear of (the capacity index counts devices from them)."""

KIND_TO_RESOURCE = {
    "Pod": PODS,
    "Node": NODES,
    "LeaderWorkerSet": LEADERWORKERSETS,
    "StatefulSet": STATEFULSETS,
    "Service": SERVICES,
    "PodDisruptionBudget": PODDISRUPTIONBUDGETS,
    "ResourceSlice": RESOURCESLICES,
    "ResourceClaim": RESOURCECLAIMS,
    "ResourceClaimTemplate": RESOURCECLAIMTEMPLATES,
    "DeviceClass": DEVICECLASSES,
    "DeviceTaintRule": DEVICETAINTRULES,
    "NodePool": NODEPOOLS,
    "PodGroup": PODGROUPS,
    "Workload": WORKLOADS,
    "JobSet": JOBSETS,
    "Namespace": NAMESPACES,
    "ValidatingWebhookConfiguration": VALIDATINGWEBHOOKCONFIGURATIONS,
    "MutatingWebhookConfiguration": MUTATINGWEBHOOKCONFIGURATIONS,
    "ValidatingAdmissionPolicy": VALIDATINGADMISSIONPOLICIES,
    "ValidatingAdmissionPolicyBinding": VALIDATINGADMISSIONPOLICYBINDINGS,
}

_DRA_RECORDS: dict[str, Callable[[KubeObject], Any]] = {
    RESOURCESLICES: ResourceSliceRecord.from_object,
    RESOURCECLAIMS: ResourceClaimRecord.from_object,
    RESOURCECLAIMTEMPLATES: ResourceClaimTemplateRecord.from_object,
    DEVICECLASSES: DeviceClassRecord.from_object,
    DEVICETAINTRULES: DeviceTaintRuleRecord.from_object,
    NODEPOOLS: NodePoolRecord.from_object,
    PODGROUPS: PodGroupRecord.from_object,
    WORKLOADS: WorkloadRecord.from_object,
    JOBSETS: JobSetRecord.from_object,
    NAMESPACES: NamespaceRecord.from_object,
    VALIDATINGWEBHOOKCONFIGURATIONS: lambda o: WebhookConfigurationRecord.from_object(
        o, "ValidatingWebhookConfiguration"
    ),
    MUTATINGWEBHOOKCONFIGURATIONS: lambda o: WebhookConfigurationRecord.from_object(
        o, "MutatingWebhookConfiguration"
    ),
    VALIDATINGADMISSIONPOLICIES: lambda o: AdmissionPolicyRecord.from_object(o, "ValidatingAdmissionPolicy"),
    VALIDATINGADMISSIONPOLICYBINDINGS: lambda o: AdmissionPolicyRecord.from_object(
        o, "ValidatingAdmissionPolicyBinding"
    ),
}

Key = tuple[str, str]


@runtime_checkable
class HeldNames(Protocol):
    """What a relist holds, by namespace (guardhook.cluster.view.live.Versions)."""

    def names_in(self, namespace: str) -> Container[str]:
        """The names held in `namespace` (empty when none)."""
        ...


Listener = Callable[[str, Any, Any], None]
"""Called as `listener(kind, old_record, new_record)` after a pod, node, ResourceSlice or
ResourceClaim changes in the view (old None on insert, new None on removal); records are
PodRecord / NodeRecord / ResourceSliceRecord / ResourceClaimRecord. A listener subscribed for
LeaderWorkerSets or Services also hears those (LeaderWorkerSet / Service dict)."""
BatchListener = Callable[[str, list[tuple[Any, Any]]], None]
"""Called as `batch(kind, changes)` with the (old, new) pairs of the pods one `upsert_all` applied,
in order, once they all are (a relist hands a page over in slices): what its `Listener` would
have heard one call each, in one call (the per-pod call cost ~0.2 us a listener, 0.8 s over issue
53's 1.95 million pods with two indexes subscribed)."""
DEFAULT_NOTIFIED_KINDS = frozenset({PODS, NODES, *NOTIFIED_RECORD_KINDS})
"""What a listener hears unless it asks for other kinds."""
OBJECT_NOTIFIED_KINDS = frozenset({NODES, LEADERWORKERSETS, SERVICES})
"""Kinds kept as objects whose upsert looks up the old one for listeners (pods do it themselves)."""


def _discard(pods: list[PodRecord], pod: PodRecord) -> bool:
    """Take `pod` (the very record) out of `pods`; False when it is not there."""
    for at in range(len(pods) - 1, -1, -1):  # the newest last: a status update moves that one
        if pods[at] is pod:
            del pods[at]
            return True
    return False


def object_key(obj: KubeObject) -> Key:
    meta = metadata(obj)
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class ClusterView:
    """What guardhook knows of the cluster.

    Freshness: `synced` is False until every kind has been loaded once; `stale_since` is the
    monotonic time a watch broke (None while healthy). `stale_after_seconds` turns a broken watch
    into a stale view, which each policy answers with its documented failure mode.
    """

    def __init__(self, source: str = "static", stale_after_seconds: float = 60.0) -> None:
        self.source = source
        self.stale_after_seconds = stale_after_seconds
        self.lock = threading.RLock()
        self._synced_kinds: set[str] = set()
        self._all_synced = False
        self._broken_since: dict[str, float] = {}
        self._unreadable: set[str] = set()
        # Pods are held by namespace, then name: no flat (namespace, name) table beside it, which
        # cost ~43 B a pod (84 MB over issue 53's 1.95 million pods) for what two lookups give.
        self._pods_by_namespace: dict[str, dict[str, PodRecord]] = defaultdict(dict)
        self._pod_count = 0
        # A node's pods as a list (a dict keyed by (namespace, name) cost ~40 B a pod more); a pod is
        # found in it by identity (`_discard`), among the ~30-110 pods a node runs.
        self._pods_by_node: dict[str, list[PodRecord]] = defaultdict(list)
        self._nodes: dict[str, NodeRecord] = {}
        self._lws: dict[Key, LeaderWorkerSet] = {}
        self._lws_by_namespace: dict[str, dict[str, LeaderWorkerSet]] = defaultdict(dict)
        self._statefulsets: dict[Key, StatefulSetRecord] = {}
        self._services: dict[Key, KubeObject] = {}
        self._pdbs: dict[Key, KubeObject] = {}
        self._pdbs_by_namespace: dict[str, dict[str, KubeObject]] = defaultdict(dict)
        self._dra: dict[str, dict[Key, Any]] = {kind: {} for kind in RECORD_KINDS}
        self._pods_by_claim: dict[Key, set[str]] = defaultdict(set)
        self._generations: dict[str, int] = defaultdict(int)
        self._listeners: list[tuple[Listener, frozenset[str], BatchListener | None]] = []

    # ---- change notification ---------------------------------------------------------------

    def subscribe(
        self,
        listener: Listener,
        kinds: Iterable[str] = DEFAULT_NOTIFIED_KINDS,
        batch: BatchListener | None = None,
    ) -> None:
        """Call `listener` after every change of one of `kinds` (default: pods, nodes,
        ResourceSlices, ResourceClaims; LeaderWorkerSets and Services on request), under the
        view's lock (so derived indexes such as guardhook.capacity stay in step). It must be quick
        and must not raise. The pods of one `upsert_all` (a relist's slice) are told after the
        whole slice is applied, still under the same hold of the lock: to `batch` in one call when
        given, else to `listener` one by one."""
        with self.lock:
            self._listeners.append((listener, frozenset(kinds), batch))

    def _notify_all(self, kind: str, changes: list[tuple[Any, Any]]) -> None:
        """Tell every listener of `kind` the (old, new) `changes`, in order (see `subscribe`)."""
        for listener, kinds, batch in self._listeners:
            if kind in kinds:
                if batch is not None:
                    batch(kind, changes)
                    continue
                for old, new in changes:
                    listener(kind, old, new)

    def _record(self, kind: str, key: Key) -> Any:
        if kind == PODS:
            return self.pod(*key)
        if kind == NODES:
            return self._nodes.get(key[1])
        if kind == LEADERWORKERSETS:
            return self._lws.get(key)
        if kind == SERVICES:
            return self._services.get(key)
        return None

    def _notify(self, kind: str, old: Any, new: Any) -> None:
        if old is None and new is None:
            return
        for listener, kinds, _ in self._listeners:
            if kind in kinds:
                listener(kind, old, new)

    # ---- freshness -------------------------------------------------------------------------

    def mark_synced(self, kind: str) -> None:
        """Record that `kind` has been listed completely; clears a broken watch for it (and an
        unreadable mark)."""
        with self.lock:
            self._synced_kinds.add(kind)
            self._all_synced = self._synced_kinds.issuperset(KINDS)
            self._broken_since.pop(kind, None)
            self._unreadable.discard(kind)

    def mark_unreadable(self, kind: str) -> None:
        """Record that `kind` (one of COVERAGE_KINDS, or LeaderWorkerSets when the API server does
        not serve them) could not be read (403, 404, or not in the manifests): the view holds none
        and does not know whether there are some."""
        with self.lock:
            self._unreadable.add(kind)

    def readable(self, kind: str) -> bool:
        """Whether what the view holds of `kind` is what the cluster holds (see mark_unreadable)."""
        return kind not in self._unreadable

    def mark_broken(self, kind: str, now: float | None = None) -> None:
        """Record that the watch of `kind` broke (keeps the earliest time while it stays broken)."""
        with self.lock:
            self._broken_since.setdefault(kind, time.monotonic() if now is None else now)

    @property
    def synced(self) -> bool:
        """True once every kind in KINDS has been listed once (kinds are never unlisted, so it is
        worked out when one is marked, not on every request)."""
        return self._all_synced

    def stale_seconds(self, now: float | None = None) -> float:
        """Seconds the oldest broken watch has been broken (0.0 when all are healthy)."""
        if not self._broken_since:
            return 0.0
        now = time.monotonic() if now is None else now
        return max(0.0, now - min(self._broken_since.values()))

    def is_stale(self, now: float | None = None) -> bool:
        """Whether decisions should follow the stale-view failure mode: never synced, or a watch
        broken for longer than `stale_after_seconds`."""
        if not self.synced:
            return True
        return self.stale_seconds(now) > self.stale_after_seconds

    # ---- writes ----------------------------------------------------------------------------

    def upsert(self, kind: str, obj: KubeObject | PodWire) -> Key | None:
        """Insert or replace one object of `kind` (a resource name from KINDS): decoded JSON, or
        for pods also a list page's PodWire (guardhook.cluster.podwire). Returns a pod's key as
        the view holds it (interned strings, one tuple for every index), else None."""
        with self.lock:
            self._generations[kind] += 1
            if kind == PODS:  # the bulk of a relist: no dispatch table
                return self._upsert_pod(pod_record(obj), bool(self._listeners))
            obj = cast(KubeObject, obj)  # only a pod comes as a PodWire
            if kind in _DRA_RECORDS:
                key = object_key(obj)
                table = self._dra[kind]
                old_record, table[key] = table.get(key), _DRA_RECORDS[kind](obj)
                if kind in NOTIFIED_RECORD_KINDS:
                    self._notify(kind, old_record, table[key])
                return None
            watched = self._listeners and kind in OBJECT_NOTIFIED_KINDS
            key = object_key(obj)
            old = self._record(kind, key) if watched else None
            {
                NODES: self._upsert_node,
                LEADERWORKERSETS: self._upsert_lws,
                STATEFULSETS: self._upsert_statefulset,
                SERVICES: self._upsert_service,
                PODDISRUPTIONBUDGETS: self._upsert_pdb,
            }[kind](obj)
            if watched:
                self._notify(kind, old, self._record(kind, key))
            return None

    def upsert_all(self, kind: str, objects: Iterable[KubeObject | PodWire]) -> list[Key | None]:
        """`upsert(kind, obj)` for each of `objects` in order (a slice of a list page) under one
        hold of the lock; returns what each returned. A relist hands them over in small slices
        (guardhook.cluster.giveway): taken per object, the lock went to the reflector again and
        again before a waiting reader got to it."""
        with self.lock:
            if kind != PODS:
                return [self.upsert(kind, obj) for obj in objects]
            # The bulk of a relist (2 million pods in issue 53's cluster): one loop, no per-object
            # dispatch, and a pod the view does not hold yet (every pod of an initial list) filed
            # inline, as `_upsert_pod` files it; one it holds goes through `_upsert_pod`.
            upsert, by_namespace, by_node = self._upsert_pod, self._pods_by_namespace, self._pods_by_node
            keys: list[Key | None] = []
            changes: list[tuple[Any, Any]] = []
            added = 0
            for pod in pod_records(objects):
                namespace, name = pod.namespace, pod.name
                in_namespace = by_namespace[namespace]
                if name in in_namespace or pod.more.claims:
                    keys.append(upsert(pod, False, changes))
                    continue
                in_namespace[name] = pod
                added += 1
                if pod.node_name and pod.phase not in TERMINAL_PHASES:
                    by_node[pod.node_name].append(pod)
                changes.append((None, pod))
                keys.append((namespace, name))
            self._pod_count += added
            if self._listeners:
                self._notify_all(PODS, changes)
            self._generations[PODS] += len(keys)  # one a pod, as upsert counts
            return keys

    def remove_all(self, kind: str, keys: Iterable[Key]) -> None:
        """`remove(kind, key)` for each of `keys`, under one hold of the lock."""
        with self.lock:
            for key in keys:
                self.remove(kind, key)

    def remove(self, kind: str, key: Key) -> None:
        """Remove one object of `kind` by (namespace, name); cluster-scoped use namespace ""."""
        with self.lock:
            self._generations[kind] += 1
            if kind in self._dra:
                removed = self._dra[kind].pop(key, None)
                if kind in NOTIFIED_RECORD_KINDS:
                    self._notify(kind, removed, None)
                return
            old = self._record(kind, key) if self._listeners else None
            if kind == PODS:
                self._remove_pod(key)
            elif kind == NODES:
                self._nodes.pop(key[1], None)
            elif kind == LEADERWORKERSETS:
                self._lws.pop(key, None)
                self._lws_by_namespace[key[0]].pop(key[1], None)
            elif kind == STATEFULSETS:
                self._statefulsets.pop(key, None)
            elif kind == SERVICES:
                self._services.pop(key, None)
            elif kind == PODDISRUPTIONBUDGETS:
                self._pdbs.pop(key, None)
                self._pdbs_by_namespace[key[0]].pop(key[1], None)
            if old is not None:
                self._notify(kind, old, None)

    def replace_kind(self, kind: str, objects: Iterable[KubeObject]) -> None:
        """Replace everything of `kind` with `objects` (a relist) and mark the kind synced."""
        with self.lock:
            for key in list(self.keys(kind)):
                self.remove(kind, key)
            for obj in objects:
                self.upsert(kind, obj)
            self.mark_synced(kind)

    def keys(self, kind: str) -> list[Key]:
        """(namespace, name) of every object of `kind` held."""
        with self.lock:
            if kind == NODES:
                return [("", name) for name in self._nodes]
            if kind in self._dra:
                return list(self._dra[kind])
            if kind == PODS:
                return [(ns, name) for ns, pods in self._pods_by_namespace.items() for name in pods]
            stores: dict[str, dict[Key, Any]] = {
                LEADERWORKERSETS: self._lws,
                STATEFULSETS: self._statefulsets,
                SERVICES: self._services,
                PODDISRUPTIONBUDGETS: self._pdbs,
            }
            return list(stores[kind])

    def keys_not_in(self, kind: str, held: Container[Key] | HeldNames) -> list[Key]:
        """`[key for key in self.keys(kind) if key not in held]` (what a relist drops), without
        building every key of a large kind at once. `held` may instead answer `names_in(namespace)`
        (the names it holds in one namespace, as a reflector's `Versions` does): pods are then
        looked up by name within their namespace, no (namespace, name) tuple made per pod."""
        with self.lock:
            if not isinstance(held, HeldNames):
                if kind != PODS:
                    return [key for key in self.keys(kind) if key not in held]
                return [
                    (ns, name)
                    for ns, pods in self._pods_by_namespace.items()
                    for name in pods
                    if (ns, name) not in held
                ]
            if kind != PODS:
                return [key for key in self.keys(kind) if key[1] not in held.names_in(key[0])]
            gone: list[Key] = []
            for ns, pods in self._pods_by_namespace.items():
                names = held.names_in(ns)
                gone += [(ns, name) for name in pods if name not in names]
            return gone

    def count(self, kind: str) -> int:
        """How many objects of `kind` are held."""
        if kind in self._dra:
            return len(self._dra[kind])
        if kind == PODS:
            return self._pod_count
        stores: dict[str, Any] = {
            NODES: self._nodes,
            LEADERWORKERSETS: self._lws,
            STATEFULSETS: self._statefulsets,
            SERVICES: self._services,
            PODDISRUPTIONBUDGETS: self._pdbs,
        }
        return len(stores[kind])

    def generation(self, kind: str) -> int:
        """A number that changes whenever an object of `kind` is written or removed (derived
        indexes compare it to rebuild lazily)."""
        return self._generations[kind]

    def broken_seconds(self, kind: str, now: float | None = None) -> float:
        """Seconds the watch of `kind` has been broken (0.0 while healthy)."""
        since = self._broken_since.get(kind)
        if since is None:
            return 0.0
        return max(0.0, (time.monotonic() if now is None else now) - since)

    def _upsert_pod(self, pod: PodRecord, notify: bool, changes: list[tuple[Any, Any]] | None = None) -> Key:
        namespace, name = pod.namespace, pod.name
        key = (namespace, name)  # one tuple for every index that keys by it
        in_namespace = self._pods_by_namespace[namespace]
        old = in_namespace.get(name)
        if old is not None:
            self._remove_pod(key)
            in_namespace = self._pods_by_namespace[namespace]  # removing the last one drops it
        in_namespace[name] = pod
        self._pod_count += 1
        claims = pod.more.claims
        if claims:
            for claim in claims:
                self._pods_by_claim[(namespace, claim)].add(name)
        if pod.node_name and pod.phase not in TERMINAL_PHASES:
            self._pods_by_node[pod.node_name].append(pod)
        if changes is not None:  # told by the caller once its slice is applied
            changes.append((old, pod))
        elif notify:
            for listener, kinds, _ in self._listeners:
                if PODS in kinds:
                    listener(PODS, old, pod)
        return key

    def _remove_pod(self, key: Key) -> None:
        in_namespace = self._pods_by_namespace.get(key[0])
        old = None if in_namespace is None else in_namespace.pop(key[1], None)
        if old is None:
            return
        self._pod_count -= 1
        if not in_namespace:
            del self._pods_by_namespace[old.namespace]
        for claim in old.claims:
            users = self._pods_by_claim.get((old.namespace, claim))
            if users is not None:
                users.discard(old.name)
                if not users:
                    del self._pods_by_claim[(old.namespace, claim)]
        on_node = self._pods_by_node.get(old.node_name)
        if on_node is not None and _discard(on_node, old) and not on_node:
            del self._pods_by_node[old.node_name]

    def _upsert_node(self, obj: KubeObject) -> None:
        node = NodeRecord.from_object(obj)
        self._nodes[node.name] = node

    def _upsert_lws(self, obj: KubeObject) -> None:
        lws = LeaderWorkerSet(obj)
        self._lws[(lws.namespace, lws.name)] = lws
        self._lws_by_namespace[lws.namespace][lws.name] = lws

    def _upsert_statefulset(self, obj: KubeObject) -> None:
        sts = StatefulSetRecord.from_object(obj)
        self._statefulsets[sts.key] = sts

    def _upsert_service(self, obj: KubeObject) -> None:
        self._services[object_key(obj)] = obj

    def _upsert_pdb(self, obj: KubeObject) -> None:
        key = object_key(obj)
        self._pdbs[key] = obj
        self._pdbs_by_namespace[key[0]][key[1]] = obj

    # ---- reads -----------------------------------------------------------------------------

    def pod(self, namespace: str, name: str) -> PodRecord | None:
        in_namespace = self._pods_by_namespace.get(namespace)
        return None if in_namespace is None else in_namespace.get(name)

    def lws(self, namespace: str, name: str) -> LeaderWorkerSet | None:
        return self._lws.get((namespace, name))

    def lws_in_namespace(self, namespace: str) -> list[LeaderWorkerSet]:
        with self.lock:
            return list(self._lws_by_namespace.get(namespace, {}).values())

    def all_lws(self) -> list[LeaderWorkerSet]:
        with self.lock:
            return list(self._lws.values())

    def statefulset(self, namespace: str, name: str) -> StatefulSetRecord | None:
        return self._statefulsets.get((namespace, name))

    def service(self, namespace: str, name: str) -> KubeObject | None:
        return self._services.get((namespace, name))

    def pdbs_in_namespace(self, namespace: str) -> list[KubeObject]:
        with self.lock:
            return list(self._pdbs_by_namespace.get(namespace, {}).values())

    def all_pdbs(self) -> list[KubeObject]:
        with self.lock:
            return list(self._pdbs.values())

    def node(self, name: str) -> NodeRecord | None:
        return self._nodes.get(name)

    def nodes(self) -> list[NodeRecord]:
        with self.lock:
            return list(self._nodes.values())

    def node_requested(self, name: str) -> Resources:
        """Summed effective requests of the non-terminal pods bound to node `name` (exact sums; a
        resource they sum to 0 is left out). Summed when asked, over the node's pods: kept up to
        date on every pod change instead, the sums cost each of a 2-million-pod list's pods a
        loop over its requests, for a read no decision makes (guardhook.capacity counts its own)."""
        with self.lock:
            totals: Resources = {}
            for pod in self._pods_by_node.get(name, ()):
                for resource, amount in pod.requests.items():
                    totals[resource] = totals.get(resource, 0) + amount
            return {resource: amount for resource, amount in totals.items() if amount}

    def pods_on_node(self, name: str) -> list[PodRecord]:
        with self.lock:
            return list(self._pods_by_node.get(name, ()))

    def all_pods(self) -> list[PodRecord]:
        with self.lock:
            return [pod for pods in self._pods_by_namespace.values() for pod in pods.values()]

    def pods_in_namespace(self, namespace: str) -> list[PodRecord]:
        """Every pod of `namespace` (an index: a PDB's budget counts the pods of its namespace,
        and an eviction must not scan the whole cluster for them)."""
        with self.lock:
            return list(self._pods_by_namespace.get(namespace, {}).values())

    # ---- DRA reads (resource.k8s.io; see guardhook.cluster.dra) ------------------------------

    def resource_slices(self) -> list[ResourceSliceRecord]:
        """Every ResourceSlice held."""
        with self.lock:
            return list(self._dra[RESOURCESLICES].values())

    def resource_claims(self, namespace: str | None = None) -> list[ResourceClaimRecord]:
        """Every ResourceClaim held, or those of `namespace`."""
        with self.lock:
            claims = self._dra[RESOURCECLAIMS].values()
            return [c for c in claims if namespace is None or c.namespace == namespace]

    def resource_claim(self, namespace: str, name: str) -> ResourceClaimRecord | None:
        """ResourceClaim `namespace/name`, or None when the view does not hold it."""
        return self._dra[RESOURCECLAIMS].get((namespace, name))

    def resource_claim_template(self, namespace: str, name: str) -> ResourceClaimTemplateRecord | None:
        """ResourceClaimTemplate `namespace/name`, or None when the view does not hold it."""
        return self._dra[RESOURCECLAIMTEMPLATES].get((namespace, name))

    def device_classes(self) -> list[DeviceClassRecord]:
        """Every DeviceClass held."""
        with self.lock:
            return list(self._dra[DEVICECLASSES].values())

    def device_class(self, name: str) -> DeviceClassRecord | None:
        """DeviceClass `name`, or None when the view does not hold it."""
        return self._dra[DEVICECLASSES].get(("", name))

    def device_taint_rules(self) -> list[DeviceTaintRuleRecord]:
        """Every DeviceTaintRule held."""
        with self.lock:
            return list(self._dra[DEVICETAINTRULES].values())

    def devices_by_node(self) -> dict[str, list[Device]]:
        """Node-local devices the ResourceSlices publish, per node name (newest pool generation
        only; see dra.devices_by_node)."""
        with self.lock:
            return devices_by_node(self._dra[RESOURCESLICES].values())

    def published_devices(self) -> dict[DeviceId, Device]:
        """Every device the ResourceSlices publish (node-local or not) by id, newest pool
        generation only (see dra.published_devices)."""
        with self.lock:
            return published_devices(self._dra[RESOURCESLICES].values())

    def devices_on_node(self, node_name: str) -> list[Device]:
        """The devices published as local to node `node_name`."""
        return self.devices_by_node().get(node_name, [])

    def allocated_devices(self) -> set[DeviceId]:
        """Every device some ResourceClaim's `status.allocation` holds."""
        with self.lock:
            return allocated_devices(self._dra[RESOURCECLAIMS].values())

    def claim_devices(self, namespace: str, name: str) -> tuple[DeviceId, ...]:
        """The devices claim `namespace/name` has allocated (empty when unallocated or absent)."""
        claim = self.resource_claim(namespace, name)
        return tuple(entry.id for entry in claim.allocated) if claim else ()

    def pods_using_claim(self, namespace: str, name: str) -> list[PodRecord]:
        """The pods in the view that use claim `namespace/name`: named in the pod (spec or status,
        see model.pod_claim_names) or in the claim's `status.reservedFor`."""
        with self.lock:
            names = set(self._pods_by_claim.get((namespace, name), ()))
            claim = self.resource_claim(namespace, name)
            if claim is not None:
                names.update(ref.name for ref in claim.reserved_for if ref.resource == "pods")
            pods = (self.pod(namespace, pod_name) for pod_name in sorted(names))
            return [pod for pod in pods if pod is not None]

    def namespace(self, name: str) -> NamespaceRecord | None:
        """Namespace `name`, or None when the view does not hold it."""
        return self._dra[NAMESPACES].get(("", name))

    def webhook_configurations(self) -> list[WebhookConfigurationRecord]:
        """Every Validating- and MutatingWebhookConfiguration held."""
        with self.lock:
            return [record for kind in WEBHOOK_KINDS for record in self._dra[kind].values()]

    def admission_policies(self) -> list[AdmissionPolicyRecord]:
        """Every ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding held."""
        with self.lock:
            return [record for kind in FLOOR_KINDS for record in self._dra[kind].values()]

    def pod_group(self, namespace: str, name: str) -> PodGroupRecord | None:
        """PodGroup `namespace/name` (scheduling.k8s.io), or None."""
        with self.lock:
            found = self._dra[PODGROUPS].get((namespace, name))
            return found if isinstance(found, PodGroupRecord) else None

    def pod_groups(self, namespace: str) -> list[PodGroupRecord]:
        """The PodGroups of `namespace`."""
        with self.lock:
            return [g for (ns, _), g in self._dra[PODGROUPS].items() if ns == namespace]

    def workload(self, namespace: str, name: str) -> WorkloadRecord | None:
        """Workload `namespace/name` (scheduling.k8s.io), or None."""
        with self.lock:
            found = self._dra[WORKLOADS].get((namespace, name))
            return found if isinstance(found, WorkloadRecord) else None

    def jobset(self, namespace: str, name: str) -> JobSetRecord | None:
        """JobSet `namespace/name` (jobset.x-k8s.io), or None."""
        with self.lock:
            found = self._dra[JOBSETS].get((namespace, name))
            return found if isinstance(found, JobSetRecord) else None

    def all_pod_groups(self) -> list[PodGroupRecord]:
        """Every PodGroup held (scheduling.k8s.io), in no particular order."""
        with self.lock:
            return [g for g in self._dra[PODGROUPS].values() if isinstance(g, PodGroupRecord)]

    def node_pools(self) -> list[NodePoolRecord]:
        """Every Karpenter NodePool held."""
        with self.lock:
            return list(self._dra[NODEPOOLS].values())
