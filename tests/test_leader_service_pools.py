"""Policy `leader-service` on InferencePools (v1 and v1alpha2, reviews built from the captured
Service reviews), on data-parallel LWSs (`guardhook.io/serving-pods`), and on selectors that
select nothing."""

from __future__ import annotations

import base64
import copy
import itertools
import json
from collections.abc import Callable
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pool_helpers import as_update, pool_review, pool_selector
from test_lws_reach import GROUP_KEYS, HASHES, P, concrete_pods, lws_objects
from test_lws_reach import NAME as NAME_IN_TESTS
from test_manifests import MANIFESTS, _called, rules_of

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.selectors import from_map, matches
from guardhook.cluster.view.store import ClusterView
from guardhook.config import build_config
from guardhook.groups.reach import reach
from guardhook.policies.shared.traffic import selects_no_lws_pod, working_selectors
from guardhook.wire import KubeObject

from conftest import Server, load_review
from helpers import find, fleet_view
from kustomize_lite import render

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
NAME = "leaderworkerset.sigs.k8s.io/name"
VERSIONS = ["v1", "v1alpha2"]
PATCH_PATH = {
    "v1": "/spec/selector/matchLabels/leaderworkerset.sigs.k8s.io~1worker-index",
    "v1alpha2": "/spec/selector/leaderworkerset.sigs.k8s.io~1worker-index",
}


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def engine(*actions: str, view: ClusterView | None = None) -> Engine:
    config = build_config({"policies": {"leader-service": {"actions": list(actions)}}})
    return Engine(view or fleet_view(), config, record=False)


def ours(response: dict[str, Any]) -> list[str]:
    return [w for w in response.get("warnings", []) if w.startswith("[leader-service]")]


def edited_lws(change: Callable[[KubeObject], None]) -> ClusterView:
    """The sample fleet with LWS serve/llm-xl changed by `change`."""
    return fleet_view(lambda objects: change(find(objects, "LeaderWorkerSet", "llm-xl")))


def annotated(value: str) -> Callable[[KubeObject], None]:
    def change(lws: KubeObject) -> None:
        lws["metadata"].setdefault("annotations", {})["guardhook.io/serving-pods"] = value

    return change


def without_leader_template(lws: KubeObject) -> None:
    del lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]


# --- InferencePools, both versions, on the real server ----------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_pool_selecting_workers_is_pinned_to_leaders_on_the_real_server(server: Server, version: str) -> None:
    body = pool_review("s12-service-app-selector.mutating", version)
    answer = server.post("/mutate", body)
    assert answer.status_code == 200, answer.text
    response = answer.json()["response"]
    assert response["allowed"] is True
    assert decoded_patch(response) == [{"op": "add", "path": PATCH_PATH[version], "value": "0"}]
    patched = jsonpatch.apply_patch(body["request"]["object"], decoded_patch(response))
    assert pool_selector(patched) == {"app": "llm-xl", WORKER_INDEX: "0"}
    again = copy.deepcopy(body)
    again["request"]["object"] = patched
    reinvoked = server.post("/mutate", again).json()["response"]
    assert (reinvoked["allowed"], "patch" in reinvoked) == (True, False)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "review",
    [
        "s13-service-leader-role.mutating",
        "s14-service-worker-index-0.mutating",
        "s17-service-unrelated.mutating",
    ],
    ids=["leader-template-label", "already-narrowed", "unrelated"],
)
def test_pools_that_cannot_reach_a_worker_are_left_alone(server: Server, version: str, review: str) -> None:
    response = server.post("/mutate", pool_review(review, version)).json()["response"]
    assert response == {"uid": load_review(review)["request"]["uid"], "allowed": True}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_pool_has_no_headless_exemption(version: str) -> None:
    # s15 is a headless Service (discovery); a pool with its selector routes traffic to every pod.
    response = engine("Mutate").judge(
        pool_review("s15-service-headless.mutating", version)["request"], "mutate"
    )
    assert decoded_patch(response.response) == [{"op": "add", "path": PATCH_PATH[version], "value": "0"}]


@pytest.mark.parametrize("version", VERSIONS)
def test_pool_update_is_judged_too(version: str) -> None:
    body = as_update(pool_review("s12-service-app-selector.mutating", version))
    assert decoded_patch(engine("Mutate").judge(body["request"], "mutate").response)


@pytest.mark.parametrize("version", VERSIONS)
def test_pool_deny_warn_audit_on_validate(version: str) -> None:
    request = pool_review("s12-service-app-selector.validating", version)["request"]
    denied = engine("Deny").judge(request, "validate").response
    assert (denied["allowed"], denied["status"]["code"]) == (False, 403)
    message = denied["status"]["message"]
    assert message.startswith("[leader-service] InferencePool serve/llm-xl-api")
    field = "spec.selector.matchLabels" if version == "v1" else "spec.selector"
    assert f"to {field}" in message
    assert "patch" not in engine("Deny").judge(request, "mutate").response
    warned = engine("Warn").judge(request, "validate").response
    assert warned["allowed"] is True and ours(warned)
    audited = engine("Audit").judge(request, "validate").response
    assert "llm-xl" in audited["auditAnnotations"]["leader-service"] and "warnings" not in audited


