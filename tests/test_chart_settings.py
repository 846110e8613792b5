"""The settings every anchor chart has (issue 49): hostNetwork and the ports, topology spread,
security contexts, extra arguments, webhook annotations, failurePolicy and timeoutSeconds per
entry, a cert-manager issuer of the user's own, and nodeSelector kubernetes.io/os: linux on every
pod the chart makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, NAMESPACE, RELEASE, is_hook, run_helm, template

Object = dict[str, Any]
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def _one(objects: list[Object], kind: str, name: str | None = None) -> Object:
    (found,) = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    return found


def _pod(objects: list[Object]) -> Object:
    return _one(objects, "Deployment")["spec"]["template"]["spec"]


def _entries(objects: list[Object]) -> dict[str, Object]:
    return {h["name"]: h for o in objects if o["kind"] in WEBHOOK_KINDS for h in o["webhooks"]}


def test_host_network_and_the_ports_reach_every_place_that_names_them(tmp_path: Path) -> None:
    values = {
        "hostNetwork": True,
        "ports": {"webhook": 10250, "metrics": 10251, "health": 10252},
        "components": {"networkPolicy": {"enabled": True}},
    }
    objects = template(tmp_path, values)
    pod = _pod(objects)
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    (container,) = pod["containers"]
    assert {"--port=10250", "--metrics-port=10251", "--health-port=10252"} <= set(container["args"])
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "https": 10250,
        "metrics": 10251,
        "healthz": 10252,
    }
    # the kubelet probes the health port (plain HTTP), never the webhook port
    for probe in (container["readinessProbe"], container["livenessProbe"]):
        assert probe["httpGet"]["port"] == "healthz" and "scheme" not in probe["httpGet"]
    (service_port,) = _one(objects, "Service")["spec"]["ports"]
    assert service_port["targetPort"] == "https"
    opened = [p["port"] for rule in _one(objects, "NetworkPolicy")["spec"]["ingress"] for p in rule["ports"]]
    assert opened == [10250, 10251]
    assert "hostNetwork" not in _pod(template(tmp_path))


def test_extra_args_security_contexts_and_spread_are_values(tmp_path: Path) -> None:
    spread = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]
    values = {
        "extraArgs": ["--enforcement=audit"],
        "podSecurityContext": {"runAsUser": 2000, "fsGroup": None},
        "securityContext": {"readOnlyRootFilesystem": False},
        "topologySpreadConstraints": spread,
    }
    pod = _pod(template(tmp_path, values))
    (container,) = pod["containers"]
    assert container["args"][-1] == "--enforcement=audit"
    assert container["args"][1] == "serve"
    # Helm merges a map value into the default: a key given wins, a key set to null goes
    assert pod["securityContext"]["runAsUser"] == 2000 and "fsGroup" not in pod["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["topologySpreadConstraints"] == spread


def test_webhook_annotations_and_per_entry_failure_policy_and_timeout(tmp_path: Path) -> None:
    values = {
        "webhook": {
            "annotations": {"example.com/owner": "platform"},
            "entries": {
                "group-eviction": {"failurePolicy": "Ignore", "timeoutSeconds": 15},
                "leader-service": {"timeoutSeconds": 8},
            },
        }
    }
    objects = template(tmp_path, {**values, "certs": {"source": "cert-manager"}})
    for kind in WEBHOOK_KINDS:
        annotations = _one(objects, kind)["metadata"]["annotations"]
        assert annotations["example.com/owner"] == "platform"
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/guardhook-serving"
    entries = _entries(objects)
    defaults = _entries(template(tmp_path))
    eviction = entries["group-eviction.guardhook.io"]
    assert (eviction["failurePolicy"], eviction["timeoutSeconds"]) == ("Ignore", 15)
    leader = entries["leader-service.guardhook.io"]
    assert (leader["failurePolicy"], leader["timeoutSeconds"]) == ("Ignore", 8)
    changed = {n for n in entries if entries[n] != defaults[n]}
    assert changed == {"group-eviction.guardhook.io", "leader-service.guardhook.io"}
    assert defaults["group-eviction.guardhook.io"]["failurePolicy"] == "Fail"


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"webhook": {"entries": {"group-evictions": {"timeoutSeconds": 5}}}}, "group-evictions"),
        ({"webhook": {"entries": {"group-eviction": {"timeoutSeconds": 31}}}}, "timeoutSeconds"),
        ({"webhook": {"entries": {"group-eviction": {"failurePolicy": "Open"}}}}, "failurePolicy"),
        ({"ports": {"webhook": 70000, "metrics": 8080}}, "webhook"),
        ({"certs": {"certManager": {"issuerRef": {"kind": "ClusterIssuer"}}}}, "name"),
        ({"extraArgs": "--enforcement=audit"}, "extraArgs"),
    ],
    ids=["entry-name", "timeout", "failure-policy", "port", "issuer-name", "extra-args"],
)
def test_the_schema_refuses_mistyped_settings(tmp_path: Path, values: Object, named: str) -> None:
    done = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, values=values, tmp=tmp_path)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert named in done.stderr, done.stderr


def test_an_issuer_of_ones_own_signs_the_serving_certificate(tmp_path: Path) -> None:
    issuer = {"kind": "ClusterIssuer", "name": "corp-ca", "group": "cert-manager.io"}
    objects = template(tmp_path, {"certs": {"source": "cert-manager", "certManager": {"issuerRef": issuer}}})
    assert not [o for o in objects if o["kind"] == "Issuer"]
    (certificate,) = [o for o in objects if o["kind"] == "Certificate"]
    assert certificate["metadata"]["name"] == "guardhook-serving"
    assert certificate["spec"]["issuerRef"] == issuer
    own = template(tmp_path, {"certs": {"source": "cert-manager"}})
    assert {o["metadata"]["name"] for o in own if o["kind"] == "Issuer"} == {
        "guardhook-selfsigned",
        "guardhook-ca",
    }


def test_every_pod_of_the_chart_runs_on_linux_nodes_by_default(tmp_path: Path) -> None:
    objects = template(tmp_path, {"components": {"policyReports": {"enabled": True}}})
    hook = next(o for o in objects if is_hook(o) and o["kind"] == "Job")["spec"]["template"]["spec"]
    cron = _one(objects, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for pod in (_pod(objects), hook, cron):
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_chart_metadata_as_the_anchor_charts_have_it() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["icon"].endswith("charts/guardhook/icon.svg") and (CHART / "icon.svg").is_file()
    assert chart["maintainers"] and all(m["name"] for m in chart["maintainers"])
    annotations = chart["annotations"]
    assert annotations["artifacthub.io/category"] == "security"
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    (image,) = yaml.safe_load(annotations["artifacthub.io/images"])
    assert image["image"] == f"ghcr.io/guardhook/guardhook:{chart['appVersion']}"
    assert all(
        link["url"].startswith("https://") for link in yaml.safe_load(annotations["artifacthub.io/links"])
    )


def test_notes_say_what_was_installed_and_how_to_check_it(tmp_path: Path) -> None:
    values = {
        "ha": {"enabled": False},
        "certs": {"source": "self-signed"},
        "components": {"pdbSync": {"enabled": True}},
    }
    done = run_helm(
        "install", "--dry-run=client", RELEASE, str(CHART), "--namespace", "ops", values=values, tmp=tmp_path
    )
    assert done.returncode == 0, done.stderr
    notes = done.stdout.split("NOTES:", 1)[1]
    assert "installed in namespace ops" in notes
    assert "1 webhook pod(s)" in notes and "certificates: self-signed" in notes
    assert "component pdb-sync" in notes and "component group-readiness" not in notes
    assert f"helm test {RELEASE} -n ops" in notes
    assert "kubectl -n ops rollout status deployment/guardhook" in notes
