"""`manifests/` renders (kustomize) to a safe install: field assertions on every object, the
matchConditions evaluated as CEL against captured requests, and the self-managed caBundle patch."""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import celpy
import kubernetes
import pytest
import yaml
from cryptography import x509

from guardhook.cluster.listing import LISTS
from guardhook.config import DEFAULT_EXEMPT_USERS
from guardhook.floor.cost import PER_CALL_LIMIT, estimated_cost

from conftest import REPO, load_review
from kustomize_lite import UnsupportedKustomization, render, user_overlay

MANIFESTS = REPO / "manifests"
OWN_NAMESPACE = "guardhook-system"
EXCLUDED_NAMESPACES = {"kube-system", "kube-node-lease", OWN_NAMESPACE}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate"}
EVICTION_OPT_IN = ("guardhook.io/guard-evictions", "true")

Object = dict[str, Any]


def by_kind(objects: list[Object], kind: str) -> list[Object]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[Object], kind: str, name: str | None = None) -> Object:
    found = [obj for obj in by_kind(objects, kind) if name is None or obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def default_install() -> list[Object]:
    return render(MANIFESTS)


@pytest.fixture(scope="module")
def webhooks(default_install: list[Object]) -> list[Object]:
    hooks = []
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for config in by_kind(default_install, kind):
            hooks += [{**hook, "_kind": kind} for hook in config["webhooks"]]
    return hooks


def canonical(objects: list[Any]) -> list[str]:
    """Objects as sorted JSON, Secret data decoded (kustomize wraps base64 at 76 columns)."""
    out = []
    for obj in objects:
        if obj and obj["kind"] == "Secret":
            obj = {**obj, "data": {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}}
        if obj:
            out.append(json.dumps(obj, sort_keys=True))
    return sorted(out)


def rules_of(hook: Object) -> set[tuple[str, str, str, str]]:
    """(group, version, resource, operation) for every rule of a webhook."""
    return {
        (group, version, resource, operation)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for version in rule["apiVersions"]
        for resource in rule["resources"]
        for operation in rule["operations"]
    }


# kubectl kustomize, when kubectl is installed, must agree with the subset renderer.
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("folder", [".", "base", "overlays/cert-manager", "overlays/single-node"])
def test_kubectl_kustomize_renders_the_same_objects(folder: str) -> None:
    printed = subprocess.run(
        ["kubectl", "kustomize", str(MANIFESTS / folder)], capture_output=True, text=True, timeout=60
    )
    assert printed.returncode == 0, printed.stderr
    assert canonical(render(MANIFESTS / folder)) == canonical(list(yaml.safe_load_all(printed.stdout)))


@pytest.mark.parametrize("case", ["absolute", "twice"])
def test_the_subset_renderer_refuses_what_kustomize_refuses(tmp_path: Path, case: str) -> None:
    # A component given by absolute path, or listed again on top of an overlay that includes it.
    overlay = user_overlay(tmp_path / "overlay", [MANIFESTS / "overlays" / "cert-manager"])
    spec = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    component = MANIFESTS / "components" / "ha"
    spec["components"] = [str(component) if case == "absolute" else os.path.relpath(component, overlay)]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(UnsupportedKustomization):
        render(overlay)
    if shutil.which("kubectl"):
        printed = subprocess.run(
            ["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60
        )
        assert printed.returncode != 0
        assert ("cannot be absolute" if case == "absolute" else "already registered id") in printed.stderr


class _Body:
    """What ApiClient.deserialize reads before kubernetes 37: a response with JSON `data`."""

    def __init__(self, obj: Object) -> None:
        self.data = json.dumps(obj)


def to_model(api: kubernetes.client.ApiClient, obj: Object, model: str) -> Any:
    """`obj` as the kubernetes client's model class `model` (e.g. "V1Service")."""
    try:
        return api.deserialize(json.dumps(obj), model, "application/json")
    except (AttributeError, TypeError):
        return api.deserialize(_Body(obj), model)


def test_built_in_objects_match_the_kubernetes_api_schema(default_install: list[Object]) -> None:
    # Deserialising into the kubernetes client's models checks types and required fields; a field
    # the API does not know (a typo) is dropped, so the round trip would differ.
    api = kubernetes.client.ApiClient()
    checked = 0
    for obj in default_install:
        if obj["apiVersion"].startswith("cert-manager.io/"):
            continue
        model = to_model(api, obj, "V1" + obj["kind"])
        assert api.sanitize_for_serialization(model) == obj, obj["kind"]
        checked += 1
    assert checked >= 11
    typo = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"selektor": {}}}
    assert api.sanitize_for_serialization(to_model(api, typo, "V1Service")) != typo


