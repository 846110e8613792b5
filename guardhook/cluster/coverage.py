"""Where guardhook does not protect: the gaps `audit`, `drain-plan` and `/metrics` report.

Read from the cluster view only (Namespaces, guardhook's own webhook configurations, LWSs):

- `evictions-unguarded`: a namespace holding an LWS or a Workload API gang (`disruptionMode: all`
  PodGroup) without the label `guardhook.io/guard-evictions=true`.
  The eviction entry selects only labelled namespaces (manifests/base/validating-webhook.yaml), so
  there an eviction is never judged, and a drain takes whole groups down.
- `webhook-unreachable`: a guardhook entry the API server cannot call: no caBundle (and so the API
  server's own roots, which never signed guardhook's CA), a caBundle that is no PEM certificate, or
  (where the serving certificate is known) one that does not verify it. With `failurePolicy:
  Ignore` such a policy silently never runs; with Fail its requests are refused.
- `webhook-fails-open`: a guardhook entry with `failurePolicy: Ignore`: its policy does not apply
  while guardhook cannot be called (down, or unreachable as above).
- `webhook-conditions-differ`: a guardhook entry whose request-selecting matchConditions are not
  the ones this guardhook version ships (guardhook.cluster.entry_conditions): one named as
  guardhook's has another expression (whitespace aside), or one is missing. Such an entry sends
  another set of requests than guardhook expects: an older install, or a GitOps tool that kept an
  older configuration (e.g. a `lws-pod-delete-or-relabel` before bare Workload API gang pods were
  sent: their deletes go unjudged). The exempt-identity conditions are not compared: naming
  another LWS or Kueue install there is a documented configuration choice.
- `webhook-conditions-added`: a guardhook entry with a matchCondition guardhook does not ship (an
  operator's): it narrows what is sent, so what it leaves out is admitted unjudged. Maybe meant.
- `annotation-unreadable`: an LWS guardhook annotation that cannot be read, so a default is used
  (`max-disrupted-groups`/`spare-groups`: not a non-negative integer; `serving-pods`: neither
  "leaders" nor "all").
- `not-installed`: the view can read webhook configurations but holds no guardhook entry. The
  entries may still be installed from the API server's configuration (manifest-based admission,
  KEP-5793, beta in 1.37: Validating/MutatingWebhookConfigurations named `*.static.k8s.io` loaded
  from a `staticManifestsDir`, invisible through the API), so the gap says both and how to tell
  (NOT_VISIBLE_SENTENCE); the webhook server, which knows it has been called, reports no such gap.

Beside the gaps, `floor_layer` reports guardhook's admission-policy floor (ValidatingAdmissionPolicies
labelled `app.kubernetes.io/component: admission-policy-floor`, guardhook.floor) as a layer of
coverage: unchecked, not installed, installed but not bound, stale (exported from another
configuration than the one given), or in sync. The floor is opt-in, so none of these is a gap.

A kind the view cannot read (RBAC 403, or absent from offline manifests) gives no gap but a note
(`unchecked`). Absent Namespace objects likewise: an LWS whose namespace the view does not hold is
not called unguarded.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from guardhook.cluster.annotations import (
    BUDGET_ANNOTATION,
    GROUP_PDBS_ANNOTATION,
    GROUP_READINESS_ANNOTATION,
    SPARE_GROUPS_ANNOTATION,
    count_unreadable,
    switch_unreadable,
)
from guardhook.cluster.entry_conditions import IDENTITY_CONDITIONS, SHIPPED_CONDITIONS, same_expression
from guardhook.cluster.lws import SERVING_PODS_ANNOTATION, LeaderWorkerSet
from guardhook.cluster.view.store import FLOOR_KINDS, NAMESPACES, WEBHOOK_KINDS, ClusterView
from guardhook.cluster.webhooks import (
    CERT_MANAGER_INJECT,
    FLOOR_DIGEST_ANNOTATION,
    WebhookConfigurationRecord,
    WebhookEntry,
)

if TYPE_CHECKING:
    from cryptography import x509

GUARD_EVICTIONS_LABEL = "guardhook.io/guard-evictions"
"""The Namespace label (value "true") the eviction entry's namespaceSelector requires."""
OPT_INS = (
    # (annotation, what any value but exactly "true" or "false" means)
    (GROUP_READINESS_ANNOTATION, '"false" (not opted in, unless allLeaderWorkerSets)'),
    (GROUP_PDBS_ANNOTATION, '"false" (no per-group PDBs)'),
)
"""The opt-in switches (guardhook.cluster.annotations.switch): exactly "true" or "false"."""
BUILTIN_BUDGET = 1
"""group-eviction's (and group-taint's) maxDisruptedGroups when not configured."""
BUILTIN_SPARE_GROUPS = 0
"""group-capacity's spareGroups when not configured."""

