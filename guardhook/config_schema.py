"""The JSON Schema of guardhook's configuration file (`--config`, docs/configuration.md), generated
from the configuration model: every registered policy's actions (Mutate only where the policy can
mutate, never Deny with Warn) and parameters (type from the default, minimum from
`Policy.param_minimums`, the enums and item shapes below), the exemptions and the cluster view.

One schema serves the config loader (`guardhook serve`, `check --config`, every command),
`guardhook config validate`, the chart's values.schema.json (its `policies`, `exemptions` and
`config` parts, written by `python -m guardhook.config_schema`) and the parameter table of
docs/configuration.md; tests/test_config_schema.py fails when any of them disagrees.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from guardhook.policies import REGISTRY
from guardhook.policies.base import ACTIONS, Policy
from guardhook.policies.group_capacity import SOURCE_ACTIONS
from guardhook.policies.shared.maker_guards import DEFER_PARAM
from guardhook.policies.worker_delete import (
    DRAIN_CONDITIONS_PARAM,
    DRAIN_TAINT_KEYS_PARAM,
    GANG_CONTROLLERS_PARAM,
)

Schema = dict[str, Any]

DIALECT = "http://json-schema.org/draft-07/schema#"
"""Draft 7: what the chart's values.schema.json has always declared, and Helm v3 and v4 read."""
MAX_NUMBER = 2**31 - 1
"""The largest number a parameter takes: Kubernetes counts (replicas, PDB budgets) are int32, and
a duration past it (68 years) is a typo, not a setting."""
DEFAULT_STALE_AFTER_SECONDS = 60.0
DENY_WITH_WARN = "Deny and Warn together are not allowed (as in ValidatingAdmissionPolicy)"

_POOL: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "nodeSelector", "maxNodes"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "nodeSelector": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
        "maxNodes": {"type": "integer", "minimum": 0, "maximum": MAX_NUMBER},
    },
}
PARAM_REFINEMENTS: Mapping[tuple[str, str], Schema] = {
    # What each policy's `param_problem` checks beyond the type of the default.
    ("group-capacity", "kueueManaged"): {"enum": list(SOURCE_ACTIONS)},
    ("group-capacity", "gangScheduled"): {"enum": list(SOURCE_ACTIONS)},
    ("group-capacity", "autoscaledPools"): {"items": _POOL},
    ("worker-delete", DRAIN_TAINT_KEYS_PARAM): {"items": {"type": "string", "minLength": 1}},
    ("worker-delete", DRAIN_CONDITIONS_PARAM): {"items": {"type": "string", "minLength": 1}},
    ("worker-delete", GANG_CONTROLLERS_PARAM): {"items": {"type": "string", "minLength": 1}},
    # `<maker>=<webhook entry name>`, split at the first `=` (maker_guards.item_problem).
    ("group-eviction", DEFER_PARAM): {"items": {"type": "string", "pattern": "^[^=]*[^=\\s][^=]*=.*\\S"}},
}
"""Enums and item shapes of parameters whose default's type does not say them, by (policy id,
parameter); tests/test_config_schema.py checks each against the loader."""


def _strings(description: str) -> Schema:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _exemptions_schema(per_policy: bool) -> Schema:
    """`exemptions` (global, with lwsControllers) or `policies.<id>.exemptions`."""
    properties = {
        "users": _strings("usernames, `*` wildcards"),
        "groups": _strings("user groups"),
        "namespaces": _strings("namespaces"),
    }
    if not per_policy:
        properties["lwsControllers"] = _strings("the LWS controller's identities, exempt per policy")
    return {"type": ["object", "null"], "additionalProperties": False, "properties": properties}


def _actions_schema(policy: Policy) -> Schema:
    allowed = [a for a in ACTIONS if a != "Mutate" or policy.can_mutate]
    # "With Deny, every action is another than Warn": Helm's validator names the offending item and
    # the actions it may be, where `not` over two `contains` would print only "'not' failed".
    # Every action but Warn, so an item the first enum refuses (Mutate) is not refused twice.
    with_deny = {"enum": [a for a in ACTIONS if a != "Warn"], "description": DENY_WITH_WARN}
    return {
        "type": "array",
        "items": {"enum": allowed},
        "default": list(policy.default_actions),
        "description": "[] turns the policy off",
        "if": {"contains": {"const": "Deny"}},
        "then": {"items": with_deny},
    }