def test_default_install_holds_every_piece(default_install: list[Object]) -> None:
    kinds = {obj["kind"] for obj in default_install}
    assert {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "Certificate",
        "Issuer",
    } <= kinds
    for obj in default_install:
        assert obj["apiVersion"] and obj["metadata"]["name"]
        if (
            obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")
            and "Webhook" not in obj["kind"]
        ):
            assert obj["metadata"]["namespace"] == OWN_NAMESPACE, obj["metadata"]


def test_every_webhook_has_its_own_failure_policy_timeout_and_side_effects(webhooks: list[Object]) -> None:
    assert len(webhooks) >= 8
    assert len({hook["name"] for hook in webhooks}) == len(webhooks)
    for hook in webhooks:
        assert hook["failurePolicy"] in ("Fail", "Ignore"), hook["name"]
        assert 1 <= hook["timeoutSeconds"] <= 30, hook["name"]
        assert hook["sideEffects"] in ("None", "NoneOnDryRun"), hook["name"]
        assert hook["matchPolicy"] == "Equivalent", hook["name"]
        assert "v1" in hook["admissionReviewVersions"]
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == ("guardhook", OWN_NAMESPACE, 443)
        expected_path = "/mutate" if hook["_kind"].startswith("Mutating") else "/validate"
        assert service["path"] == expected_path


def test_every_webhook_entry_documents_why_its_failure_policy(default_install: list[Object]) -> None:
    for file in ("validating-webhook.yaml", "mutating-webhook.yaml"):
        lines = (MANIFESTS / "base" / file).read_text().splitlines()
        entries = [i for i, line in enumerate(lines) if re.match(r"  - name: ", line)]
        assert entries
        for index in entries:
            comment = []
            back = index - 1
            while lines[back].lstrip().startswith("#"):
                comment.append(lines[back])
                back -= 1
            assert "Down:" in " ".join(comment), f"{file}: {lines[index]} lacks a why-comment"


def cluster_scoped(hook: Object) -> bool:
    return all(rule.get("scope") == "Cluster" for rule in hook["rules"])


def test_namespace_selector_excludes_system_and_own_namespaces(webhooks: list[Object]) -> None:
    for hook in webhooks:
        if cluster_scoped(hook):
            # The API server never skips a cluster-scoped object by namespaceSelector: none is set.
            assert "namespaceSelector" not in hook, hook["name"]
            continue
        expressions = hook["namespaceSelector"]["matchExpressions"]
        excluded = next(
            set(e["values"])
            for e in expressions
            if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn"
        )
        assert excluded >= EXCLUDED_NAMESPACES, hook["name"]


def test_eviction_webhook_is_opt_in_by_namespace_label_and_records_only_off_dry_run(
    webhooks: list[Object],
) -> None:
    evictions = [hook for hook in webhooks if ("", "v1", "pods/eviction", "CREATE") in rules_of(hook)]
    assert len(evictions) == 1
    hook = evictions[0]
    key, value = EVICTION_OPT_IN
    assert {"key": key, "operator": "In", "values": [value]} in hook["namespaceSelector"]["matchExpressions"]
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["failurePolicy"] == "Fail"
    others = [h for h in webhooks if h is not hook]
    # A worker DELETE on a cordoned node (a drain without evictions) is recorded in the same ledger.
    deletes = [h for h in others if ("", "v1", "pods", "DELETE") in rules_of(h)]
    assert [h["sideEffects"] for h in deletes] == ["NoneOnDryRun"]
    # So is a resize that restarts a container under a recreating restartPolicy (group-resize).
    resizes = [h for h in others if ("", "v1", "pods/resize", "UPDATE") in rules_of(h)]
    assert [h["sideEffects"] for h in resizes] == ["NoneOnDryRun"]
    # And so is a NoExecute taint within the budget (group-taint records the groups it dooms).
    taints = [h for h in others if any(r[2] in ("nodes", "devicetaintrules") for r in rules_of(h))]
    assert [h["sideEffects"] for h in taints] == ["NoneOnDryRun", "NoneOnDryRun"]
    assert all(h["sideEffects"] == "None" for h in others if h not in deletes + resizes + taints)
    assert all(h["failurePolicy"] == "Ignore" for h in others)  # only the opt-in scope fails closed


def test_no_entry_selects_objects_by_a_label_a_tenant_may_remove(webhooks: list[Object]) -> None:
    # Issue 48: `kubectl label pod <worker> leaderworkerset.sigs.k8s.io/name-` took a worker out
    # of every entry that had an objectSelector on it; none has one now.
    assert [hook["name"] for hook in webhooks if "objectSelector" in hook] == []


def _unnamed(review: Object) -> Object:
    """`review` with its pod's (or StatefulSet's) `leaderworkerset.sigs.k8s.io/name` label removed."""
    for key in ("object", "oldObject"):
        if review["request"].get(key):
            review["request"][key]["metadata"]["labels"].pop("leaderworkerset.sigs.k8s.io/name", None)
    return review