EVICTIONS_UNGUARDED = "evictions-unguarded"
WEBHOOK_UNREACHABLE = "webhook-unreachable"
WEBHOOK_FAILS_OPEN = "webhook-fails-open"
WEBHOOK_CONDITIONS_DIFFER = "webhook-conditions-differ"
WEBHOOK_CONDITIONS_ADDED = "webhook-conditions-added"
ANNOTATION_UNREADABLE = "annotation-unreadable"
NOT_INSTALLED = "not-installed"
GAP_KINDS = (
    EVICTIONS_UNGUARDED,
    WEBHOOK_UNREACHABLE,
    WEBHOOK_FAILS_OPEN,
    WEBHOOK_CONDITIONS_DIFFER,
    WEBHOOK_CONDITIONS_ADDED,
    ANNOTATION_UNREADABLE,
    NOT_INSTALLED,
)
SEVERE = frozenset(
    {
        EVICTIONS_UNGUARDED,
        WEBHOOK_UNREACHABLE,
        WEBHOOK_CONDITIONS_DIFFER,
        ANNOTATION_UNREADABLE,
        NOT_INSTALLED,
    }
)
"""Gaps that mean a protection is off now (PolicyReport `fail`); the others only while guardhook is
down, or by an operator's choice (`warn`)."""


NOT_VISIBLE_SENTENCE = (
    "no webhook entry named *.guardhook.io is visible through the API: guardhook's entries are either "
    "not installed (then no policy is called by the API server) or installed from the API server's "
    "configuration (manifest-based admission, KEP-5793: a webhook configuration named *.static.k8s.io in "
    "a staticManifestsDir, which the API does not show). To tell: guardhook's own counters "
    "guardhook_decisions_total{policy} and guardhook_requests_total{endpoint} rise only when the API "
    "server calls it, and the API server's apiserver_admission_manifest_webhook_admission_duration_seconds"
    '{name=~".*\\\\.guardhook\\\\.io"} counts the calls of manifest-based entries'
)
"""What the `not-installed` gap says (audit, /metrics' guardhook_protection_gap, the alert's runbook)."""


@dataclass(frozen=True)
class Gap:
    """One gap: its kind (GAP_KINDS), the object it is about (`namespace` "" for cluster-scoped:
    a webhook configuration, `name` then "<configuration>/<entry>"), its API kind, and a sentence."""

    kind: str
    object_kind: str
    namespace: str
    name: str
    message: str

    @property
    def severe(self) -> bool:
        return self.kind in SEVERE


@dataclass(frozen=True)
class UnreadableAnnotation:
    """An LWS annotation guardhook cannot read: its key, its raw value and what is used instead."""

    annotation: str
    value: str
    used: str

    def sentence(self) -> str:
        return f'annotation {self.annotation}: "{self.value}" cannot be read; {self.used} is used instead'


