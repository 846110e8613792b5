"""`guardhook export admission-policies`: the floor as ValidatingAdmissionPolicy and
ValidatingAdmissionPolicyBinding objects, from guardhook's own configuration.

Each policy in guardhook.floor.rules.RULES whose configured actions include Deny, Warn or Audit is
exported as one policy and one binding, both named `guardhook-floor-<policy id>`: the binding's
`validationActions` are the configured actions, the policy's `matchConditions` skip the identities,
groups and namespaces the configuration exempts (global and the policy's own, as the engine does),
and its `matchConstraints` the namespaces every webhook entry leaves out
(guardhook.cluster.coverage.EXCLUDED_NAMESPACES). No binding has a `paramRef`: a floor that needed
an object guardhook serves could deadlock the way Gatekeeper #4530's generated policies did.

Each object carries the annotation `guardhook.io/floor-digest`, a digest of the specs exported
together, so `audit` and `/metrics` can tell an installed floor in sync with the configuration
from a stale one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from guardhook.cluster.coverage import EXCLUDED_NAMESPACES
from guardhook.cluster.webhooks import FLOOR_COMPONENT, FLOOR_COMPONENT_LABEL, FLOOR_DIGEST_ANNOTATION
from guardhook.config import Config, Exemptions
from guardhook.floor.cel import exemption_conditions
from guardhook.floor.cost import PER_CALL_LIMIT, estimated_cost
from guardhook.floor.rules import LEFT_OUT, RULES, Rule
from guardhook.policies import REGISTRY

API_VERSIONS = ("v1", "v1beta1")
"""admissionregistration.k8s.io versions the export writes: v1 (GA in Kubernetes 1.30), v1beta1
(1.28-1.29, where the ValidatingAdmissionPolicy feature gate and API must be enabled)."""
GROUP = "admissionregistration.k8s.io"
NAME_PREFIX = "guardhook-floor-"
LABELS = {"app.kubernetes.io/name": "guardhook", FLOOR_COMPONENT_LABEL: FLOOR_COMPONENT}
DIGEST_ANNOTATION = FLOOR_DIGEST_ANNOTATION
POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"


@dataclass(frozen=True)
class Cost:
    """One expression's estimated cost: where it is ("<policy> <field> <name>") and the estimate."""

    where: str
    estimate: int


@dataclass
class Export:
    """What an export wrote: the `objects` (policies and bindings, in order), the policies `left_out`
    ((policy id, why)), every expression's estimated cost, and the floor's `digest`."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    costs: list[Cost] = field(default_factory=list)
    digest: str = ""
    rules: list[Rule] = field(default_factory=list)

    def report(self) -> list[str]:
        """What was exported, left out and why, and the estimated costs, as lines for people."""
        lines = [f"exported: {rule.policy_id}: {rule.covers}" for rule in self.rules]
        lines += [f"left out: {pid}: {why}" for pid, why in self.left_out]
        worst = max((c.estimate for c in self.costs), default=0)
        lines.append(
            f"estimated CEL cost (guardhook's estimate, not the API server's checker): at most {worst} "
            f"per expression, limit {PER_CALL_LIMIT}"
        )
        lines += [f"  {c.estimate:>7}  {c.where}" for c in self.costs]
        return lines


def _actions(config: Config, policy_id: str) -> list[str]:
    return [a for a in config.settings(policy_id).actions if a != "Mutate"]


def _exemptions(config: Config, policy_id: str) -> list[Exemptions]:
    policy = next(p for p in REGISTRY if p.id == policy_id)
    own = config.settings(policy_id).exemptions
    global_ = config.exemptions
    if not policy.honours_user_exemptions:
        global_ = Exemptions(users=(), groups=(), namespaces=global_.namespaces)
    return [global_, own]


def _policy(rule: Rule, config: Config, api_version: str, excluded: tuple[str, ...]) -> dict[str, Any]:
    constraints: dict[str, Any] = {
        "matchPolicy": "Equivalent",
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": list(dict.fromkeys(excluded)),
                }
            ]
        },
        "resourceRules": [{**r, "scope": "Namespaced"} for r in rule.resource_rules],
    }
    if rule.object_selector:
        constraints["objectSelector"] = dict(rule.object_selector)
    spec: dict[str, Any] = {"failurePolicy": "Fail", "matchConstraints": constraints}
    conditions = exemption_conditions(_exemptions(config, rule.policy_id))
    if conditions:
        spec["matchConditions"] = conditions
    spec["variables"] = [{"name": n, "expression": e} for n, e in rule.variables]
    spec["validations"] = [v.document() for v in rule.validations]
    return {
        "apiVersion": f"{GROUP}/{api_version}",
        "kind": POLICY_KIND,
        "metadata": {"name": NAME_PREFIX + rule.policy_id, "labels": dict(LABELS)},
        "spec": spec,
    }


def _binding(rule: Rule, actions: list[str], api_version: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{api_version}",
        "kind": BINDING_KIND,
        "metadata": {"name": NAME_PREFIX + rule.policy_id, "labels": dict(LABELS)},
        "spec": {"policyName": NAME_PREFIX + rule.policy_id, "validationActions": actions},
    }


def _costs(policy: Mapping[str, Any]) -> list[Cost]:
    name = policy["metadata"]["name"]
    spec = policy["spec"]
    found = [
        Cost(f"{name} matchConditions {c['name']}", estimated_cost(c["expression"]))
        for c in spec.get("matchConditions", [])
    ]
    found += [
        Cost(f"{name} variables {v['name']}", estimated_cost(v["expression"])) for v in spec["variables"]
    ]
    for i, validation in enumerate(spec["validations"]):
        found.append(Cost(f"{name} validations[{i}]", estimated_cost(validation["expression"])))
        if "messageExpression" in validation:
            found.append(
                Cost(
                    f"{name} validations[{i}] messageExpression",
                    estimated_cost(validation["messageExpression"]),
                )
            )
    return found


def go_json(value: Any) -> str:
    """`value` as JSON the way Go's encoding/json (Helm's `toJson`) writes it: map keys sorted, no
    spaces, `<`, `>`, `&`, U+2028 and U+2029 escaped; so the chart computes the same digest."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _configured(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` without the namespaces it leaves out: those follow the install (its namespace,
    the webhook's excluded namespaces), not the configuration the digest tracks."""
    constraints = {k: v for k, v in spec.get("matchConstraints", {}).items() if k != "namespaceSelector"}
    return {**spec, "matchConstraints": constraints} if "matchConstraints" in spec else spec


