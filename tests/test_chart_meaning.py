"""Chart values that mean what they say (issue 49): one replica surges and gets no PDB, the
ServiceMonitor's port is one the NetworkPolicy opens to Prometheus, a system-*-critical priority
class comes with its ResourceQuota outside kube-system, and the hook Job and the audit CronJob
take the scheduling values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, RELEASE, run_helm, template

Object = dict[str, Any]


def _kind(objects: list[Object], kind: str) -> list[Object]:
    return [o for o in objects if o["kind"] == kind]


def _one(objects: list[Object], kind: str) -> Object:
    (found,) = _kind(objects, kind)
    return found


@pytest.mark.parametrize(
    ("values", "surge", "pdb"),
    [
        ({"replicas": 1}, True, False),  # ha.enabled is the default: one replica still surges
        ({"replicas": 1, "ha": {"enabled": False}}, True, False),
        ({}, False, True),  # the default: two replicas under guardhook's own PDB
        ({"replicas": 3}, False, True),
        ({"replicas": 3, "ha": {"enabled": False}}, True, False),
    ],
    ids=["1+ha", "1", "default", "3+ha", "3"],
)
def test_one_replica_surges_and_gets_no_pdb(tmp_path: Path, values: Object, surge: bool, pdb: bool) -> None:
    objects = template(tmp_path, values)
    rolling = _one(objects, "Deployment")["spec"]["strategy"]["rollingUpdate"]
    expected = {"maxSurge": 1, "maxUnavailable": 0} if surge else {"maxSurge": 0, "maxUnavailable": 1}
    assert rolling == expected
    assert bool(_kind(objects, "PodDisruptionBudget")) == pdb


def _scraped_container_port(objects: list[Object]) -> int:
    """The pod port the ServiceMonitor scrapes: its endpoint's Service port, that port's target."""
    (endpoint,) = _one(objects, "ServiceMonitor")["spec"]["endpoints"]
    service_port = next(p for p in _one(objects, "Service")["spec"]["ports"] if p["name"] == endpoint["port"])
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    target = service_port["targetPort"]
    return next(p["containerPort"] for p in container["ports"] if target in (p["name"], p["containerPort"]))


def test_prometheus_may_reach_the_port_the_service_monitor_scrapes(tmp_path: Path) -> None:
    prometheus = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    values = {
        "monitoring": {"serviceMonitor": {"enabled": True}},
        "components": {
            "networkPolicy": {
                "enabled": True,
                "webhookFrom": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
                "metricsFrom": prometheus,
            }
        },
    }
    objects = template(tmp_path, values)
    port = _scraped_container_port(objects)
    rules = _one(objects, "NetworkPolicy")["spec"]["ingress"]
    reaching = [r for r in rules if port in [p["port"] for p in r["ports"]]]
    assert any("from" not in r or prometheus[0] in r["from"] for r in reaching), rules
    # the control plane keeps its own rule and Prometheus reaches nothing else new
    assert {"ipBlock": {"cidr": "10.0.0.0/24"}} in reaching[0]["from"]


@pytest.mark.parametrize(
    ("values", "namespace", "quota"),
    [
        ({}, "guardhook-system", "system-cluster-critical"),
        ({"priorityClassName": "system-node-critical"}, "guardhook-system", "system-node-critical"),
        ({}, "kube-system", None),
        ({"priorityClassName": ""}, "guardhook-system", None),
        ({"priorityClassName": "high"}, "guardhook-system", None),
        ({"resourceQuota": {"enabled": False}}, "guardhook-system", None),
    ],
    ids=["default", "node-critical", "kube-system", "no-class", "own-class", "off"],
)
def test_a_critical_priority_class_comes_with_its_resource_quota(
    tmp_path: Path, values: Object, namespace: str, quota: str | None
) -> None:
    done = run_helm("template", RELEASE, str(CHART), "--namespace", namespace, values=values, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    quotas = _kind([d for d in yaml.safe_load_all(done.stdout) if d], "ResourceQuota")
    if quota is None:
        assert quotas == []
        return
    (found,) = quotas
    assert found["metadata"]["namespace"] == namespace
    (selector,) = found["spec"]["scopeSelector"]["matchExpressions"]
    assert selector == {"operator": "In", "scopeName": "PriorityClass", "values": [quota]}


def test_the_hook_job_and_the_audit_cronjob_take_the_scheduling_values(tmp_path: Path) -> None:
    node_selector = {"kubernetes.io/os": "linux", "node-role.example/infra": "true"}
    tolerations = [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    values = {
        "nodeSelector": node_selector,
        "tolerations": tolerations,
        "affinity": affinity,
        "uninstallHook": {"enabled": True, "priorityClassName": "ops-high"},
        "components": {"policyReports": {"enabled": True, "priorityClassName": "ops-low"}},
    }
    objects = template(tmp_path, values)
    hook = next(o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] == "guardhook-uninstall")
    hook = hook["spec"]["template"]["spec"]
    cron = _one(objects, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    webhook = _one(objects, "Deployment")["spec"]["template"]["spec"]
    for pod, priority in ((hook, "ops-high"), (cron, "ops-low")):
        assert pod["nodeSelector"] == node_selector
        assert pod["tolerations"] == tolerations
        assert pod["affinity"] == affinity
        assert pod["priorityClassName"] == priority
    assert webhook["affinity"] == affinity  # replaces the HA anti-affinity
    bare = template(tmp_path, {"components": {"policyReports": {"enabled": True}}})
    cron = _one(bare, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "priorityClassName" not in cron and "affinity" not in cron


def test_a_release_in_the_default_namespace_fails_with_one_line(tmp_path: Path) -> None:
    # guardhook leaves its own namespace out of every webhook: in `default` (helm install without
    # -n) the workloads there would be silently unguarded (found trying the chart as a new user).
    done = run_helm("template", RELEASE, str(CHART), "--namespace", "default", values={}, tmp=tmp_path)
    assert done.returncode != 0
    (line,) = [text for text in done.stderr.splitlines() if "release namespace is default" in text]
    assert "-n guardhook-system" in line
    elsewhere = run_helm(
        "template", RELEASE, str(CHART), "--namespace", "models-infra", values={}, tmp=tmp_path
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
