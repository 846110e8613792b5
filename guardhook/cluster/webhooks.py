"""Namespaces and admission webhook configurations as the cluster view keeps them: compact records
for the coverage report (guardhook.cluster.coverage). Only guardhook's own entries matter there:
those named `*.guardhook.io` (the manifests' names; the alerts select them the same way).

Field meanings are the API's (admissionregistration.k8s.io/v1 WebhookClientConfig: `caBundle` is
the base64 PEM the API server verifies the webhook's serving certificate with, and an empty one
means the API server's own trust roots; `failurePolicy` defaults to Fail).
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.model import as_dict, as_list, metadata, str_map
from guardhook.wire import KubeObject

OWN_ENTRY_SUFFIX = ".guardhook.io"
CERT_MANAGER_INJECT = "cert-manager.io/inject-ca-from"


@dataclass(frozen=True)
class NamespaceRecord:
    """A Namespace: its name and labels."""

    name: str
    labels: dict[str, str]

    @staticmethod
    def from_object(obj: KubeObject) -> NamespaceRecord:
        """The record of a decoded Namespace (never raises)."""
        meta = metadata(obj)
        return NamespaceRecord(str(meta.get("name") or ""), str_map(meta.get("labels")))


@dataclass(frozen=True)
class WebhookEntry:
    """One entry of a webhook configuration: name, failurePolicy (API default Fail), the caBundle
    as given (base64, "" when unset), where it calls (`service` "namespace/name:port path", or
    the `url`), what its `rules` match: (API group, resource, operation) triples, "*" as given, and
    its `matchConditions` as (name, expression) pairs in order."""

    name: str
    failure_policy: str
    ca_bundle: str
    target: str
    matches: frozenset[tuple[str, str, str]] = frozenset()
    conditions: tuple[tuple[str, str], ...] = ()

    @property
    def own(self) -> bool:
        """Whether the entry is one of guardhook's (named `*.guardhook.io`)."""
        return self.name.endswith(OWN_ENTRY_SUFFIX)


@dataclass(frozen=True)
class WebhookConfigurationRecord:
    """A Validating- or MutatingWebhookConfiguration: kind, name, annotations and entries."""

    kind: str
    name: str
    annotations: dict[str, str]
    entries: tuple[WebhookEntry, ...]

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: ("", name), the object being cluster-scoped."""
        return ("", self.name)

    @staticmethod
    def from_object(obj: KubeObject, kind: str = "") -> WebhookConfigurationRecord:
        """The record of a decoded webhook configuration of `kind` (else its own `kind`: list items
        carry none); malformed entries are skipped (never raises)."""
        meta = metadata(obj)
        entries = tuple(
            _entry(as_dict(hook)) for hook in as_list(obj.get("webhooks")) if as_dict(hook).get("name")
        )
        return WebhookConfigurationRecord(
            kind or str(obj.get("kind") or ""),
            str(meta.get("name") or ""),
            str_map(meta.get("annotations")),
            entries,
        )


def _entry(hook: KubeObject) -> WebhookEntry:
    config = as_dict(hook.get("clientConfig"))
    service = as_dict(config.get("service"))
    if service:
        target = (
            f"service {service.get('namespace')}/{service.get('name')}:{service.get('port') or 443}"
            f" {service.get('path') or '/'}"
        )
    else:
        target = f"url {config.get('url') or ''}"
    return WebhookEntry(
        str(hook.get("name")),
        str(hook.get("failurePolicy") or "Fail"),
        str(config.get("caBundle") or ""),
        target,
        rule_matches(as_list(hook.get("rules"))),
        match_conditions(as_list(hook.get("matchConditions"))),
    )


def match_conditions(conditions: list[object]) -> tuple[tuple[str, str], ...]:
    """The (name, expression) pairs of a webhook's `matchConditions` (MatchCondition), in order;
    entries that are not mappings or lack a string name are skipped, a missing expression is ""."""
    found = []
    for raw in conditions:
        condition = as_dict(raw)
        name, expression = condition.get("name"), condition.get("expression")
        if isinstance(name, str) and name:
            found.append((name, expression if isinstance(expression, str) else ""))
    return tuple(found)


def rule_matches(rules: list[object]) -> frozenset[tuple[str, str, str]]:
    """The (API group, resource, operation) triples admission `rules` (RuleWithOperations: a
    webhook's or a ValidatingAdmissionPolicy's `resourceRules`) name, "*" kept as a wildcard;
    entries that are not mappings, and values that are not strings, are skipped."""
    found: set[tuple[str, str, str]] = set()
    for raw in rules:
        rule = as_dict(raw)
        groups, resources, operations = (
            [v for v in as_list(rule.get(key)) if isinstance(v, str)]
            for key in ("apiGroups", "resources", "operations")
        )
        found.update((g, r, o) for g in groups for r in resources for o in operations)
    return frozenset(found)


def overlap(a: frozenset[tuple[str, str, str]], b: frozenset[tuple[str, str, str]]) -> bool:
    """Whether some request matches both sets of rule_matches triples ("*" matches any value)."""
    return any(
        all(x == y or "*" in (x, y) for x, y in zip(one, other, strict=True)) for one in a for other in b
    )


FLOOR_COMPONENT_LABEL = "app.kubernetes.io/component"
FLOOR_COMPONENT = "admission-policy-floor"
"""The label guardhook's admission-policy floor carries (guardhook.floor.export)."""
FLOOR_DIGEST_ANNOTATION = "guardhook.io/floor-digest"
"""The digest of the floor's specs each of its objects carries (guardhook.floor.export.floor_digest)."""


@dataclass(frozen=True)
class AdmissionPolicyRecord:
    """A ValidatingAdmissionPolicy or ValidatingAdmissionPolicyBinding: kind, name, labels,
    annotations, and for a binding the `policy_name` it binds and its `actions`
    (validationActions); "" and () for a policy."""

    kind: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    policy_name: str = ""
    actions: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: ("", name), the object being cluster-scoped."""
        return ("", self.name)

    @property
    def floor(self) -> bool:
        """Whether the object is part of guardhook's admission-policy floor (by its label)."""
        return self.labels.get(FLOOR_COMPONENT_LABEL) == FLOOR_COMPONENT

    @staticmethod
    def from_object(obj: KubeObject, kind: str = "") -> AdmissionPolicyRecord:
        """The record of a decoded policy or binding of `kind` (else its own `kind`); never raises."""
        meta = metadata(obj)
        spec = as_dict(obj.get("spec"))
        return AdmissionPolicyRecord(
            kind or str(obj.get("kind") or ""),
            str(meta.get("name") or ""),
            str_map(meta.get("labels")),
            str_map(meta.get("annotations")),
            str(spec.get("policyName") or ""),
            tuple(str(a) for a in as_list(spec.get("validationActions"))),
        )