def _hook(webhooks: list[Object], name: str) -> Object:
    return next(hook for hook in webhooks if hook["name"] == name)


def test_a_member_without_its_name_label_still_reaches_worker_delete(webhooks: list[Object]) -> None:
    hook = _hook(webhooks, "worker-delete.guardhook.io")
    assert _called(hook, _unnamed(load_review("s01-worker-delete.validating")), identity_only=False)
    bare = load_review("s01-worker-delete.validating")
    bare["request"]["oldObject"]["metadata"]["labels"] = {"app": "web"}
    assert _called(hook, bare, identity_only=False)  # its controller is a StatefulSet
    bare["request"]["oldObject"]["metadata"]["ownerReferences"] = []
    assert not _called(hook, bare, identity_only=False)  # a bare pod of no group: not sent


@pytest.mark.parametrize(
    ("api_version", "kind", "called"),
    [
        ("batch/v1", "Job", True),  # a JobSet Job's pod, or a Workload API gang of a Job
        ("grove.io/v1alpha1", "PodClique", True),  # a Grove PodCliqueSet replica's pod
        ("apps/v1", "DaemonSet", False),  # no group maker's pod: not sent
    ],
)
def test_a_gang_member_delete_reaches_worker_delete(
    webhooks: list[Object], api_version: str, kind: str, called: bool
) -> None:
    """worker-delete judges Grove and JobSet gang members (guardhook.groups.grove, .jobset), whose
    pods carry no LWS label: the entry must be called for them by their controller."""
    hook = _hook(webhooks, "worker-delete.guardhook.io")
    gang = load_review("s01-worker-delete.validating")
    meta = gang["request"]["oldObject"]["metadata"]
    meta["labels"] = {"app": "gang"}
    meta["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": "g-0", "uid": "u-1", "controller": True}
    ]
    assert _called(hook, gang, identity_only=False) is called


def _bare(review: Object, scheduling_group: Object | None) -> Object:
    """`review` (a captured pod DELETE) with its pod made bare: no labels, no ownerReferences, and
    `spec.schedulingGroup` (core/v1 PodSpec, Kubernetes 1.37) set to `scheduling_group` if given."""
    old = review["request"]["oldObject"]
    old["metadata"].pop("labels", None)
    old["metadata"].pop("ownerReferences", None)
    if scheduling_group is not None:
        old["spec"]["schedulingGroup"] = scheduling_group
    return review


@pytest.mark.parametrize(
    ("scheduling_group", "called"),
    [
        ({"podGroupName": "train-0"}, True),  # a bare member of a Workload API gang
        ({}, False),  # a schedulingGroup naming no PodGroup
        (None, False),  # a bare pod of no group
    ],
)
def test_a_bare_workload_api_gang_member_delete_reaches_worker_delete(
    webhooks: list[Object], scheduling_group: Object | None, called: bool
) -> None:
    """A pod naming a PodGroup in `spec.schedulingGroup.podGroupName` is a gang member whatever
    controls it (guardhook.groups.podgroup): a bare one (no controller, no LWS label) must reach
    worker-delete too, or deleting it breaks its gang unguarded."""
    hook = _hook(webhooks, "worker-delete.guardhook.io")
    review = _bare(load_review("s01-worker-delete.validating"), scheduling_group)
    assert _called(hook, review, identity_only=False) is called


def test_only_deletes_of_a_bare_gang_member_are_sent_not_its_updates(webhooks: list[Object]) -> None:
    """The schedulingGroup widens the DELETE branch only: an UPDATE of a bare gang member (which
    carries no LWS label to remove) stays unsent."""
    hook = _hook(webhooks, "worker-delete.guardhook.io")
    review = _bare(load_review("s01-worker-delete.validating"), {"podGroupName": "train-0"})
    review["request"]["oldObject"]["metadata"]["labels"] = {"app": "train"}
    assert not _called(hook, _update(review, app="other"), identity_only=False)
    assert not _called(hook, _update(review, app=None), identity_only=False)


def _update(review: Object, **labels: str | None) -> Object:
    request = review["request"]
    request["operation"] = "UPDATE"
    request["object"] = copy.deepcopy(request["oldObject"])
    for key, value in labels.items():
        if value is None:
            request["object"]["metadata"]["labels"].pop(key)
        else:
            request["object"]["metadata"]["labels"][key] = value
    return review


def test_worker_delete_is_sent_only_the_updates_that_change_lws_labels(webhooks: list[Object]) -> None:
    hook = _hook(webhooks, "worker-delete.guardhook.io")
    s01 = "s01-worker-delete.validating"
    name, group = "leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index"
    assert _called(hook, _update(load_review(s01), **{name: None}), identity_only=False)
    assert _called(hook, _update(load_review(s01), **{group: "3"}), identity_only=False)
    assert not _called(hook, _update(load_review(s01), app="other"), identity_only=False)


