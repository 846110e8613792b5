"""charts/guardhook's values (issue 41): `helm lint --strict` passes for every combination of the
opt-in values, values.schema.json refuses mistyped values naming the key, and `helm package`
makes the release artifact that renders as the chart folder does."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, NAMESPACE, RELEASE, merged, run_helm, template

Object = dict[str, Any]

SWITCHES: dict[str, Object] = {
    "ha": {"ha": {"enabled": True}},
    "self-signed": {"certs": {"source": "self-signed"}},
    "pdb-sync": {"components": {"pdbSync": {"enabled": True}}},
    "leader-service-sync": {"components": {"leaderServiceSync": {"enabled": True}}},
    "group-readiness": {"components": {"groupReadiness": {"enabled": True}}},
    "network-policy": {"components": {"networkPolicy": {"enabled": True}}},
    "policy-reports": {"components": {"policyReports": {"enabled": True}}},
    "admission-policy-floor": {"components": {"admissionPolicyFloor": {"enabled": True}}},
    "leader-service-deny": {"policies": {"leader-service": {"actions": ["Deny"]}}},
    "monitoring": {
        "monitoring": {
            "serviceMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True},
            "dashboard": {"enabled": True},
        }
    },
    "namespace": {"namespace": {"create": True}},
    "no-uninstall-hook": {"uninstallHook": {"enabled": False}},
}
"""Each boolean choice of the chart, as the values that turn it on (ha: off in the base)."""

BASE: Object = {"ha": {"enabled": False}, "components": {"leaderServiceSync": {"enabled": False}}}
ALL = list(SWITCHES)


def values_of(names: tuple[str, ...] | list[str]) -> Object:
    return merged(BASE, *(SWITCHES[n] for n in names))


@pytest.mark.parametrize("names", [(), tuple(ALL), *((n,) for n in ALL)], ids=lambda n: "+".join(n) or "base")
def test_helm_lint_strict_passes(tmp_path: Path, names: tuple[str, ...]) -> None:
    done = run_helm(
        "lint", "--strict", str(CHART), "--namespace", NAMESPACE, values=values_of(names), tmp=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


PAIRS = [(), tuple(ALL), *itertools.combinations(ALL, 1), *itertools.combinations(ALL, 2)]
"""No switch, all of them, each alone and every pair. Every subset of the kustomize components'
switches is rendered (and compared with kustomize) by tests/test_chart.py."""


_RENDERED: dict[tuple[str, ...], list[Object]] = {}


def _rendered(tmp_path: Path, names: tuple[str, ...]) -> list[Object]:
    """`helm template` with the switches `names` on, certificate bytes blanked; each set rendered once."""
    if names not in _RENDERED:
        _RENDERED[names] = _without_certs(template(tmp_path, values_of(names)))
    return _RENDERED[names]


@pytest.mark.parametrize("names", PAIRS, ids=lambda n: "+".join(n) or "base")
def test_helm_template_renders_every_pair_of_switches(tmp_path: Path, names: tuple[str, ...]) -> None:
    """Renders, and each switch changes what is rendered."""
    objects = _rendered(tmp_path, names)
    assert {o["kind"] for o in objects} >= {"Deployment", "Service", "ValidatingWebhookConfiguration"}
    for name in names:
        without = _rendered(tmp_path, tuple(n for n in names if n != name))
        assert objects != without, f"{name} changed nothing"


BAD_VALUES = [
    ({"replicas": "two"}, "replicas"),
    ({"replicas": 0}, "replicas"),
    ({"ha": {"enable": True}}, "enable"),
    ({"certs": {"source": "vault"}}, "source"),
    ({"certs": {"certManager": {"duration": "90 days"}}}, "duration"),
    ({"components": {"pdbSync": {"enabled": "yes"}}}, "enabled"),
    ({"components": {"pdbsync": {"enabled": True}}}, "pdbsync"),
    ({"policies": {"worker-delet": {"actions": ["Deny"]}}}, "worker-delet"),
    ({"policies": {"worker-delete": {"actions": ["Block"]}}}, "actions"),
    ({"policies": {"worker-delete": {"actions": "Deny"}}}, "actions"),
    ({"exemptions": {"namespace": ["ops"]}}, "namespace"),
    ({"config": {"policies": {}}}, "config"),
    ({"image": {"digest": "latest"}}, "digest"),
    ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    ({"resources": {"requests": {"memory": "lots"}}}, "memory"),
    ({"monitoring": {"serviceMonitor": {"enabled": True, "interval": "often"}}}, "interval"),
    ({"components": {"policyReports": {"schedule": "every hour"}}}, "schedule"),  # was taken
    ({"replica": 2}, "replica"),
    # a flag `guardhook serve` does not take would crash-loop the pod: refused at render
    ({"extraArgs": ["--enforcment=audit"]}, "extraArgs"),
    ({"extraArgs": ["--version"]}, "extraArgs"),
    ({"extraArgs": ["-x"]}, "extraArgs"),
    # issue 49: guardhook's own configuration, checked by the generated configuration schema
    ({"policies": {"group-eviction": {"budgett": 2}}}, "budgett"),
    ({"policies": {"worker-delete": {"actions": ["Deny", "Warn"]}}}, "actions"),
    ({"policies": {"group-eviction": {"maxDisruptedGroups": "two"}}}, "maxDisruptedGroups"),
    ({"policies": {"group-eviction": {"maxDisruptedGroups": -1}}}, "maxDisruptedGroups"),
    ({"policies": {"worker-delete": {"actions": ["Mutate"]}}}, "actions"),
    ({"config": {"clusterVeiw": {"staleAfterSeconds": 5}}}, "clusterVeiw"),
    ({"config": {"clusterView": {"staleAfterSeconds": 0}}}, "staleAfterSeconds"),
    ({"policies": {"group-capacity": {"kueueManaged": "Maybe"}}}, "kueueManaged"),
]


@pytest.mark.parametrize(("values", "named"), BAD_VALUES, ids=[str(v) for v, _n in BAD_VALUES])
def test_schema_refuses_mistyped_values_naming_the_key(tmp_path: Path, values: Object, named: str) -> None:
    done = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, values=values, tmp=tmp_path)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert named in done.stderr, done.stderr
    assert "panic" not in done.stderr and "goroutine" not in done.stderr


@pytest.mark.parametrize(("values", "named"), BAD_VALUES[-8:], ids=[str(v) for v, _n in BAD_VALUES[-8:]])
def test_helm_lint_strict_refuses_a_mistyped_configuration(
    tmp_path: Path, values: Object, named: str
) -> None:
    """What guardhook's loader refuses fails the lint too, before a pod crash-loops on it."""
    done = run_helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, values=values, tmp=tmp_path)
    assert done.returncode != 0
    assert named in done.stdout + done.stderr


