"""Policy worker-delete, judged by the engine against views derived from the sample fleet."""

from __future__ import annotations

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.view.store import PODS
from guardhook.config import build_config

from conftest import load_review
from helpers import find, fleet_view, request_of, set_ready


def judge(request: dict, view=None, config=None) -> dict:
    return dict(Engine(view or fleet_view(), config).judge(request, "validate").response)


def worker_delete() -> dict:
    return request_of(load_review("s01-worker-delete.validating"))


def test_worker_of_a_whole_group_is_denied_naming_the_leader() -> None:
    response = judge(worker_delete())
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["reason"] == "Forbidden"
    assert response["status"]["message"].startswith("[worker-delete]")
    assert "kubectl delete pod -n serve llm-xl-0" in response["status"]["message"]


@pytest.mark.parametrize(
    "review", ["s03-worker-delete-gc.validating", "s04-worker-delete-lws-controller.validating"]
)
def test_garbage_collector_and_lws_controller_may_delete_workers(review: str) -> None:
    # Blocking the garbage collector after a leader delete would wedge the group for good.
    assert judge(request_of(load_review(review)))["allowed"] is True


def test_dry_run_is_judged_the_same() -> None:
    request = request_of(load_review("s05-worker-delete-dryrun.validating"))
    assert request["dryRun"] is True
    assert judge(request)["allowed"] is False


def test_leader_delete_is_allowed() -> None:
    assert judge(request_of(load_review("s02-leader-delete.validating")))["allowed"] is True


def test_kubelets_final_delete_of_a_terminating_pod_is_allowed() -> None:
    request = worker_delete()
    request["oldObject"]["metadata"]["deletionTimestamp"] = "2026-11-29T17:30:00Z"
    request["userInfo"] = {"username": "kubernetes-admin", "groups": ["system:masters"]}
    assert judge(request)["allowed"] is True


def test_worker_of_a_group_that_already_lost_a_pod_may_be_deleted() -> None:
    view = fleet_view()
    view.remove(PODS, ("serve", "llm-xl-0-1"))
    assert judge(worker_delete(), view)["allowed"] is True


def test_worker_of_a_group_with_an_unready_pod_may_be_deleted() -> None:
    view = fleet_view(lambda objs: set_ready(find(objs, "Pod", "llm-xl-0-3"), False))
    assert judge(worker_delete(), view)["allowed"] is True


def test_worker_of_a_group_with_a_terminating_pod_may_be_deleted() -> None:
    def terminate(objs: list) -> None:
        find(objs, "Pod", "llm-xl-0")["metadata"]["deletionTimestamp"] = "2026-11-29T17:30:00Z"

    assert judge(worker_delete(), fleet_view(terminate))["allowed"] is True


def test_other_groups_do_not_count() -> None:
    view = fleet_view()
    view.remove(PODS, ("serve", "llm-xl-1-1"))  # group 1 broken, group 0 still whole
    assert judge(worker_delete(), view)["allowed"] is False


def test_a_pod_outside_any_lws_is_allowed() -> None:
    request = worker_delete()
    labels = request["oldObject"]["metadata"]["labels"]
    for key in [k for k in labels if k.startswith("leaderworkerset.sigs.k8s.io/")]:
        del labels[key]
    assert judge(request)["allowed"] is True


def test_name_is_taken_from_old_object_when_request_has_none() -> None:
    request = worker_delete()
    del request["name"]
    response = judge(request)
    assert response["allowed"] is False
    assert "serve/llm-xl-0-2" in response["status"]["message"]


def test_group_size_comes_from_the_pod_when_the_lws_is_unknown() -> None:
    view = fleet_view(lambda objs: objs.remove(find(objs, "LeaderWorkerSet", "llm-xl")))
    assert judge(worker_delete(), view)["allowed"] is False


def test_a_stale_view_fails_closed_saying_so() -> None:
    view = fleet_view()
    view.stale_after_seconds = 5
    view.mark_broken(PODS, now=0.0)
    response = judge(worker_delete(), view)
    assert response["allowed"] is False
    assert "cluster view" in response["status"]["message"]
    assert judge(request_of(load_review("s02-leader-delete.validating")), view)["allowed"] is True


def test_exemptions_are_configurable_with_wildcards() -> None:
    config = build_config({"exemptions": {"users": ["kubernetes-*"]}})
    assert judge(worker_delete(), config=config)["allowed"] is True
    # Replacing the list drops the default exemptions: the garbage collector is judged again.
    gc = request_of(load_review("s03-worker-delete-gc.validating"))
    assert judge(gc, config=config)["allowed"] is False


def test_exempt_namespace_and_group() -> None:
    by_namespace = build_config({"exemptions": {"namespaces": ["serve"]}})
    assert judge(worker_delete(), config=by_namespace)["allowed"] is True
    by_group = build_config({"exemptions": {"groups": ["system:masters"]}})
    assert judge(worker_delete(), config=by_group)["allowed"] is True


def test_turned_off_policy_allows() -> None:
    config = build_config({"policies": {"worker-delete": {"actions": []}}})
    assert judge(worker_delete(), config=config)["allowed"] is True


def test_mutate_endpoint_never_runs_a_validating_policy() -> None:
    response = Engine(fleet_view()).judge(worker_delete(), "mutate").response
    assert response["allowed"] is True and "patch" not in response


def test_a_delete_without_old_object_is_judged_from_the_views_pod() -> None:
    request = worker_delete()
    del request["oldObject"]
    response = judge(request)
    assert response["allowed"] is False
    assert "worker 2 of group 0" in response["status"]["message"]
    leader = worker_delete()
    del leader["oldObject"]
    leader["name"] = "llm-xl-0"
    assert judge(leader)["allowed"] is True


def test_the_lws_size_outranks_the_pods_size_annotation() -> None:
    # The LWS now asks for one more pod per group than the pods were created with: group 0 is short.
    def grow(objects: list) -> None:
        template = find(objects, "LeaderWorkerSet", "llm-xl")["spec"]["leaderWorkerTemplate"]
        template["size"] = template["size"] + 1

    assert judge(worker_delete(), fleet_view(grow))["allowed"] is True