def test_resize_and_statefulset_entries_follow_owners_too(webhooks: list[Object]) -> None:
    resize = load_review("s01-worker-delete.validating")
    resize["request"].update(operation="UPDATE", subResource="resize", object=resize["request"]["oldObject"])
    assert _called(_hook(webhooks, "group-resize.guardhook.io"), _unnamed(resize), identity_only=False)
    statefulsets = _hook(webhooks, "pod-counted-scaler-statefulsets.guardhook.io")
    sts = _unnamed(load_review("s27-sts-update-worker.validating"))
    for key in ("object", "oldObject"):
        sts["request"][key]["metadata"]["labels"] = {}
    assert _called(statefulsets, sts, identity_only=False)  # its controller is the leader pod
    sts["request"]["oldObject"]["metadata"]["ownerReferences"] = []
    assert not _called(statefulsets, sts, identity_only=False)


def test_services_are_mutated_with_reinvocation_if_needed(webhooks: list[Object]) -> None:
    services = [hook for hook in webhooks if any(r[2] == "services" for r in rules_of(hook))]
    assert len(services) == 1
    assert services[0]["_kind"] == "MutatingWebhookConfiguration"
    assert services[0]["reinvocationPolicy"] == "IfNeeded"
    assert rules_of(services[0]) == LEADER_SERVICE_REQUESTS


LEADER_SERVICE_REQUESTS = {
    (group, version, resource, op)
    for group, version, resource in (
        ("", "v1", "services"),
        ("inference.networking.k8s.io", "v1", "inferencepools"),
        ("inference.networking.x-k8s.io", "v1alpha2", "inferencepools"),
    )
    for op in ("CREATE", "UPDATE")
}


def test_hpa_is_registered_as_autoscaling_v2_only(webhooks: list[Object]) -> None:
    hpa = {rule for hook in webhooks for rule in rules_of(hook) if rule[2] == "horizontalpodautoscalers"}
    assert hpa == {
        ("autoscaling", "v2", "horizontalpodautoscalers", "CREATE"),
        ("autoscaling", "v2", "horizontalpodautoscalers", "UPDATE"),
    }


# design.md §2: the requests each policy sees, each reaching exactly one webhook entry (a request
# reaching two entries would be judged twice by /validate).
POLICY_REQUESTS = {
    "worker-delete": [("", "v1", "pods", "DELETE"), ("", "v1", "pods", "UPDATE")],
    "group-eviction": [("", "v1", "pods/eviction", "CREATE")],
    "group-resize": [("", "v1", "pods/resize", "UPDATE")],
    "leader-service": sorted(LEADER_SERVICE_REQUESTS),
    "group-pdb": [("policy", "v1", "poddisruptionbudgets", op) for op in ("CREATE", "UPDATE")],
    "pod-counted-scaler": [
        ("autoscaling", "v2", "horizontalpodautoscalers", "CREATE"),
        ("keda.sh", "v1alpha1", "scaledobjects", "CREATE"),
        ("apps", "v1", "statefulsets", "UPDATE"),
        ("apps", "v1", "statefulsets/scale", "UPDATE"),
    ],
    "group-taint": [
        ("", "v1", "nodes", "CREATE"),
        ("", "v1", "nodes", "UPDATE"),
        *(
            ("resource.k8s.io", version, "devicetaintrules", op)
            for version in ("v1alpha3", "v1beta2", "v1")
            for op in ("CREATE", "UPDATE")
        ),
    ],
    "group-capacity": [
        ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "CREATE"),
        ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "UPDATE"),
        ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets/scale", "UPDATE"),
        ("grove.io", "v1alpha1", "podcliquesets", "CREATE"),
        ("grove.io", "v1alpha1", "podcliquesets", "UPDATE"),
        ("grove.io", "v1alpha1", "podcliquesets/scale", "UPDATE"),
        ("grove.io", "v1alpha1", "podcliquescalinggroups", "UPDATE"),
        ("grove.io", "v1alpha1", "podcliquescalinggroups/scale", "UPDATE"),
    ],
}


@pytest.mark.parametrize("policy", sorted(POLICY_REQUESTS))
def test_every_policy_request_reaches_exactly_one_webhook(webhooks: list[Object], policy: str) -> None:
    for request in POLICY_REQUESTS[policy]:
        reaching = [hook["name"] for hook in webhooks if request in rules_of(hook)]
        assert len(reaching) == 1, (request, reaching)


@functools.cache
def _program(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression))


def _called(hook: Object, review: Object, identity_only: bool = True) -> bool:
    """Whether the API server would call `hook` for this review, by its matchConditions (CEL): the
    identity conditions (`not-…`) only, unless `identity_only` is False."""
    request = review["request"]
    activation = {
        "request": celpy.json_to_cel(request),
        "object": celpy.json_to_cel(request.get("object")),
        "oldObject": celpy.json_to_cel(request.get("oldObject")),
    }
    conditions = [c for c in hook["matchConditions"] if not identity_only or c["name"].startswith("not-")]
    return all(bool(_program(condition["expression"]).evaluate(activation)) for condition in conditions)


