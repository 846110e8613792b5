"""Kubernetes label selectors: `metav1.LabelSelector` (matchLabels + matchExpressions) and the
string form (`a=b,c!=d,e in (x,y),!f`) used by Scale status and `kubectl -l`.

Semantics follow k8s.io/apimachinery/pkg/labels: every requirement must hold; an empty
LabelSelector matches everything, a null one nothing (PodDisruptionBudget, policy/v1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """A selector that cannot be parsed; the message says which part."""


@dataclass(frozen=True)
class Requirement:
    """One requirement: `key` `operator` `values` (operator one of OPERATORS)."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present


Selector = tuple[Requirement, ...]


def from_label_selector(raw: Any) -> Selector | None:
    """Requirements of a LabelSelector object; None for a null selector (matches nothing).

    Raises SelectorError on an unknown operator or malformed entries.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SelectorError("selector must be an object")
    labels, expressions = raw.get("matchLabels") or {}, raw.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError("matchLabels must be an object and matchExpressions a list")
    requirements = [Requirement(str(k), "In", frozenset({str(v)})) for k, v in labels.items()]
    for expr in expressions:
        if not isinstance(expr, Mapping) or expr.get("operator") not in OPERATORS:
            raise SelectorError(f"bad matchExpressions entry: {expr!r}")
        if not isinstance(expr.get("values") or [], list):
            raise SelectorError(f"matchExpressions values must be a list: {expr!r}")
        values = frozenset(str(v) for v in expr.get("values") or [])
        requirements.append(Requirement(str(expr.get("key", "")), str(expr["operator"]), values))
    return tuple(requirements)


def from_map(raw: Mapping[str, Any] | None) -> Selector:
    """Requirements of a plain equality map (a Service's `spec.selector`)."""
    return tuple(Requirement(str(k), "In", frozenset({str(v)})) for k, v in (raw or {}).items())


_SET_TERM = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*(?:(notin|in)\s*\(([^)]*)\)|(==|=|!=)\s*([^\s,]*))?\s*$")


def parse(text: str) -> Selector:
    """Parse the string form (`a=b,c!=d,e in (x,y),!f,g`). Raises SelectorError."""
    requirements: list[Requirement] = []
    for term in _split_terms(text):
        match = _SET_TERM.match(term)
        if not match:
            raise SelectorError(f"cannot parse selector term {term!r}")
        negated, key, set_op, set_values, eq_op, eq_value = match.groups()
        if set_op:
            values = frozenset(v.strip() for v in set_values.split(",") if v.strip())
            requirements.append(Requirement(key, "In" if set_op == "in" else "NotIn", values))
        elif eq_op:
            requirements.append(Requirement(key, "NotIn" if eq_op == "!=" else "In", frozenset({eq_value})))
        else:
            requirements.append(Requirement(key, "DoesNotExist" if negated else "Exists"))
    return tuple(requirements)


def _split_terms(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        terms.append(current)
    return [t for t in terms if t.strip()]


def matches(selector: Selector | None, labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy every requirement (a None selector matches nothing)."""
    return selector is not None and all(r.matches(labels) for r in selector)
