"""charts/guardhook renders what manifests/ renders (issue 41): for every combination of the
kustomize components (enumerated from manifests/components, so a component without chart support
fails here), `helm template` with the matching values and kustomize give the same objects: names,
kinds, webhook entries with their rules, failure policies, matchConditions and caBundles, RBAC
rules, the Deployment, the configuration. Labels may only be added (Helm's standard ones).
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from helm_chart import CHART, NAMESPACE, is_hook, merged, template
from test_manifests import MANIFESTS

from guardhook.commands.main import main
from guardhook.config import load_config

from kustomize_lite import render, user_overlay

Object = dict[str, Any]

CERT_MANAGER = "cert-manager"
COMPONENT_VALUES: dict[str, Object] = {
    "ha": {"ha": {"enabled": True}},
    "group-readiness": {"components": {"groupReadiness": {"enabled": True}}},
    "leader-service-deny": {"policies": {"leader-service": {"actions": ["Deny"]}}},
    "leader-service-sync": {"components": {"leaderServiceSync": {"enabled": True}}},
    "network-policy": {"components": {"networkPolicy": {"enabled": True}}},
    "pdb-sync": {"components": {"pdbSync": {"enabled": True}}},
    "policy-reports": {"components": {"policyReports": {"enabled": True}}},
    "admission-policy-floor": {"components": {"admissionPolicyFloor": {"enabled": True}}},
    "client-auth": {"components": {"clientAuth": {"enabled": True}}},
}
"""The chart values that do what each kustomize component does. A component added to
manifests/components needs its values here and its templates in the chart (see
charts/guardhook/README.md: Adding a component)."""

CERT_VALUES = {
    CERT_MANAGER: {"certs": {"source": "cert-manager"}},
    "self-managed": {"certs": {"source": "self-signed"}},
    "managed-certs": {"certs": {"source": "self-managed"}},
}
"""The certificate source: the cert-manager component or the self-managed overlay's certificates."""

OFF: Object = {
    "ha": {"enabled": False},
    "components": {"leaderServiceSync": {"enabled": False}},
    "namespace": {"create": True},
}
"""Every opt-in off (the kustomize base), the Namespace rendered as the base renders it."""

OPT_IN = sorted(p.name for p in (MANIFESTS / "components").iterdir() if p.name != CERT_MANAGER)
COMBINATIONS = [list(c) for n in range(len(OPT_IN) + 1) for c in itertools.combinations(OPT_IN, n)]
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
}
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def chart_values(components: list[str], certs: str = CERT_MANAGER) -> Object:
    """The values that render what kustomize renders with `components` and certificate source `certs`."""
    missing = [c for c in components if c not in COMPONENT_VALUES]
    assert not missing, (
        f"manifests/components/{missing[0]} has no chart support: add its values to COMPONENT_VALUES "
        "in tests/test_chart.py and its templates to charts/guardhook (charts/guardhook/README.md)"
    )
    return merged(OFF, CERT_VALUES[certs], *(COMPONENT_VALUES[c] for c in components))


def key(obj: Object) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def comparable(kustomized: Object, charted: Object) -> tuple[Object, Object]:
    """Both objects with what may differ made equal, after checking it: the chart may add Helm's
    labels only; the configuration file compares as YAML; certificate bytes compare by presence."""
    k, c = copy.deepcopy(kustomized), copy.deepcopy(charted)
    k_labels = k["metadata"].get("labels") or {}
    c_labels = c["metadata"].get("labels") or {}
    extra = set(c_labels) - set(k_labels) - HELM_LABELS - {"app.kubernetes.io/name"}
    assert not extra, f"{key(c)}: the chart adds labels {sorted(extra)}"
    assert {n: c_labels.get(n) for n in k_labels} == k_labels, f"{key(c)}: labels differ"
    for obj in (k, c):
        obj["metadata"].pop("labels", None)
    if k["kind"] == "ConfigMap" and k["metadata"]["name"] == "guardhook-config":
        for obj in (k, c):
            obj["data"]["config.yaml"] = yaml.safe_load(obj["data"]["config.yaml"]) or {}
    if k["kind"] == "Secret":
        c["metadata"].pop("annotations", None)  # guardhook.io/not-after: the chart's renewal clock
        for obj in (k, c):
            obj["data"] = sorted(obj.get("data") or {})
    if k["kind"] in WEBHOOK_KINDS:
        for obj in (k, c):
            obj["webhooks"] = sorted(obj.get("webhooks") or [], key=lambda h: h["name"])
            for hook in obj["webhooks"]:
                if "caBundle" in hook["clientConfig"]:
                    hook["clientConfig"]["caBundle"] = "<set>"
    return k, c


