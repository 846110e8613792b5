"""guardhook's RBAC in manifests/ grants what its code asks the API server for.

What is needed is never written down here: it is derived from the code's own declarations
(`guardhook.cluster.listing.LISTS`, each kind's `resource`) and from the requests the real
commands make against the fake API server (tests/fake_apiserver.py), then checked against the
roles the rendered manifests bind to the ServiceAccount the Deployment runs as. `audit`,
`drain-plan` and `check --kubeconfig` run in a cluster as that ServiceAccount get a 403 on any
resource left out (the HPAs, ScaledObjects and InferencePools were); the webhook's live view
(`serve`) and its eviction ledger need their own part of the same grants.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from test_manifests import MANIFESTS, OWN_NAMESPACE, by_kind, one
from test_manifests_components import with_components

from guardhook.cluster.kube_transport import KubeTransport, listed_for
from guardhook.cluster.listing import LISTS, Listed, list_cluster
from guardhook.cluster.view.live import LiveView
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.cluster.view.store import KINDS, ClusterView
from guardhook.commands.main import main
from guardhook.ledger.lease import LeaseLedger
from guardhook.policies.group_pdb import GROUP_PDBS_ANNOTATION

from fake_apiserver import ROUTE, FakeApiServer, running_fake
from kustomize_lite import render
from readiness_helpers import fleet as gated_fleet

Object = dict[str, Any]
Need = tuple[str, str, str, str, str]
"""(verb, apiGroup, resource, namespace, name): namespace "" for a cluster-wide request, name ""
for one naming no object (list, watch, create). As a grant, "" means any (no resourceNames)."""
READ = ("get", "list", "watch")
VERB_OF = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def needs_of(requests: Iterable[str]) -> set[Need]:
    """The RBAC verb, group, resource and namespace of each recorded "METHOD /path?query"."""
    found = set()
    for request in requests:
        method, _, target = request.partition(" ")
        url = urlparse(target)
        route = ROUTE.match(url.path)
        assert route, f"the fake recorded a request it cannot route: {request}"
        namespace, resource, name, subresource = route.groups()
        group = url.path.split("/")[2] if url.path.startswith("/apis/") else ""
        if method == "GET":
            watching = parse_qs(url.query).get("watch", [""])[-1] in ("true", "1", "True")
            verb = "get" if name else "watch" if watching else "list"
        else:
            verb = VERB_OF[method]
        resource += f"/{subresource}" if subresource else ""
        found.add((verb, group, resource, namespace or "", name or ""))
    return found


def _reads(listed: Iterable[Listed]) -> set[Need]:
    return {
        (verb, form.group, form.resource, "", "") for item in listed for form in item.forms for verb in READ
    }


def grants(objects: list[Object]) -> set[Need]:
    """What the roles bound to the Deployment's ServiceAccount allow: ClusterRoles through
    ClusterRoleBindings cluster-wide, Roles through RoleBindings in their namespace."""
    deployment = one(objects, "Deployment")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    subject = {"kind": "ServiceAccount", "name": account, "namespace": deployment["metadata"]["namespace"]}
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}
    allowed: set[Need] = set()
    for binding in by_kind(objects, "ClusterRoleBinding") + by_kind(objects, "RoleBinding"):
        if subject not in binding["subjects"]:
            continue
        scope = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles[(ref["kind"], scope if ref["kind"] == "Role" else "", ref["name"])]
        for rule in role["rules"]:
            allowed |= {
                (verb, group, resource, scope, name)
                for verb in rule["verbs"]
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for name in rule.get("resourceNames") or [""]
            }
    return allowed


def missing(needs: set[Need], allowed: set[Need]) -> set[Need]:
    """The needs no grant covers: a cluster-wide grant covers every namespace, one without
    resourceNames every name."""

    def covered(need: Need) -> bool:
        verb, group, resource, namespace, name = need
        scopes, names = {namespace, ""}, {name, ""}
        return any((verb, group, resource, s, n) in allowed for s in scopes for n in names)

    return {need for need in needs if not covered(need)}


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Object]]:
    """The default install, and the default install with every optional component."""
    # every optional component; cert-manager, ha and leader-service-sync are in the default overlay already
    in_default = ("cert-manager", "ha", "leader-service-sync")
    components = sorted(p.name for p in (MANIFESTS / "components").iterdir() if p.name not in in_default)
    return {
        "default": render(MANIFESTS),
        "all components": with_components(tmp_path_factory.mktemp("rbac"), *components),
    }


def _fake_cluster(fake: FakeApiServer) -> None:
    fake.load(embedded_fleet_objects())


@contextmanager
def forbidding(resource: str, tmp_path: Path) -> Iterator[str]:
    """A kubeconfig for a fake API server holding the sample fleet that answers 403 on `resource`."""
    with running_fake(forbidden={resource}) as fake:
        _fake_cluster(fake)
        yield str(fake.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.mark.parametrize(
    "form",
    [form for listed in LISTS for form in listed.forms],
    ids=lambda form: f"{form.kind}-{form.api_version}",
)
def test_each_listed_kind_requests_exactly_the_resource_it_declares(form: Listed) -> None:
    """The declarations the grants are derived from are the requests made: each form's own call."""
    with running_fake() as fake:
        list_cluster(fake.api_client(), (replace(form, older=()),))
    assert needs_of(fake.requests) == {("list", form.group, form.resource, "", "")}


