"""LWS Hash group identity (lws KEP-898, PRs #987/#1050): groups keyed by 40-character keys, leaders
from the leader Deployment's ReplicaSet, workers from StatefulSets named after their leader pod. The sample
fleet turned Hash (tests/group_shapes.py), judged by the engine as an Ordinal LWS is."""

from __future__ import annotations

import copy

import group_shapes as shapes

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import GROUP_INDEX_LABEL, GROUP_KEY_LABEL, GROUP_REPLACEMENT_GATE
from guardhook.commands.audit import audit
from guardhook.commands.scan import Located
from guardhook.config import build_config, default_config
from guardhook.groups import resolve_object
from guardhook.groups.counts import count_groups
from guardhook.groups.placement import member_of_object
from guardhook.groups.ref import LWS_HASH
from guardhook.ledger import MemoryLedger
from guardhook.planning.drain import plan_drain

from conftest import load_review
from helpers import request_of, set_ready

PARAMS = {"maxDisruptedGroups": 1, "ledgerTTLSeconds": 120}


def hash_fleet() -> tuple[list, dict[int, tuple[str, str]]]:
    objects = shapes.fleet()
    return objects, shapes.to_hash(objects)


def judge(objects: list, request: dict, ledger: MemoryLedger | None = None) -> dict:
    engine = Engine(shapes.view(objects), build_config({}), ledger=ledger or MemoryLedger())
    return dict(engine.judge(request, "validate").response)


def worker_of(groups: dict[int, tuple[str, str]], key: str, worker: int) -> str:
    """Worker `worker` of the Hash group keyed `key`: `<leader pod>-<w>` (its StatefulSet is named
    after the leader pod)."""
    (leader,) = [name for found, name in groups.values() if found == key]
    return f"{leader}-{worker}"


def test_a_hash_pod_resolves_to_its_group_by_key_and_rank() -> None:
    objects, groups = hash_fleet()
    key, leader = groups[1]
    worker = shapes.pod(objects, worker_of(groups, key, 2))
    ref = resolve_object(shapes.view(objects), worker)
    assert ref is not None
    assert (ref.maker, ref.key, str(ref.rank), ref.size) == (LWS_HASH, key, "worker 2", 4)
    assert (ref.set.kind, ref.set.name, ref.restart) == ("LeaderWorkerSet", "llm-xl", (leader,))
    leader_ref = resolve_object(shapes.view(objects), shapes.pod(objects, leader))
    assert leader_ref is not None and leader_ref.is_leader and leader_ref.key == key


