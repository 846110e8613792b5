"""Validate an object against its kind's schema before `check` judges it (issue 39).

Built-in kinds: the Kubernetes 1.37 OpenAPI schemas that `kubernetes-validate` ships (strict: an
unknown field is an error, as `kubectl apply --validate=strict`). Custom resources guardhook
reads — LeaderWorkerSet, DisaggregatedSet, InferencePool, ScaledObject, PolicyReport — the
`openAPIV3Schema` of their CRDs, vendored in guardhook/data/schemas (SOURCES.md there names each
source), with the ObjectMeta of the Kubernetes schemas for `metadata`, after their defaults are
filled in, as apiextensions-apiserver validates; a field the CRD does not name is an error there too
(`strict`), their CEL rules (`x-kubernetes-validations`) are evaluated, and one of those kinds in
a group/version no vendored CRD serves is refused ("no matches for kind"). A kind with neither is
not validated (`validate` returns None).

The API server's rules for names, namespaces, labels and selectors (guardhook.commands.names), and
two more the schemas cannot say, are added from their upstream sources:
- a resource quantity (`cpu: "lots"`) must match apimachinery's quantity syntax (the pattern
  controller-gen writes into CRDs; the built-in schemas leave Quantity an unchecked string);
- a LeaderWorkerSet's `spec.leaderWorkerTemplate.size` is at least 1 (the LWS webhook,
  kubernetes-sigs/lws pkg/webhooks/leaderworkerset_webhook.go: "size must be equal or greater
  than 1").
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any

from guardhook.commands.names import name_problems
from guardhook.wire import KubeObject

KUBERNETES_VERSION = "1.37.0"
"""The Kubernetes schemas built-in kinds are validated against (kubernetes-validate's folder)."""
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)
"""apimachinery's resource.Quantity syntax, as controller-gen writes it into CRD schemas."""
QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
MAX_PROBLEMS = 20
"""At most this many problems per object: past it, the first ones say enough."""


