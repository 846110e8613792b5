"""Evaluate exported floor policies offline with cel-python, as the API server would: match
constraints, match conditions, variables, validations, then the binding's validation actions.

Used by the tests (the floor's answer against the webhook's on every captured review) and by
anyone who wants to see what the floor would answer to a review (`Floor.answer`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from guardhook.cluster.model import as_dict, metadata, str_map


@dataclass(frozen=True)
class FloorAnswer:
    """The floor's answer to one request: `denied` messages (Deny), `warnings` (Warn), `audited`
    messages (Audit), and `errors` (an expression that failed: failurePolicy Fail denies)."""

    denied: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    audited: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    matched: tuple[str, ...] = field(default=())

    @property
    def allowed(self) -> bool:
        return not self.denied and not self.errors


@cache
def _program(expression: str) -> Any:
    import celpy

    env = celpy.Environment()
    return env.program(env.compile(expression))


def _evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    """The value of `expression`; raises on a parse or evaluation error (CELEvalError values too)."""
    import celpy

    value = _program(expression).evaluate(dict(activation))
    if isinstance(value, celpy.CELEvalError):
        raise value
    return value


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels, matchExpressions: In, NotIn, Exists, DoesNotExist) on `labels`."""
    for key, value in as_dict(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _matches_constraints(spec: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    constraints = as_dict(spec.get("matchConstraints"))
    resource = as_dict(request.get("resource"))
    if request.get("subResource"):
        return False
    if not any(
        resource.get("group", "") in rule["apiGroups"]
        and resource.get("resource", "") in rule["resources"]
        and request.get("operation") in rule["operations"]
        for rule in constraints.get("resourceRules", [])
    ):
        return False
    namespace = str(request.get("namespace") or "")
    if not _selector_matches(
        as_dict(constraints.get("namespaceSelector")), {"kubernetes.io/metadata.name": namespace}
    ):
        return False
    objects = [as_dict(request.get("object")), as_dict(request.get("oldObject"))]
    selector = as_dict(constraints.get("objectSelector"))
    return not selector or any(
        _selector_matches(selector, str_map(metadata(o).get("labels"))) for o in objects if o
    )


def _base(request: Mapping[str, Any]) -> dict[str, Any]:
    """The activation's request, object and oldObject, converted once per request."""
    import celpy

    return {
        "request": celpy.json_to_cel(dict(request)),
        "object": celpy.json_to_cel(request.get("object")),
        "oldObject": celpy.json_to_cel(request.get("oldObject")),
    }


def _lazy_variables(spec: Mapping[str, Any], base: Mapping[str, Any]) -> Any:
    """`variables` as the API server gives them: each evaluated when first used, then kept; an
    error is raised where the variable is used (so one used only by a messageExpression errs there)."""
    import celpy

    expressions = {v["name"]: v["expression"] for v in spec.get("variables", [])}

    class Variables(celpy.celtypes.MapType):
        def __init__(self) -> None:
            super().__init__({celpy.celtypes.StringType(k): None for k in expressions})
            self.done: dict[str, Any] = {}

        def __getitem__(self, key: Any) -> Any:
            name = str(key)
            if name not in expressions:
                raise KeyError(key)
            if name not in self.done:
                try:
                    self.done[name] = _evaluate(expressions[name], {**base, "variables": self})
                except Exception as error:
                    self.done[name] = error
            found = self.done[name]
            if isinstance(found, Exception):
                raise found
            return found

    return Variables()


def evaluate_policy(
    policy: Mapping[str, Any], actions: Sequence[str], request: Mapping[str, Any]
) -> FloorAnswer:
    """What one ValidatingAdmissionPolicy (with its binding's `actions`) answers to `request`."""
    spec = as_dict(policy.get("spec"))
    name = str(metadata(policy).get("name") or "")
    if not _matches_constraints(spec, request):
        return FloorAnswer()
    base = _base(request)
    activation = {**base, "variables": _lazy_variables(spec, base)}
    try:
        for condition in spec.get("matchConditions", []):
            if not bool(_evaluate(condition["expression"], activation)):
                return FloorAnswer()
        failed = []
        for validation in spec.get("validations", []):
            if not bool(_evaluate(validation["expression"], activation)):
                failed.append(_message(validation, activation))
    except Exception as error:  # celpy's errors have no common base but Exception
        return FloorAnswer(errors=(f"{name}: {error}",), matched=(name,))
    text = tuple(f"ValidatingAdmissionPolicy '{name}': {m}" for m in failed)
    return FloorAnswer(
        denied=text if "Deny" in actions else (),
        warnings=text if "Warn" in actions else (),
        audited=text if "Audit" in actions else (),
        matched=(name,),
    )


def _message(validation: Mapping[str, Any], activation: Mapping[str, Any]) -> str:
    """The messageExpression's value, else (on error, or none) the static message."""
    if "messageExpression" in validation:
        try:
            return str(_evaluate(validation["messageExpression"], activation))
        except Exception:
            pass
    return str(validation.get("message") or "")


def evaluate_floor(objects: Sequence[Mapping[str, Any]], request: Mapping[str, Any]) -> FloorAnswer:
    """What the whole floor (policies and bindings, as guardhook.floor.export writes them) answers
    to `request`: every bound policy's answer, joined."""
    bindings = {
        str(as_dict(o.get("spec")).get("policyName")): list(
            as_dict(o.get("spec")).get("validationActions") or []
        )
        for o in objects
        if o.get("kind") == "ValidatingAdmissionPolicyBinding"
    }
    answers = [
        evaluate_policy(o, bindings[str(metadata(o).get("name"))], request)
        for o in objects
        if o.get("kind") == "ValidatingAdmissionPolicy" and str(metadata(o).get("name")) in bindings
    ]
    return FloorAnswer(
        denied=tuple(m for a in answers for m in a.denied),
        warnings=tuple(m for a in answers for m in a.warnings),
        audited=tuple(m for a in answers for m in a.audited),
        errors=tuple(m for a in answers for m in a.errors),
        matched=tuple(m for a in answers for m in a.matched),
    )
