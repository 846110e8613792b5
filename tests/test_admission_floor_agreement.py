"""The admission-policy floor answers as the webhook does (issue 40): the exported CEL, evaluated
offline with cel-python, against every captured review and variants built from them. The floor
never allows what the webhook denies; it denies what the webhook allows only in the cases
docs/policies.md lists (a group already broken, a PDB on an LWS of one replica or none), and it
does not cover what docs/policies.md says it leaves to the webhook."""

from __future__ import annotations

import copy
import functools
from typing import Any

import group_shapes as shapes
import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.view.store import ClusterView
from guardhook.config import Config, build_config, default_config
from guardhook.floor.evaluate import FloorAnswer, evaluate_floor
from guardhook.floor.export import export_floor

from conftest import REVIEWS, load_review
from helpers import find, fleet_view, request_of, set_ready

DEFAULT = default_config()
FLOOR_POLICIES = ("worker-delete", "group-pdb", "group-spec")
ADMIN = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
USERS = {
    "admin": ADMIN,
    "gc": {"username": "system:serviceaccount:kube-system:generic-garbage-collector", "groups": []},
    "lws": {"username": "system:serviceaccount:lws-system:lws-controller-manager", "groups": []},
    "kueue": {"username": "system:serviceaccount:kueue-system:kueue-controller-manager", "groups": []},
    "kubelet": {"username": "system:node:gpu-node-02", "groups": ["system:nodes"]},
    "lookalike": {"username": "system:serviceaccount:team-a:lws-controller-manager", "groups": []},
}


_FLOORS: dict[int, tuple[dict[str, Any], ...]] = {}


def floor(config: Config | None = None) -> tuple[dict[str, Any], ...]:
    """The exported floor for `config` (the defaults when None), exported once per configuration."""
    config = config or DEFAULT
    if id(config) not in _FLOORS:
        _FLOORS[id(config)] = tuple(export_floor(config).objects)
    return _FLOORS[id(config)]


@functools.cache
def whole_fleet() -> ClusterView:
    return fleet_view()


def webhook_denials(
    request: dict[str, Any], view: ClusterView | None = None, config: Config | None = None
) -> set[str]:
    """The floor's policies that the webhook denies (or, for a Warn policy, warns about) `request` by."""
    verdict = Engine(view or whole_fleet(), config, record=False).judge(copy.deepcopy(request), "validate")
    return {
        d.policy
        for d in verdict.decisions
        if d.policy in FLOOR_POLICIES and d.outcome in ("denied", "warned")
    }


def floor_denials(request: dict[str, Any], config: Config | None = None) -> set[str]:
    answer: FloorAnswer = evaluate_floor(floor(config), request)
    assert not answer.errors, answer.errors
    texts = answer.denied + answer.warnings
    return {pid for pid in FLOOR_POLICIES for t in texts if f"'guardhook-floor-{pid}'" in t}


CAPTURED = sorted(p.name.removesuffix(".json") for p in REVIEWS.glob("*.json"))


@pytest.mark.parametrize("review", CAPTURED)
def test_every_captured_review_gets_the_webhooks_answer(review: str) -> None:
    request = request_of(load_review(review))
    assert floor_denials(request) == webhook_denials(request), review


def test_the_captured_worker_delete_is_denied_naming_its_leader() -> None:
    answer = evaluate_floor(floor(), request_of(load_review("s01-worker-delete.validating")))
    (message,) = answer.denied
    assert "kubectl delete pod -n serve llm-xl-0 --cascade=foreground" in message
    assert "pod serve/llm-xl-0-2 is a Ready worker of LeaderWorkerSet llm-xl" in message


# --- worker-delete variants: every pod of group 0 and 1 as the deleted pod, each identity, each
# change of the pod a DELETE can show.