def test_every_match_condition_is_far_under_the_api_servers_cost_limit(webhooks: list[Object]) -> None:
    """The API server refuses a matchCondition whose estimated cost exceeds its per-call limit and
    evaluates every one on every request it matches: guardhook's estimate (guardhook.floor.cost,
    generous bounds) keeps each a tenth of the limit (worker-delete's DELETE branch, three
    alternatives, is the largest)."""
    costs = {
        (hook["name"], c["name"]): estimated_cost(c["expression"])
        for hook in webhooks
        for c in hook.get("matchConditions") or []
    }
    assert costs and max(costs.values()) < PER_CALL_LIMIT // 10, max(costs.items(), key=lambda kv: kv[1])


def _as_user(username: str) -> Object:
    """s01 as sent by `username`; a kubelet (`system:node:gpu-node-*`) in the `system:nodes` group,
    as its credentials put it, anyone else (`system:node:evil` too) in `system:authenticated` only."""
    review = load_review("s01-worker-delete.validating")
    groups = ["system:nodes"] if username.startswith("system:node:gpu-node") else []
    review["request"]["userInfo"] = {"username": username, "groups": [*groups, "system:authenticated"]}
    return review


@pytest.mark.parametrize(
    ("review", "called"),
    [
        ("s01-worker-delete.validating", True),  # kubernetes-admin
        ("s03-worker-delete-gc.validating", False),  # the garbage collector
        ("s04-worker-delete-lws-controller.validating", False),  # the LWS controller
    ],
)
def test_match_conditions_skip_exempt_identities_of_captured_requests(
    webhooks: list[Object], review: str, called: bool
) -> None:
    for hook in webhooks:
        if hook["name"] in LWS_HOOKS and "lws-controller" in review:
            continue  # LWS spec changes are judged whoever makes them (below)
        assert _called(hook, load_review(review)) is called, hook["name"]


LWS_HOOKS = {"leaderworkersets.guardhook.io", "leaderworkerset-scale.guardhook.io"}
LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"


@pytest.mark.parametrize(
    ("review", "spec_changed", "called"),
    [
        ("s31-lws-patch-replicas-6.validating", True, True),  # an LWS spec change: judged
        ("s31-lws-patch-replicas-6.validating", False, False),  # metadata only: skipped
        ("s33-lws-create-fits.validating", True, True),  # a create (the DisaggregatedSet controller)
        ("s29-lws-scale-up-1.validating", True, True),  # the scale subresource
    ],
)
def test_the_lws_controller_reaches_group_capacity_only_with_a_spec_change(
    webhooks: list[Object], review: str, spec_changed: bool, called: bool
) -> None:
    loaded = load_review(review)
    request = loaded["request"]
    request["userInfo"] = {"username": LWS_CONTROLLER, "groups": ["system:serviceaccounts"]}
    if not spec_changed:
        request["object"]["spec"] = request["oldObject"]["spec"]
    resource = request["resource"]["resource"] + (
        "/" + request["subResource"] if request.get("subResource") else ""
    )
    (hook,) = [
        h
        for h in webhooks
        if (request["resource"]["group"], "v1", resource, request["operation"]) in rules_of(h)
    ]
    assert hook["name"] in LWS_HOOKS
    assert _called(hook, loaded) is called


LOOK_ALIKES = [
    # Anyone who may create a ServiceAccount in their own namespace could name it so (issue 20).
    "system:serviceaccount:tenant-a:my-lws-controller-manager",
    "system:serviceaccount:tenant-a:lws-controller-manager",
    "system:serviceaccount:lws:lws-release-lws-controller-manager",
    "system:serviceaccount:tenant-a:kueue-controller-manager",
    "system:serviceaccount:kueue-system:kueue-controller-manager-x",
    "system:serviceaccount:tenant-a:statefulset-controller",
]


def test_match_conditions_skip_every_default_exempt_user_and_no_look_alike(webhooks: list[Object]) -> None:
    samples = [pattern.replace("*", "gpu-node-03") for pattern in DEFAULT_EXEMPT_USERS]
    non_exempt = [
        "kubernetes-admin",
        "system:node:evil",  # named like a kubelet, outside the system:nodes group (issue 48)
        "system:serviceaccount:kube-system:deployment-controller",
        "system:serviceaccount:team:lws-controller-manager-helper",
        "system:serviceaccount:team:kueue-controller-manager-helper",
        "system:serviceaccount:kube-system:device-taint-eviction-controller",
        "system:nodes",
        *LOOK_ALIKES,
    ]
    for hook in webhooks:
        exempt = [u for u in samples if not (hook["name"] in LWS_HOOKS and u == LWS_CONTROLLER)]
        assert not any(_called(hook, _as_user(user)) for user in exempt), hook["name"]
        assert all(_called(hook, _as_user(user)) for user in non_exempt), hook["name"]