def test_labels_cannot_turn_a_hash_worker_into_a_leader() -> None:
    objects, groups = hash_fleet()
    key, _ = groups[0]
    worker = shapes.pod(objects, worker_of(groups, key, 1))
    worker["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = "0"
    member = member_of_object(worker)
    assert member is not None and member.worker_index == 1 and "worker StatefulSet" in member.inconsistent


def test_a_worker_delete_of_a_whole_hash_group_is_denied_naming_its_leader() -> None:
    objects, groups = hash_fleet()
    key, leader = groups[2]
    response = judge(objects, shapes.delete_request(shapes.pod(objects, worker_of(groups, key, 3))))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert f"worker 3 of group {key} of LeaderWorkerSet llm-xl (groupIdentity Hash)" in message
    assert f"kubectl delete pod -n serve {leader} --cascade=foreground" in message
    assert "new group key" in message and "group-replacement" in message


def test_a_worker_delete_of_a_broken_hash_group_is_allowed() -> None:
    objects, groups = hash_fleet()
    key, _ = groups[2]
    set_ready(shapes.pod(objects, worker_of(groups, key, 1)), False)
    response = judge(objects, shapes.delete_request(shapes.pod(objects, worker_of(groups, key, 3))))
    assert response["allowed"] is True


def test_hash_evictions_are_budgeted_per_group_key() -> None:
    objects, groups = hash_fleet()
    ledger = MemoryLedger()
    first = judge(objects, shapes.eviction_request(worker_of(groups, groups[0][0], 1)), ledger)
    same_group = judge(objects, shapes.eviction_request(worker_of(groups, groups[0][0], 2)), ledger)
    other = judge(objects, shapes.eviction_request(groups[3][1]), ledger)
    assert (first["allowed"], same_group["allowed"], other["allowed"]) == (True, True, False)
    assert other["status"]["code"] == 429
    assert f"group {groups[3][0]} of LeaderWorkerSet serve/llm-xl" in other["status"]["message"]
    assert (
        f"group {groups[0][0]} (eviction of {worker_of(groups, groups[0][0], 1)} recorded"
        in other["status"]["message"]
    )


def test_hash_groups_are_counted_whole_and_broken() -> None:
    objects, groups = hash_fleet()
    set_ready(shapes.pod(objects, groups[1][1]), False)
    view = shapes.view(objects)
    lws = view.lws("serve", "llm-xl")
    assert lws is not None and lws.hashed
    counted = count_groups(view, lws)
    assert (counted.desired, counted.whole, counted.broken) == (4, 3, 1)


def test_a_drain_plan_of_a_hash_lws_keeps_to_the_budget() -> None:
    objects, groups = hash_fleet()
    nodes = [shapes.pod(objects, groups[g][1])["spec"]["nodeName"] for g in (0, 1)]
    plan = plan_drain(objects, nodes, PARAMS)
    xl = next(lws for lws in plan.lws if (lws.namespace, lws.name) == ("serve", "llm-xl"))
    assert set(xl.losing) == {groups[0][0], groups[1][0]}
    assert len(plan.waves) == 2  # one group of the budget-1 LWS per wave


def gated_leader(objects: list, key: str) -> dict:
    """A replacement Hash leader as the LWS pod webhook leaves it under groupReplacementPolicy
    PostTermination: unbound, held by the `group-replacement` scheduling gate."""
    leader = copy.deepcopy(
        next(
            o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"].startswith(shapes.REPLICA_SET)
        )
    )
    meta = leader["metadata"]
    meta.update(name=f"{shapes.REPLICA_SET}-{key[-5:]}", uid=f"uid-{key[-5:]}")
    meta["labels"].update({GROUP_INDEX_LABEL: key, GROUP_KEY_LABEL: key})
    leader["spec"].pop("nodeName", None)
    leader["spec"]["schedulingGates"] = [{"name": GROUP_REPLACEMENT_GATE}]
    leader["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
    }
    return leader


def test_capacity_counts_gated_hash_leaders_as_groups_to_place() -> None:
    objects, _ = hash_fleet()
    scale_up = request_of(load_review("s29-lws-scale-up-1.validating"))  # llm-xl 4 -> 5 groups
    assert judge(objects, scale_up)["allowed"] is True  # one more group fits the free nodes
    objects.append(gated_leader(objects, "f" * 40))
    response = judge(objects, scale_up)
    assert response["allowed"] is False
    assert "1 scheduling-gated Hash leader counted as groups to place" in response["status"]["message"]


def test_a_noexecute_taint_on_two_hash_groups_meets_the_budget() -> None:
    objects, groups = hash_fleet()
    key0, _ = groups[0]
    # group 1 already broken: a taint dooming another whole group exceeds budget 1
    set_ready(shapes.pod(objects, groups[1][1]), False)
    node = shapes.pod(objects, worker_of(groups, key0, 1))["spec"]["nodeName"]
    request = request_of(load_review("n01-node-taint-noexecute.validating"))
    request["name"] = node
    request["object"]["metadata"]["name"] = node
    request["object"]["spec"]["taints"][0]["effect"] = "NoExecute"
    (warning,) = judge(objects, request)["warnings"]
    assert "LeaderWorkerSet serve/llm-xl would lose 1 whole group of 4" in warning
    assert f"group {key0} ({worker_of(groups, key0, 1)})" in warning
    assert f"already broken: group {groups[1][0]} (not Ready: {groups[1][1]})" in warning


def test_a_restarting_resize_of_a_hash_worker_is_a_group_disruption() -> None:
    objects, groups = hash_fleet()
    for pod in (o for o in objects if o["kind"] == "Pod"):
        pod["spec"]["containers"][0]["resizePolicy"] = [
            {"resourceName": "memory", "restartPolicy": "RestartContainer"}
        ]
    key0, key1 = groups[0][0], groups[1][0]
    ledger = MemoryLedger()

    def resize(name: str) -> dict:
        request = request_of(load_review("s01-worker-delete.validating"))
        old = copy.deepcopy(shapes.pod(objects, name))
        new = copy.deepcopy(old)
        new["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1600Gi"
        request.update(name=name, operation="UPDATE", subResource="resize", requestSubResource="resize")
        request.update(object=new, oldObject=old)
        return judge(objects, request, ledger)

    first = resize(worker_of(groups, key0, 2))
    assert first["allowed"] is True
    second = resize(worker_of(groups, key1, 1))
    assert second["allowed"] is False and second["status"]["code"] == 429
    assert f"would break group {key1}" in second["status"]["message"]


def test_audit_counts_hash_groups_whole_and_finds_no_broken_ones() -> None:
    objects, _ = hash_fleet()
    result = audit([Located("cluster", o) for o in objects], default_config())
    xl = next(g for g in result.groups if (g.namespace, g.name) == ("serve", "llm-xl"))
    assert (xl.desired, xl.whole, xl.broken) == (4, 4, 0)


def leader_service(objects: list, selector: dict) -> tuple[dict, dict]:
    """s12 (a Service selecting the LWS's pods) with `selector`, judged on /mutate: the response
    and the Service as the patch leaves it."""
    import base64
    import json

    import jsonpatch

    request = copy.deepcopy(load_review("s12-service-app-selector.mutating")["request"])
    request["object"]["spec"]["selector"] = selector
    engine = Engine(shapes.view(objects), build_config({}), ledger=MemoryLedger())
    response = dict(engine.judge(request, "mutate").response)
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return response, jsonpatch.apply_patch(request["object"], patch)


def test_leader_service_narrows_a_service_to_the_hash_leaders() -> None:
    # LWS main stamps worker-index "0" on the leader Deployment's pod template
    # (buildLeaderPodTemplateApplyConfiguration), so it still marks Hash leaders.
    objects, groups = hash_fleet()
    response, service = leader_service(objects, {"app": "llm-xl"})
    selector = service["spec"]["selector"]
    assert response["allowed"] is True
    assert selector == {"app": "llm-xl", "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    selected = sorted(
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "Pod"
        and o["metadata"]["namespace"] == service["metadata"]["namespace"]
        and all(o["metadata"]["labels"].get(k) == v for k, v in selector.items())
    )
    assert selected == sorted(leader for _, leader in groups.values())
    again, _ = leader_service(objects, selector)
    assert again["allowed"] is True and "patch" not in again


def test_a_per_group_service_of_a_hash_group_is_narrowed_to_its_leader() -> None:
    # group-index holds the group's key on every pod of a Hash group (lws pod webhook)
    objects, groups = hash_fleet()
    key, leader = groups[2]
    per_group = {"leaderworkerset.sigs.k8s.io/name": "llm-xl", GROUP_INDEX_LABEL: key}
    response, service = leader_service(objects, per_group)
    selector = service["spec"]["selector"]
    assert response["allowed"] is True and selector == {
        **per_group,
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    selected = [
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "Pod" and all(o["metadata"]["labels"].get(k) == v for k, v in selector.items())
    ]
    assert selected == [leader]
    # an ordinal names no Hash group: nothing to narrow
    ordinal, _ = leader_service(
        objects, {"leaderworkerset.sigs.k8s.io/name": "llm-xl", GROUP_INDEX_LABEL: "2"}
    )
    assert "patch" not in ordinal


def opted_in_hash_fleet() -> tuple[list, dict[int, tuple[str, str]]]:
    objects, groups = hash_fleet()
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == "llm-xl")
    lws["metadata"].setdefault("annotations", {})["guardhook.io/group-pdbs"] = "true"
    return objects, groups


def test_per_group_pdbs_of_a_hash_lws_select_each_group_by_its_key() -> None:
    from guardhook.pdbsync.desired import plan

    objects, groups = opted_in_hash_fleet()
    _, broken_leader = groups[1]
    set_ready(shapes.pod(objects, broken_leader), False)
    planned = plan(shapes.view(objects))
    by_key = {p["spec"]["selector"]["matchLabels"][GROUP_INDEX_LABEL]: p for p in planned.create}
    assert set(by_key) == {key for key, _ in groups.values()}
    for ordinal, (key, _) in groups.items():
        pdb = by_key[key]
        assert pdb["metadata"]["name"] == f"llm-xl-group-{key}"
        assert pdb["spec"]["selector"]["matchLabels"] == {
            "leaderworkerset.sigs.k8s.io/name": "llm-xl",
            GROUP_INDEX_LABEL: key,
        }
        assert pdb["spec"]["minAvailable"] == (0 if ordinal == 1 else 4)
        members = [
            o["metadata"]["name"]
            for o in objects
            if o["kind"] == "Pod" and o["metadata"]["labels"].get(GROUP_INDEX_LABEL) == key
        ]
        assert len(members) == 4  # the leader and its three workers
    assert (planned.update, planned.delete, planned.warnings) == ([], [], [])


def test_a_user_pdb_over_one_hash_group_keeps_guardhooks_off_that_group_only() -> None:
    from guardhook.pdbsync.desired import plan

    objects, groups = opted_in_hash_fleet()
    key, _ = groups[2]
    objects.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "mine", "namespace": "serve", "resourceVersion": "7"},
            "spec": {"selector": {"matchLabels": {GROUP_INDEX_LABEL: key}}, "minAvailable": 1},
        }
    )
    planned = plan(shapes.view(objects))
    kept = {p["spec"]["selector"]["matchLabels"][GROUP_INDEX_LABEL] for p in planned.create}
    assert kept == {k for k, _ in groups.values()} - {key}
    assert len(planned.warnings) == 1 and "mine" in planned.warnings[0] and key in planned.warnings[0]


