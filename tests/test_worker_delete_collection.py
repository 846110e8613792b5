"""`kubectl delete pods -l …` (a delete-collection) reaches admission as one DELETE per pod, each
judged alone against the view: workers of whole groups are refused, leaders go."""

from __future__ import annotations

import copy

from guardhook.admission.engine import Engine
from guardhook.cluster.selectors import parse
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.wire import KubeObject

from conftest import Server, load_review
from helpers import fleet_view, set_ready


def per_pod_deletes(selector: str, pods: list[KubeObject]) -> list[dict]:
    """The reviews the API server sends for a delete-collection: one DELETE per selected pod, the
    pod in `oldObject` (as in the captured s01)."""
    template = load_review("s01-worker-delete.validating")
    reviews = []
    for pod in pods:
        if not all(r.matches(pod["metadata"].get("labels", {})) for r in parse(selector)):
            continue
        review = copy.deepcopy(template)
        review["request"].update(
            name=pod["metadata"]["name"], oldObject=pod, uid=f"uid-{pod['metadata']['name']}"
        )
        reviews.append(review)
    return reviews


def fleet_pods() -> list[KubeObject]:
    return [o for o in copy.deepcopy(embedded_fleet_objects()) if o["kind"] == "Pod"]


def test_label_selected_delete_is_judged_pod_by_pod_on_the_real_server(server: Server) -> None:
    reviews = per_pod_deletes("app=llm-xl", fleet_pods())
    assert len(reviews) == 16
    allowed = {}
    for review in reviews:
        answer = server.post("/validate", review).json()["response"]
        allowed[review["request"]["name"]] = answer["allowed"]
        if not answer["allowed"]:
            assert answer["status"]["message"].startswith("[worker-delete]")
    assert sorted(name for name, ok in allowed.items() if ok) == [f"llm-xl-{g}" for g in range(4)]


def test_workers_of_an_already_broken_group_go_in_a_collection_delete() -> None:
    def break_group_1(objects: list[KubeObject]) -> None:
        set_ready(next(o for o in objects if o["metadata"]["name"] == "llm-xl-1-2"), False)

    engine = Engine(fleet_view(break_group_1))
    pods = fleet_pods()
    verdicts = {
        r["request"]["name"]: engine.judge(r["request"], "validate").response["allowed"]
        for r in per_pod_deletes("leaderworkerset.sigs.k8s.io/group-index in (1,2)", pods)
    }
    assert verdicts == {
        "llm-xl-1": True, "llm-xl-1-1": True, "llm-xl-1-2": True, "llm-xl-1-3": True,
        "llm-xl-2": True, "llm-xl-2-1": False, "llm-xl-2-2": False, "llm-xl-2-3": False,
    }  # fmt: skip