def validate(obj: KubeObject) -> list[str] | None:
    """The schema problems of `obj`, one `path: what` line each (`spec.replicas: -4 is less than
    the minimum of 0`), in document order; [] for a valid object; None when guardhook has no
    schema for its apiVersion and kind (then it is judged as it is). An object without an
    apiVersion, or of a kind a built-in group/version does not have (`apps/v1 Deploymnet`), is a
    problem: the API server refuses both (kubectl: "apiVersion not set", "no matches for kind"), and
    so is a kind guardhook knows a CRD of in a group/version that CRD does not serve."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return None
    if not isinstance(api_version, str) or not api_version:
        return ["apiVersion: is required (the API server refuses an object without one)"]
    validator = _validator(api_version, kind)
    if validator is None:
        unserved = unserved_version(api_version, kind)
        if unserved:
            return [f"apiVersion: {unserved}"]
        group, _, version = api_version.rpartition("/")
        kinds = _built_in_kinds().get((group, version))
        if kinds is not None and kind not in kinds and _crd_file(api_version, kind) is None:
            return [f"kind: {api_version} has no kind {kind} (it has {', '.join(sorted(kinds))})"]
        return None
    crd = _crd_file(api_version, kind)
    # A custom resource is validated as the API server does it: after its CRD's defaults are applied
    # (a required `type` with a default may be left out).
    checked = _defaulted(obj, _crd_schema(crd)) if crd is not None else obj
    problems = [(list(e.absolute_path), _message(e)) for e in validator.iter_errors(checked)]
    if crd is not None:
        meta = _validator_for({"$ref": f"{DEFINITIONS_ID}#/$defs/{OBJECT_META}"})
        problems += [
            (["metadata", *e.absolute_path], _message(e)) for e in meta.iter_errors(obj.get("metadata"))
        ]
    if crd is not None:
        problems += _cel_problems(checked, _crd_schema(crd), [])
    if kind == "LeaderWorkerSet":
        problems += _lws_rules(obj)
    problems += name_problems(obj, built_in=crd is None)
    problems.sort(key=lambda p: [str(step) for step in p[0]])
    return [f"{_path(path)}: {message}" for path, message in problems[:MAX_PROBLEMS]]


def _cel_problems(value: Any, schema: Any, path: list[Any]) -> list[tuple[list[Any], str]]:
    """The CEL rules of a CRD's schema (`x-kubernetes-validations`) that `value` breaks, at every
    depth, as the API server evaluates them on a create (`self` the value at the rule's place; a
    transition rule, one that reads `oldSelf`, has nothing to compare on a create). A rule that
    cannot be evaluated here is not reported: an unsure "Invalid" would fail a pipeline the API
    server passes. The problem is the rule's `message`, or "failed rule: RULE" as the API server
    says it."""
    if not isinstance(schema, dict) or value is None:
        return []
    problems: list[tuple[list[Any], str]] = []
    for rule in schema.get("x-kubernetes-validations") or ():
        text = rule.get("rule") if isinstance(rule, dict) else None
        if isinstance(text, str) and "oldSelf" not in text and _cel_rule(text, value) is False:
            problems.append((path, str(rule.get("message") or f"failed rule: {text}")))
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            sub = properties.get(key, schema.get("additionalProperties"))
            problems += _cel_problems(item, sub, [*path, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problems += _cel_problems(item, schema.get("items"), [*path, index])
    return problems


@functools.cache
def _cel_program(rule: str) -> Any:
    import celpy

    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def _cel_rule(rule: str, value: Any) -> bool | None:
    """Whether `value` keeps CEL `rule` (`self` = value); None when it cannot be evaluated."""
    import celpy

    try:
        result = _cel_program(rule).evaluate({"self": celpy.json_to_cel(value)})
    except Exception:  # celpy's parse and evaluation errors, and its KeyError/TypeError variants
        return None
    return bool(result) if isinstance(result, bool | celpy.celtypes.BoolType) else None


def unserved_version(api_version: str, kind: str) -> str | None:
    """Why `kind` is not served in `api_version` — `no matches for kind "LeaderWorkerSet" in version
    "leaderworkerset.sigs.k8s.io/v1" (its CRD serves leaderworkerset.x-k8s.io/v1)`, as kubectl says
    it — when `kind` is one guardhook vendors a CRD of (guardhook/data/schemas) and none of its files
    serves that group/version; else None."""
    served = _crd_versions().get(kind.lower())
    if not served or _crd_file(api_version, kind) is not None:
        return None
    versions = ", ".join(served[:-1]) + " or " + served[-1] if len(served) > 1 else served[0]
    return f'no matches for kind "{kind}" in version "{api_version}" (its CRD serves {versions})'


def _lws_rules(obj: KubeObject) -> list[tuple[list[Any], str]]:
    spec = obj.get("spec")
    template = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    size = template.get("size") if isinstance(template, dict) else None
    if isinstance(size, int) and not isinstance(size, bool) and size < 1:
        return [(["spec", "leaderWorkerTemplate", "size"], f"{size} is less than 1 (the leader counts)")]
    return []


def _message(error: Any) -> str:
    """One error as a person reads it: the value as YAML/JSON writes it (never a Python repr)."""
    value = _shown(error.instance)
    if error.validator == "additionalProperties":
        return str(error.message).replace("Additional properties are not allowed", "unknown field")
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        names = [TYPE_NAMES.get(str(t), str(t)) for t in wanted if t != "null"]
        return f"{value} is not {' or '.join(names)}"
    if _is_quantity(error):
        return f"{value} is not a resource quantity (such as 500m, 2 or 16Gi)"
    if error.validator in ("oneOf", "anyOf") and error.context:
        if any(_is_quantity(e) for e in error.context):
            return f"{value} is not a resource quantity (such as 500m, 2 or 16Gi)"
        return f"{value} is not valid: {_message(error.context[0])}"
    if error.validator == "minimum":
        return f"{value} is less than the minimum of {error.validator_value}"
    if error.validator == "maximum":
        return f"{value} is more than the maximum of {error.validator_value}"
    if error.validator == "required":
        return str(error.message).replace("is a required property", "is required")
    return str(error.message)


def _is_quantity(error: Any) -> bool:
    # the built-in schemas' Quantity (patched in _registry) and controller-gen's, which CRDs carry
    return error.validator == "pattern" and "[KMGTPE]i" in str(error.validator_value)


TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
}


def _shown(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "), default=str)[:80]  # an explicit !!binary, !!set


def _path(path: list[Any]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(object)"


@functools.cache
def _crd_file(api_version: str, kind: str) -> str | None:
    group, _, version = api_version.rpartition("/")
    name = f"{group}_{version}_{kind.lower()}.json"
    return name if resources.files("guardhook").joinpath("data/schemas/" + name).is_file() else None


@functools.cache
def _crd_versions() -> dict[str, list[str]]:
    """A vendored CRD kind (in lower case) -> the group/versions it is served in: those of its files
    here (`<group>_<version>_<kind>.json`), as a cluster with those CRDs installed serves it."""
    served: dict[str, list[str]] = {}
    for entry in resources.files("guardhook").joinpath("data/schemas").iterdir():
        parts = entry.name.removesuffix(".json").split("_")
        if entry.name.endswith(".json") and len(parts) == 3:
            served.setdefault(parts[2], []).append(f"{parts[0]}/{parts[1]}")
    return {kind: sorted(versions) for kind, versions in served.items()}


@functools.cache
def _crd_schema(name: str) -> dict[str, Any]:
    """The vendored `openAPIV3Schema` of CRD schema file `name`."""
    text = resources.files("guardhook").joinpath("data/schemas/" + name).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _defaulted(value: Any, schema: Any) -> Any:
    """`value` with the `default` of every property its structural schema gives one for filled in
    where the property is absent, at every depth (properties, items, additionalProperties), as
    apiextensions-apiserver defaults a custom resource before validating it. `value` is not changed:
    what is filled in is a copy."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        found = schema.get("properties")
        properties: dict[str, Any] = found if isinstance(found, dict) else {}
        extra = schema.get("additionalProperties")
        out = {key: _defaulted(item, properties.get(key, extra)) for key, item in value.items()}
        for key, sub in properties.items():
            if key not in out and isinstance(sub, dict) and "default" in sub:
                out[key] = _defaulted(copy.deepcopy(sub["default"]), sub)
        return out
    if isinstance(value, list):
        return [_defaulted(item, schema.get("items")) for item in value]
    return value


