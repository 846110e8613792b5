"""`audit` compares the live webhook entries' matchConditions with the ones guardhook ships
(guardhook.cluster.entry_conditions): an entry kept from an older install (an older
`lws-pod-delete-or-relabel`, which did not send bare Workload API gang pods) is a severe gap, an
operator's added condition a mild one, a reformatted expression none."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_manifests import MANIFESTS

from guardhook.cluster.coverage import (
    WEBHOOK_CONDITIONS_ADDED,
    WEBHOOK_CONDITIONS_DIFFER,
    coverage_gaps,
)
from guardhook.cluster.entry_conditions import IDENTITY_CONDITIONS, SHIPPED_CONDITIONS, same_expression
from guardhook.cluster.view.static import view_from_objects
from guardhook.commands.main import main

from conftest import REPO
from kustomize_lite import render, user_overlay

Object = dict[str, Any]
WORKER_DELETE = "worker-delete.guardhook.io"
CONDITION = "lws-pod-delete-or-relabel"
OLD_EXPRESSION = (
    # manifests/base/validating-webhook.yaml before bare gang pods were sent (git show b6e178e:...),
    # folded as YAML `>-` folds it
    "request.operation == 'DELETE' ? (has(oldObject.metadata.labels) && "
    "oldObject.metadata.labels.exists(k, k.startsWith('leaderworkerset.sigs.k8s.io/'))) || "
    "(has(oldObject.metadata.ownerReferences) && oldObject.metadata.ownerReferences.exists(r, "
    "has(r.controller) && r.controller && r.kind in ['StatefulSet', 'ReplicaSet', 'Job', 'PodClique'])) : "
    "has(oldObject.metadata.labels) && oldObject.metadata.labels.exists(k, "
    "k.startsWith('leaderworkerset.sigs.k8s.io/') && !(has(object.metadata.labels) && "
    "k in object.metadata.labels && object.metadata.labels[k] == oldObject.metadata.labels[k]))"
)


def configurations(objects: list[Object]) -> list[Object]:
    return [o for o in objects if o["kind"].endswith("WebhookConfiguration")]


def shipped() -> list[Object]:
    """The base's webhook configurations (rendered, as `kubectl apply -k` sends them)."""
    return configurations(render(MANIFESTS / "base"))


def entry(configs: list[Object], name: str) -> Object:
    (hook,) = [
        h
        for c in configs
        if c["kind"] == "ValidatingWebhookConfiguration"
        for h in c["webhooks"]
        if h["name"] == name
    ]
    return hook


def condition(hook: Object, name: str) -> Object:
    (found,) = [c for c in hook["matchConditions"] if c["name"] == name]
    return found


def condition_gaps(configs: list[Object]) -> list[Any]:
    kinds = (WEBHOOK_CONDITIONS_DIFFER, WEBHOOK_CONDITIONS_ADDED)
    return [g for g in coverage_gaps(view_from_objects(configs)) if g.kind in kinds]