def compare(kustomized: list[Object], charted: list[Object]) -> None:
    """The same objects, field by field (see `comparable`)."""
    installed = [obj for obj in charted if not is_hook(obj)]
    assert sorted(map(key, installed)) == sorted(map(key, kustomized))
    by_key = {key(obj): obj for obj in installed}
    for obj in kustomized:
        k, c = comparable(obj, by_key[key(obj)])
        assert c == k, f"{key(obj)} differs"


def kustomize_cert_manager(tmp_path: Path, components: list[str]) -> list[Object]:
    folder = user_overlay(
        tmp_path / "overlay",
        [MANIFESTS / "base"],
        [MANIFESTS / "components" / c for c in [CERT_MANAGER, *components]],
    )
    return render(folder)


def test_every_kustomize_component_has_chart_values() -> None:
    """A component added to manifests/components without chart support fails here by name."""
    on_disk = {p.name for p in (MANIFESTS / "components").iterdir() if (p / "kustomization.yaml").is_file()}
    assert on_disk - {CERT_MANAGER} == set(OPT_IN)
    missing = sorted(set(OPT_IN) - set(COMPONENT_VALUES))
    assert not missing, (
        f"manifests/components/{', '.join(missing)}: no chart support; add values to COMPONENT_VALUES "
        "in tests/test_chart.py and templates to charts/guardhook (charts/guardhook/README.md)"
    )
    assert not set(COMPONENT_VALUES) - set(OPT_IN), "COMPONENT_VALUES names a component that is gone"


@pytest.mark.parametrize("components", COMBINATIONS, ids=lambda c: "+".join(c) or "base")
def test_chart_renders_what_kustomize_renders_with_cert_manager(
    tmp_path: Path, components: list[str]
) -> None:
    kustomized = kustomize_cert_manager(tmp_path, components)
    compare(kustomized, template(tmp_path, chart_values(components)))


def test_the_defaults_render_the_default_install(tmp_path: Path) -> None:
    """No values but the certificate source: what `kubectl kustomize manifests/` renders
    (cert-manager with HA), but the Namespace, which `helm install --create-namespace` makes. The
    chart's own default certificates are self-managed (tests/test_chart_self_managed.py)."""
    kustomized = [obj for obj in render(MANIFESTS) if obj["kind"] != "Namespace"]
    compare(kustomized, template(tmp_path, CERT_VALUES[CERT_MANAGER]))


def _self_managed(tmp_path: Path, components: list[str]) -> list[Object]:
    """The self-managed overlay listing `components` (no `ha` unless listed), certificates made."""
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    path = manifests / "overlays" / "self-managed" / "kustomization.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["components"] = [f"../../components/{c}" for c in components]
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main(["certs", "--patch-manifests", str(manifests)]) == 0
    return render(manifests / "overlays" / "self-managed")


SELF_MANAGED_CASES = [[], OPT_IN, *([c] for c in OPT_IN)]


@pytest.mark.parametrize("components", SELF_MANAGED_CASES, ids=lambda c: "+".join(c) or "base")
def test_self_signed_chart_renders_what_the_self_managed_overlay_renders(
    tmp_path: Path, components: list[str]
) -> None:
    compare(_self_managed(tmp_path, components), template(tmp_path, chart_values(components, "self-managed")))


def _one(objects: list[Object], kind: str, name: str) -> Object:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def test_self_signed_certificates_verify_and_every_entry_trusts_them(tmp_path: Path) -> None:
    objects = template(tmp_path, chart_values(OPT_IN, "self-managed"))
    secret = _one(objects, "Secret", "guardhook-tls")
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    serving = x509.load_pem_x509_certificate(data["tls.crt"])
    cas = x509.load_pem_x509_certificates(data["ca.crt"])
    assert len(cas) == 1  # a first install: no previous CA
    serving.verify_directly_issued_by(cas[0])
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {
        f"guardhook.{NAMESPACE}.svc",
        f"guardhook.{NAMESPACE}.svc.cluster.local",
    }
    usages = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages
    not_after = int(secret["metadata"]["annotations"]["guardhook.io/not-after"])
    assert abs(not_after - serving.not_valid_after_utc.timestamp()) < 120
    entries = [h for o in objects if o["kind"] in WEBHOOK_KINDS for h in o.get("webhooks") or []]
    assert len(entries) >= 11
    assert {h["clientConfig"]["caBundle"] for h in entries} == {secret["data"]["ca.crt"]}
    assert all("annotations" not in o["metadata"] for o in objects if o["kind"] in WEBHOOK_KINDS)


