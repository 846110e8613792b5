"""`--config` validation (design.md §4): unknown keys are errors naming the key, Deny with Warn is an
error, parameters keep their types, exemptions match with `*` wildcards, `--enforcement audit`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from guardhook.config import (
    ConfigError,
    Exemptions,
    apply_enforcement,
    build_config,
    default_config,
    load_config,
)
from guardhook.policies import REGISTRY


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("polices: {}\n", "polices"),
        ("policies: {worker-delet: {actions: [Deny]}}\n", "policies.worker-delet"),
        ("policies: {worker-delete: {action: [Deny]}}\n", "policies.worker-delete.action"),
        ("policies: {group-spec: {weightLoadSecs: 10}}\n", "policies.group-spec.weightLoadSecs"),
        ("exemptions: {user: []}\n", "exemptions.user"),
        ("clusterView: {staleAfter: 5}\n", "clusterView.staleAfter"),
    ],
)
def test_unknown_key_fails_naming_it(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown key {named} "):
        load_config(write(tmp_path, text))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("policies: {worker-delete: {actions: [Deny, Warn]}}\n", "Deny and Warn together"),
        ("policies: {worker-delete: {actions: [Block]}}\n", "unknown action 'Block'"),
        # the actions offered are the policy's own: Mutate only where it can mutate
        (
            "policies: {group-spec: {actions: [Warm]}}\n",
            r"unknown action 'Warm' \(one of Deny, Warn, Audit\)$",
        ),
        (
            "policies: {leader-service: {actions: [Warm]}}\n",
            r"unknown action 'Warm' \(one of Deny, Warn, Audit, Mutate\)$",
        ),
        ("policies: {worker-delete: {actions: Deny}}\n", "must be a list"),
        ("policies: {worker-delete: {actions: [Mutate]}}\n", "cannot Mutate"),
        (
            "policies: {group-spec: {weightLoadSeconds: ten}}\n",
            "policies.group-spec.weightLoadSeconds must be",
        ),
        ("policies: {group-spec: {weightLoadSeconds: -1}}\n", "weightLoadSeconds must be"),
        ("exemptions: {users: system:node:*}\n", "exemptions.users must be a list"),
        ("clusterView: {staleAfterSeconds: 0}\n", "staleAfterSeconds must be a positive"),
        ("- a list\n", "config must be a mapping"),
        ("policies: [worker-delete]\n", "policies must be a mapping"),
        ("policies: []\n", r"^policies must be a mapping \(got an empty list\)$"),
        ("policies: false\n", r"^policies must be a mapping \(got false\)$"),
        ("policies: {}\nexemptions: []\n", r"^exemptions must be a mapping \(got an empty list\)$"),
        ("false\n", r"^config must be a mapping \(got false\)$"),
        ("[]\n", r"^config must be a mapping \(got an empty list\)$"),
    ],
)
def test_invalid_values_fail_with_a_clear_error(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_config(write(tmp_path, text))


def test_unreadable_file_and_bad_yaml_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(write(tmp_path, "policies: {worker-delete: [\n"))


def test_bad_yaml_is_reported_on_one_line(tmp_path: Path) -> None:
    # PyYAML's own text spans lines and quotes the source; a command's error is one stderr line.
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, "policies: [\n"))
    assert "\n" not in str(raised.value)
    assert str(raised.value).endswith(
        "not valid YAML: while parsing a flow node; "
        "expected the node content, but found '<stream end>' (line 2, column 1)"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("policies: {group-eviction: {maxDisruptedGroups: -1}}\n", "must be a non-negative integer, got -1"),
        ("policies: {group-eviction: {ledgerTTLSeconds: x}}\n", "must be a non-negative integer, got 'x'"),
        ("policies: {group-readiness: {allLeaderWorkerSets: 'yes'}}\n", "must be true or false, got 'yes'"),
    ],
)
def test_a_mistyped_parameter_says_what_it_must_be(tmp_path: Path, text: str, says: str) -> None:
    # It used to say "must be a int (non-negative)" for every type, a bool included.
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_config(write(tmp_path, text))


def test_defaults_cover_every_registered_policy() -> None:
    config = load_config(None)
    assert set(config.policies) == {p.id for p in REGISTRY}
    for policy in REGISTRY:
        assert config.settings(policy.id).actions == policy.default_actions
        assert dict(config.settings(policy.id).params) == dict(policy.params)


def test_actions_and_parameters_are_read(tmp_path: Path) -> None:
    text = (
        "policies:\n"
        "  worker-delete: {actions: [Warn, Audit]}\n"
        "  group-spec: {actions: [], weightLoadSeconds: 900}\n"
        "clusterView: {staleAfterSeconds: 15}\n"
    )
    config = load_config(write(tmp_path, text))
    assert config.settings("worker-delete").actions == ("Warn", "Audit")
    assert config.settings("group-spec").actions == ()
    assert config.settings("group-spec").params["weightLoadSeconds"] == 900
    assert config.stale_after_seconds == 15.0


def test_enforcement_audit_turns_every_deny_into_audit() -> None:
    raw = {"policies": {"worker-delete": {"actions": ["Deny", "Audit"]}, "group-spec": {"actions": ["Warn"]}}}
    config = apply_enforcement(build_config(raw), "audit")
    assert config.settings("worker-delete").actions == ("Audit",)
    assert config.settings("group-spec").actions == ("Warn",)
    assert apply_enforcement(build_config(raw), "deny").settings("worker-delete").actions == ("Deny", "Audit")
    with pytest.raises(ConfigError, match="--enforcement"):
        apply_enforcement(build_config(raw), "warn")


def test_exemptions_match_users_with_wildcards_groups_and_namespaces() -> None:
    exemptions = build_config(
        {
            "exemptions": {
                "users": ["system:serviceaccount:*:*lws-controller-manager"],
                "groups": ["ops"],
                "namespaces": ["kube-system"],
            }
        }
    ).exemptions
    assert exemptions.exempts({"username": "system:serviceaccount:lws:my-lws-controller-manager"}, "serve")
    assert not exemptions.exempts({"username": "system:serviceaccount:lws:other"}, "serve")
    assert exemptions.exempts({"username": "alice", "groups": ["ops"]}, "serve")
    assert exemptions.exempts({"username": "alice"}, "kube-system")
    assert not exemptions.exempts({"username": "alice", "groups": ["dev"]}, "serve")
    # The defaults exempt kubelets (`system:node:*` in the `system:nodes` group) and the garbage
    # collector; a user merely named like a node is judged (issue 48).
    assert Exemptions().exempts({"username": "system:node:gpu-node-03", "groups": ["system:nodes"]}, "serve")
    assert not Exemptions().exempts(
        {"username": "system:node:evil", "groups": ["system:authenticated"]}, "serve"
    )
    assert not Exemptions().exempts({"username": "system:node:evil"}, "serve")
    assert Exemptions().exempts(
        {"username": "system:serviceaccount:kube-system:generic-garbage-collector"}, "x"
    )


def test_the_group_budget_is_set_once_for_evictions_drains_and_taints() -> None:
    config = build_config({"policies": {"group-eviction": {"maxDisruptedGroups": 3, "ledgerTTLSeconds": 60}}})
    assert config.settings("worker-delete").params["maxDisruptedGroups"] == 3
    assert config.settings("worker-delete").params["ledgerTTLSeconds"] == 60
    assert config.settings("group-taint").params["maxDisruptedGroups"] == 3
    # Set for the policy itself, its own value wins.
    own = build_config(
        {
            "policies": {
                "group-eviction": {"maxDisruptedGroups": 3},
                "group-taint": {"maxDisruptedGroups": 2},
            }
        }
    )
    assert own.settings("group-taint").params["maxDisruptedGroups"] == 2
    assert own.settings("worker-delete").params["maxDisruptedGroups"] == 3
    assert build_config({}).settings("worker-delete").params["maxDisruptedGroups"] == 1


@pytest.mark.parametrize("text", ["", "policies:\n", "policies: {}\n", "# only a comment\n"])
def test_an_empty_file_or_key_means_the_defaults(tmp_path: Path, text: str) -> None:
    assert load_config(write(tmp_path, text)) == default_config()