@pytest.mark.parametrize("schedule", ["@hourly", "@daily", "@every 90m", "*/30 * * * *", "0 3 * * 1-5"])
def test_a_cronjob_schedule_the_api_server_takes_renders(tmp_path: Path, schedule: str) -> None:
    # "@hourly" was refused (minLength 9) while "every hour" passed to the API server to refuse
    values = {"components": {"policyReports": {"enabled": True, "schedule": schedule}}}
    done = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, values=values, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    [cron] = [o for o in yaml.safe_load_all(done.stdout) if o and o["kind"] == "CronJob"]
    assert cron["spec"]["schedule"] == schedule


def test_helm_package_makes_the_release_artifact(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    done = run_helm("package", str(CHART), "--destination", str(out), tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    archive = out / f"guardhook-{chart['version']}.tgz"
    assert archive.is_file()
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {
        "guardhook/Chart.yaml",
        "guardhook/values.yaml",
        "guardhook/values.schema.json",
        "guardhook/files/monitoring/prometheus-rule.yaml",
        "guardhook/README.md",
    } <= names
    everything = values_of(ALL)
    assert _without_certs(template(tmp_path, everything, chart=archive)) == _without_certs(
        template(tmp_path, everything)
    )


def _without_certs(objects: list[Object]) -> list[Object]:
    """Objects with the generated certificate bytes blanked (each render makes new ones)."""
    out = []
    for obj in objects:
        if obj["kind"] == "Secret":
            obj = {
                **obj,
                "data": sorted(obj.get("data") or {}),
                "metadata": {**obj["metadata"], "annotations": {}},
            }
        for hook in obj.get("webhooks") or []:
            hook["clientConfig"].pop("caBundle", None)
        out.append(obj)
    return out


CROSS_VALUE_RULES = [
    (
        {"policies": {"group-readiness": {"allLeaderWorkerSets": True}}},
        "guardhook",
        "policies.group-readiness is set but components.groupReadiness.enabled is false",
    ),
    (
        {"certs": {"selfManaged": {"validity": "1h30m", "renewBefore": "90m"}}},
        "guardhook-system",
        "certs.selfManaged.renewBefore (90m) must be less than certs.selfManaged.validity (1h30m)",
    ),
    (
        {"ports": {"webhook": 8080}},
        "guardhook-system",
        "ports.webhook and ports.metrics must differ (both 8080)",
    ),
    (
        {"ports": {"health": 8443}},
        "guardhook-system",
        "ports.webhook and ports.health must differ (both 8443): guardhook serve refuses to start with "
        "--port and --health-port the same",
    ),
    (
        {"ports": {"health": 8080}},
        "guardhook-system",
        "ports.metrics and ports.health must differ (both 8080)",
    ),
    (
        {"components": {"admissionPolicyFloor": {"enabled": True}}, "exemptions": {"users": ["ci-?"]}},
        "guardhook-system",
        'the exempt user pattern "ci-?" is a glob the chart cannot write as CEL',
    ),
]


@pytest.mark.parametrize(
    ("values", "namespace", "says"), CROSS_VALUE_RULES, ids=[s for *_v, s in CROSS_VALUE_RULES]
)
def test_a_rule_across_values_fails_the_render_with_one_line(
    tmp_path: Path, values: Object, namespace: str, says: str
) -> None:
    """What values.schema.json cannot say (a rule across values) fails at render, not in the cluster."""
    done = run_helm("template", RELEASE, str(CHART), "--namespace", namespace, values=values, tmp=tmp_path)
    assert done.returncode != 0
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert says in error, done.stderr
    assert any(
        said in error
        for said in ("guardhook export admission-policies", "group-readiness", "certs.", "ports.")
    )


def _serve_flags() -> set[str]:
    """Every option string of `guardhook serve` (its own and the global flags after the command)."""
    from guardhook.commands.main import build_parser

    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {option for action in commands.choices["serve"]._actions for option in action.option_strings}


def test_extra_args_schema_names_every_flag_of_serve() -> None:
    """values.schema.json's extraArgs pattern lists exactly serve's flags but --help and --version
    (which would print and exit, restarting the pod): a flag added to serve must be added there."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    choices = schema["properties"]["extraArgs"]["items"]["anyOf"]
    [flag_pattern] = [choice["pattern"] for choice in choices if "pattern" in choice]
    parts = re.fullmatch(r"\^\((.*)\|--\((.*)\)\(=\.\*\)\?\)\$", flag_pattern)
    assert parts is not None, flag_pattern
    shorts, longs = parts.groups()
    listed = {*shorts.split("|"), *(f"--{name}" for name in longs.split("|"))}
    assert listed == _serve_flags() - {"--help", "-h", "--version"}


@pytest.mark.parametrize(
    "extra_args",
    [["--enforcement=audit"], ["--enforcement", "audit"], ["--log-level=DEBUG", "-v"], ["--threads", "16"]],
    ids=str,
)
def test_extra_args_of_serve_render_in_order(tmp_path: Path, extra_args: list[str]) -> None:
    objects = template(tmp_path, {"extraArgs": extra_args})
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "guardhook"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-len(extra_args) :] == extra_args