def test_release_namespace_and_exemptions_reach_every_entry_and_the_config(tmp_path: Path) -> None:
    values = {
        "exemptions": {"namespaces": ["batch-system"], "users": ["system:serviceaccount:ops:drainer"]},
        "policies": {
            "worker-delete": {"actions": ["Warn"]},
            "group-spec": {"actions": ["Audit"], "weightLoadSeconds": 300},
        },
        "config": {"clusterView": {"staleAfterSeconds": 30}},
        "webhook": {"excludedNamespaces": ["kube-system"]},
    }
    done = template(tmp_path, values)
    config_text = _one(done, "ConfigMap", "guardhook-config")["data"]["config.yaml"]
    assert yaml.safe_load(config_text) == {
        "policies": values["policies"],
        "exemptions": values["exemptions"],
        "clusterView": {"staleAfterSeconds": 30},
    }
    (tmp_path / "config.yaml").write_text(config_text)
    loaded = load_config(tmp_path / "config.yaml")  # guardhook itself accepts what the chart writes
    assert loaded is not None
    for config in (o for o in done if o["kind"] in WEBHOOK_KINDS):
        for hook in config["webhooks"]:
            if hook["rules"][0]["scope"] == "Cluster":
                assert "namespaceSelector" not in hook
                continue
            expression = hook["namespaceSelector"]["matchExpressions"][0]
            assert expression == {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", NAMESPACE, "batch-system"],
            }, hook["name"]


def test_leader_service_in_warn_or_audit_is_judged_not_pinned(tmp_path: Path) -> None:
    for actions in (["Warn"], ["Audit"], ["Warn", "Audit"]):
        objects = template(tmp_path, {"policies": {"leader-service": {"actions": actions}}})
        validating = _one(objects, "ValidatingWebhookConfiguration", "guardhook")
        mutating = _one(objects, "MutatingWebhookConfiguration", "guardhook")
        assert "leader-service.guardhook.io" in {h["name"] for h in validating["webhooks"]}
        assert mutating["webhooks"] == []
        hook = next(h for h in validating["webhooks"] if h["name"] == "leader-service.guardhook.io")
        assert hook["clientConfig"]["service"]["path"] == "/validate"
    objects = template(tmp_path, {"policies": {"leader-service": {"actions": ["Mutate", "Warn"]}}})
    assert [h["name"] for h in _one(objects, "MutatingWebhookConfiguration", "guardhook")["webhooks"]] == [
        "leader-service.guardhook.io"
    ]