def floor_digest(objects: list[dict[str, Any]]) -> str:
    """A digest of the objects' kinds, names and specs (annotations and the namespaces left out
    aside): equal for two exports of the same configuration's floor, whatever the API version they
    are written in or the namespace guardhook is installed in. The bytes hashed are Go's JSON
    (`go_json`), so the chart's template (components/admission-policy-floor.yaml) computes the same."""
    canonical = [[o["kind"], o["metadata"]["name"], _configured(o["spec"])] for o in objects]
    return hashlib.sha256(go_json(canonical).encode()).hexdigest()[:16]


def export_floor(
    config: Config, api_version: str = "v1", excluded_namespaces: tuple[str, ...] = EXCLUDED_NAMESPACES
) -> Export:
    """The floor for `config`, written as admissionregistration.k8s.io/`api_version` objects that
    leave out `excluded_namespaces` (default: the manifests' kube-system, kube-node-lease,
    guardhook-system; an install elsewhere names its own). Raises ValueError for an API version
    not in API_VERSIONS."""
    if api_version not in API_VERSIONS:
        raise ValueError(f"API version must be one of {', '.join(API_VERSIONS)}, not {api_version!r}")
    result = Export()
    for policy in REGISTRY:
        builder = RULES.get(policy.id)
        if builder is None:
            result.left_out.append((policy.id, LEFT_OUT[policy.id]))
            continue
        actions = _actions(config, policy.id)
        if not actions:
            result.left_out.append((policy.id, "off in the configuration (no Deny, Warn or Audit action)"))
            continue
        rule = builder(config.settings(policy.id).params)
        vap = _policy(rule, config, api_version, excluded_namespaces)
        result.rules.append(rule)
        result.costs += _costs(vap)
        result.objects += [vap, _binding(rule, actions, api_version)]
    result.digest = floor_digest(result.objects)
    for obj in result.objects:
        obj["metadata"]["annotations"] = {DIGEST_ANNOTATION: result.digest}
    return result


def render(export: Export) -> str:
    """The export as multi-document YAML, its report at the top as comments."""
    import yaml

    header = [
        "# guardhook admission-policy floor, written by `guardhook export admission-policies`: do not edit.",
        "# Evaluated by the API server in process, so these hold while guardhook is down (docs/policies.md).",
        *(f"# {line}" for line in export.report()),
    ]
    body = yaml.safe_dump_all(export.objects, sort_keys=False, width=100)
    return "\n".join(header) + "\n" + body
