"""`guardhook export admission-policies` (issue 40): the floor's objects, what it leaves out, its
cost estimates, the command line, and the kustomize component that installs the default floor."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.commands.main import main
from guardhook.config import build_config, default_config
from guardhook.floor.cel import glob_regex, user_condition
from guardhook.floor.cost import PER_CALL_LIMIT, estimated_cost
from guardhook.floor.evaluate import evaluate_floor
from guardhook.floor.export import DIGEST_ANNOTATION, export_floor, floor_digest, render
from guardhook.floor.rules import LEFT_OUT, RULES

from conftest import REPO, load_review
from helpers import request_of
from kustomize_lite import render as kustomize
from kustomize_lite import user_overlay

COMPONENT = REPO / "manifests" / "components" / "admission-policy-floor"


def kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in objects]


def test_the_default_floor_is_one_policy_and_one_binding_per_lookup_free_rule() -> None:
    objects = export_floor(default_config()).objects
    assert kinds(objects) == [
        (kind, f"guardhook-floor-{pid}")
        for pid in ("worker-delete", "group-pdb", "group-spec")
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    ]
    assert {o["apiVersion"] for o in objects} == {"admissionregistration.k8s.io/v1"}


def test_bindings_take_the_configured_actions_and_never_params() -> None:
    bindings = {
        o["metadata"]["name"]: o["spec"]
        for o in export_floor(default_config()).objects
        if "Binding" in o["kind"]
    }
    assert bindings["guardhook-floor-worker-delete"]["validationActions"] == ["Deny"]
    assert bindings["guardhook-floor-group-pdb"]["validationActions"] == ["Deny"]
    assert bindings["guardhook-floor-group-spec"]["validationActions"] == ["Warn"]
    for spec in bindings.values():
        assert "paramRef" not in spec
    for policy in export_floor(default_config()).objects:
        assert "paramKind" not in policy["spec"]


def test_enforcement_audit_and_configured_actions_reach_the_bindings() -> None:
    config = build_config(
        {"policies": {"group-pdb": {"actions": ["Warn", "Audit"]}, "worker-delete": {"actions": []}}}
    )
    found = export_floor(config)
    bindings = {
        o["metadata"]["name"]: o["spec"]["validationActions"] for o in found.objects if "Binding" in o["kind"]
    }
    assert bindings == {
        "guardhook-floor-group-pdb": ["Warn", "Audit"],
        "guardhook-floor-group-spec": ["Warn"],
    }
    assert ("worker-delete", "off in the configuration (no Deny, Warn or Audit action)") in found.left_out


def test_a_policy_switched_off_is_not_enforced_by_the_floor() -> None:
    config = build_config({"policies": {"worker-delete": {"actions": []}}})
    request = request_of(load_review("s01-worker-delete.validating"))
    assert evaluate_floor(export_floor(config).objects, request).allowed
    assert not evaluate_floor(export_floor(default_config()).objects, request).allowed


def test_audit_enforcement_audits_instead_of_denying(tmp_path: Path) -> None:
    from guardhook.config import apply_enforcement

    config = apply_enforcement(default_config(), "audit")
    answer = evaluate_floor(
        export_floor(config).objects, request_of(load_review("s01-worker-delete.validating"))
    )
    assert answer.allowed and len(answer.audited) == 1


def test_v1beta1_for_older_clusters_is_the_same_floor() -> None:
    v1, beta = export_floor(default_config()), export_floor(default_config(), "v1beta1")
    assert {o["apiVersion"] for o in beta.objects} == {"admissionregistration.k8s.io/v1beta1"}
    assert [o["spec"] for o in beta.objects] == [o["spec"] for o in v1.objects]
    assert beta.digest == v1.digest
    with pytest.raises(ValueError, match="v1, v1beta1"):
        export_floor(default_config(), "v2")


def test_every_policy_is_exported_or_left_out_saying_why() -> None:
    found = export_floor(default_config())
    exported = {r.policy_id for r in found.rules}
    left = dict(found.left_out)
    from guardhook.policies import REGISTRY

    assert exported | set(left) == {p.id for p in REGISTRY}
    assert not exported & set(left)
    assert all(left[pid].startswith("needs the view") for pid in left)
    assert set(LEFT_OUT) | set(RULES) == {p.id for p in REGISTRY}


def test_every_expression_is_estimated_far_under_the_limit() -> None:
    found = export_floor(default_config())
    expressions = [
        e
        for o in found.objects
        if o["kind"] == "ValidatingAdmissionPolicy"
        for e in [
            *(c["expression"] for c in o["spec"].get("matchConditions", [])),
            *(v["expression"] for v in o["spec"]["variables"]),
            *(v["expression"] for v in o["spec"]["validations"]),
            *(v["messageExpression"] for v in o["spec"]["validations"] if "messageExpression" in v),
        ]
    ]
    assert len(found.costs) == len(expressions)
    assert all(0 < c.estimate < PER_CALL_LIMIT // 10 for c in found.costs)


def test_the_cost_estimate_grows_with_what_an_expression_iterates() -> None:
    flat = estimated_cost("object.a == 'x'")
    loop = estimated_cost("object.items.exists(i, i == 'x')")
    nested = estimated_cost("object.items.exists(i, object.other.exists(j, j == i))")
    assert flat < loop < nested
    assert nested >= 100 * loop // 2  # a nested loop multiplies, not adds


def test_the_digest_annotation_follows_the_configuration() -> None:
    default = export_floor(default_config())
    assert {o["metadata"]["annotations"][DIGEST_ANNOTATION] for o in default.objects} == {default.digest}
    other = export_floor(build_config({"exemptions": {"users": ["ci-bot"]}}))
    assert other.digest != default.digest
    assert floor_digest(default.objects) == default.digest


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        ("system:node:*", ["system:node:a", "system:node:", "system:nodes", "x-system:node:a"]),
        ("ci-?-bot", ["ci-1-bot", "ci-12-bot", "ci--bot"]),
        ("ops-[ab]*", ["ops-a", "ops-b1", "ops-c", "ops-[ab]"]),
        ("ops-[!ab]", ["ops-a", "ops-c", "ops-!"]),
        ("a.b+c", ["a.b+c", "axb+c", "a.bbc"]),
        ("odd[", ["odd[", "odd"]),
        ("line*", ["line\nfeed", "lin"]),
    ],
)
def test_exemption_globs_match_what_fnmatch_matches(pattern: str, names: list[str]) -> None:
    import re2

    for name in names:
        assert bool(re2.search(glob_regex(pattern), name)) == fnmatch.fnmatchcase(name, pattern), name


def test_user_condition_is_false_without_patterns_and_skips_empty_names() -> None:
    assert user_condition([]) == "false"
    assert "request.userInfo.username != ''" in user_condition(["*"])


# --- the command line


def test_export_writes_the_floor_and_its_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "admission-policies"]) == 0
    out = capsys.readouterr().out
    assert out == render(export_floor(default_config()))
    assert "# left out: group-eviction: needs the view" in out
    assert re.search(r"# estimated CEL cost .* at most \d+ per expression, limit 1000000", out)
    assert len(list(yaml.safe_load_all(out))) == 6


def test_export_takes_config_api_version_and_out(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("exemptions:\n  users: [ci-bot]\n")
    out = tmp_path / "floor.yaml"
    assert (
        main(
            [
                "export",
                "admission-policies",
                "--config",
                str(config),
                "--api-version",
                "v1beta1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    objects = list(yaml.safe_load_all(out.read_text()))
    assert {o["apiVersion"] for o in objects} == {"admissionregistration.k8s.io/v1beta1"}
    conditions = objects[0]["spec"]["matchConditions"]
    assert "'ci-bot'" in conditions[0]["expression"]


def test_export_with_a_bad_config_or_out_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("policies:\n  no-such-policy: {}\n")
    assert main(["export", "admission-policies", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-policy" in err
    assert main(["export", "admission-policies", "--out", str(tmp_path / "missing" / "floor.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("guardhook export: cannot write") and err.count("\n") == 1


# --- the component


def test_the_component_holds_the_export_of_the_default_configuration() -> None:
    assert (COMPONENT / "floor.yaml").read_text() == render(export_floor(default_config()))


def test_the_component_renders_into_an_install(tmp_path: Path) -> None:
    overlay = user_overlay(
        tmp_path / "overlay", [REPO / "manifests" / "overlays" / "cert-manager"], [COMPONENT]
    )
    objects = kustomize(overlay)
    floor = [o for o in objects if o["kind"].startswith("ValidatingAdmissionPolicy")]
    assert kinds(floor) == kinds(export_floor(default_config()).objects)
    # Everything else of the install is still there, unchanged by the component.
    assert any(o["kind"] == "ValidatingWebhookConfiguration" for o in objects)


def test_the_floor_skips_the_namespaces_every_webhook_entry_skips() -> None:
    from test_manifests import MANIFESTS, by_kind

    webhook = by_kind(kustomize(MANIFESTS / "base"), "ValidatingWebhookConfiguration")[0]["webhooks"][0]
    for policy in export_floor(default_config()).objects:
        if policy["kind"] == "ValidatingAdmissionPolicy":
            assert policy["spec"]["matchConstraints"]["namespaceSelector"] == webhook["namespaceSelector"]


# --- the floor as a coverage layer: audit, /metrics


def floor_view(objects: list[dict[str, Any]], unreadable: list[str] | None = None) -> Any:
    from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects

    return view_from_objects([*embedded_fleet_objects(), *objects], unreadable=unreadable)


def test_the_floor_layer_says_installed_bound_in_sync_or_stale() -> None:
    from guardhook.cluster.coverage import floor_layer

    exported = export_floor(default_config())
    objects = exported.objects
    assert floor_layer(floor_view(objects), exported.digest).state == "in-sync"
    assert (
        floor_layer(
            floor_view(objects), export_floor(build_config({"exemptions": {"users": []}})).digest
        ).state
        == "stale"
    )
    unbound = [
        o
        for o in objects
        if o["metadata"]["name"] != "guardhook-floor-worker-delete" or "Binding" not in o["kind"]
    ]
    layer = floor_layer(floor_view(unbound), exported.digest)
    assert layer.state == "not-bound" and "guardhook-floor-worker-delete has no binding" in layer.message
    assert floor_layer(floor_view([], unreadable=[]), exported.digest).state == "not-installed"
    # Manifests holding no policy at all, or a listing RBAC forbade: not checked, never "not installed".
    assert floor_layer(floor_view([]), exported.digest).state == "unchecked"
    assert (
        floor_layer(floor_view(objects, unreadable=["validatingadmissionpolicies"]), exported.digest).state
        == "unchecked"
    )


def test_someone_elses_admission_policies_are_not_the_floor() -> None:
    from guardhook.cluster.coverage import floor_layer

    other = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "guardhook-floor-worker-delete"},  # the name alone does not make it ours
        "spec": {},
    }
    assert floor_layer(floor_view([other], unreadable=[]), None).state == "not-installed"


def test_audit_reports_the_floor_layer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from guardhook.cluster.view.static import embedded_fleet_objects

    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all([*embedded_fleet_objects(), *export_floor(default_config()).objects]))
    assert main(["audit", "--cluster-state", str(state)]) == 0
    assert "Admission-policy floor: installed, bound, in sync" in capsys.readouterr().out
    config = tmp_path / "config.yaml"
    config.write_text("policies:\n  worker-delete: {actions: [Audit]}\n")
    assert main(["audit", "--cluster-state", str(state), "--config", str(config), "--format", "json"]) == 0
    import json

    layer = json.loads(capsys.readouterr().out)["admissionPolicyFloor"]
    assert layer["state"] == "stale" and "guardhook-floor-worker-delete" in layer["policies"]


def test_metrics_report_the_floor_layer() -> None:
    from prometheus_client import CollectorRegistry

    from guardhook.server.coverage_metrics import CoverageCollector

    view = floor_view(export_floor(default_config()).objects)
    registry = CollectorRegistry()
    registry.register(CoverageCollector(lambda: view, default_config, None))
    for state in ("unchecked", "not-installed", "not-bound", "stale", "in-sync"):
        value = registry.get_sample_value("guardhook_admission_policy_floor", {"state": state})
        assert value == (1.0 if state == "in-sync" else 0.0), state


def test_the_helm_chart_ships_the_floors_rules_as_guardhook_writes_them() -> None:
    """The chart assembles the floor from files/floor-rules.yaml (tests/test_chart_floor.py renders
    it); that file is what `python -m guardhook.floor.chartparts` writes from the rules."""
    from guardhook.floor.chartparts import CHART_FILE
    from guardhook.floor.chartparts import render as chart_parts

    assert (REPO / CHART_FILE).read_text() == chart_parts(), "run python -m guardhook.floor.chartparts"


def test_export_without_what_names_the_missing_argument(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["export"])
    assert exited.value.code == 2
    # not "required: what", the argument's internal name
    assert capsys.readouterr().err.splitlines()[-1] == (
        "guardhook export: error: the following arguments are required: admission-policies"
    )
