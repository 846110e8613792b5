"""The chart's admission-policy floor follows the release (issue 49): for each configuration, the
floor `helm template` renders with components.admissionPolicyFloor is, object by object, what
`guardhook export admission-policies` writes for the same configuration and the namespaces the
release leaves out (webhook.excludedNamespaces and its own): the exemptions, the actions (with
--enforcement=audit in extraArgs), the parameters and the digest `audit` and /metrics check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, RELEASE, run_helm

from guardhook.commands.main import main
from guardhook.config import apply_enforcement, build_config
from guardhook.floor.export import export_floor

Object = dict[str, Any]
FLOOR = {"components": {"admissionPolicyFloor": {"enabled": True}}}

CASES: dict[str, tuple[str, Object]] = {
    "defaults": ("guardhook-system", {}),
    "another-namespace-and-exclusions": ("ops", {"webhook": {"excludedNamespaces": ["kube-system"]}}),
    "exemptions-actions-parameters": (
        "guardhook-system",
        {
            "exemptions": {
                "users": ["system:serviceaccount:ops:drainer", "ci:*", "it's"],
                "groups": ["platform"],
                "namespaces": ["batch"],
                "lwsControllers": ["system:serviceaccount:lws:lws-controller"],
            },
            "policies": {
                "worker-delete": {
                    "actions": ["Warn", "Audit"],
                    "exemptions": {"namespaces": ["batch", "ml"]},
                },
                "group-pdb": {"exemptions": {"users": [], "groups": ["sre"]}},
                "group-spec": {"actions": ["Audit"], "weightLoadSeconds": 900},
            },
        },
    ),
    "a-policy-off": ("guardhook-system", {"policies": {"worker-delete": {"actions": []}}}),
    "no-user-exemptions": ("guardhook-system", {"exemptions": {"users": [], "lwsControllers": []}}),
    "enforcement-audit": ("guardhook-system", {"extraArgs": ["--enforcement=audit"]}),
    "enforcement-audit-two-args": ("guardhook-system", {"extraArgs": ["--enforcement", "audit"]}),
}


def _charted(tmp_path: Path, namespace: str, values: Object) -> list[Object]:
    done = run_helm(
        "template", RELEASE, str(CHART), "--namespace", namespace, values={**values, **FLOOR}, tmp=tmp_path
    )
    assert done.returncode == 0, done.stderr
    return [
        o for o in yaml.safe_load_all(done.stdout) if o and o["kind"].startswith("ValidatingAdmissionPolicy")
    ]


def _exported(namespace: str, values: Object) -> list[Object]:
    document = {k: values[k] for k in ("policies", "exemptions") if k in values}
    audit = any("audit" in a for a in values.get("extraArgs", []))
    config = apply_enforcement(build_config(document), "audit" if audit else "deny")
    excluded = (
        *(values.get("webhook", {}).get("excludedNamespaces") or ["kube-system", "kube-node-lease"]),
        namespace,
    )
    return export_floor(config, excluded_namespaces=excluded).objects


def _comparable(obj: Object) -> tuple[tuple[str, str], Object]:
    meta = obj["metadata"]
    labels = {
        k: v
        for k, v in meta["labels"].items()
        if k in ("app.kubernetes.io/name", "app.kubernetes.io/component")
    }
    return (obj["kind"], meta["name"]), {
        "apiVersion": obj["apiVersion"],
        "labels": labels,
        "annotations": meta["annotations"],
        "spec": obj["spec"],
    }


@pytest.mark.parametrize("case", list(CASES))
def test_the_charts_floor_is_the_export_of_the_same_configuration(tmp_path: Path, case: str) -> None:
    namespace, values = CASES[case]
    charted = dict(map(_comparable, _charted(tmp_path, namespace, values)))
    exported = dict(map(_comparable, _exported(namespace, values)))
    assert sorted(charted) == sorted(exported)
    for key, obj in exported.items():
        assert charted[key] == obj, key


def test_the_floor_follows_the_namespace_exemptions_and_actions(tmp_path: Path) -> None:
    """What issue 49 found: the floor left out guardhook-system and denied, whatever the values said."""
    namespace, values = CASES["exemptions-actions-parameters"]
    objects = {(o["kind"], o["metadata"]["name"]): o for o in _charted(tmp_path, "ops", values)}
    binding = objects[("ValidatingAdmissionPolicyBinding", "guardhook-floor-worker-delete")]
    assert binding["spec"]["validationActions"] == ["Warn", "Audit"]
    policy = objects[("ValidatingAdmissionPolicy", "guardhook-floor-worker-delete")]
    (expression,) = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert expression["values"] == ["kube-system", "kube-node-lease", "ops"]
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    assert "'batch', 'ml'" in conditions["not-exempt-namespace"]
    assert "startsWith('ci:')" in conditions["not-exempt-user"]
    spec_policy = objects[("ValidatingAdmissionPolicy", "guardhook-floor-group-spec")]
    assert ">= 900" in yaml.safe_dump(spec_policy["spec"]["validations"])


def test_the_command_line_export_with_the_releases_namespaces_is_the_charts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace, values = CASES["exemptions-actions-parameters"]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({k: values[k] for k in ("policies", "exemptions")}))
    flags = ["--exclude-namespace", "kube-system", "--exclude-namespace", "kube-node-lease"]
    assert (
        main(["export", "admission-policies", "--config", str(config), *flags, "--exclude-namespace", "ops"])
        == 0
    )
    exported = [o for o in yaml.safe_load_all(capsys.readouterr().out) if o]
    assert dict(map(_comparable, exported)) == dict(map(_comparable, _charted(tmp_path, "ops", values)))


def test_a_glob_the_chart_cannot_write_fails_the_render_with_one_line(tmp_path: Path) -> None:
    values = {**FLOOR, "exemptions": {"users": ["system:serviceaccount:*:drainer"]}}
    done = run_helm(
        "template", RELEASE, str(CHART), "--namespace", "guardhook-system", values=values, tmp=tmp_path
    )
    assert done.returncode != 0
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert "system:serviceaccount:*:drainer" in error and "guardhook export admission-policies" in error