def unreadable_annotations(
    lws: LeaderWorkerSet, budget_default: int | None = None, spare_default: int | None = None
) -> list[UnreadableAnnotation]:
    """Every guardhook annotation of `lws` that cannot be read, with the value used instead: the
    group-eviction/group-taint parameter maxDisruptedGroups, group-capacity's spareGroups (their
    configured values `*_default` when known, else the built-in defaults), "leaders" for
    serving-pods, and "false" for an opt-in switch (OPT_INS) that is neither "true" nor "false"."""
    found = []
    annotations = lws.annotations
    for key, parameter, default, builtin in (
        (BUDGET_ANNOTATION, "maxDisruptedGroups", budget_default, BUILTIN_BUDGET),
        (SPARE_GROUPS_ANNOTATION, "spareGroups", spare_default, BUILTIN_SPARE_GROUPS),
    ):
        raw = annotations.get(key)
        if raw is not None and count_unreadable(annotations, key):
            value = f"({default})" if default is not None else f"(default {builtin})"
            found.append(UnreadableAnnotation(key, raw, f"the configured {parameter} {value}"))
    serving = lws.serving_pods_unreadable
    if serving is not None:
        found.append(UnreadableAnnotation(SERVING_PODS_ANNOTATION, serving, '"leaders"'))
    for key, meaning in OPT_INS:
        if switch_unreadable(annotations, key):
            found.append(UnreadableAnnotation(key, annotations[key], meaning))
    return found


EXCLUDED_NAMESPACES = ("kube-system", "kube-node-lease", "guardhook-system")
"""The namespaces every webhook entry of the manifests leaves out (`namespaceSelector` NotIn):
nothing there ever reaches guardhook, whatever its labels (tests/test_coverage.py holds the two
together)."""


def evictions_guarded(view: ClusterView, namespace: str) -> bool | None:
    """Whether evictions in `namespace` reach guardhook (the opt-in label is "true", and the
    namespace is not one the webhooks leave out); None when the view cannot tell (Namespaces
    unreadable, or this one not held)."""
    if namespace in EXCLUDED_NAMESPACES:
        return False
    if not view.readable(NAMESPACES):
        return None
    record = view.namespace(namespace)
    if record is None:
        return None
    return record.labels.get(GUARD_EVICTIONS_LABEL) == "true"


def unguarded_sentence(namespace: str) -> str:
    """Why a namespace's evictions are not judged, for audit and drain-plan."""
    if namespace in EXCLUDED_NAMESPACES:
        return (
            f"namespace {namespace} is left out by every guardhook webhook entry (namespaceSelector): "
            "no policy judges its pods, so a drain may take whole groups down"
        )
    return (
        f"namespace {namespace} lacks the label {GUARD_EVICTIONS_LABEL}=true: its evictions never reach "
        "guardhook, so a drain may take whole groups down"
    )


def coverage_gaps(
    view: ClusterView,
    serving_cert: x509.Certificate | None = None,
    budget_default: int | None = None,
    spare_default: int | None = None,
    called: bool = False,
) -> list[Gap]:
    """Every gap the view shows, namespaces first, then webhook entries, then LWS annotations.
    `called`: the API server is known to call guardhook (the webhook server has answered reviews),
    so no visible entry means entries installed from the API server's configuration, not a gap."""
    gaps = list(_namespace_gaps(view))
    gaps += [g for g in _webhook_gaps(view, serving_cert) if not (called and g.kind == NOT_INSTALLED)]
    for lws in sorted(view.all_lws(), key=lambda item: (item.namespace, item.name)):
        for unreadable in unreadable_annotations(lws, budget_default, spare_default):
            message = f"LeaderWorkerSet {lws.name}: {unreadable.sentence()}"
            gaps.append(Gap(ANNOTATION_UNREADABLE, "LeaderWorkerSet", lws.namespace, lws.name, message))
    return gaps


def unchecked(view: ClusterView) -> list[str]:
    """Notes on what the coverage report could not check (kinds the view cannot read)."""
    notes = []
    if not view.readable(NAMESPACES):
        notes.append(
            "Namespaces could not be read: whether LWS namespaces guard evictions was not checked (in a "
            "cluster, grant get/list on namespaces; offline, the objects hold none)"
        )
    missing = [kind for kind in WEBHOOK_KINDS if not view.readable(kind)]
    if missing:
        notes.append(
            f"webhook configurations could not be read ({', '.join(missing)}): whether every guardhook "
            "entry there reaches guardhook was not checked (in a cluster, grant get/list on them; "
            "offline, the objects hold none)"
        )
    return notes


