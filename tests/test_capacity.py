"""guardhook.capacity: pod shapes, the incrementally updated index, and the exact group solver
(with a property test against brute force on small random clusters)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardhook.capacity import CapacityIndex, GroupDemand, fit_groups, index_for, shape_of_template
from guardhook.capacity.index import ABSENT
from guardhook.capacity.shapes import PODS
from guardhook.capacity.solver import (
    Capacity,
    domains_that_fit,
    group_bounds,
    max_groups,
    place_pending,
    pod_caps,
    prepare,
)
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import NODES, ClusterView
from guardhook.cluster.view.store import PODS as POD_KIND
from guardhook.policies.group_capacity import shortfall_message

from gpu_cluster import node_object

GPU = "nvidia.com/gpu"


def node(
    name: str,
    cpu: str = "8",
    gpu: int = 0,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "64Gi", "pods": str(pods)}
    if gpu:
        allocatable[GPU] = str(gpu)
    return node_object(name, allocatable, labels, taints, unschedulable, ready)


def pod(
    name: str,
    node_name: str = "",
    cpu: str = "1",
    gpu: int = 0,
    phase: str = "Running",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpu:
        requests[GPU] = str(gpu)
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase},
    }


def template(cpu: str = "1", gpu: int = 0, **spec: Any) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu}
    if gpu:
        requests[GPU] = str(gpu)
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec}}


def groups_that_fit(
    view: ClusterView,
    leader: dict[str, Any],
    worker: dict[str, Any] | None = None,
    size: int = 1,
    count: int = 1,
    exclusive: str | None = None,
) -> int:
    demand = GroupDemand(
        leader=shape_of_template(leader),
        worker=shape_of_template(worker or leader),
        size=size,
        count=count,
        namespace="default",
        exclusive_key=exclusive,
    )
    return fit_groups(index_for(view), demand).fits


# ---- shapes ----------------------------------------------------------------------------------


def test_requests_default_to_limits_and_add_a_pod_slot() -> None:
    shape = shape_of_template(
        {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", GPU: "4"}}}]}}
    )
    assert shape.request_map == {"cpu": 2000, GPU: 4, PODS: 1}


def test_sidecars_add_and_init_containers_take_the_maximum() -> None:
    spec = {
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "init", "resources": {"requests": {"cpu": "6"}}},
        ],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"cpu": "500m"},
    }
    # steady 2 + sidecar 1 = 3; init peak 6 + sidecar 1 = 7; plus overhead 0.5
    assert shape_of_template({"spec": spec}).request_map["cpu"] == 7500


# ---- eligibility through the index -----------------------------------------------------------


def test_taints_need_tolerations_but_prefer_no_schedule_does_not_filter() -> None:
    view = view_from_objects(
        [
            node("tainted", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
            node("soft", taints=[{"key": "x", "effect": "PreferNoSchedule"}]),
        ]
    )
    assert groups_that_fit(view, template(cpu="8"), count=5) == 1  # only "soft"
    tolerant = template(cpu="8", tolerations=[{"key": "gpu", "operator": "Equal", "value": "yes"}])
    assert groups_that_fit(view, tolerant, count=5) == 2
    wrong_value = template(cpu="8", tolerations=[{"key": "gpu", "operator": "Equal", "value": "no"}])
    assert groups_that_fit(view, wrong_value, count=5) == 1
    wildcard = template(cpu="8", tolerations=[{"operator": "Exists"}])
    assert groups_that_fit(view, wildcard, count=5) == 2


def test_no_execute_taint_with_other_effect_toleration_does_not_fit() -> None:
    view = view_from_objects([node("n", taints=[{"key": "k", "effect": "NoExecute"}])])
    other_effect = template(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}])
    assert groups_that_fit(view, other_effect) == 0
    same_effect = template(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute"}])
    assert groups_that_fit(view, same_effect) == 1


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("nodes", "tolerations", "fits"),
    [
        # kube-scheduler never reads the Ready condition: a NotReady node without the lifecycle
        # controller's taints is a candidate (the controller taints it within seconds)
        ([node("a", ready=False)], [], 1),
        ([node("a", ready=False, taints=[NOT_READY])], [], 0),
        ([node("a", taints=[UNREACHABLE])], [], 0),
        ([node("a", ready=False, taints=[NOT_READY])], [{"key": NOT_READY["key"], "operator": "Exists"}], 1),
        # NodeUnschedulable: a cordoned node takes a pod that tolerates unschedulable:NoSchedule
        ([node("b", unschedulable=True)], [], 0),
        ([node("b", unschedulable=True)], [CORDON], 1),
        ([node("b", unschedulable=True)], [{"operator": "Exists"}], 1),  # the wildcard toleration
        ([node("b", unschedulable=True)], [{**CORDON, "effect": "NoExecute"}], 0),
        # the controller's own taint for a cordon is the same taint, not judged twice
        ([node("b", unschedulable=True, taints=[{**CORDON, "value": ""}])], [CORDON], 1),
        ([node("a", ready=False, taints=[NOT_READY]), node("b", unschedulable=True), node("c")], [], 1),
        (
            [node("a", ready=False, taints=[NOT_READY]), node("b", unschedulable=True), node("c")],
            [{"operator": "Exists"}],
            3,
        ),
    ],
)
def test_node_filter_is_kube_schedulers(
    nodes: list[dict[str, Any]], tolerations: list[Any], fits: int
) -> None:
    view = view_from_objects(nodes)
    assert groups_that_fit(view, template(cpu="8", tolerations=tolerations), count=3) == fits


def test_pending_pods_are_not_placed_on_cordoned_or_not_ready_nodes() -> None:
    nodes = [node("cordoned", unschedulable=True), node("sick", taints=[NOT_READY]), node("ok", cpu="8")]
    view = view_from_objects([*nodes, pod("waiting", cpu="8")])
    # the pending pod can only go to "ok"; a tolerant group still has the two others
    assert groups_that_fit(view, template(cpu="8", tolerations=[{"operator": "Exists"}]), count=3) == 2


def test_node_selector_and_required_affinity_operators() -> None:
    view = view_from_objects(
        [
            node("a", labels={"pool": "gpu", "gen": "3"}),
            node("b", labels={"pool": "gpu", "gen": "5"}),
            node("c", labels={"pool": "cpu"}),
        ]
    )

    def fits_with(*expressions: dict[str, Any]) -> int:
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
                }
            }
        }
        return groups_that_fit(view, template(cpu="8", affinity=affinity), count=3)

    assert groups_that_fit(view, template(cpu="8", nodeSelector={"pool": "gpu"}), count=3) == 2
    assert groups_that_fit(view, template(cpu="8", nodeSelector={"pool": "tpu"}), count=3) == 0
    assert fits_with({"key": "pool", "operator": "In", "values": ["cpu", "tpu"]}) == 1
    assert fits_with({"key": "pool", "operator": "NotIn", "values": ["cpu"]}) == 2
    assert fits_with({"key": "gen", "operator": "NotIn", "values": ["3"]}) == 2  # c has no gen label
    assert fits_with({"key": "gen", "operator": "Exists"}) == 2
    assert fits_with({"key": "gen", "operator": "DoesNotExist"}) == 1
    assert fits_with({"key": "gen", "operator": "Gt", "values": ["4"]}) == 1
    assert fits_with({"key": "gen", "operator": "Lt", "values": ["4"]}) == 1
    assert fits_with({"key": "gen", "operator": "Gt", "values": ["x"]}) == 0
    assert (
        fits_with(
            {"key": "pool", "operator": "In", "values": ["gpu"]},
            {"key": "gen", "operator": "Gt", "values": ["4"]},
        )
        == 1
    )


def test_affinity_terms_are_ored_and_match_fields_name_nodes() -> None:
    view = view_from_objects([node("a", labels={"zone": "1"}), node("b", labels={"zone": "2"}), node("c")])
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["1"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]},
                ]
            }
        }
    }
    assert groups_that_fit(view, template(cpu="8", affinity=affinity), count=3) == 2


# ---- requests and the incremental index ------------------------------------------------------


def test_free_capacity_counts_bound_non_terminal_pods_and_pod_slots() -> None:
    view = view_from_objects(
        [
            node("a", cpu="8", pods=3),
            pod("p1", "a", cpu="2"),
            pod("p2", "a", cpu="2"),
            pod("done", "a", cpu="4", phase="Succeeded"),
        ]
    )
    assert groups_that_fit(view, template(cpu="2"), count=5) == 1  # cpu room for 2, pod slots for 1
    assert groups_that_fit(view, template(cpu="3"), count=5) == 1
    assert groups_that_fit(view, template(cpu="5"), count=5) == 0


def test_index_follows_pod_and_node_changes() -> None:
    view = view_from_objects([node("a", cpu="8")])
    index = index_for(view)
    assert groups_that_fit(view, template(cpu="4"), count=5) == 2
    view.upsert(POD_KIND, pod("p", "a", cpu="4"))
    assert groups_that_fit(view, template(cpu="4"), count=5) == 1
    view.upsert(POD_KIND, pod("p", "a", cpu="4", phase="Failed"))  # terminal: frees its requests
    assert groups_that_fit(view, template(cpu="4"), count=5) == 2
    view.upsert(POD_KIND, pod("q", "b", cpu="4"))  # bound to a node not seen yet
    view.upsert(NODES, node("b", cpu="8"))
    assert groups_that_fit(view, template(cpu="4"), count=5) == 3
    view.remove(POD_KIND, ("default", "q"))
    assert groups_that_fit(view, template(cpu="4"), count=5) == 4
    view.remove(NODES, ("", "b"))
    assert groups_that_fit(view, template(cpu="4"), count=5) == 2
    assert index is index_for(view)  # one index per view, kept up to date


def test_node_count_follows_nodes_added_updated_removed_and_back() -> None:
    view = view_from_objects([node("a"), node("b")])
    index = index_for(view)
    assert index.node_count == 2
    view.upsert(NODES, node("a", cpu="16"))  # an update is not another node
    view.upsert(NODES, node("c"))
    assert index.node_count == 3
    view.remove(NODES, ("", "b"))
    view.remove(NODES, ("", "b"))  # removed twice: counted once
    assert index.node_count == 2
    view.upsert(NODES, node("b"))  # back, in its old row
    assert index.node_count == 3 == len(view.nodes())


def test_a_taint_first_seen_after_a_decision_is_judged_for_the_same_tolerations() -> None:
    """Which taint classes a set of tolerations tolerates is kept between decisions; a node
    with a taint no node had before must still be filtered for the same template."""
    view = view_from_objects([node("a", cpu="8")])
    shape = shape_of_template(template(cpu="4"))
    with view.lock:
        assert index_for(view).eligible(shape).tolist() == [True]
    gpu_taint = {"key": GPU, "value": "present", "effect": "NoSchedule"}
    view.upsert(NODES, node("b", cpu="8", taints=[gpu_taint]))
    with view.lock:
        assert index_for(view).eligible(shape).tolist() == [True, False]
    tolerant = shape_of_template(template(cpu="4", tolerations=[{"key": GPU, "operator": "Exists"}]))
    with view.lock:
        assert index_for(view).eligible(tolerant).tolist() == [True, True]
    assert groups_that_fit(view, template(cpu="4"), count=5) == 2


def test_a_status_update_leaves_the_index_state_and_a_binding_moves_it() -> None:
    view = view_from_objects([node("a", cpu="8"), pod("p", "a", cpu="4")])
    index = index_for(view)
    before = index.state()
    running = pod("p", "a", cpu="4")
    running["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    view.upsert(POD_KIND, running)  # the kubelet reports status: nothing counted moved
    assert index.state() == before
    assert groups_that_fit(view, template(cpu="4"), count=5) == 1
    view.upsert(POD_KIND, pod("p", "a", cpu="4", phase="Succeeded"))
    assert index.state() != before
    assert groups_that_fit(view, template(cpu="4"), count=5) == 2


def test_arrays_a_decision_reuses_are_read_only() -> None:
    view = view_from_objects([node("a", cpu="8"), pod("w", cpu="2")])  # one pending pod
    shape = shape_of_template(template(cpu="4"))
    demand = GroupDemand(leader=shape, worker=shape, size=1, count=1, namespace="default")
    with view.lock:
        problem = prepare(index_for(view), demand)
        again = prepare(index_for(view), demand)
    assert problem.cap.free is again.cap.free and problem.cap.leader_ok is again.cap.leader_ok
    assert problem.cap.free[0, problem.resources.index("cpu")] == 6000  # the pending pod placed
    with pytest.raises(ValueError, match="read-only"):
        problem.cap.free[0, 0] = 0
    with pytest.raises(ValueError, match="read-only"):
        problem.cap.leader_ok[0] = False


def test_a_problem_is_made_once_per_state_and_demand_shapes() -> None:
    """Two demands of the same shapes and namespace read one Problem while the index state stays
    (its derived counts included); a pod that moves capacity, or another namespace, gets its own."""
    view = view_from_objects([node("a", cpu="8"), node("b", cpu="8")])
    shape = shape_of_template(template(cpu="4"))
    demand = GroupDemand(leader=shape, worker=shape, size=2, count=3, namespace="default")
    with view.lock:
        first = prepare(index_for(view), demand)
        again = prepare(index_for(view), replace(demand, size=1, count=9))
        other = prepare(index_for(view), replace(demand, namespace="serve"))
    assert again is first and other is not first
    assert first.worker_slots == 4 and fit_groups(index_for(view), demand).pod_slots == 0
    assert first.cap.worker.flags.writeable is False
    view.upsert(POD_KIND, pod("p", "a", cpu="4"))
    with view.lock:
        moved = prepare(index_for(view), demand)
    assert moved is not first and moved.worker_slots == 3
    assert fit_groups(index_for(view), demand).fits == 1


def test_index_matches_a_rebuild_after_many_changes() -> None:
    view = view_from_objects([node(f"n{i}", cpu="16", gpu=8) for i in range(4)])
    live = index_for(view)
    for i in range(40):
        view.upsert(POD_KIND, pod(f"p{i}", f"n{i % 4}", cpu=str(1 + i % 3), gpu=i % 2))
    for i in range(0, 40, 3):
        view.remove(POD_KIND, ("default", f"p{i}"))
    rebuilt = CapacityIndex.of_view(view)
    names = ["cpu", GPU, PODS]
    assert live.names(range(live.rows)) == rebuilt.names(range(rebuilt.rows))
    assert (live.free(names) == rebuilt.free(names)).all()
    assert live.free(names)[:, 2].tolist() == [110 - 6, 110 - 7, 110 - 7, 110 - 6]


def test_pending_pods_claim_capacity_first() -> None:
    view = view_from_objects([node("a", cpu="8"), node("b", cpu="8"), pod("waiting", cpu="6")])
    # the pending pod takes 6 of one node: room for 4 + 4 on the other, 2 on the first
    assert groups_that_fit(view, template(cpu="4"), count=5) == 2
    assert groups_that_fit(view, template(cpu="8"), count=5) == 1


def test_resources_a_node_lacks_do_not_fit() -> None:
    view = view_from_objects([node("cpu-only", cpu="64")])
    assert groups_that_fit(view, template(cpu="1", gpu=1)) == 0


# ---- groups ----------------------------------------------------------------------------------


def test_same_shape_groups_sum_pod_slots_across_nodes() -> None:
    view = view_from_objects([node(f"n{i}", cpu="8", gpu=8) for i in range(5)])
    # 5 nodes, one 8-GPU pod each: two groups of 2 fit, not three
    assert groups_that_fit(view, template(gpu=8), size=2, count=3) == 2


def test_mixed_leader_and_worker_shapes() -> None:
    view = view_from_objects([node("a", cpu="10", gpu=8), node("b", cpu="10", gpu=8)])
    leader = template(cpu="6")
    # a node holds a leader and 2 workers of 1 cpu / 4 GPUs (6 + 2 <= 10 cpu)
    assert groups_that_fit(view, leader, template(cpu="1", gpu=4), size=3, count=3) == 2
    # with 3-cpu workers a node holds 2 workers, or a leader and 1 worker: counted apart there
    # would be room for 2 leaders and 4 workers, but together only one group of 3 fits
    assert groups_that_fit(view, leader, template(cpu="3", gpu=4), size=3, count=2) == 1
    assert groups_that_fit(view, leader, template(cpu="3", gpu=4), size=2, count=3) == 2


@pytest.mark.parametrize(
    ("worker_gpu", "fits", "ending"), [(16, 0, "fit on"), (4, 1, "fit beside the first 1 on")]
)
def test_a_mixed_shape_shortfall_names_the_groups_placed_before_it(
    worker_gpu: int, fits: int, ending: str
) -> None:
    # with none placed the message ended "they do not fit beside the first 0"
    view = view_from_objects([node("a", cpu="10", gpu=8)])
    demand = GroupDemand(
        leader=shape_of_template(template(cpu="6")),
        worker=shape_of_template(template(cpu="1", gpu=worker_gpu)),
        size=2,
        count=2,
        namespace="default",
    )
    fit = fit_groups(index_for(view), demand)
    assert (fit.fits, fit.pod_slots) == (fits, -1)
    message = shortfall_message(fit, "llm", 2)
    assert f"; the {'first' if not fits else 'second'} needs a leader requesting" in message
    assert f"they do not {ending} the eligible nodes" in message
    assert "beside the first 0" not in message


def test_exclusive_topology_one_group_per_free_domain() -> None:
    nodes = [node(f"n{d}{i}", gpu=8, labels={"rack": f"r{d}"}) for d in range(3) for i in range(2)]
    nodes.append(node("unlabelled", gpu=8))
    holder = pod("other-0", "n00", cpu="0", labels={"leaderworkerset.sigs.k8s.io/group-key": "abc"})
    view = view_from_objects([*nodes, holder])
    # size 2 needs two nodes of one rack; rack r0 already holds a group; unlabelled nodes are no domain
    assert groups_that_fit(view, template(gpu=8), size=2, count=3, exclusive="rack") == 2
    # without exclusive topology the same pods spread freely: 7 nodes hold 3 groups of 2
    assert groups_that_fit(view, template(gpu=8), size=2, count=3) == 3
    # a group of 3 fits in no rack of 2 nodes
    assert groups_that_fit(view, template(gpu=8), size=3, count=1, exclusive="rack") == 0


def test_group_pods_of_another_namespace_do_not_take_a_domain() -> None:
    nodes = [node(f"n{d}", gpu=8, labels={"rack": f"r{d}"}) for d in range(2)]
    other = pod(
        "x", "n0", cpu="0", namespace="elsewhere", labels={"leaderworkerset.sigs.k8s.io/group-key": "k"}
    )
    view = view_from_objects([*nodes, other])
    assert groups_that_fit(view, template(gpu=8), size=1, count=2, exclusive="rack") == 2


# ---- exactness: property test against brute force ----------------------------------------------

RESOURCES = 2  # two resource dimensions plus the pod slot


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    nodes = draw(st.integers(1, 3))
    free = np.array(
        [
            [draw(st.integers(0, 6)) for _ in range(RESOURCES)] + [draw(st.integers(0, 4))]
            for _ in range(nodes)
        ],
        dtype=np.int64,
    )
    leader = np.array([draw(st.integers(0, 3)) for _ in range(RESOURCES)] + [1], dtype=np.int64)
    same = draw(st.booleans())
    worker = leader.copy() if same else np.array([draw(st.integers(0, 3)) for _ in range(RESOURCES)] + [1])
    leader_ok = np.array([draw(st.booleans()) for _ in range(nodes)])
    worker_ok = leader_ok.copy() if same else np.array([draw(st.booleans()) for _ in range(nodes)])
    size = draw(st.integers(1, 3))
    wanted = draw(st.integers(1, max(1, 6 // size)))
    domain = np.array([draw(st.sampled_from([ABSENT, 0, 1])) for _ in range(nodes)], dtype=np.int32)
    return dict(
        free=free,
        leader=leader,
        worker=worker.astype(np.int64),
        leader_ok=leader_ok,
        worker_ok=worker_ok,
        size=size,
        wanted=wanted,
        same=same,
        domain=domain,
    )


def capacity(c: dict[str, Any]) -> Capacity:
    return Capacity(c["free"], c["leader"], c["worker"], c["leader_ok"], c["worker_ok"])


def _fits(c: dict[str, Any], assignment: tuple[int, ...], groups: int) -> bool:
    """Whether putting pod i (group i // size, leader when i % size == 0) on node assignment[i] is
    valid: eligibility and capacity on every node."""
    used = np.zeros_like(c["free"])
    for i, row in enumerate(assignment):
        is_leader = i % c["size"] == 0
        if not (c["leader_ok"] if is_leader else c["worker_ok"])[row]:
            return False
        used[row] += c["leader"] if is_leader else c["worker"]
    return bool((used <= c["free"]).all())


def brute_force_groups(c: dict[str, Any], exclusive: bool) -> int:
    nodes = len(c["free"])
    for groups in range(c["wanted"], 0, -1):
        pods = groups * c["size"]
        for assignment in itertools.product(range(nodes), repeat=pods):
            if exclusive and not _exclusive_ok(c, assignment, groups):
                continue
            if _fits(c, assignment, groups):
                return groups
    return 0


def _exclusive_ok(c: dict[str, Any], assignment: tuple[int, ...], groups: int) -> bool:
    domains = []
    for g in range(groups):
        rows = assignment[g * c["size"] : (g + 1) * c["size"]]
        ids = {int(c["domain"][r]) for r in rows}
        if len(ids) != 1 or ABSENT in ids:
            return False
        domains.append(ids.pop())
    return len(set(domains)) == groups


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_max_groups_equals_brute_force(c: dict[str, Any]) -> None:
    exact = brute_force_groups(c, exclusive=False)
    if c["size"] > 1:
        lower, upper = group_bounds(capacity(c), c["size"], c["wanted"])
        assert lower <= exact <= upper
    got = max_groups(capacity(c), c["size"], c["wanted"], same_shape=c["same"])
    assert got == exact


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_exclusive_domains_equal_brute_force(c: dict[str, Any]) -> None:
    fitting = domains_that_fit(capacity(c), c["size"], c["domain"], 2)
    assert min(c["wanted"], int(fitting.sum())) == brute_force_groups(c, exclusive=True)


def one_at_a_time(free: np.ndarray, usable: np.ndarray, requests: list[np.ndarray]) -> list[int]:
    """The reference: each pod alone, largest first, on the tightest usable row."""
    order = sorted(
        range(len(requests)),
        key=lambda i: (sorted(requests[i].tolist(), reverse=True), requests[i].tolist()),
        reverse=True,
    )
    # pods with equal requests keep their given order (sorted() is stable, reverse keeps it too)
    placed = [-1] * len(requests)
    for i in order:
        caps = np.where(usable, pod_caps(free, requests[i]), 0)
        rows = np.flatnonzero(caps >= 1)
        if len(rows):
            row = int(rows[np.argmin(caps[rows])])
            free[row] -= requests[i]
            placed[i] = row
    return placed


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_bulk_pending_placement_equals_one_at_a_time(data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 5))
    free = np.array(
        [
            [data.draw(st.integers(0, 9)) for _ in range(2)] + [data.draw(st.integers(0, 5))]
            for _ in range(rows)
        ],
        dtype=np.int64,
    )
    usable = np.array([data.draw(st.booleans()) for _ in range(rows)])
    shapes = [np.array([data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3)), 1]) for _ in range(2)]
    requests = [shapes[data.draw(st.integers(0, 1))] for _ in range(data.draw(st.integers(0, 8)))]
    reference_free = free.copy()
    expected = one_at_a_time(reference_free, usable, requests)
    classes: dict[tuple[int, ...], list[int]] = {}  # distinct requests -> their pods, in order
    for i, request in enumerate(requests):
        classes.setdefault(tuple(request.tolist()), []).append(i)
    vectors = [np.array(v) for v in classes]
    placed = place_pending(free, usable, vectors, [len(members) for members in classes.values()])
    got = [-1] * len(requests)
    for members, rows in zip(classes.values(), placed, strict=True):
        for member, row in zip(members, rows.tolist(), strict=False):
            got[member] = row
    assert got == expected
    assert (free == reference_free).all()


def test_many_pending_pods_of_one_shape_fill_the_tightest_nodes_first() -> None:
    view = view_from_objects(
        [node("roomy", cpu="16"), node("tight", cpu="4"), *[pod(f"w{i}", cpu="2") for i in range(5)]]
    )
    # 2 pods fill "tight", 3 go to "roomy" (10 of 16 cpu left there)
    assert groups_that_fit(view, template(cpu="5"), count=5) == 2
    assert groups_that_fit(view, template(cpu="6"), count=5) == 1


def test_a_relist_keeps_the_index_in_step() -> None:
    view = view_from_objects([node("a", cpu="8"), pod("p", "a", cpu="6")])
    assert groups_that_fit(view, template(cpu="4"), count=5) == 0
    view.replace_kind(POD_KIND, [pod("q", "a", cpu="2")])  # a 410 relist: p is gone, q arrived
    assert groups_that_fit(view, template(cpu="4"), count=5) == 1
    view.replace_kind(NODES, [node("b", cpu="12")])  # node a gone, b new
    assert groups_that_fit(view, template(cpu="4"), count=5) == 3


def test_view_listeners_see_old_and_new_records() -> None:
    view = view_from_objects([])
    seen: list[tuple[str, str | None, str | None]] = []
    view.subscribe(lambda kind, old, new: seen.append((kind, old and old.phase, new and new.phase)))
    view.upsert(POD_KIND, pod("p", "a", phase="Pending"))
    view.upsert(POD_KIND, pod("p", "a", phase="Running"))
    view.remove(POD_KIND, ("default", "p"))
    view.remove(POD_KIND, ("default", "p"))  # already gone: no call
    view.upsert("services", {"kind": "Service", "metadata": {"name": "s", "namespace": "default"}})
    assert seen == [("pods", None, "Pending"), ("pods", "Pending", "Running"), ("pods", "Running", None)]


def test_a_pending_group_pod_takes_the_domain_it_will_land_in() -> None:
    nodes = [node(f"n{d}", gpu=8, labels={"rack": f"r{d}"}) for d in range(2)]
    waiting = pod("g-0", gpu=8, labels={"leaderworkerset.sigs.k8s.io/group-key": "k"})
    view = view_from_objects([*nodes, waiting])
    assert groups_that_fit(view, template(cpu="1"), size=1, count=2, exclusive="rack") == 1
    view.remove(POD_KIND, ("default", "g-0"))
    assert groups_that_fit(view, template(cpu="1"), size=1, count=2, exclusive="rack") == 2


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-(2**50), 2**52), min_size=1, max_size=6),
    st.integers(1, 2**45),
)
def test_pod_caps_is_exact_floor_division_for_large_amounts(amounts: list[int], size: int) -> None:
    free = np.array([[a, 110] for a in amounts], dtype=np.int64)
    request = np.array([size, 1], dtype=np.int64)
    expected = [max(0, min(a // size, 110)) for a in amounts]
    assert pod_caps(free, request).tolist() == expected


# ---- exactness with DRA devices, gated pods and cordons, through the view and the index -------------

DRA_DRIVER = "gpu.example.com"


def _dra_objects(draw: st.DrawFn, rows: int) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """Random nodes (device plugin or DRA GPUs, bound pods, allocated claims, gated pods, cordons)
    and, computed independently of guardhook, their free (cpu, gpu, pods) and cordon flags."""
    objects: list[dict[str, Any]] = [
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "selectors": [{"cel": {"expression": f"device.driver == '{DRA_DRIVER}'"}}],
                "extendedResourceName": GPU,
            },
        }
    ]
    free = np.zeros((rows, 3), dtype=np.int64)
    cordoned = np.zeros(rows, dtype=bool)
    for r in range(rows):
        name = f"n{r}"
        cpu, slots, gpus = draw(st.integers(0, 6)), draw(st.integers(0, 4)), draw(st.integers(0, 4))
        dra = draw(st.booleans())
        cordoned[r] = draw(st.booleans())
        objects.append(
            node(name, cpu=str(cpu), gpu=0 if dra else gpus, pods=slots, unschedulable=bool(cordoned[r]))
        )
        bound_cpu = draw(st.integers(0, cpu))
        bound = bound_cpu > 0 and slots > 0
        if bound:
            objects.append(pod(f"b{r}", name, cpu=str(bound_cpu)))
        taken = 0
        if dra:
            devices = [{"name": f"d{i}"} for i in range(gpus)]
            objects.append(
                {
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-slice"},
                    "spec": {
                        "driver": DRA_DRIVER,
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1},
                        "devices": devices,
                    },
                }
            )
            taken = draw(st.integers(0, gpus))
            results = [
                {"request": "r", "driver": DRA_DRIVER, "pool": name, "device": f"d{i}"} for i in range(taken)
            ]
            objects.append(
                {
                    "kind": "ResourceClaim",
                    "metadata": {"name": f"{name}-claim", "namespace": "default"},
                    "status": {"allocation": {"devices": {"results": results}}},
                }
            )
        for g in range(draw(st.integers(0, 2))):  # gated pods: never placed, claim nothing
            gated = pod(f"g{r}-{g}", cpu=str(draw(st.integers(1, 6))), gpu=draw(st.integers(0, 4)))
            gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
            objects.append(gated)
        free[r] = [cpu - bound_cpu, gpus - taken, slots - (1 if bound else 0)]
    return objects, free, cordoned


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fit_through_the_index_equals_brute_force_with_dra_gated_pods_and_cordons(
    data: st.DataObject,
) -> None:
    rows = data.draw(st.integers(1, 3))
    objects, free, cordoned = _dra_objects(data.draw, rows)
    leader = [data.draw(st.integers(0, 3)), data.draw(st.integers(0, 2))]
    worker = [data.draw(st.integers(0, 3)), data.draw(st.integers(0, 2))]
    leader_tolerates, worker_tolerates = data.draw(st.booleans()), data.draw(st.booleans())
    size = data.draw(st.integers(1, 3))
    wanted = data.draw(st.integers(1, max(1, 6 // size)))
    wildcard = [{"operator": "Exists"}]
    leader_template = template(str(leader[0]), leader[1], tolerations=wildcard if leader_tolerates else [])
    worker_template = template(str(worker[0]), worker[1], tolerations=wildcard if worker_tolerates else [])
    view = view_from_objects(objects)
    got = groups_that_fit(view, leader_template, worker_template, size=size, count=wanted)
    c = dict(
        free=free * np.array([1000, 1, 1]),  # cpu in millicores, as the index counts it
        leader=np.array([leader[0] * 1000, leader[1], 1]),
        worker=np.array([worker[0] * 1000, worker[1], 1]),
        leader_ok=~cordoned | leader_tolerates,
        worker_ok=~cordoned | worker_tolerates,
        size=size,
        wanted=wanted,
    )
    assert got == brute_force_groups(c, exclusive=False)


def _huge_node(name: str) -> dict[str, Any]:
    """A node whose allocatable quantities are above int64 (the API server stores them as given)."""
    bad = node(name, cpu="8")
    bad["status"]["allocatable"].update({"pods": "1e999", "memory": "10Ei", GPU: "1e999"})
    return bad


def test_a_node_with_quantities_above_int64_is_counted_as_int64_max() -> None:
    view = view_from_objects([node("a", cpu="8", gpu=8), _huge_node("huge")])
    # "huge" has 8 cpu and effectively unbounded pod slots, memory and GPUs: 2 more 4-cpu groups
    assert groups_that_fit(view, template(cpu="4", gpu=2), count=9) == 4
    assert groups_that_fit(view, template(cpu="1"), size=2, count=100) == 8


def test_a_node_above_int64_arriving_through_watch_and_relist_leaves_the_index_working() -> None:
    view = view_from_objects([node("a", cpu="8")])
    index = index_for(view)
    view.upsert(NODES, _huge_node("huge"))  # a watch event: the index listener runs under the lock
    view.upsert(POD_KIND, pod("p", "huge", cpu="4"))
    assert groups_that_fit(view, template(cpu="4"), count=9) == 3
    view.replace_kind(NODES, [node("b", cpu="8"), _huge_node("huge")])  # a relist
    assert groups_that_fit(view, template(cpu="4"), count=9) == 3  # 2 on b, 1 beside p on huge
    assert index is index_for(view)


def test_requests_buffered_for_the_arrays_are_all_counted_before_any_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from guardhook.capacity import index as index_module

    monkeypatch.setattr(index_module, "FLUSH_AT", 64)
    monkeypatch.setattr(index_module, "SHAPES_KEPT", 1)  # the numbered requests maps forgotten too
    view = ClusterView("test")
    index = index_for(view)  # subscribed before the pods arrive, as guardhook serve's index is
    view.upsert(NODES, node("n1", cpu="100000", gpu=8, pods=100000))
    count = 3 * 64 + 7  # one entry a pod: past three flushes, and a rest
    for i in range(count):
        view.upsert(POD_KIND, pod(f"p{i}", "n1", cpu="2", gpu=i % 2))
    view.remove(POD_KIND, ("default", "p0"))  # buffered too: its removal counts before a read
    view.upsert(POD_KIND, pod("p1", "n1", cpu="3", gpu=1))  # replaced: -2 cpu, +3 cpu
    free = index.free(["cpu", GPU, PODS])
    assert free[0].tolist() == [
        100000 * 1000 - 2000 * (count - 1) - 1000,
        8 - count // 2,
        100000 - (count - 1),
    ]
    view.upsert(POD_KIND, pod("p2", "n1", phase="Succeeded"))  # terminal: gives back what it held
    assert index.free(["cpu", GPU, PODS])[0].tolist() == [free[0][0] + 2000, free[0][1], free[0][2] + 1]


# ---- gangs of several shapes (fit_gangs) -------------------------------------------------------


def test_a_gang_of_an_lws_groups_shapes_is_solved_exactly_as_one() -> None:
    from guardhook.capacity import GangDemand, fit_gangs

    view = view_from_objects([node(f"n{i}", cpu="8", gpu=8) for i in range(3)])
    big, small = shape_of_template(template("1", 4)), shape_of_template(template("1", 2))
    gang = fit_gangs(index_for(view), GangDemand(((small, 2), (big, 1)), 5, "default"))
    assert gang.exact and gang.fits == groups_that_fit(view, template("1", 4), template("1", 2), 3, 5) == 3


def test_a_gang_of_three_shapes_is_placed_greedily_and_names_the_member_short() -> None:
    from guardhook.capacity import GangDemand, fit_gangs

    view = view_from_objects([node(f"n{i}", cpu="8", gpu=8) for i in range(4)])
    members = (
        (shape_of_template(template("1", 8)), 1),
        (shape_of_template(template("1", 4)), 2),
        (shape_of_template(template("1")), 1),
    )
    gang = fit_gangs(index_for(view), GangDemand(members, 3, "default"))
    # per gang one full node and one node of two halves: 2 of the 4 nodes; a 3rd gang's 8-GPU pod
    # takes the third node, and its two 4-GPU pods find room for only two of six (member 1)
    assert (gang.exact, gang.fits, gang.short) == (False, 2, 1)
    assert "gangs of several pod shapes placed greedily" in gang.model