def param_schema(policy: Policy, name: str, default: Any) -> Schema:
    """The schema of parameter `name` of `policy`: its default's type (a number is non-negative and
    at most MAX_NUMBER, at least `param_minimums`), its refinement, its default."""
    schema: Schema
    if isinstance(default, bool):
        schema = {"type": "boolean"}
    elif isinstance(default, int | float):
        minimum = policy.param_minimums.get(name, 0)
        schema = {"type": "integer" if isinstance(default, int) else "number"}
        schema.update(minimum=minimum, maximum=MAX_NUMBER)
    elif isinstance(default, str):
        schema = {"type": "string"}
    elif isinstance(default, list):
        schema = {"type": "array"}
    else:  # pragma: no cover - a new kind of parameter needs its schema here
        raise TypeError(f"{policy.id}.{name}: no schema for a {type(default).__name__} parameter")
    schema.update(PARAM_REFINEMENTS.get((policy.id, name), {}))
    schema["default"] = default
    owner = policy.shared_params.get(name)
    if owner:
        schema["description"] = f"default: {owner}'s {name}"
    return schema


def policy_schema(policy: Policy) -> Schema:
    """`policies.<id>`: actions, exemptions and the policy's parameters, nothing else."""
    properties: Schema = {"actions": _actions_schema(policy), "exemptions": _exemptions_schema(True)}
    for name, default in policy.params.items():
        properties[name] = param_schema(policy, name, default)
    return {"type": ["object", "null"], "additionalProperties": False, "properties": properties}


def config_schema(policies: Iterable[Policy] | None = None) -> Schema:
    """The JSON Schema (draft 7) of the whole configuration document."""
    registry = sorted(REGISTRY if policies is None else policies, key=lambda p: p.id)
    return {
        "$schema": DIALECT,
        "title": "guardhook configuration (--config, docs/configuration.md)",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "policies": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {p.id: policy_schema(p) for p in registry},
            },
            "exemptions": _exemptions_schema(False),
            "clusterView": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "staleAfterSeconds": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": MAX_NUMBER,
                        "default": DEFAULT_STALE_AFTER_SECONDS,
                    }
                },
            },
        },
    }


# ---- Validation: one line per problem, in the words of the loader. ----


def schema_problems(document: Any, schema: Schema | None = None) -> list[str]:
    """Every way `document` (a decoded configuration) breaks the schema (default: config_schema()),
    one line each, sorted by where; [] when it conforms."""
    validator = _validator() if schema is None else _validator_class()(schema)
    lines: list[str] = []
    for error in sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]):
        lines.extend(_describe(error))
    return lines


@functools.cache
def _validator_class() -> Any:
    """Draft 7 with the loader's integers: YAML's 2.0 is a float, which the loader refuses where an
    integer is due (draft 7 would take it)."""
    from jsonschema import Draft7Validator, validators

    checker = Draft7Validator.TYPE_CHECKER.redefine(
        "integer", lambda _c, value: isinstance(value, int) and not isinstance(value, bool)
    )
    return validators.extend(Draft7Validator, type_checker=checker)


@functools.cache
def _validator() -> Any:
    """The validator of the registered policies' schema (built once: reloads reuse it)."""
    return _validator_class()(config_schema())


def _where(path: Sequence[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _describe(error: Any) -> list[str]:
    where = _where(list(error.absolute_path))
    instance, schema, kind = error.instance, error.schema, error.validator
    if kind == "additionalProperties" and isinstance(instance, dict):
        known = sorted(schema.get("properties") or {})
        prefix = f"{where}." if where else ""
        return [
            f"unknown key {prefix}{key} (known: {', '.join(known) or 'none'})"
            for key in instance
            if key not in known
        ]
    where = where or "config"
    if kind == "type":
        return [f"{where} must be {_type_words(error.validator_value)}, got {_kind(instance)}"]
    if kind == "enum" and schema.get("description"):
        return [f"{where}: {schema['description']}"]
    if kind == "enum":
        return [f"{where}: {instance!r} is not one of {', '.join(map(str, error.validator_value))}"]
    if kind == "minimum":
        return [f"{where} must be at least {error.validator_value}, got {instance!r}"]
    if kind == "exclusiveMinimum":
        return [f"{where} must be more than {error.validator_value}, got {instance!r}"]
    if kind == "maximum":
        return [f"{where} must be at most {error.validator_value}, got {instance!r}"]
    return [f"{where}: {error.message}"]


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "empty",
}


def _type_words(types: str | list[str]) -> str:
    names = [types] if isinstance(types, str) else [t for t in types if t != "null"]
    return " or ".join(_TYPE_WORDS.get(t, t) for t in names)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | dict):
        return ("an empty " if not value else "a ") + ("list" if isinstance(value, list) else "mapping")
    if isinstance(value, str):
        return f"the string {value!r}"
    return repr(value)