def _identities(hook: Object) -> set[str]:
    """The identities a webhook entry's `not-…` matchConditions name, as exemption patterns: an
    exact username literal as itself, a `startsWith('p')` prefix as `p*`."""
    found: set[str] = set()
    for condition in hook.get("matchConditions") or []:
        if not condition["name"].startswith("not-"):
            continue
        expression = condition["expression"]
        prefixes = set(re.findall(r"startsWith\('([^']*)'\)", expression))
        found |= {p + "*" for p in prefixes if p != "system:serviceaccount:"}
        found |= {
            s for s in re.findall(r"'(system:[^']*)'", expression) if s not in prefixes | {"system:nodes"}
        }
    return found


def _all_webhooks(tmp_path: Path) -> list[Object]:
    """Every webhook entry of the single-node install (cert-manager, no `ha`) with every other
    component added, `ha` included (as a user's overlay): each component once, as kustomize
    requires, so every component's entries are covered."""
    overlay = MANIFESTS / "overlays" / "single-node"
    present = {
        Path(c).name for c in yaml.safe_load((overlay / "kustomization.yaml").read_text())["components"]
    }
    components = sorted(
        p.name for p in (MANIFESTS / "components").iterdir() if p.is_dir() and p.name not in present
    )
    assert "ha" in components
    user = user_overlay(tmp_path / "overlay", [overlay], [MANIFESTS / "components" / c for c in components])
    hooks: list[Object] = []
    objects = render(user)
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for config in by_kind(objects, kind):
            hooks += [{**hook, "_where": kind} for hook in config.get("webhooks") or []]
    return hooks


def test_match_conditions_name_exactly_the_configured_default_exemptions(tmp_path: Path) -> None:
    # One list (guardhook.config.DEFAULT_EXEMPT_USERS), two places: the webhook entries skip the
    # same identities guardhook itself exempts, so the two cannot drift. group-readiness judges
    # every identity but kubelets (it gates pods the StatefulSet controller creates); a scale of
    # an LWS is a spec change, judged whoever makes it (the LWS controller included).
    hooks = _all_webhooks(tmp_path)
    names = {hook["name"] for hook in hooks}
    assert {"leaderworkerset-scale.guardhook.io", "group-readiness.guardhook.io"} <= names, names
    for hook in hooks:
        expected = set(DEFAULT_EXEMPT_USERS)
        if hook["name"] == "group-readiness.guardhook.io":
            expected = {"system:node:*"}
        elif hook["name"] == "leaderworkerset-scale.guardhook.io":
            expected -= {LWS_CONTROLLER}
        assert _identities(hook) == expected, (hook["_where"], hook["name"])


def test_base_cluster_role_only_reads_what_guardhook_lists(default_install: list[Object]) -> None:
    role = one(default_install, "ClusterRole", "guardhook-view")
    granted = set()
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert set(rule["verbs"]) == {"get", "list", "watch"}
        granted |= {(group, resource) for group in rule["apiGroups"] for resource in rule["resources"]}
    # Exactly the reads of every kind the view and the one-shot commands list (tests/test_rbac.py
    # checks the requests they make against these grants).
    assert granted == {(form.group, form.resource) for listed in LISTS for form in listed.forms}
    binding = one(default_install, "ClusterRoleBinding", "guardhook-view")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "guardhook", "namespace": OWN_NAMESPACE}
    ]


def test_lease_writes_are_confined_to_its_own_namespace(default_install: list[Object]) -> None:
    role = one(default_install, "Role", "guardhook-eviction-ledger")
    assert role["metadata"]["namespace"] == OWN_NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            # list, delete: the sweep of Leases whose entries all expired (issue 42 item 9)
            "verbs": ["get", "list", "create", "update", "delete"],
        }
    ]
    binding = one(default_install, "RoleBinding", "guardhook-eviction-ledger")
    assert binding["metadata"]["namespace"] == OWN_NAMESPACE