@pytest.mark.parametrize("version", VERSIONS)
def test_pool_pinning_a_non_zero_worker_index_is_warned_not_rewritten(version: str) -> None:
    body = pool_review("s14-service-worker-index-0.mutating", version, {NAME: "llm-xl", WORKER_INDEX: "2"})
    response = engine("Mutate").judge(body["request"], "mutate").response
    assert "patch" not in response
    (warning,) = ours(response)
    assert f"{WORKER_INDEX}=2" in warning and "InferencePool serve/llm-xl-pinned" in warning


def test_a_v1_pool_with_64_match_labels_is_warned_not_patched() -> None:
    labels = {"app": "llm-xl", **{f"example.com/l{i}": "x" for i in range(63)}}
    body = pool_review("s12-service-app-selector.mutating", "v1", labels)
    # the fleet's templates do not carry the extra labels: give them to both templates
    view = edited_lws(
        lambda lws: [
            t["metadata"]["labels"].update({f"example.com/l{i}": "x" for i in range(63)})
            for t in (
                lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"],
                lws["spec"]["leaderWorkerTemplate"]["workerTemplate"],
            )
        ]
    )
    response = engine("Mutate", view=view).judge(body["request"], "mutate").response
    assert "patch" not in response
    (warning,) = ours(response)
    assert "64 labels" in warning
    fewer = pool_review("s12-service-app-selector.mutating", "v1", dict(list(labels.items())[:63]))
    assert decoded_patch(engine("Mutate", view=view).judge(fewer["request"], "mutate").response)


def test_an_inference_pool_import_or_other_group_is_not_judged() -> None:
    body = pool_review("s12-service-app-selector.mutating", "v1")
    body["request"]["object"]["apiVersion"] = "example.com/v1"
    assert "patch" not in engine("Mutate").judge(body["request"], "mutate").response


# --- data-parallel LWSs: guardhook.io/serving-pods ---------------------------------------------


@pytest.mark.parametrize("make", ["service", "v1", "v1alpha2"])
def test_serving_pods_all_is_never_narrowed(make: str) -> None:
    body = (
        load_review("s12-service-app-selector.mutating")
        if make == "service"
        else pool_review("s12-service-app-selector.mutating", make)
    )
    view = edited_lws(annotated("all"))
    for actions, endpoint in ((("Mutate",), "mutate"), (("Deny",), "validate")):
        response = engine(*actions, view=view).judge(body["request"], endpoint).response
        assert response == {"uid": body["request"]["uid"], "allowed": True}, actions


@pytest.mark.parametrize("value", ["leaders", "All", ""])
def test_serving_pods_leaders_or_unreadable_narrows_as_before(value: str) -> None:
    request = load_review("s12-service-app-selector.mutating")["request"]
    response = engine("Mutate", view=edited_lws(annotated(value))).judge(request, "mutate").response
    assert decoded_patch(response)


def _second_lws(objects: list[KubeObject]) -> None:
    lws = copy.deepcopy(find(objects, "LeaderWorkerSet", "llm-xl"))
    lws["metadata"].update(name="dp", uid="dp-uid", annotations={"guardhook.io/serving-pods": "all"})
    objects.append(lws)


def test_a_selector_spanning_a_data_parallel_lws_and_workers_of_another_is_warned_not_narrowed() -> None:
    request = load_review("s12-service-app-selector.mutating")["request"]  # app: llm-xl, both LWSs
    response = engine("Mutate", view=fleet_view(_second_lws)).judge(request, "mutate").response
    assert "patch" not in response
    (warning,) = ours(response)
    assert "dp (serving-pods: all)" in warning and "llm-xl" in warning


@pytest.mark.parametrize("make", ["service", "v1"])
def test_every_pod_of_an_lws_without_leader_template_gets_the_patch_and_the_annotation_hint(
    make: str,
) -> None:
    body = (
        load_review("s12-service-app-selector.mutating")
        if make == "service"
        else pool_review("s12-service-app-selector.mutating", make)
    )
    response = (
        engine("Mutate", view=edited_lws(without_leader_template)).judge(body["request"], "mutate").response
    )
    assert decoded_patch(response)  # the default never flips by heuristic
    (hint,) = ours(response)
    assert 'guardhook.io/serving-pods: "all"' in hint and "no leaderTemplate" in hint


def test_no_hint_when_the_leaders_have_their_own_template() -> None:
    request = load_review("s12-service-app-selector.mutating")["request"]
    response = engine("Mutate").judge(request, "mutate").response
    assert decoded_patch(response) and not ours(response)