def _set_condition(pod: dict[str, Any], kind: str, status: str, reason: str = "") -> None:
    conditions = pod["status"].setdefault("conditions", [])
    conditions[:] = [c for c in conditions if c["type"] != kind]
    conditions.append({"type": kind, "status": status, "reason": reason})


def _mutations() -> dict[str, Any]:
    def terminating(pod: dict[str, Any]) -> None:
        pod["metadata"]["deletionTimestamp"] = "2026-11-29T18:00:00Z"

    def not_ready(pod: dict[str, Any]) -> None:
        set_ready(pod, False)

    def preempted(pod: dict[str, Any]) -> None:
        _set_condition(pod, "DisruptionTarget", "True", "PreemptionByScheduler")

    def cleared(pod: dict[str, Any]) -> None:
        _set_condition(pod, "DisruptionTarget", "False", "")

    def kueue_stop(pod: dict[str, Any]) -> None:
        _set_condition(pod, "TerminationTarget", "True", "StoppedByKueue")

    def no_labels_but_owner(pod: dict[str, Any]) -> None:
        for key in ("group-index", "worker-index"):
            pod["metadata"]["labels"].pop(f"leaderworkerset.sigs.k8s.io/{key}", None)

    def labels_only(pod: dict[str, Any]) -> None:
        pod["metadata"].pop("ownerReferences", None)

    def labelled_leader(pod: dict[str, Any]) -> None:
        pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = "0"

    def labelled_worker(pod: dict[str, Any]) -> None:
        pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = "7"

    def padded_zero(pod: dict[str, Any]) -> None:
        pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = "00"

    def foreign_owner(pod: dict[str, Any]) -> None:
        for ref in pod["metadata"].get("ownerReferences", []):
            ref["kind"] = "ReplicaSet"

    def no_name_label(pod: dict[str, Any]) -> None:
        pod["metadata"]["labels"].pop("leaderworkerset.sigs.k8s.io/name")

    def no_size(pod: dict[str, Any]) -> None:
        pod["metadata"]["annotations"].pop("leaderworkerset.sigs.k8s.io/size", None)

    return {
        "as-is": None,
        "terminating": terminating,
        "not-ready": not_ready,
        "preempted": preempted,
        "disruption-cleared": cleared,
        "kueue-stop": kueue_stop,
        "owner-only": no_labels_but_owner,
        "labels-only": labels_only,
        "labelled-leader": labelled_leader,
        "labelled-worker": labelled_worker,
        "padded-zero": padded_zero,
        "foreign-owner": foreign_owner,
        "no-name-label": no_name_label,
        "no-size": no_size,
    }


MUTATIONS = _mutations()
PODS = ("llm-xl-0", "llm-xl-0-1", "llm-xl-1-3")


def delete_of(pod_name: str, mutation: str, user: str) -> dict[str, Any]:
    """A DELETE review built from s01 (the API server's shape) for fleet pod `pod_name`."""
    request = request_of(load_review("s01-worker-delete.validating"))
    pods = [o for o in copy.deepcopy(list(whole_fleet_objects())) if o["kind"] == "Pod"]
    pod = find(pods, "Pod", pod_name)
    pod["metadata"].pop("managedFields", None)
    change = MUTATIONS[mutation]
    if change is not None:
        change(pod)
    request["name"] = pod_name
    request["oldObject"] = pod
    request["userInfo"] = USERS[user]
    return request


@functools.cache
def whole_fleet_objects() -> tuple[dict[str, Any], ...]:
    from guardhook.cluster.view.static import embedded_fleet_objects

    return tuple(embedded_fleet_objects())


def view_with(pod_name: str, mutation: str) -> ClusterView:
    """The fleet as the webhook's view sees it when `pod_name` is as `mutation` left it: the
    DELETE's oldObject is the stored pod, which the view holds too."""
    change = MUTATIONS[mutation]

    def edit(objects: list[dict[str, Any]]) -> None:
        if change is not None:
            change(find(objects, "Pod", pod_name))

    return fleet_view(edit)