def test_deployment_is_replicated_spread_probed_and_locked_down(default_install: list[Object]) -> None:
    deployment = one(default_install, "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    pod = deployment["spec"]["template"]["spec"]
    # Spread, not required (test_manifests_small_clusters: fewer nodes than replicas).
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == deployment["spec"]["selector"]["matchLabels"]
    )
    assert pod["priorityClassName"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # Both probe the plain-HTTP health port (issue 53: never behind the webhook port's connections).
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in (container["readinessProbe"], container["livenessProbe"]):
        assert probe["httpGet"]["port"] == "healthz" and probe["httpGet"].get("scheme", "HTTP") == "HTTP"
    assert f"--health-port={ports['healthz']}" in container["args"]
    assert container["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert (
        container["args"][:2] == ["--log-format=json", "serve"] and "--cert-dir=/certs" in container["args"]
    )
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/certs")
    assert "subPath" not in mount  # a subPath mount never sees a rotated secret
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "guardhook-tls"
    assert pod["terminationGracePeriodSeconds"] > int(container["lifecycle"]["preStop"]["exec"]["command"][1])


def test_own_pdb_and_service_select_the_deployment_pods(default_install: list[Object]) -> None:
    labels = one(default_install, "Deployment")["spec"]["template"]["metadata"]["labels"]
    pdb = one(default_install, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one(default_install, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]


def test_cert_manager_overlay_injects_the_ca_and_issues_the_mounted_secret(
    default_install: list[Object],
) -> None:
    serving = one(default_install, "Certificate", "guardhook-serving")
    assert serving["spec"]["secretName"] == "guardhook-tls"
    assert "guardhook.guardhook-system.svc" in serving["spec"]["dnsNames"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        annotations = one(default_install, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == "guardhook-system/guardhook-serving"


def test_pdb_sync_component_adds_writes_and_the_flag_only(tmp_path: Path) -> None:
    overlay = user_overlay(
        tmp_path / "overlay",
        [MANIFESTS / "overlays" / "cert-manager"],
        [MANIFESTS / "components" / "pdb-sync"],
    )
    objects = render(overlay)
    writer = one(objects, "ClusterRole", "guardhook-pdb-sync")
    assert writer["rules"] == [
        {
            "apiGroups": ["policy"],
            "resources": ["poddisruptionbudgets"],
            "verbs": ["create", "update", "delete"],
        }
    ]
    election = one(objects, "Role", "guardhook-pdb-sync-leader-election")
    assert election["metadata"]["namespace"] == OWN_NAMESPACE
    assert (
        "--sync-group-pdbs" in one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert not any(obj["metadata"]["name"] == "guardhook-pdb-sync" for obj in render(MANIFESTS))


def _certs(manifests: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guardhook", "certs", "--patch-manifests", str(manifests), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _bundle_certs(bundle_b64: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(base64.b64decode(bundle_b64))


def test_self_managed_overlay_gets_secret_and_ca_bundle_from_guardhook_certs(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    done = _certs(manifests)
    assert done.returncode == 0, done.stderr
    certs = manifests / "overlays" / "self-managed" / "certs"
    ca_pem = (certs / "ca.crt").read_bytes()
    assert done.stdout.strip() == base64.b64encode(ca_pem).decode()

    objects = render(manifests / "overlays" / "self-managed")
    secret = one(objects, "Secret", "guardhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == (certs / "tls.crt").read_bytes()
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    serving = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "guardhook.guardhook-system.svc" in sans.get_values_for_type(x509.DNSName)
    ca = x509.load_pem_x509_certificate(ca_pem)
    hooks = [
        h
        for kind in ("Validating", "Mutating")
        for h in one(objects, kind + "WebhookConfiguration")["webhooks"]
    ]
    assert len(hooks) >= 8
    for hook in hooks:
        assert _bundle_certs(hook["clientConfig"]["caBundle"]) == [ca]
        serving.verify_directly_issued_by(ca)
    assert not by_kind(objects, "Certificate")

    if shutil.which("kubectl"):
        printed = subprocess.run(
            ["kubectl", "kustomize", str(manifests / "overlays" / "self-managed")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert printed.returncode == 0, printed.stderr
        assert canonical(list(yaml.safe_load_all(printed.stdout))) == canonical(objects)


def test_rotating_self_managed_certs_trusts_old_and_new_ca_during_the_switch(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    assert _certs(manifests).returncode == 0
    certs = manifests / "overlays" / "self-managed" / "certs"
    old_ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    assert _certs(manifests, "--force").returncode == 0
    new_ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    assert new_ca != old_ca
    patch = yaml.safe_load(
        (manifests / "overlays" / "self-managed" / "ca-bundle.validating.yaml").read_text()
    )
    names = [hook["name"] for hook in one(render(MANIFESTS), "ValidatingWebhookConfiguration")["webhooks"]]
    assert [hook["name"] for hook in patch["webhooks"]] == names  # by name, every entry
    assert all(
        _bundle_certs(hook["clientConfig"]["caBundle"]) == [new_ca, old_ca] for hook in patch["webhooks"]
    )


def test_patch_manifests_refuses_a_folder_without_webhook_configurations(tmp_path: Path) -> None:
    done = _certs(tmp_path)
    assert done.returncode == 2
    assert f"{tmp_path / 'base'}: no such folder" in done.stderr  # no base/, so no webhook configurations
    assert not (tmp_path / "overlays").exists()  # nothing written


def _taint_hook(webhooks: list[Object], resource: str) -> Object:
    (hook,) = [h for h in webhooks if any(rule[2] == resource for rule in rules_of(h))]
    return hook


def _device_taint_rule_review(effect: str) -> Object:
    review = load_review("n01-node-taint-noexecute.validating")
    rule = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "gpu-maintenance"},
        "spec": {"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "k", "effect": effect}},
    }
    review["request"].update(
        kind={"group": "resource.k8s.io", "version": "v1beta2", "kind": "DeviceTaintRule"},
        resource={"group": "resource.k8s.io", "version": "v1beta2", "resource": "devicetaintrules"},
        name="gpu-maintenance",
        operation="CREATE",
        object=rule,
        oldObject=None,
    )
    return review


@pytest.mark.parametrize(
    ("review", "called"),
    [
        ("n01-node-taint-noexecute.validating", True),  # kubectl taint …:NoExecute
        ("n02-node-untaint.validating", False),  # the taint removed: nothing to judge
        ("n03-node-cordon.validating", False),  # spec.unschedulable only
    ],
)
def test_node_entry_is_called_only_for_a_node_with_a_no_execute_taint(
    webhooks: list[Object], review: str, called: bool
) -> None:
    hook = _taint_hook(webhooks, "nodes")
    assert (
        hook["failurePolicy"] == "Ignore"
        and hook["timeoutSeconds"] <= 5
        and hook["sideEffects"] == "NoneOnDryRun"
    )
    assert _called(hook, load_review(review), identity_only=False) is called


def test_node_entry_skips_the_node_lifecycle_controller_and_kubelets(webhooks: list[Object]) -> None:
    hook = _taint_hook(webhooks, "nodes")
    for user in ("system:serviceaccount:kube-system:node-controller", "system:node:gpu-node-06"):
        review = load_review("n01-node-taint-noexecute.validating")
        groups = ["system:nodes"] if user.startswith("system:node:") else []
        review["request"]["userInfo"] = {"username": user, "groups": [*groups, "system:authenticated"]}
        assert _called(hook, review, identity_only=False) is False


@pytest.mark.parametrize(("effect", "called"), [("NoExecute", True), ("None", False), ("NoSchedule", False)])
def test_device_taint_rule_entry_is_called_only_for_no_execute(
    webhooks: list[Object], effect: str, called: bool
) -> None:
    hook = _taint_hook(webhooks, "devicetaintrules")
    assert (
        hook["failurePolicy"] == "Ignore"
        and hook["timeoutSeconds"] <= 5
        and hook["sideEffects"] == "NoneOnDryRun"
    )
    assert _called(hook, _device_taint_rule_review(effect), identity_only=False) is called


def test_group_readiness_component_adds_the_leader_webhook_status_patch_and_the_flag(tmp_path: Path) -> None:
    objects = _render_with_component("group-readiness", tmp_path)
    mutating = one(objects, "MutatingWebhookConfiguration")
    hook = next(h for h in mutating["webhooks"] if h["name"] == "group-readiness.guardhook.io")
    assert rules_of(hook) == {("", "v1", "pods", "CREATE")}
    assert hook["failurePolicy"] == "Ignore" and hook["clientConfig"]["service"]["path"] == "/mutate"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    # Every LWS pod, workers included: a serving-pods "all" LWS gates its workers too (issue 20).
    assert {e["key"]: e["operator"] for e in hook["objectSelector"]["matchExpressions"]} == {
        "leaderworkerset.sigs.k8s.io/name": "Exists",
    }
    hooks = [{**h, "_kind": "MutatingWebhookConfiguration"} for h in mutating["webhooks"]]
    hooks += one(objects, "ValidatingWebhookConfiguration")["webhooks"]
    assert [h["name"] for h in hooks if ("", "v1", "pods", "CREATE") in rules_of(h)] == [hook["name"]]
    # Leader pods are created by the StatefulSet controller: it must reach this entry.
    assert _called(hook, _as_user("system:serviceaccount:kube-system:statefulset-controller"))
    assert not _called(hook, _as_user("system:node:gpu-node-03"))
    writer = one(objects, "ClusterRole", "guardhook-group-readiness")
    assert writer["rules"] == [{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]}]
    election = one(objects, "Role", "guardhook-group-readiness-leader-election")
    assert election["metadata"]["namespace"] == OWN_NAMESPACE
    args = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--sync-group-readiness" in args
    default = render(MANIFESTS)
    assert not any(obj["metadata"]["name"] == "guardhook-group-readiness" for obj in default)
    assert all(h["name"] != hook["name"] for h in one(default, "MutatingWebhookConfiguration")["webhooks"])


def _render_with_component(component: str, overlay: Path) -> list[Object]:
    """The default install (cert-manager overlay) with `component` added, rendered in `overlay`."""
    user_overlay(overlay, [MANIFESTS / "overlays" / "cert-manager"], [MANIFESTS / "components" / component])
    return render(overlay)