# --- selectors that select nothing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "selector", "suggestion"),
    [
        (
            "service",
            {"app": "llm-xl", "leaderworkerset.sigs.k8s.io/role": "leader"},
            "{app: llm-xl, " + WORKER_INDEX + ': "0"}',
        ),
        (
            "v1",
            {"leaderworkerset.sigs.k8s.io/role": "leader"},
            "{" + NAME + ": llm-xl, " + WORKER_INDEX + ': "0"}',
        ),
        (
            "v1alpha2",
            {NAME: "llm-xl", WORKER_INDEX: "7"},
            "{" + NAME + ": llm-xl, " + WORKER_INDEX + ': "0"}',
        ),
    ],
    ids=["role-label", "role-label-only", "worker-index-beyond-size"],
)
def test_a_selector_naming_lws_labels_no_pod_carries_is_said_to_select_nothing(
    make: str, selector: dict[str, str], suggestion: str
) -> None:
    if make == "service":
        request = copy.deepcopy(load_review("s12-service-app-selector.mutating")["request"])
        request["object"]["spec"]["selector"] = selector
    else:
        request = pool_review("s12-service-app-selector.mutating", make, selector)["request"]
    response = engine("Mutate").judge(request, "mutate").response
    assert "patch" not in response
    (warning,) = ours(response)
    assert "selects no pod" in warning
    assert suggestion in warning


@pytest.mark.parametrize(
    "selector",
    [
        {NAME: "not-created-yet", "leaderworkerset.sigs.k8s.io/role": "leader"},  # its LWS may come later
        {NAME: "llm-xl", "leaderworkerset.sigs.k8s.io/group-index": "9"},  # a group a scale-up adds
        {NAME: "llm-xl", "leaderworkerset.sigs.k8s.io/subgroup-index": "0"},  # subgroups: not modelled
    ],
    ids=["unknown-lws", "group-beyond-replicas", "subgroup"],
)
def test_selectors_that_may_select_pods_are_not_said_to_select_nothing(selector: dict[str, str]) -> None:
    request = copy.deepcopy(load_review("s12-service-app-selector.mutating")["request"])
    request["object"]["spec"]["selector"] = selector
    response = engine("Mutate").judge(request, "mutate").response
    assert not any("selects no pod" in w for w in ours(response))


def test_a_template_carrying_the_role_label_is_not_said_to_select_nothing() -> None:
    def label(lws: KubeObject) -> None:
        lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"][
            "leaderworkerset.sigs.k8s.io/role"
        ] = "leader"

    request = copy.deepcopy(load_review("s12-service-app-selector.mutating")["request"])
    request["object"]["spec"]["selector"] = {"app": "llm-xl", "leaderworkerset.sigs.k8s.io/role": "leader"}
    response = engine("Mutate", view=edited_lws(label)).judge(request, "mutate").response
    assert response == {"uid": request["uid"], "allowed": True}


lws_keyed_selectors = st.dictionaries(
    st.sampled_from(
        ["app", "role", P + "name", P + "worker-index", P + "group-index", P + "group-key", P + "role"]
    ),
    st.sampled_from(["llm", "web", "leader", NAME_IN_TESTS, "0", "1", "3", "k0"]),
    min_size=1,
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(lws_objects(), lws_keyed_selectors)
def test_select_nothing_is_only_said_of_selectors_no_concrete_pod_matches(
    lws: LeaderWorkerSet, selector: dict
) -> None:
    """Sound against concrete pods (built apart from the model), whatever the opaque labels; and
    every suggested selector reaches the LWS's leaders."""
    if not selects_no_lws_pod(selector, [lws]):
        return
    requirements = from_map(selector)
    for keys in itertools.permutations(GROUP_KEYS, lws.replicas):
        for hashes in itertools.product(HASHES, repeat=2):
            assert not any(matches(requirements, labels) for _, _, labels in concrete_pods(lws, keys, hashes))
    for suggestion in working_selectors(selector, [lws]):
        assert lws.replicas == 0 or reach(from_map(suggestion), lws).leaders


# --- the default install's webhook entry -----------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_the_default_install_calls_the_mutating_entry_for_pools_of_users_only(version: str) -> None:
    hooks = [
        {**hook, "_kind": config["kind"]}
        for config in render(MANIFESTS)
        if config["kind"].endswith("WebhookConfiguration")
        for hook in config["webhooks"]
    ]
    group = pool_review("s12-service-app-selector.mutating", version)["request"]["resource"]["group"]
    request = (group, version, "inferencepools", "CREATE")
    (hook,) = [h for h in hooks if request in rules_of(h)]
    assert (hook["_kind"], hook["clientConfig"]["service"]["path"]) == (
        "MutatingWebhookConfiguration",
        "/mutate",
    )
    body = pool_review("s12-service-app-selector.mutating", version)
    assert _called(hook, body)
    body["request"]["userInfo"]["username"] = "system:serviceaccount:lws-system:lws-controller-manager"
    assert not _called(hook, body)