@pytest.mark.parametrize("install", ["default", "all components"])
@pytest.mark.parametrize("command", ["audit", "drain-plan", "check"])
def test_one_shot_commands_as_guardhooks_service_account_are_granted_every_list(
    command: str, install: str, installs: dict[str, list[Object]], tmp_path: Path
) -> None:
    with running_fake() as fake:
        _fake_cluster(fake)
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        args = {
            "audit": ["audit", "--kubeconfig", kubeconfig],
            "drain-plan": ["drain-plan", "--kubeconfig", kubeconfig, "gpu-node-01"],
            "check": ["check", "--kubeconfig", kubeconfig, str(tmp_path / "nothing.yaml")],
        }[command]
        (tmp_path / "nothing.yaml").write_text("")
        main(args)
    made = needs_of(fake.requests)
    assert {n[2] for n in made} >= {form.resource for listed in LISTS for form in listed.forms}
    assert missing(made | _reads(LISTS), grants(installs[install])) == set()


@pytest.mark.parametrize("install", ["default", "all components"])
def test_the_webhooks_live_view_and_ledger_are_granted_every_request(
    install: str, installs: dict[str, list[Object]]
) -> None:
    with running_fake() as fake:
        _fake_cluster(fake)
        view = ClusterView(source="live")
        live = LiveView(view, lambda: KubeTransport(fake.api_client())).start()
        try:
            for _ in range(400):
                watched = {n[2] for n in needs_of(list(fake.requests)) if n[0] == "watch"}
                if view.synced and watched >= set(KINDS):
                    break
                time.sleep(0.05)
        finally:
            live.stop()
        ledger = LeaseLedger(fake.api_client(), OWN_NAMESPACE)
        for _ in range(2):  # the first write creates the Lease, the second replaces it
            ledger.update(("serve", "llm-xl"), lambda entries: (None, entries))
    made = needs_of(fake.requests)
    assert {n[2] for n in made if n[0] == "watch"} == set(KINDS)
    assert {n[0] for n in made if n[2] == "leases"} == {"get", "create", "update"}
    declared = _reads(listed_for(kind) for kind in KINDS)
    assert missing(made | declared, grants(installs[install])) == set()