def test_image_resources_priority_and_replicas_are_values(tmp_path: Path) -> None:
    values = {
        "image": {"repository": "registry.example/guardhook", "tag": "1.2.3", "pullPolicy": "Always"},
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "priorityClassName": "",
        "replicas": 3,
        "imagePullSecrets": [{"name": "pull"}],
        "components": {"policyReports": {"enabled": True, "schedule": "5 */6 * * *"}},
    }
    objects = template(tmp_path, values)
    deployment = _one(objects, "Deployment", "guardhook")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 3
    assert "priorityClassName" not in pod
    assert pod["imagePullSecrets"] == [{"name": "pull"}]
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/guardhook:1.2.3"
    assert container["imagePullPolicy"] == "Always"
    assert container["resources"] == values["resources"]
    cron = _one(objects, "CronJob", "guardhook-audit")
    assert cron["spec"]["schedule"] == "5 */6 * * *"
    (audit,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert audit["image"] == container["image"]
    digest = "sha256:" + "ab" * 32
    pinned = template(tmp_path, {"image": {"digest": digest}})
    (container,) = _one(pinned, "Deployment", "guardhook")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ghcr.io/guardhook/guardhook@{digest}"


MONITORING = {
    "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True},
    "dashboard": {"enabled": True},
}


def test_monitoring_renders_manifests_monitoring(tmp_path: Path) -> None:
    for name in ("prometheus-rule.yaml", "grafana-dashboard.yaml"):
        copy_ = CHART / "files" / "monitoring" / name
        assert copy_.read_bytes() == (MANIFESTS / "monitoring" / name).read_bytes(), (
            f"charts/guardhook/files/monitoring/{name} is not manifests/monitoring/{name}: copy it over"
        )
    charted = [
        o
        for o in template(tmp_path, {"monitoring": MONITORING})
        if o["kind"] in ("ServiceMonitor", "PrometheusRule") or o["metadata"]["name"] == "guardhook-dashboard"
    ]
    compare(render(MANIFESTS / "monitoring"), charted)
    assert not [o for o in template(tmp_path) if o["kind"] in ("ServiceMonitor", "PrometheusRule")]


def test_network_policy_sources_are_values(tmp_path: Path) -> None:
    control_plane = [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
    objects = template(
        tmp_path, {"components": {"networkPolicy": {"enabled": True, "webhookFrom": control_plane}}}
    )
    policy = _one(objects, "NetworkPolicy", "guardhook")
    assert policy["spec"]["ingress"][0] == {
        "ports": [{"protocol": "TCP", "port": 8443}],
        "from": control_plane,
    }


def test_uninstall_hook_runs_guardhook_uninstall_before_anything_is_deleted(tmp_path: Path) -> None:
    objects = template(tmp_path)
    hooks = [o for o in objects if is_hook(o)]
    # the pre-delete clean-up, the Pod `helm test` runs (tests/test_chart_helm_test.py) and the
    # post-install check (tests/test_chart_startup_check.py)
    assert {o["metadata"]["annotations"]["helm.sh/hook"] for o in hooks} == {
        "pre-delete",
        "test",
        "post-install,post-upgrade",
    }
    hooks = [o for o in hooks if o["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"]
    job = _one(hooks, "Job", "guardhook-uninstall")
    weights = {key(o): int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in hooks}
    assert all(w < weights[key(job)] for k, w in weights.items() if k != key(job)), weights
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["uninstall", f"--namespace={NAMESPACE}"]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "guardhook-uninstall"
    role = _one(hooks, "ClusterRole", "guardhook-uninstall")
    deletes = {
        resource for rule in role["rules"] if "delete" in rule["verbs"] for resource in rule["resources"]
    }
    assert deletes == {
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "poddisruptionbudgets",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    }
    webhook_delete = next(
        r
        for r in role["rules"]
        if "validatingwebhookconfigurations" in r["resources"] and "delete" in r["verbs"]
    )
    assert webhook_delete["resourceNames"] == ["guardhook"]
    reads = {
        (g, r)
        for rule in role["rules"]
        if "list" in rule["verbs"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    view = _one(objects, "ClusterRole", "guardhook-view")
    needed = {(g, r) for rule in view["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert needed - reads == set()  # the hook lists the whole cluster view guardhook uninstall opens
    without = template(tmp_path, {"uninstallHook": {"enabled": False}})
    assert not [
        o for o in without if is_hook(o) and o["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    ]


def test_chart_version_follows_the_image(tmp_path: Path) -> None:
    from guardhook import __version__

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == __version__
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(values) <= set(schema["properties"])


MANAGED_CERTS_CASES = [[], OPT_IN, ["ha", "leader-service-sync"], ["client-auth", "pdb-sync"]]


@pytest.mark.parametrize("components", MANAGED_CERTS_CASES, ids=lambda c: "+".join(c) or "base")
def test_self_managed_chart_renders_what_the_managed_certs_component_renders(
    tmp_path: Path, components: list[str]
) -> None:
    """certs.source=self-managed (the chart's default) is manifests/managed-certs (issue 49): the
    empty Secret, `serve --manage-certs`, its startup probe and RBAC, with any opt-in components."""
    folder = user_overlay(
        tmp_path / "overlay",
        [MANIFESTS / "base"],
        [MANIFESTS / "managed-certs", *(MANIFESTS / "components" / c for c in components)],
    )
    compare(render(folder), template(tmp_path, chart_values(components, "managed-certs")))


def test_the_managed_certs_overlay_is_the_charts_default(tmp_path: Path) -> None:
    """overlays/managed-certs renders what the chart renders with no values (but the Namespace)."""
    kustomized = [o for o in render(MANIFESTS / "overlays" / "managed-certs") if o["kind"] != "Namespace"]
    compare(kustomized, template(tmp_path))