def test_the_old_expression_is_the_one_before_bare_gang_pods_were_sent() -> None:
    done = subprocess.run(
        ["git", "-C", str(REPO), "show", "b6e178e:manifests/base/validating-webhook.yaml"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip("no git history here (an sdist, a shallow clone)")
    import yaml

    old = entry([yaml.safe_load(done.stdout)], WORKER_DELETE)
    assert condition(old, CONDITION)["expression"] == OLD_EXPRESSION
    assert not same_expression(OLD_EXPRESSION, SHIPPED_CONDITIONS[WORKER_DELETE][CONDITION])


def test_the_shipped_conditions_are_the_manifests_every_component_included(tmp_path: Path) -> None:
    components = sorted(p for p in (MANIFESTS / "components").iterdir() if p.is_dir())
    folder = user_overlay(tmp_path / "overlay", [MANIFESTS / "base"], components)
    seen = set()
    for config in configurations(render(folder)):
        for hook in config["webhooks"]:
            name = hook["name"]
            seen.add(name)
            assert name in SHIPPED_CONDITIONS, name
            selecting = {
                c["name"]: c["expression"]
                for c in hook.get("matchConditions", [])
                if c["name"] not in IDENTITY_CONDITIONS
            }
            expected = SHIPPED_CONDITIONS[name]
            assert selecting.keys() == expected.keys(), name
            assert all(same_expression(selecting[k], expected[k]) for k in expected), name
    assert seen == set(SHIPPED_CONDITIONS)


def test_the_shipped_configuration_has_no_condition_gap() -> None:
    assert condition_gaps(shipped()) == []


def test_an_entry_kept_from_before_bare_gang_pods_were_sent_is_a_severe_gap() -> None:
    configs = shipped()
    condition(entry(configs, WORKER_DELETE), CONDITION)["expression"] = OLD_EXPRESSION
    (gap,) = condition_gaps(configs)
    assert (gap.kind, gap.name, gap.object_kind, gap.severe) == (
        WEBHOOK_CONDITIONS_DIFFER,
        f"guardhook/{WORKER_DELETE}",
        "ValidatingWebhookConfiguration",
        True,
    )
    assert f"matchCondition {CONDITION} is not the one guardhook ships" in gap.message
    assert gap.message.endswith(
        "sends a different set of requests than this guardhook version expects; re-apply the "
        "manifests or upgrade the chart"
    )


def test_a_missing_shipped_condition_is_a_severe_gap() -> None:
    configs = shipped()
    hook = entry(configs, "group-resize.guardhook.io")
    hook["matchConditions"] = [c for c in hook["matchConditions"] if c["name"] != "lws-pod"]
    (gap,) = condition_gaps(configs)
    assert (gap.kind, gap.name, gap.severe) == (
        WEBHOOK_CONDITIONS_DIFFER,
        "guardhook/group-resize.guardhook.io",
        True,
    )
    assert "matchCondition lws-pod is missing" in gap.message


def test_a_reformatted_expression_is_no_gap() -> None:
    configs = shipped()
    found = condition(entry(configs, WORKER_DELETE), CONDITION)
    # as a literal block (`|`) keeps it, one token per line, and with the spaces after commas gone
    found["expression"] = "\n".join(found["expression"].replace(", ", ",").split(" ")) + "\n"
    assert found["expression"] != SHIPPED_CONDITIONS[WORKER_DELETE][CONDITION]
    assert condition_gaps(configs) == []


def test_whitespace_inside_a_string_literal_counts() -> None:
    configs = shipped()
    found = condition(entry(configs, WORKER_DELETE), CONDITION)
    found["expression"] = found["expression"].replace("'Job'", "'Job '")
    assert [g.kind for g in condition_gaps(configs)] == [WEBHOOK_CONDITIONS_DIFFER]


def test_a_changed_exempt_identity_is_a_configuration_choice_not_a_gap() -> None:
    # docs/policies.md: another LWS install is named by a kustomize patch of not-lws-controller
    configs = shipped()
    found = condition(entry(configs, WORKER_DELETE), "not-lws-controller")
    found["expression"] = (
        "request.userInfo.username != 'system:serviceaccount:ml-platform:myrel-lws-controller-manager'"
    )
    assert condition_gaps(configs) == []


@pytest.mark.parametrize("added", [["skip-batch"], ["skip-batch", "skip-ci"]])
def test_an_operator_added_condition_is_reported_as_narrowing(added: list[str]) -> None:
    configs = shipped()
    hook = entry(configs, "group-eviction.guardhook.io")
    for name in added:
        hook["matchConditions"].append({"name": name, "expression": f"request.namespace != '{name}'"})
    (gap,) = condition_gaps(configs)
    assert (gap.kind, gap.name, gap.severe) == (
        WEBHOOK_CONDITIONS_ADDED,
        "guardhook/group-eviction.guardhook.io",
        False,
    )
    assert ", ".join(added) in gap.message and "narrow" in gap.message


def test_an_entry_another_guardhook_version_ships_is_not_compared() -> None:
    configs = copy.deepcopy(shipped())
    hook = copy.deepcopy(entry(configs, WORKER_DELETE))
    hook["name"] = "future-entry.guardhook.io"
    hook["matchConditions"].append({"name": "anything", "expression": "true"})
    configs[0]["webhooks"].append(hook)
    assert condition_gaps(configs) == []


def test_audit_names_the_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    configs = shipped()
    condition(entry(configs, WORKER_DELETE), CONDITION)["expression"] = OLD_EXPRESSION
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": configs}))
    assert main(["audit", "--cluster-state", str(state)]) == 0
    out = capsys.readouterr().out
    assert (
        f"  [{WEBHOOK_CONDITIONS_DIFFER}] ValidatingWebhookConfiguration guardhook/{WORKER_DELETE}: " in out
    )