@pytest.mark.parametrize(
    "resource", sorted({form.resource for listed in LISTS if listed.unchecked for form in listed.forms})
)
def test_audit_skips_a_forbidden_partial_kind_naming_it_and_reports_the_rest(
    resource: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with forbidding(resource, tmp_path) as kubeconfig:
        assert main(["audit", "--kubeconfig", kubeconfig, "--format", "json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert main(["drain-plan", "--kubeconfig", kubeconfig, "gpu-node-01"]) in (0, 1)
        plan_err = capsys.readouterr().err
    forbidden = [n for n in document["notes"] if "(HTTP 403)" in n]
    kinds = {form.kind for listed in LISTS for form in listed.forms if form.resource == resource}
    assert forbidden and all(any(k in n for k in kinds) and f"on {resource}" in n for n in forbidden)
    # The other kinds still count: the sample fleet's LWS and its groups.
    assert [(g["name"], g["desired"]) for g in document["groups"]] == [("llm-xl", 4)]
    assert f"on {resource}" in plan_err


@pytest.mark.parametrize(
    "resource", sorted({form.resource for listed in LISTS if not listed.unchecked for form in listed.forms})
)
def test_audit_refuses_in_one_line_when_a_kind_every_check_needs_is_forbidden(
    resource: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with forbidding(resource, tmp_path) as kubeconfig:
        assert main(["audit", "--kubeconfig", kubeconfig]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"RBAC forbids listing {resource} " in err and "guardhook-view" in err


def test_the_reconcilers_writes_are_granted_by_their_components_and_only_there(
    installs: dict[str, list[Object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pdb-sync and group-readiness, one round each (`--once`): their lists, PDB creates, updates
    and deletes, and the leaders' pods/status patches."""
    objects = gated_fleet()  # leaders gated, the LWS opted in to group-readiness
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            obj["metadata"]["annotations"][GROUP_PDBS_ANNOTATION] = "true"
    with running_fake() as fake:
        fake.load(o for o in objects if o["kind"] in ("LeaderWorkerSet", "Pod", "Node", "StatefulSet"))
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        sync = ["pdb-sync", "--kubeconfig", kubeconfig, "--once"]
        assert main(sync) == 0  # creates one PDB per group
        budget = fake.get("poddisruptionbudgets", "serve", "llm-xl-group-1")
        assert budget is not None
        fake.put("poddisruptionbudgets", {**budget, "spec": {**budget["spec"], "minAvailable": 0}})
        lws = fake.get("leaderworkersets", "serve", "llm-xl")
        assert lws is not None
        fake.put("leaderworkersets", {**lws, "spec": {**lws["spec"], "replicas": 3}})
        assert main(sync) == 0  # updates group 1's, deletes group 3's
        assert main(["group-readiness", "--kubeconfig", kubeconfig, "--once"]) == 0
    capsys.readouterr()
    made = needs_of(fake.requests)
    writes = {need for need in made if need[0] not in READ}
    assert {n[0] for n in writes if n[2] == "poddisruptionbudgets"} == {"create", "update", "delete"}
    assert {n[0] for n in writes if n[2] == "pods/status"} == {"patch"}
    assert missing(made, grants(installs["all components"])) == set()
    assert missing(writes, grants(installs["default"])) == writes  # the default install writes none


def test_leader_service_sync_writes_are_granted_by_its_component_and_only_there(
    installs: dict[str, list[Object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """leader-service-sync, one round (`--once`) that narrows a Service and an InferencePool
    created before their LWS: its lists and its JSONPatches, granted by the default install (the
    component is in every overlay), and the patches by nothing but the component."""
    from test_leader_service_sync import pool, service

    objects = [o for o in embedded_fleet_objects() if o["kind"] in ("LeaderWorkerSet", "Pod", "Node")]
    with running_fake(unserved={"inference.networking.x-k8s.io/v1alpha2"}) as fake:
        fake.put("services", service())
        fake.put("inferencepools", pool())
        fake.load(objects)
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        assert main(["leader-service-sync", "--kubeconfig", kubeconfig, "--once"]) == 0
    capsys.readouterr()
    made = needs_of(fake.requests)
    writes = {need for need in made if need[0] not in READ}
    assert {(n[0], n[2]) for n in writes} == {("patch", "services"), ("patch", "inferencepools")}
    assert missing(made, grants(installs["default"])) == set()
    without = [o for o in installs["default"] if "leader-service-sync" not in o["metadata"]["name"]]
    assert missing(writes, grants(without)) == writes


def test_the_audit_cronjob_writes_reports_granted_by_its_component_and_only_there(
    installs: dict[str, list[Object]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """components/policy-reports: the CronJob's own arguments, with the rendered ConfigMap's
    configuration (in-cluster config replaced by the fake's kubeconfig), run twice: the first run
    creates the reports, the second reads and replaces them."""
    objects = installs["all components"]
    (job,) = [o for o in by_kind(objects, "CronJob") if o["metadata"]["name"] == "guardhook-audit"]
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    deployment = one(objects, "Deployment")["spec"]
    served = deployment["template"]["spec"]
    assert pod["serviceAccountName"] == served["serviceAccountName"]
    assert container["image"] == served["containers"][0]["image"]
    assert container["securityContext"] == served["containers"][0]["securityContext"]
    # Not one of the webhook's pods: the Service, the Deployment and guardhook's PDB select those,
    # and an audit pod (Ready, no port 8443) among them would take webhook calls it cannot answer.
    labels = job["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert not deployment["selector"]["matchLabels"].items() <= labels.items()
    (mount,) = container["volumeMounts"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    config_map = one(objects, "ConfigMap", volume["configMap"]["name"])
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    args = [a.replace(mount["mountPath"] + "/config.yaml", str(config)) for a in container["args"]]
    assert "audit" in args and "--write-reports" in args and f"--config={config}" in args
    with running_fake() as fake:
        _fake_cluster(fake)
        kubeconfig = str(fake.write_kubeconfig(tmp_path / "kubeconfig"))
        assert main([*args, "--kubeconfig", kubeconfig]) == 0
        assert main([*args, "--kubeconfig", kubeconfig]) == 0
        assert fake.names("policyreports") and fake.names("clusterpolicyreports")
    capsys.readouterr()
    made = needs_of(fake.requests)
    reports = {need for need in made if need[1] == "wgpolicyk8s.io"}
    assert {need[0] for need in reports} == {"get", "create", "update"}
    assert {need for need in made if need[0] not in READ} <= reports  # audit writes nothing else
    assert missing(made, grants(objects)) == set()
    assert missing(reports, grants(installs["default"])) == reports  # the default install writes none


def test_audit_refused_a_report_write_exits_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without components/policy-reports the ServiceAccount gets a 403 on the first report; the
    API server's reason is one line, not the client library's headers and body."""
    with forbidding("policyreports", tmp_path) as kubeconfig:
        assert main(["audit", "--kubeconfig", kubeconfig, "--write-reports"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if not line.startswith("guardhook audit: note: ")]
    assert len(errors) == 1, err  # the notes go to stderr too, each on its own line
    assert "cannot write PolicyReports to" in err
    assert "HTTP 403 Forbidden: policyreports is forbidden" in err