def test_every_per_group_pdb_of_a_hash_lws_passes_group_pdb() -> None:
    from guardhook.pdbsync.desired import plan

    objects, _ = opted_in_hash_fleet()
    engine = Engine(shapes.view(objects), build_config({}), ledger=MemoryLedger())
    request = copy.deepcopy(load_review("s01-worker-delete.validating")["request"])
    for pdb in plan(shapes.view(objects)).create:
        request.update(
            resource={"group": "policy", "version": "v1", "resource": "poddisruptionbudgets"},
            operation="CREATE",
            namespace="serve",
            name=pdb["metadata"]["name"],
            object=pdb,
            oldObject=None,
            userInfo={"username": "system:serviceaccount:guardhook-system:guardhook"},
        )
        request["kind"] = {"group": "policy", "version": "v1", "kind": "PodDisruptionBudget"}
        response = engine.judge(request, "validate").response
        assert response["allowed"] is True and not response.get("warnings"), response


def test_group_pdb_advice_for_a_hash_lws_pins_a_key_not_an_ordinal() -> None:
    objects, _ = hash_fleet()
    engine = Engine(shapes.view(objects), build_config({}), ledger=MemoryLedger())
    request = copy.deepcopy(load_review("s01-worker-delete.validating")["request"])
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "all-of-it", "namespace": "serve"},
        "spec": {
            "selector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "llm-xl"}},
            "maxUnavailable": 1,
        },
    }
    request.update(
        resource={"group": "policy", "version": "v1", "resource": "poddisruptionbudgets"},
        kind={"group": "policy", "version": "v1", "kind": "PodDisruptionBudget"},
        operation="CREATE",
        name="all-of-it",
        object=pdb,
        oldObject=None,
    )
    message = engine.judge(request, "validate").response["status"]["message"]
    assert "can match pods of 4 groups of LeaderWorkerSet llm-xl" in message
    assert f"{GROUP_INDEX_LABEL}: <the group's key>" in message and f'{GROUP_INDEX_LABEL}: "0"' not in message