def _namespace_gaps(view: ClusterView) -> Iterator[Gap]:
    """An `evictions-unguarded` gap per namespace holding an LWS or a Workload API gang (a
    `disruptionMode: all` PodGroup) whose evictions do not reach guardhook."""
    by_namespace: dict[str, list[str]] = {}
    for lws in view.all_lws():
        by_namespace.setdefault(lws.namespace, []).append(lws.name)
    gangs: dict[str, int] = {}
    for group in view.all_pod_groups():
        if group.all_mode:
            gangs[group.namespace] = gangs.get(group.namespace, 0) + 1
    for namespace in sorted({*by_namespace, *gangs}):
        if evictions_guarded(view, namespace) is False:
            what = []
            if by_namespace.get(namespace):
                what.append(f"LeaderWorkerSets {', '.join(sorted(by_namespace[namespace]))}")
            if gangs.get(namespace):
                count = gangs[namespace]
                what.append(f"{count} PodGroup{'' if count == 1 else 's'} with disruptionMode all")
            message = f"{unguarded_sentence(namespace)} ({'; '.join(what)})"
            yield Gap(EVICTIONS_UNGUARDED, "Namespace", "", namespace, message)


def _webhook_gaps(view: ClusterView, serving_cert: x509.Certificate | None) -> list[Gap]:
    # The entries of a kind the view can read are checked even when the other kind cannot be read
    # (RBAC for one of them, or a dump holding only one); "not installed" needs both.
    readable = [kind for kind in WEBHOOK_KINDS if view.readable(kind)]
    if not readable:
        return []
    gaps = []
    configurations = sorted(view.webhook_configurations(), key=lambda c: (c.kind, c.name))
    own = [(c, e) for c in configurations for e in c.entries if e.own]
    if not own:
        if len(readable) < len(WEBHOOK_KINDS):
            return []
        return [Gap(NOT_INSTALLED, "ValidatingWebhookConfiguration", "", "", NOT_VISIBLE_SENTENCE)]
    for configuration, entry in own:
        name = f"{configuration.name}/{entry.name}"
        problem = unreachable_because(configuration, entry, serving_cert)
        if problem:
            message = (
                f"{configuration.kind} {name}: {problem}, so the API server cannot call guardhook for it"
            )
            message += (
                "; its policy never runs"
                if entry.failure_policy == "Ignore"
                else "; its requests are refused"
            )
            gaps.append(Gap(WEBHOOK_UNREACHABLE, configuration.kind, "", name, message))
        if entry.failure_policy == "Ignore":
            message = (
                f"{configuration.kind} {name}: failurePolicy Ignore, so its requests are admitted unjudged "
                "while guardhook cannot be called"
            )
            gaps.append(Gap(WEBHOOK_FAILS_OPEN, configuration.kind, "", name, message))
        gaps += condition_gaps(configuration, entry)
    return gaps


def condition_gaps(configuration: WebhookConfigurationRecord, entry: WebhookEntry) -> list[Gap]:
    """The `webhook-conditions-differ` and `webhook-conditions-added` gaps of one guardhook entry:
    its matchConditions against the request-selecting ones this version ships for its name
    (SHIPPED_CONDITIONS; none for a name it does not ship), expressions compared as CEL
    parse trees (whitespace aside); the exempt-identity conditions (IDENTITY_CONDITIONS) are not compared."""
    shipped = SHIPPED_CONDITIONS.get(entry.name)
    if shipped is None:
        return []
    live = dict(entry.conditions)
    name = f"{configuration.name}/{entry.name}"
    differ = []
    for condition, expression in shipped.items():
        if condition not in live:
            differ.append(f"matchCondition {condition} is missing")
        elif not same_expression(live[condition], expression):
            differ.append(f"matchCondition {condition} is not the one guardhook ships")
    gaps = []
    if differ:
        message = (
            f"{configuration.kind} {name}: {'; '.join(differ)}: it sends a different set of requests "
            "than this guardhook version expects; re-apply the manifests or upgrade the chart"
        )
        gaps.append(Gap(WEBHOOK_CONDITIONS_DIFFER, configuration.kind, "", name, message))
    added = [c for c, _ in entry.conditions if c not in shipped and c not in IDENTITY_CONDITIONS]
    if added:
        several = len(added) > 1
        message = (
            f"{configuration.kind} {name}: matchCondition{'s' if several else ''} {', '.join(added)} "
            f"{'are' if several else 'is'} not guardhook's (added to the entry): "
            f"{'they narrow' if several else 'it narrows'} the requests sent to guardhook, and what "
            f"{'they leave' if several else 'it leaves'} out is admitted unjudged; remove "
            f"{'them' if several else 'it'} unless that is meant"
        )
        gaps.append(Gap(WEBHOOK_CONDITIONS_ADDED, configuration.kind, "", name, message))
    return gaps