@pytest.mark.parametrize("pod", PODS)
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_worker_delete_variants_agree_with_the_webhook(pod: str, mutation: str) -> None:
    request = delete_of(pod, mutation, "admin")
    floor_says = "worker-delete" in floor_denials(request)
    # With no size annotation the webhook takes the size from the LWS: whole, denied as before.
    assert floor_says == ("worker-delete" in webhook_denials(request, view_with(pod, mutation))), (
        pod,
        mutation,
    )


@pytest.mark.parametrize("user", sorted(USERS))
@pytest.mark.parametrize("pod", ["llm-xl-0-1", "llm-xl-0"])
def test_exempt_identities_are_exempt_from_the_floor_as_from_the_webhook(user: str, pod: str) -> None:
    request = delete_of(pod, "as-is", user)
    assert ("worker-delete" in floor_denials(request)) == ("worker-delete" in webhook_denials(request))


def test_a_lookalike_of_the_lws_controller_is_not_exempt() -> None:
    assert "worker-delete" in floor_denials(delete_of("llm-xl-0-1", "as-is", "lookalike"))


def broken_group_view(group: int) -> ClusterView:
    def edit(objects: list[dict[str, Any]]) -> None:
        set_ready(find(objects, "Pod", f"llm-xl-{group}-3"), False)

    return fleet_view(edit)


def cordoned_view(node: str) -> ClusterView:
    def edit(objects: list[dict[str, Any]]) -> None:
        find(objects, "Node", node)["spec"]["unschedulable"] = True

    return fleet_view(edit)


@pytest.mark.parametrize(
    ("case", "view"),
    [
        ("a worker of a group already broken", lambda: broken_group_view(0)),
        ("a worker on a cordoned node, within the group budget", lambda: cordoned_view("gpu-node-01")),
    ],
)
def test_the_floor_is_stricter_only_where_the_webhook_needs_the_view(case: str, view: Any) -> None:
    request = delete_of("llm-xl-0-1", "as-is", "admin")
    assert "worker-delete" not in webhook_denials(request, view()), case
    assert "worker-delete" in floor_denials(request), case


def test_the_documented_stricter_cases_are_in_the_policies_doc() -> None:
    from docs_helpers import DOCS

    from guardhook.floor.rules import RULES

    text = " ".join((DOCS / "policies.md").read_text().split())
    for build in RULES.values():
        rule = build({})
        for case in rule.stricter + rule.not_covered:
            assert case in text, case


# --- group-pdb variants built from s18 (the API server's PDB CREATE).


LWS = "leaderworkerset.sigs.k8s.io/"


def pdb_with(selector: dict[str, Any], user: str = "admin") -> dict[str, Any]:
    request = request_of(load_review("s18-pdb-lws-wide.validating"))
    request["object"]["spec"]["selector"] = selector
    request["userInfo"] = USERS[user]
    return request


AGREEING_PDBS = {
    "lws-wide": {"matchLabels": {LWS + "name": "llm-xl"}},
    "per-group": {"matchLabels": {LWS + "name": "llm-xl", LWS + "group-index": "1"}},
    "per-group-key": {
        "matchLabels": {LWS + "name": "llm-xl", LWS + "group-key": "27481622d97c0eeffbe48cac3192e35c521ed7aa"}
    },
    "leaders-only": {"matchLabels": {LWS + "name": "llm-xl", LWS + "worker-index": "0"}},
    "name-in": {"matchExpressions": [{"key": LWS + "name", "operator": "In", "values": ["llm-xl"]}]},
    "group-in-one": {
        "matchLabels": {LWS + "name": "llm-xl"},
        "matchExpressions": [{"key": LWS + "group-index", "operator": "In", "values": ["2"]}],
    },
    "group-notin": {
        "matchLabels": {LWS + "name": "llm-xl"},
        "matchExpressions": [{"key": LWS + "group-index", "operator": "NotIn", "values": ["2"]}],
    },
    "group-exists": {
        "matchLabels": {LWS + "name": "llm-xl"},
        "matchExpressions": [{"key": LWS + "group-index", "operator": "Exists"}],
    },
    "unrelated": {"matchLabels": {"app": "web"}},
}