def test_a_hash_worker_without_its_worker_index_label_is_placed_by_its_statefulset() -> None:
    # The LWS pod webhook labels worker-index at admission; a pod without it (the label removed,
    # or admitted while that webhook was bypassed) is still the worker its StatefulSet makes it.
    objects, groups = hash_fleet()
    key, _ = groups[1]
    worker = shapes.pod(objects, worker_of(groups, key, 2))
    del worker["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"]
    member = member_of_object(worker)
    assert member is not None and (member.group_index, member.worker_index) == (key, 2)
    assert "labels say unreadable" in member.inconsistent
    ledger = MemoryLedger()
    assert judge(objects, shapes.eviction_request(worker_of(groups, groups[0][0], 1)), ledger)["allowed"]
    second = judge(objects, shapes.eviction_request(worker["metadata"]["name"]), ledger)
    assert second["allowed"] is False and second["status"]["code"] == 429  # a member, budgeted


def test_a_hash_group_with_no_pod_stalls_the_drain_and_is_counted_in_the_429() -> None:
    # Its key went with its pods: nothing names it, yet it fills the budget of 1. The plan said
    # "waits for nothing" and exited 0 while the webhook answered 429 with an empty list of groups.
    objects, groups = hash_fleet()
    key = groups[2][0]
    objects[:] = [o for o in objects if o.get("metadata", {}).get("labels", {}).get(GROUP_KEY_LABEL) != key]
    node = shapes.pod(objects, groups[0][1])["spec"]["nodeName"]
    plan = plan_drain(objects, [node], PARAMS)
    assert (plan.stalled, plan.ok) == ((1,), False)
    assert [(p.name, p.count, p.groups) for p in plan.podless] == [("llm-xl", 1, ())]
    denied = judge(objects, shapes.eviction_request(worker_of(groups, groups[0][0], 1)))
    assert denied["status"]["code"] == 429
    assert ": 1 group with no pods (0 of 4 pods exist). Retry" in denied["status"]["message"]
