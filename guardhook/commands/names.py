"""The name and label rules the API server applies that no OpenAPI schema says (for `check`'s
schema step, guardhook.commands.schema): a manifest that breaks one passes a schema check and is
refused by `kubectl apply`. Only rules known for certain are applied, so no valid manifest fails.

From apimachinery, Kubernetes' and apiextensions' validation packages:
- `metadata.name` is required unless `metadata.generateName` is given (ValidateObjectMeta), and is
  an RFC 1123 subdomain (NameIsDNSSubdomain) for the workload and core kinds in SUBDOMAIN_KINDS and
  for custom resources (apiextensions' customResourceValidator), an RFC 1123 label for a Namespace
  (ValidateNamespaceName) and a Service (KEP-5311 relaxed it from RFC 1035 in 1.34+; the looser rule
  is checked). Other built-in kinds' names (an IPAddress is an IP, a review object has none, a
  CertificateSigningRequest's is not validated) are left alone.
- `metadata.namespace` is an RFC 1123 label (ValidateNamespaceName).
- A label key is a qualified name (an optional RFC 1123 subdomain prefix and `/`, then at most 63
  of `[A-Za-z0-9_.-]` starting and ending alphanumeric) and a value at most 63 such characters or
  empty (ValidateLabels). The `spec.selector` of the kinds in SELECTOR_KINDS obeys the same rules
  (ValidateLabelSelector; a Service's map through ValidateLabels), `In`/`NotIn` values included.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from guardhook.wire import KubeObject

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
SUBDOMAIN_KINDS = frozenset(
    {
        "Pod", "ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ConfigMap",
        "Secret", "ServiceAccount", "Node", "PersistentVolumeClaim", "PodDisruptionBudget",
    }
)  # fmt: skip
LABEL_KINDS = frozenset({"Namespace", "Service"})
SELECTOR_KINDS = frozenset(
    {"Service", "PodDisruptionBudget", "ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job"}
)
Problem = tuple[list[Any], str]


def name_problems(obj: KubeObject, built_in: bool) -> list[Problem]:
    """The (path, message) problems of `obj`'s name, namespace, labels and selectors; `built_in`:
    a kind of Kubernetes itself (else a custom resource)."""
    kind = str(obj.get("kind"))
    named = not built_in or kind in SUBDOMAIN_KINDS or kind in LABEL_KINDS
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [(["metadata", "name"], "is required (or metadata.generateName)")] if named else []
    problems = list(_name(meta, kind)) if named else []
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace and not is_label(namespace):
        problems.append((["metadata", "namespace"], f"{namespace!r} is not an RFC 1123 label {LABEL_FORM}"))
    problems += _labels(meta.get("labels"), ["metadata", "labels"])
    if built_in and kind in SELECTOR_KINDS:
        problems += _selectors(obj)
    return problems


LABEL_FORM = "(lowercase letters, digits and '-', at most 63, starting and ending alphanumeric)"


def _name(meta: dict[str, Any], kind: str) -> Iterator[Problem]:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        if not meta.get("generateName"):
            yield (["metadata", "name"], "is required (or metadata.generateName)")
        return
    where = ["metadata", "name"]
    if kind in LABEL_KINDS:
        if not is_label(name):
            yield (where, f"{name!r} is not an RFC 1123 label {LABEL_FORM}")
    elif not is_subdomain(name):
        yield (
            where,
            f"{name!r} is not an RFC 1123 subdomain (lowercase letters, digits, '-' and '.', at most 253)",
        )


def is_label(text: str) -> bool:
    """Whether `text` is an RFC 1123 label: lowercase letters, digits and '-', at most 63,
    starting and ending alphanumeric (apimachinery's IsDNS1123Label)."""
    return len(text) <= 63 and bool(_DNS_LABEL.fullmatch(text))


def is_subdomain(text: str) -> bool:
    """Whether `text` is an RFC 1123 subdomain: labels joined by dots, at most 253 characters."""
    return len(text) <= 253 and all(_DNS_LABEL.fullmatch(part) for part in text.split("."))


def label_key_problem(key: str) -> str:
    """Why `key` is not a label key (a qualified name), or ""."""
    prefix, slash, name = key.rpartition("/")
    if slash and not (prefix and is_subdomain(prefix)):
        return f"{key!r} is not a label key: its prefix must be an RFC 1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            f"{key!r} is not a label key: at most 63 of letters, digits, '-', '_' and '.', starting and "
            "ending alphanumeric (an optional DNS prefix and '/' before)"
        )
    return ""


def label_value_problem(value: Any) -> str:
    """Why `value` is not a label value, or "" (an empty value is one)."""
    if not isinstance(value, str):
        return ""  # the schema names a value of the wrong type
    if value and (len(value) > 63 or not _QUALIFIED_NAME.fullmatch(value)):
        return (
            f"{value!r} is not a label value: at most 63 of letters, digits, '-', '_' and '.', starting "
            "and ending alphanumeric, or empty"
        )
    return ""


def _labels(labels: Any, path: list[Any]) -> list[Problem]:
    if not isinstance(labels, dict):
        return []
    problems = []
    for key, value in labels.items():
        why = label_key_problem(str(key)) or label_value_problem(value)
        if why:
            problems.append(([*path, key], why))
    return problems


def _selectors(obj: KubeObject) -> list[Problem]:
    """A Service's `spec.selector` map, and a `spec.selector` label selector (PDB, Deployment,
    StatefulSet, ReplicaSet, DaemonSet, Job)."""
    spec = obj.get("spec")
    selector = spec.get("selector") if isinstance(spec, dict) else None
    if not isinstance(selector, dict):
        return []
    path: list[Any] = ["spec", "selector"]
    if obj.get("kind") == "Service":
        return _labels(selector, path)
    problems = _labels(selector.get("matchLabels"), [*path, "matchLabels"])
    expressions = selector.get("matchExpressions")
    for number, expression in enumerate(expressions if isinstance(expressions, list) else []):
        if not isinstance(expression, dict):
            continue
        where = [*path, "matchExpressions", number]
        why = label_key_problem(str(expression.get("key") or ""))
        if why:
            problems.append(([*where, "key"], why))
        values = expression.get("values")
        for index, value in enumerate(values if isinstance(values, list) else []):
            why = label_value_problem(value)
            if why:
                problems.append(([*where, "values", index], why))
    return problems