@pytest.mark.parametrize("name", sorted(AGREEING_PDBS))
def test_pdb_variants_agree_with_the_webhook(name: str) -> None:
    request = pdb_with(AGREEING_PDBS[name])
    assert ("group-pdb" in floor_denials(request)) == ("group-pdb" in webhook_denials(request)), name


def test_the_lws_controller_is_exempt_from_the_pdb_floor() -> None:
    request = pdb_with(AGREEING_PDBS["lws-wide"], "lws")
    assert "group-pdb" not in floor_denials(request)
    assert "group-pdb" not in webhook_denials(request)


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {LWS + "name": "no-such-lws"}},
        {"matchLabels": {LWS + "name": "llm-xl", "tier": "none-has-it"}},
    ],
)
def test_pdb_floor_is_stricter_only_where_the_webhook_needs_the_lws(selector: dict[str, Any]) -> None:
    request = pdb_with(selector)
    assert "group-pdb" not in webhook_denials(request)
    assert "group-pdb" in floor_denials(request)


def test_a_pdb_reaching_the_lws_by_template_labels_is_left_to_the_webhook() -> None:
    request = pdb_with({"matchLabels": {"app": "llm-xl"}})
    assert "group-pdb" in webhook_denials(request)
    assert "group-pdb" not in floor_denials(request)  # documented: not covered by the floor


def test_a_workload_api_gang_member_delete_is_left_to_the_webhook() -> None:
    """worker-delete's floor knows LWS workers only (documented in its `not_covered`): the delete
    of a member of a whole `disruptionMode: all` gang is denied by the webhook, allowed by the floor."""
    objects = shapes.gang_objects()
    request = shapes.delete_request(shapes.pod(objects, "train-1-0"))
    request["userInfo"] = {"username": "kubernetes-admin", "groups": ["system:authenticated"]}
    assert "worker-delete" in webhook_denials(request, shapes.view(objects))
    assert "worker-delete" not in floor_denials(request)


# --- group-spec variants built from s35 (an LWS CREATE).


def lws_with(change: Any) -> dict[str, Any]:
    request = request_of(load_review("s35-lws-restart-none.validating"))
    change(request["object"])
    return request


def _template(lws: dict[str, Any]) -> dict[str, Any]:
    return lws["spec"]["leaderWorkerTemplate"]


def _leader(lws: dict[str, Any]) -> dict[str, Any]:
    return _template(lws)["leaderTemplate"]["spec"]["containers"][0]


def _fix_rollout(lws: dict[str, Any]) -> None:
    lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] = {"maxSurge": 1, "maxUnavailable": 0}


SPEC_CHANGES = {
    "clean": lambda o: (
        _template(o).update(restartPolicy="RecreateGroupOnPodRestart"),
        _leader(o).update(readinessProbe={"httpGet": {"path": "/health", "port": 8000}}),
    ),
    "tcp-readiness": lambda o: (
        _template(o).update(restartPolicy="RecreateGroupOnPodRestart"),
        _leader(o).update(readinessProbe={"tcpSocket": {"port": 8000}}),
    ),
    "short-startup": lambda o: _leader(o).update(startupProbe={"httpGet": {"path": "/", "port": 1}}),
    "liveness-alone": lambda o: (
        _leader(o).pop("startupProbe"),
        _leader(o).update(livenessProbe={"httpGet": {"path": "/", "port": 1}, "periodSeconds": 5}),
    ),
    "long-liveness": lambda o: (
        _leader(o).pop("startupProbe"),
        _leader(o).update(livenessProbe={"httpGet": {"path": "/", "port": 1}, "initialDelaySeconds": 600}),
    ),
    "no-leader-template": lambda o: _template(o).pop("leaderTemplate"),
    "default-restart": lambda o: _template(o).update(restartPolicy="Default"),
    "bad-annotations": lambda o: (
        o["metadata"]
        .setdefault("annotations", {})
        .update(
            {
                "guardhook.io/max-disrupted-groups": "two",
                "guardhook.io/serving-pods": "workers",
                "guardhook.io/group-pdbs": "TRUE",
            }
        )
    ),
    "bad-readiness-optin": lambda o: (
        o["metadata"].setdefault("annotations", {}).update({"guardhook.io/group-readiness": "yes"})
    ),
    "zero-budget": lambda o: (
        o["metadata"].setdefault("annotations", {}).update({"guardhook.io/max-disrupted-groups": "00"})
    ),
}


