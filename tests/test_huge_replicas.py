"""An LWS with `spec.replicas` or `size` at the int32 maximum (2^31 - 1, which the API server
accepts): every answer costs work proportional to the pods the view holds, never to `replicas`.

The view used here counts `group_pods` lookups and fails past a bound, so a loop over every group
index fails at once instead of running for minutes."""

from __future__ import annotations

import io
from typing import Any

import pytest
from eviction_helpers import engine, eviction, judge, lws_object, pod_object

from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.commands.drain_plan import render_text
from guardhook.groups.counts import all_groups, count_groups, view_group_health
from guardhook.groups.index import GroupIndex, group_index, group_keys
from guardhook.groups.ready import leaders
from guardhook.pdbsync.desired import MAX_EMPTY_GROUP_PDBS, plan
from guardhook.planning.drain import GROUPS_LISTED, plan_drain
from guardhook.policies.group_capacity import POLICY as GROUP_CAPACITY
from guardhook.policies.group_pdb import GROUP_PDBS_ANNOTATION

INT32_MAX = 2**31 - 1
LOOKUPS = 5_000


def bounded(view: ClusterView) -> ClusterView:
    """`view`, whose group index's `pods` fails after LOOKUPS calls (a walk over 2^31 groups would)."""
    index = group_index(view)
    real = index.pods
    calls = [0]

    def group_pods(namespace: str, lws_name: str, key: str) -> list[Any]:
        calls[0] += 1
        assert calls[0] <= LOOKUPS, "group_pods called once per group key: work grows with replicas"
        return real(namespace, lws_name, key)

    index.pods = group_pods  # type: ignore[method-assign]
    return view


def huge_view(
    replicas: int = INT32_MAX,
    size: int = 2,
    groups: tuple[int, ...] = (0, 1),
    annotations: dict[str, str] | None = None,
    extra: tuple[dict[str, Any], ...] = (),
) -> ClusterView:
    """serve/llm with `replicas` groups of `size`, of which only `groups` have (all their, Ready)
    pods (at most 3 pods each when size is huge)."""
    objects = [lws_object("llm", replicas, size, annotations)]
    for group in groups:
        objects += [pod_object("llm", group, worker, size) for worker in range(min(size, 3))]
    return bounded(view_from_objects([*objects, *extra]))


def test_the_view_indexes_the_groups_that_have_pods() -> None:
    view = huge_view(groups=(0, 5, 7))
    assert group_keys(view, "serve", "llm") == ["0", "5", "7"]
    view.remove(PODS, ("serve", "llm-5"))
    assert group_keys(view, "serve", "llm") == ["0", "5", "7"]  # llm-5-1 is still there
    view.remove(PODS, ("serve", "llm-5-1"))
    assert group_keys(view, "serve", "llm") == ["0", "7"]
    assert group_keys(view, "serve", "other") == []


def test_an_eviction_is_judged_with_groups_without_pods_counted_not_walked() -> None:
    denied = judge(engine(huge_view()), eviction("llm-0-1"))
    message = denied["status"]["message"]
    assert denied["status"]["code"] == 429
    assert f"but {INT32_MAX - 2} of its {INT32_MAX} groups are already broken" in message
    assert message.count("(0 of 2 pods exist)") == 21  # 20 groups named, then the rest summed up
    assert "group 2 (0 of 2 pods exist); group 3 (" in message and "group 21 (0 of 2" in message
    assert f"; and {INT32_MAX - 22} more groups with no pods (0 of 2 pods exist)." in message
    assert len(message) < 2_000


def test_a_budget_above_the_groups_without_pods_allows_and_records() -> None:
    eng = engine(huge_view(annotations={"guardhook.io/max-disrupted-groups": str(INT32_MAX)}))
    assert judge(eng, eviction("llm-0-1"))["allowed"] is True
    assert [e.group for e in eng.ledger.entries(("serve", "llm"))] == ["0"]
    assert judge(eng, eviction("llm-1-1"))["allowed"] is True  # INT32_MAX - 1 broken: still < B


def test_a_message_names_twenty_groups_without_pods_then_counts_the_rest() -> None:
    view = huge_view(replicas=30, groups=(0, 3, 29), extra=(pod_object("llm", 4, 0, 2, ready=False),))
    message = judge(engine(view), eviction("llm-0-1"))["status"]["message"]
    named = "; ".join(
        f"group {g} ({'0 of 2 pods exist' if g != 4 else '1 of 2 pods exist; not Ready: llm-4'})"
        for g in [1, 2, 4, *range(5, 23)]
    )
    assert (
        "already broken and at most 1 may be broken at a time (config parameter maxDisruptedGroups): "
        in message
    )
    assert f": {named}; and 6 more groups with no pods (0 of 2 pods exist). Retry" in message
    assert "but 27 of its 30 groups are already broken" in message


def test_group_counts_for_audit_and_metrics_are_arithmetic() -> None:
    leader_only = pod_object("llm", 9, 0, 2)
    view = huge_view(groups=(0, 1, 2), extra=(leader_only,))
    counts = count_groups(view, view.lws("serve", "llm"))  # type: ignore[arg-type]
    assert (counts.desired, counts.whole, counts.broken) == (INT32_MAX, 3, INT32_MAX - 3)
    assert counts.leader_ready_group_incomplete == 1  # group 9: its leader Ready, its worker missing
    assert [g.as_dict()["whole"] for g in all_groups(view)] == [3]


def test_a_group_of_int32_max_pods_is_judged_from_its_pods() -> None:
    view = huge_view(replicas=3, size=INT32_MAX, groups=(0,))
    lws = view.lws("serve", "llm")
    assert lws is not None
    health = view_group_health(view, lws, "0")
    assert not health.whole and health.problems == (f"3 of {INT32_MAX} pods exist",)
    counts = count_groups(view, lws)
    assert (counts.whole, counts.broken, counts.leader_ready_group_incomplete) == (0, 3, 1)