# ---- Where the schema is written: the chart's values.schema.json, docs/configuration.md. ----

CHART_SCHEMA = Path("charts/guardhook/values.schema.json")
DOC = Path("docs/configuration.md")
DOC_BEGIN = "<!-- generated by `python -m guardhook.config_schema`: parameters -->"
DOC_END = "<!-- end of the generated parameters -->"


def chart_values_schema(values_schema: Mapping[str, Any]) -> Schema:
    """The chart's values schema with its `policies`, `exemptions` and `config` parts replaced by
    the configuration schema's (`config` holds every other top-level key; `policies` and
    `exemptions` have values of their own there)."""
    schema = config_schema()["properties"]
    out = json.loads(json.dumps(values_schema))
    properties = out["properties"]
    properties["policies"] = {**schema["policies"], "description": "policies.<id> (docs/configuration.md)"}
    properties["exemptions"] = {**schema["exemptions"], "description": "exemptions (docs/configuration.md)"}
    others = {k: v for k, v in schema.items() if k not in ("policies", "exemptions")}
    properties["config"] = {
        "type": "object",
        "description": "other top-level keys of guardhook's configuration file",
        "additionalProperties": False,
        "properties": {
            **others,
            "policies": {"not": {}, "description": "use the value policies"},
            "exemptions": {"not": {}, "description": "use the value exemptions"},
        },
    }
    out.get("definitions", {}).pop("policy", None)
    if out.get("definitions") == {}:
        del out["definitions"]
    return out


def parameter_table() -> str:
    """docs/configuration.md's table: every policy's parameters with type, default and range."""
    rows = ["| policy | key | type | default | allowed |", "|---|---|---|---|---|"]
    for pid, policy in sorted(config_schema()["properties"]["policies"]["properties"].items()):
        for key, schema in policy["properties"].items():
            if key == "exemptions":
                continue
            kind = _type_words(schema["type"])
            rows.append(f"| `{pid}` | `{key}` | {kind} | {_default(schema)} | {_allowed(schema)} |")
    return "\n".join(rows)


def _default(schema: Schema) -> str:
    text = f"`{json.dumps(schema['default'])}`"
    return (
        f"{text} ({schema['description']})"
        if "description" in schema and "default:" in schema["description"]
        else text
    )


def _allowed(schema: Schema) -> str:
    if schema["type"] == "array":
        item = schema.get("items") or {}
        if "enum" in item:
            return ", ".join(item["enum"]) + ("; not Deny with Warn" if "then" in schema else "")
        if item.get("type") == "object":
            return "entries " + ", ".join(f"`{k}`" for k in item["required"])
        return "non-empty strings" if item.get("minLength") else "strings"
    if "enum" in schema:
        return ", ".join(schema["enum"])
    if "minimum" in schema:
        return f"{schema['minimum']} to {schema['maximum']}"
    return ""


def documented(text: str) -> str:
    """`text` (docs/configuration.md) with the generated table between its markers replaced."""
    pattern = re.compile(re.escape(DOC_BEGIN) + r".*?" + re.escape(DOC_END), re.S)
    return pattern.sub(lambda _m: f"{DOC_BEGIN}\n{parameter_table()}\n{DOC_END}", text)


def write(repo: Path) -> None:
    """Rewrite the chart's values.schema.json and the docs table under `repo` from the model."""
    chart = repo / CHART_SCHEMA
    chart.write_text(json.dumps(chart_values_schema(json.loads(chart.read_text())), indent=2) + "\n")
    doc = repo / DOC
    doc.write_text(documented(doc.read_text()))


if __name__ == "__main__":  # pragma: no cover - the maintainer's regeneration step
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd())