def strict(schema: Any, root: bool = True) -> Any:
    """A copy of a CRD's structural `schema` in which a field the schema does not name is an error
    (`additionalProperties: false`), as the API server's pruning reports it under
    `--validate=strict` (apiextensions-apiserver pkg/apiserver/schema/pruning: every field of an
    object that neither `properties` nor `additionalProperties` names is unknown). As there:
    - below `x-kubernetes-preserve-unknown-fields: true` unknown fields are kept (the fields the
      schema names are still checked);
    - the root and an `x-kubernetes-embedded-resource: true` object take `apiVersion`, `kind` and
      `metadata` besides their properties; an embedded object's are checked as the API server
      does (apiVersion and kind required strings, metadata an ObjectMeta); the root's metadata is
      checked on its own (`validate`);
    - `anyOf`/`allOf`/`oneOf`/`not` only restrict values in a structural schema: left as they are."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {key: strict(sub, root=False) for key, sub in properties.items()}
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out[key] = strict(schema[key], root=False)
    if root or schema.get("x-kubernetes-embedded-resource") is True:
        meta: dict[str, Any] = {} if root else {"$ref": f"{DEFINITIONS_ID}#/$defs/{OBJECT_META}"}
        out["properties"] = {
            **out.get("properties", {}),
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": meta,
        }
        if not root:
            out["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind"})
    if (
        schema.get("type") == "object"
        and "additionalProperties" not in schema
        and schema.get("x-kubernetes-preserve-unknown-fields") is not True
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def _validator(api_version: str, kind: str) -> Any:
    crd = _crd_file(api_version, kind)
    if crd is not None:
        return _validator_for(strict(_crd_schema(crd)))
    group, _, version = api_version.rpartition("/")
    prefix = group.split(".")[0] + "-" if group else ""
    path = _kubernetes_schemas().joinpath(f"{kind.lower()}-{prefix}{version}.json")
    if not path.is_file():
        return None
    schema = json.loads(path.read_text(encoding="utf-8"))
    # the file name keeps only the group's first label: scheduling.volcano.sh/v1beta1 PodGroup
    # (a CRD) names the file of scheduling.k8s.io/v1beta1 PodGroup, so the group must match too
    served = schema.get("x-kubernetes-group-version-kind") or []
    if not any(gvk.get("group") == group and gvk.get("version") == version for gvk in served):
        return None
    return _validator_for(schema)


@functools.cache
def _built_in_kinds() -> dict[tuple[str, str], frozenset[str]]:
    """(group, version) -> the kinds Kubernetes serves there, from the schemas' definitions
    (their `x-kubernetes-group-version-kind`), List kinds and the meta kinds left out."""
    definitions = json.loads(_kubernetes_schemas().joinpath("_definitions.json").read_text(encoding="utf-8"))
    kinds: dict[tuple[str, str], set[str]] = {}
    for definition in definitions["$defs"].values():
        for gvk in definition.get("x-kubernetes-group-version-kind") or ():
            kinds.setdefault((gvk["group"], gvk["version"]), set()).add(gvk["kind"])
    meta = {"DeleteOptions", "WatchEvent", "Status", "APIGroup", "APIGroupList", "APIResourceList"}
    meta |= {"APIVersions", "ListOptions", "GetOptions", "CreateOptions", "PatchOptions", "UpdateOptions"}
    served = {
        gv: frozenset(k for k in found if k not in meta and not k.endswith("List"))
        for gv, found in kinds.items()
    }
    # a group/version with no resource kind here (admission.k8s.io/v1: AdmissionReview is in no
    # schema) says nothing about which kinds it has
    return {gv: found for gv, found in served.items() if found}


def schema_dir_name() -> str:
    """The one folder of kubernetes-validate's `kubernetes-json-schema` that `check` reads: the
    strict schemas of KUBERNETES_VERSION (the image keeps this one and drops the others)."""
    return f"v{KUBERNETES_VERSION}-local-strict"


def _kubernetes_schemas() -> Any:
    return resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", schema_dir_name())


@functools.cache
def _registry() -> Any:
    from referencing import Registry, Resource

    definitions = json.loads(_kubernetes_schemas().joinpath("_definitions.json").read_text(encoding="utf-8"))
    definitions["$defs"][QUANTITY_DEF] = {
        "anyOf": [{"type": ["integer", "null"]}, {"type": "string", "pattern": QUANTITY}]
    }
    return Registry().with_resource(DEFINITIONS_ID, Resource.from_contents(definitions))


def _validator_for(schema: dict[str, Any]) -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(schema, registry=_registry())