def test_leaders_of_the_readiness_gate_are_those_of_groups_with_pods() -> None:
    view = huge_view(groups=(0, 4))
    lws = view.lws("serve", "llm")
    assert lws is not None
    assert [(leader.group_index, leader.pod.name) for leader in leaders(view, lws)] == [
        ("0", "llm-0"),
        ("4", "llm-4"),
    ]


def test_group_capacity_sees_a_running_lws_without_walking_its_groups() -> None:
    view = huge_view(groups=(7,))
    assert GROUP_CAPACITY.already_running(view, lws_object("llm", INT32_MAX, 2)) is True
    assert GROUP_CAPACITY.already_running(view, lws_object("new", INT32_MAX, 2)) is False


def test_pdbsync_plans_every_group_with_pods_and_a_bounded_number_without() -> None:
    view = huge_view(groups=(0, 5), annotations={GROUP_PDBS_ANNOTATION: "true"})
    planned = plan(view)
    names = [p["metadata"]["name"] for p in planned.create]
    assert len(names) == 2 + MAX_EMPTY_GROUP_PDBS
    assert {"llm-group-0", "llm-group-5", "llm-group-1", f"llm-group-{MAX_EMPTY_GROUP_PDBS + 1}"} <= set(
        names
    )
    assert f"llm-group-{MAX_EMPTY_GROUP_PDBS + 2}" not in names
    min_available = {p["metadata"]["name"]: p["spec"]["minAvailable"] for p in planned.create}
    assert min_available["llm-group-0"] == 2 and min_available["llm-group-1"] == 0
    left_out = INT32_MAX - 2 - MAX_EMPTY_GROUP_PDBS
    assert planned.warnings == [
        f"serve/llm: {left_out} more groups with no pods (of spec.replicas {INT32_MAX}) get no "
        f"PodDisruptionBudget until their pods exist; at most {MAX_EMPTY_GROUP_PDBS} groups with no "
        "pods get one"
    ]


@pytest.mark.parametrize("replicas", [3, MAX_EMPTY_GROUP_PDBS + 1])
def test_pdbsync_plans_every_group_while_under_the_cap(replicas: int) -> None:
    planned = plan(huge_view(replicas=replicas, groups=(1,), annotations={GROUP_PDBS_ANNOTATION: "true"}))
    assert len(planned.create) == replicas and planned.warnings == []


def huge_cluster(replicas: int = INT32_MAX) -> list[dict[str, Any]]:
    """serve/llm (`replicas` groups of 2, only groups 0 and 1 with pods) with a node per pod."""
    objects: list[dict[str, Any]] = [lws_object("llm", replicas, 2)]
    objects += [pod_object("llm", g, w, 2) for g in (0, 1) for w in (0, 1)]
    for pod in list(objects[1:]):
        name = pod["spec"]["nodeName"]
        objects.append(
            {
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {},
                "status": {
                    "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "3"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return objects


def test_drain_plan_counts_groups_without_pods_and_lists_a_bounded_few(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = GroupIndex.pods
    calls = [0]

    def group_pods(self: GroupIndex, namespace: str, lws_name: str, key: str) -> list[Any]:
        calls[0] += 1
        assert calls[0] <= LOOKUPS, "group_pods called once per group key: work grows with replicas"
        return real(self, namespace, lws_name, key)

    monkeypatch.setattr(GroupIndex, "pods", group_pods)
    document = plan_drain(huge_cluster(), ["node-0-1"], {}).as_dict()
    row = document["lws"][0]
    assert row["losing"] == ["0"] and row["broken"] == [str(g) for g in range(2, GROUPS_LISTED + 2)]
    assert row["brokenNotListed"] == INT32_MAX - 2 - GROUPS_LISTED
    # the groups with no pod are a note, not a rebuild: only group 0, which the drain loses
    assert (row["lost"], row["rebuildable"]) == (1, 1)
    [podless] = document["podless"]
    assert podless["count"] == INT32_MAX - 2 and podless["groups"] == row["broken"] and not podless["noPod"]
    assert f"{INT32_MAX - 2} of its groups are broken" in document["refusedAtOnce"][0]["reason"]


def test_drain_plan_text_of_a_huge_lws_caps_its_lists_and_counts_the_rest() -> None:
    # one line held 1,000 group keys (5,000 characters), and waitsFor stopped at 1,000 unsaid
    plan = plan_drain(huge_cluster(), ["node-0-1"], {})
    wave = plan.waves[-1]
    assert len(wave.waits_for) == GROUPS_LISTED
    assert wave.waits_for_not_listed == INT32_MAX - 2 - GROUPS_LISTED
    assert wave.as_dict()["waitsForNotListed"] == INT32_MAX - 2 - GROUPS_LISTED
    out = io.StringIO()
    render_text(plan, out)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) < 300, text
    assert (
        f"  serve/llm: losing group 0; broken now 2, 3, 4, 5, 6, 7, 8, 9 … and {INT32_MAX - 10} more" in text
    )
    assert f"waits for serve/llm groups 2, 3, 4, 5, 6, 7, 8, 9 … and {INT32_MAX - 10} more" in text


def test_drain_plan_of_a_small_lws_lists_every_broken_group() -> None:
    row = plan_drain(huge_cluster(replicas=GROUPS_LISTED + 2), ["node-0-1"], {}).as_dict()["lws"][0]
    assert row["broken"] == [str(g) for g in range(2, GROUPS_LISTED + 2)] and "brokenNotListed" not in row