def unreachable_because(
    configuration: WebhookConfigurationRecord, entry: WebhookEntry, serving_cert: x509.Certificate | None
) -> str:
    """Why the API server cannot call `entry` ("" when nothing says it cannot)."""
    # cryptography only here: group-spec imports this module, and `review` stays light (test_cli_startup).
    from cryptography import x509

    from guardhook.pki import issued_by

    if not entry.ca_bundle:
        if CERT_MANAGER_INJECT in configuration.annotations:
            return "no caBundle (cert-manager's cainjector has not filled it in)"
        return "no caBundle"
    try:
        cas = x509.load_pem_x509_certificates(base64.b64decode(entry.ca_bundle, validate=True))
    except (ValueError, binascii.Error):
        return "a caBundle that holds no PEM certificate"
    if serving_cert is not None and not any(issued_by(serving_cert, ca) for ca in cas):
        return "a caBundle that does not verify the serving certificate"
    return ""


FLOOR_UNCHECKED = "unchecked"
FLOOR_NOT_INSTALLED = "not-installed"
FLOOR_NOT_BOUND = "not-bound"
FLOOR_STALE = "stale"
FLOOR_IN_SYNC = "in-sync"
FLOOR_STATES = (FLOOR_UNCHECKED, FLOOR_NOT_INSTALLED, FLOOR_NOT_BOUND, FLOOR_STALE, FLOOR_IN_SYNC)


@dataclass(frozen=True)
class FloorLayer:
    """The admission-policy floor as the view shows it: `state` (FLOOR_STATES), a sentence, and
    the floor's policies installed (names)."""

    state: str
    message: str
    policies: tuple[str, ...] = ()


def floor_layer(view: ClusterView, expected_digest: str | None) -> FloorLayer:
    """The floor's state: unchecked when the view cannot read the policy kinds (RBAC, a cluster
    before 1.30, manifests holding none), not installed, not bound (a floor policy without its
    binding, or a binding of no policy: the API server enforces neither), stale when an object's
    digest annotation is not `expected_digest` (the digest of the floor exported from the
    configuration in force; None: not compared), else in sync."""
    if not all(view.readable(kind) for kind in FLOOR_KINDS):
        return FloorLayer(
            FLOOR_UNCHECKED,
            "ValidatingAdmissionPolicies could not be read (RBAC, a cluster before 1.30, or manifests "
            "without them): the admission-policy floor was not checked",
        )
    records = [r for r in view.admission_policies() if r.floor]
    policies = sorted(r.name for r in records if r.kind == "ValidatingAdmissionPolicy")
    bound = {r.policy_name for r in records if r.kind == "ValidatingAdmissionPolicyBinding"}
    if not records:
        return FloorLayer(
            FLOOR_NOT_INSTALLED,
            "not installed: while guardhook is down nothing refuses a single-worker delete or an "
            "LWS-wide PDB (components/admission-policy-floor)",
        )
    unbound = [name for name in policies if name not in bound]
    orphans = sorted(bound - set(policies))
    if unbound or orphans:
        parts = [f"policy {n} has no binding" for n in unbound]
        parts += [f"binding of policy {n}, which is not installed" for n in orphans]
        return FloorLayer(FLOOR_NOT_BOUND, "installed, not bound: " + "; ".join(parts), tuple(policies))
    digests = {r.annotations.get(FLOOR_DIGEST_ANNOTATION, "") for r in records}
    if expected_digest is not None and digests != {expected_digest}:
        return FloorLayer(
            FLOOR_STALE,
            "installed and bound, but stale: exported from another configuration than guardhook's "
            "(export it again: guardhook export admission-policies --config …)",
            tuple(policies),
        )
    return FloorLayer(FLOOR_IN_SYNC, f"installed, bound, in sync ({', '.join(policies)})", tuple(policies))
