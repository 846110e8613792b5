"""The floor's pieces the chart assembles at render (charts/guardhook/files/floor-rules.yaml), so
the floor it installs follows the release: its namespace, `webhook.excludedNamespaces`, the
exemptions, and each policy's actions and parameters.

The CEL of each rule is written once here, from guardhook.floor.rules; a parameter that enters a
rule's CEL is written as a sentinel number the template replaces with the configured value
(`params`). What the template computes itself, as guardhook.config and guardhook.floor.export do:
the actions (with `--enforcement=audit` among `extraArgs`), the exemption conditions
(guardhook.floor.cel), the namespaces left out and the digest (export.floor_digest).
`tests/test_chart_floor.py` renders the chart for several configurations and compares the floor
with `guardhook export admission-policies` of the same configuration.

`python -m guardhook.floor.chartparts` rewrites the file (from the repository's root).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from guardhook.config import GLOBAL_EXEMPT_USERS, PER_POLICY_EXEMPT_USERS, judges_default_per_policy_users
from guardhook.floor.rules import RULES
from guardhook.policies import REGISTRY

CHART_FILE = Path("charts/guardhook/files/floor-rules.yaml")
SENTINEL_BASE = 987654300
"""Sentinels are SENTINEL_BASE + i for the i-th parameter: numbers no rule holds otherwise."""


def parts() -> dict[str, Any]:
    """The file's content: the default exemptions, and one entry per exported rule, in the
    registry's order (as export_floor writes them)."""
    rules = []
    for policy in REGISTRY:
        builder = RULES.get(policy.id)
        if builder is None:
            continue
        defaults = dict(policy.params)
        sentinels: dict[str, Any] = {}
        for name, default in defaults.items():
            if isinstance(default, int) and not isinstance(default, bool):
                sentinels[name] = {"sentinel": str(SENTINEL_BASE + len(sentinels)), "default": default}
        probe = {**defaults, **{n: int(s["sentinel"]) for n, s in sentinels.items()}}
        rule = builder(probe)
        text = yaml.safe_dump([v.document() for v in rule.validations]) + yaml.safe_dump(rule.variables)
        used = {n: s for n, s in sentinels.items() if s["sentinel"] in text}
        entry: dict[str, Any] = {
            "policy": policy.id,
            "defaultActions": list(policy.default_actions),
            "honoursUserExemptions": policy.honours_user_exemptions,
            "policyUsersByDefault": not judges_default_per_policy_users(policy),
            "params": used,
            "resourceRules": [{**r, "scope": "Namespaced"} for r in rule.resource_rules],
            "variables": [{"name": n, "expression": e} for n, e in rule.variables],
            "validations": [v.document() for v in rule.validations],
        }
        if rule.object_selector:
            entry["objectSelector"] = dict(rule.object_selector)
        rules.append(entry)
    return {
        "globalUsers": list(GLOBAL_EXEMPT_USERS),
        "lwsControllers": list(PER_POLICY_EXEMPT_USERS),
        "rules": rules,
    }


def render() -> str:
    """The file's text."""
    header = (
        "# The admission-policy floor's rules for the chart's template\n"
        "# (templates/components/admission-policy-floor.yaml), written by\n"
        "# `python -m guardhook.floor.chartparts` from guardhook.floor.rules: do not edit.\n"
    )
    return header + yaml.safe_dump(parts(), sort_keys=False, width=100)


def write(repo: Path) -> None:
    """Rewrite the chart's file under `repo`."""
    (repo / CHART_FILE).write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    write(Path.cwd())
