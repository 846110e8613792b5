"""The one configuration schema (issue 49): generated from the configuration model, it agrees with
the loader on every document below, the chart's values.schema.json and docs/configuration.md hold
it as generated, and `guardhook config validate` reports every problem on its own line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.commands.main import main
from guardhook.config import SECTIONS, ConfigError, build_config, config_problems, load_config
from guardhook.config_schema import (
    CHART_SCHEMA,
    DOC,
    PARAM_REFINEMENTS,
    chart_values_schema,
    config_schema,
    documented,
    schema_problems,
)
from guardhook.policies import REGISTRY

from conftest import REPO

DOCS_EXAMPLE = yaml.safe_load((REPO / DOC).read_text().split("```yaml\n")[1].split("```")[0])

VALID: list[Any] = [
    {},
    {"policies": None, "exemptions": None, "clusterView": None},
    {"policies": {"worker-delete": None}},
    DOCS_EXAMPLE,
    {"policies": {"worker-delete": {"actions": []}}},
    {"policies": {"group-spec": {"actions": ["Warn", "Audit"]}}},
    {"policies": {"worker-delete": {"actions": ["Deny", "Audit", "Deny"]}}},  # the loader dedups
    {"policies": {"leader-service": {"actions": ["Mutate", "Warn"]}}},
    {"policies": {"group-eviction": {"maxDisruptedGroups": 0}}},
    {"policies": {"group-capacity": {"kueueManaged": "Deny", "gangScheduled": "Warn"}}},
    {"policies": {"worker-delete": {"drainTaintKeys": ["example.com/drain"], "drainConditions": []}}},
    {"policies": {"group-readiness": {"allLeaderWorkerSets": True, "exemptions": {"users": ["a"]}}}},
    {"clusterView": {"staleAfterSeconds": 0.5}},
    {"exemptions": {"users": ["system:node:*"], "lwsControllers": [], "groups": [], "namespaces": ["x"]}},
    # every policy with every parameter at its default
    {"policies": {p.id: {"actions": list(p.default_actions), **p.params} for p in REGISTRY}},
]

INVALID: list[tuple[Any, str]] = [
    # the cases
    ({"policies": {"group-eviction": {"budgett": 2}}}, "unknown key policies.group-eviction.budgett"),
    ({"policies": {"worker-delete": {"actions": ["Deny", "Warn"]}}}, "Deny and Warn together"),
    ({"policies": {"group-eviction": {"maxDisruptedGroups": "two"}}}, "maxDisruptedGroups must be"),
    ({"policies": {"group-eviction": {"maxDisruptedGroups": -1}}}, "maxDisruptedGroups must be"),
    ({"policies": {"worker-delete": {"actions": ["Mutate"]}}}, "policies.worker-delete.actions"),
    ({"clusterVeiw": {"staleAfterSeconds": 5}}, "unknown key clusterVeiw"),
    # the rest of the model
    ({"polices": {}}, "unknown key polices"),
    ({"policies": {"worker-delet": {}}}, "unknown key policies.worker-delet"),
    ({"policies": {"worker-delete": {"actions": "Deny"}}}, "policies.worker-delete.actions must be"),
    ({"policies": {"worker-delete": {"actions": ["Block"]}}}, "policies.worker-delete.actions"),
    ({"policies": {"group-eviction": {"maxDisruptedGroups": 2**31}}}, "maxDisruptedGroups must be"),
    ({"policies": {"group-eviction": {"maxDisruptedGroups": 2.0}}}, "maxDisruptedGroups must be"),
    ({"policies": {"group-eviction": {"maxDisruptedGroups": True}}}, "maxDisruptedGroups must be"),
    ({"policies": {"group-eviction": {"ledgerTTLSeconds": 0}}}, "ledgerTTLSeconds must be"),
    ({"policies": {"group-readiness": {"allLeaderWorkerSets": "yes"}}}, "allLeaderWorkerSets must be"),
    ({"policies": {"group-capacity": {"kueueManaged": "Maybe"}}}, "kueueManaged"),
    (
        {"policies": {"group-capacity": {"autoscaledPools": [{"name": "a", "maxNodes": 1}]}}},
        "autoscaledPools",
    ),
    (
        {
            "policies": {
                "group-capacity": {"autoscaledPools": [{"name": "a", "nodeSelector": {}, "maxNodes": 1}]}
            }
        },
        "autoscaledPools",
    ),
    ({"policies": {"worker-delete": {"drainTaintKeys": [""]}}}, "drainTaintKeys"),
    ({"policies": {"worker-delete": {"drainConditions": [1]}}}, "drainConditions"),
    ({"policies": {"worker-delete": {"exemptions": {"lwsControllers": []}}}}, "lwsControllers"),
    ({"exemptions": {"users": "system:node:*"}}, "exemptions.users must be"),
    ({"exemptions": {"namespace": []}}, "unknown key exemptions.namespace"),
    ({"clusterView": {"staleAfterSeconds": 0}}, "staleAfterSeconds"),
    ({"clusterView": {"staleAfterSeconds": float("inf")}}, "staleAfterSeconds"),
    ({"policies": []}, "policies must be a mapping"),
    ([], "config must be a mapping"),
]


def loader_refuses(doc: Any) -> bool:
    try:
        build_config(doc)
    except ConfigError:
        return True
    return False


@pytest.mark.parametrize("doc", VALID, ids=range(len(VALID)))
def test_the_schema_and_the_loader_accept_the_same_documents(doc: Any) -> None:
    assert schema_problems(doc) == []
    assert not loader_refuses(doc)


@pytest.mark.parametrize(("doc", "says"), INVALID, ids=[s for _d, s in INVALID])
def test_the_schema_and_the_loader_refuse_the_same_documents(doc: Any, says: str) -> None:
    problems = schema_problems(doc)
    assert problems and says in problems[0], problems
    assert loader_refuses(doc)


def test_the_schema_and_the_loader_know_the_same_sections() -> None:
    assert set(config_schema()["properties"]) == set(SECTIONS)


def test_every_refinement_names_a_parameter_of_its_policy() -> None:
    params = {(p.id, name) for p in REGISTRY for name in p.params}
    assert set(PARAM_REFINEMENTS) <= params


def test_an_action_refused_for_itself_is_refused_once() -> None:
    problems = schema_problems({"policies": {"worker-delete": {"actions": ["Deny", "Mutate"]}}})
    assert problems == ["policies.worker-delete.actions[1]: 'Mutate' is not one of Deny, Warn, Audit"]


def test_mutate_is_offered_only_to_policies_that_can_mutate() -> None:
    policies = config_schema()["properties"]["policies"]["properties"]
    for policy in REGISTRY:
        allowed = policies[policy.id]["properties"]["actions"]["items"]["enum"]
        assert ("Mutate" in allowed) == policy.can_mutate, policy.id


def test_the_charts_values_schema_is_the_generated_one() -> None:
    committed = json.loads((REPO / CHART_SCHEMA).read_text())
    assert committed == chart_values_schema(committed), "run `python -m guardhook.config_schema`"
    assert (
        committed["properties"]["policies"]["properties"]
        == (config_schema()["properties"]["policies"]["properties"])
    )


def test_docs_configuration_holds_the_generated_parameter_table() -> None:
    text = (REPO / DOC).read_text()
    assert text == documented(text), "run `python -m guardhook.config_schema`"
    for policy in REGISTRY:
        for name in policy.params:
            assert f"| `{policy.id}` | `{name}` |" in text


def test_every_problem_is_listed_on_its_own_line() -> None:
    doc = {
        "policies": {"group-eviction": {"budgett": 2, "maxDisruptedGroups": -1}},
        "clusterVeiw": {},
    }
    problems = schema_problems(doc)
    assert problems == [
        "unknown key clusterVeiw (known: clusterView, exemptions, policies)",
        "unknown key policies.group-eviction.budgett (known: actions, deferToMakerGuards, exemptions, "
        "ledgerTTLSeconds, maxDisruptedGroups, minMaxDisruptedGroups, stuckAfterSeconds)",
        "policies.group-eviction.maxDisruptedGroups must be at least 0, got -1",
    ]
    assert config_problems(doc) == problems


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_config_validate_exits_0_for_a_valid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "policies: {group-eviction: {maxDisruptedGroups: 2}}\n")
    assert main(["config", "validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: valid\n"


def test_config_validate_exits_1_with_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path, "policies:\n  worker-delete: {actions: [Deny, Warn]}\n  group-eviction: {budgett: 2}\n"
    )
    assert main(["config", "validate", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{path}: unknown key policies.group-eviction.budgett")
    deny_with_warn = "Deny and Warn together are not allowed (as in ValidatingAdmissionPolicy)"
    assert lines[1] == f"{path}: policies.worker-delete.actions[1]: {deny_with_warn}"


@pytest.mark.parametrize("text", [None, "policies: {worker-delete: [\n", "a: 1\na: 2\n"])
def test_config_validate_exits_2_for_an_unreadable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None
) -> None:
    path = tmp_path / "missing.yaml" if text is None else write(tmp_path, text)
    assert main(["config", "validate", str(path)]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and len(printed.err.strip().splitlines()) == 1
    assert "Traceback" not in printed.err


def test_config_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == config_schema()


def test_load_config_refuses_what_the_schema_refuses(tmp_path: Path) -> None:
    # serve, check --config and every command load through load_config
    with pytest.raises(ConfigError, match="Deny and Warn together"):
        load_config(write(tmp_path, "policies: {worker-delete: {actions: [Deny, Warn]}}\n"))