def _findings(request: dict[str, Any]) -> int:
    verdict = Engine(whole_fleet(), record=False).judge(copy.deepcopy(request), "validate")
    found = [d for d in verdict.decisions if d.policy == "group-spec" and d.outcome == "warned"]
    findings = [f for d in found for f in (d.findings or (d.message,))]
    # The rollout lint is left to the webhook (percentages need string parsing); so are the
    # several annotation findings the floor reports as one.
    annotations = sum(1 for f in findings if f.startswith("annotation "))
    rollout = sum(1 for f in findings if f.startswith("rollout "))
    return len(findings) - rollout - max(annotations - 1, 0)


@pytest.mark.parametrize("name", sorted(SPEC_CHANGES))
def test_group_spec_lints_warn_as_the_webhook_does(name: str) -> None:
    request = lws_with(lambda o: (_fix_rollout(o), SPEC_CHANGES[name](o)))
    answer = evaluate_floor(floor(), request)
    assert not answer.errors and not answer.denied
    assert len(answer.warnings) == _findings(request), name


# --- exemptions come from the configuration: the floor and the webhook never disagree on who is exempt.


EXEMPTING = build_config(
    {
        "exemptions": {
            "users": ["ci-bot-*", "alice", "system:node:*", "ops-[ab]?"],
            "groups": ["platform-admins"],
            "namespaces": ["scratch"],
        },
        "policies": {"worker-delete": {"exemptions": {"users": ["bob"]}}},
    }
)


@pytest.mark.parametrize(
    ("user", "namespace"),
    [
        ({"username": "ci-bot-7", "groups": []}, "serve"),
        ({"username": "ci-bot", "groups": []}, "serve"),
        ({"username": "alice", "groups": []}, "serve"),
        ({"username": "alice2", "groups": []}, "serve"),
        ({"username": "bob", "groups": []}, "serve"),
        ({"username": "ops-a1", "groups": []}, "serve"),
        ({"username": "ops-c1", "groups": []}, "serve"),
        ({"username": "carol", "groups": ["platform-admins"]}, "serve"),
        ({"username": "carol", "groups": ["devs"]}, "scratch"),
        ({"username": "system:serviceaccount:lws-system:lws-controller-manager", "groups": []}, "serve"),
        ({"username": "system:node:gpu-node-01", "groups": ["system:nodes"]}, "serve"),
        ({"username": "system:node:evil", "groups": ["system:authenticated"]}, "serve"),
        ({"username": "system:node:evil"}, "serve"),
    ],
)
def test_configured_exemptions_hold_for_the_floor_as_for_the_webhook(
    user: dict[str, Any], namespace: str
) -> None:
    request = delete_of("llm-xl-0-1", "as-is", "admin")
    request["userInfo"] = user
    request["namespace"] = request["oldObject"]["metadata"]["namespace"] = namespace
    webhook = "worker-delete" in webhook_denials(request, config=EXEMPTING)
    assert ("worker-delete" in floor_denials(request, EXEMPTING)) == webhook, user
