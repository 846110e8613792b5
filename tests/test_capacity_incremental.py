"""guardhook.capacity.derived: the decision-time arrays kept per changed row (free capacity after
the pending pods, the pending placement, pod counts per request) equal the same arrays made again
over every row, after random pod, node, claim and ResourceSlice changes."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from guardhook.capacity import GroupDemand, derived, fit_groups, index_for, shape_of_template
from guardhook.capacity.derived import plan_for
from guardhook.capacity.index import PendingClass
from guardhook.capacity.placing import place_pending, pod_caps, vector
from guardhook.cluster.lws import GROUP_KEY_LABEL
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import NODES, PODS, RESOURCECLAIMS, RESOURCESLICES, ClusterView

from gpu_cluster import GPU, allocated_claim, device_class, node, resource_slice

RESOURCES = ["cpu", "memory", GPU, "pods"]
NAMESPACE = "default"


def free_after_pending_rebuilt(
    index: Any, resources: list[str], namespace: str
) -> tuple[np.ndarray, np.ndarray]:
    """The reference the kept plan must equal: free capacity over `resources` made from nothing
    (`CapacityIndex.free`), the pending classes placed on it over every row (`place_pending`),
    and the rows holding a group of `namespace` (bound pods, and the rows the pending group pods
    land on: within a class, the group pods are placed first)."""
    free = index.free(resources)
    taken = np.zeros(len(free), dtype=bool)
    pending: list[PendingClass] = index.pending()
    if pending:
        requests = [vector(entry.requests, resources) for entry in pending]
        placed = place_pending(free, index.usable(), requests, [entry.count for entry in pending])
        for entry, rows in zip(pending, placed, strict=True):
            taken[rows[: entry.group_pods.get(namespace, 0)]] = True
    return free, index.holding_groups(namespace) | taken


def bound_pod(name: str, node_name: str, cpu: int, gpu: int = 0, group: bool = False) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": str(cpu), "memory": "1Gi"}
    if gpu:
        requests[GPU] = str(gpu)
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    labels = {GROUP_KEY_LABEL: f"key-{name}"} if group else {}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def cluster(nodes: int) -> ClusterView:
    """`nodes` nodes of 96 cpu: even ones with 8 GPUs in allocatable, odd ones publishing 8 through
    DRA; a few pending pods of two shapes waiting."""
    objects: list[dict[str, Any]] = [device_class()]
    for i in range(nodes):
        name = f"gpu-{i}"
        objects.append(node(name, gpus=0 if i % 2 else 8))
        if i % 2:
            objects.append(resource_slice(name, 8))
    for k in range(4):
        objects.append(bound_pod(f"pending-{k}", "", cpu=8 if k % 2 else 30, gpu=k % 2, group=k == 0))
    return view_from_objects(objects)


def assert_kept_equals_rebuilt(view: ClusterView) -> None:
    index = index_for(view)
    with index.lock:
        plan = plan_for(index, tuple(RESOURCES))
        free, taken = free_after_pending_rebuilt(index, RESOURCES, NAMESPACE)
        assert np.array_equal(plan.free(), free)
        assert np.array_equal(index.holding_groups(NAMESPACE) | plan.group_rows(NAMESPACE), taken)
        for request in ([8000, 0, 1, 1], [30000, 2**30, 0, 1]):
            wanted = np.array(request, dtype=np.int64)
            assert np.array_equal(plan.caps(wanted), pod_caps(free, wanted))
            minus = np.array([4000, 0, 1, 1], dtype=np.int64)
            assert np.array_equal(plan.caps(wanted, minus), pod_caps(np.maximum(free - minus, 0), wanted))


change = st.one_of(
    st.tuples(st.just("pod"), st.integers(0, 7), st.integers(0, 40), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("delete pod"), st.integers(0, 7), st.integers(0, 0), st.integers(0, 0), st.booleans()),
    st.tuples(st.just("pending"), st.integers(0, 3), st.integers(1, 40), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("claim"), st.integers(0, 7), st.integers(0, 8), st.integers(0, 0), st.booleans()),
    st.tuples(st.just("node"), st.integers(0, 8), st.integers(0, 0), st.integers(0, 0), st.booleans()),
    st.tuples(st.just("slice"), st.integers(0, 7), st.integers(0, 8), st.integers(0, 0), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(change, min_size=1, max_size=25), st.sets(st.integers(0, 24)), st.integers(0, 3))
def test_kept_arrays_equal_the_rebuilt_ones_after_random_changes(
    changes: list[tuple[str, int, int, int, bool]], read_after: set[int], reserve: int
) -> None:
    # Few rows kept in order past the filled ones (a 65,000-node cluster keeps 64 of thousands),
    # so that rows leave and join them and the fallback to placing over every row is taken too.
    kept = derived.RESERVE
    derived.RESERVE = reserve
    try:
        random_changes(changes, read_after)
    finally:
        derived.RESERVE = kept


def random_changes(changes: list[tuple[str, int, int, int, bool]], read_after: set[int]) -> None:
    view = cluster(8)
    assert_kept_equals_rebuilt(view)  # the plan exists from here on and follows every change
    for at, (what, i, amount, extra, flag) in enumerate(changes):
        name = f"gpu-{i}"
        if what == "pod":  # a pod bound to (or moved onto) node i, perhaps an LWS group's
            view.upsert(PODS, bound_pod(f"p{extra}", name, cpu=amount, gpu=extra % 2, group=flag))
        elif what == "delete pod":
            view.remove(PODS, (NAMESPACE, f"p{i % 4}"))
        elif what == "pending":  # a pending pod of a new shape, or one bound where it landed
            view.upsert(PODS, bound_pod(f"pending-{i}", name if flag else "", cpu=amount, gpu=extra))
        elif what == "claim":  # devices of a DRA node allocated (odd nodes publish through DRA)
            claim = allocated_claim(f"c{i}", f"gpu-{i | 1}", range(amount))
            if amount:
                view.upsert(RESOURCECLAIMS, claim)
            else:
                view.remove(RESOURCECLAIMS, ("other", f"c{i}"))
        elif what == "node":  # a node added, cordoned or uncordoned
            view.upsert(NODES, node(name, gpus=0 if i % 2 else 8, unschedulable=flag))
        else:  # a DRA node's slice republished with another count
            view.upsert(RESOURCESLICES, resource_slice(f"gpu-{i | 1}", amount))
        if at in read_after or at == len(changes) - 1:
            assert_kept_equals_rebuilt(view)


def rebuilds(view: ClusterView) -> int:
    index = index_for(view)
    with index.lock:
        return plan_for(index, tuple(RESOURCES)).rebuilds


def test_pod_changes_move_the_pending_placement_without_placing_it_again_over_every_row() -> None:
    view = cluster(8)
    before = rebuilds(view)
    # The pending pods take the tightest rows (the lowest row numbers of equal nodes); a small pod
    # on the last node leaves its row as loose as the rows the pending pods passed over.
    view.upsert(PODS, bound_pod("side", "gpu-7", cpu=1))
    assert rebuilds(view) == before
    assert_kept_equals_rebuilt(view)
    # A pod that makes a row the tightest draws the GPU pending pods there: the class is filled
    # again from the rows it keeps in order, still without a pass over every row.
    view.upsert(PODS, bound_pod("big", "gpu-6", cpu=80))
    assert rebuilds(view) == before
    assert_kept_equals_rebuilt(view)
    index = index_for(view)
    with index.lock:
        free, _ = free_after_pending_rebuilt(index, RESOURCES, NAMESPACE)
        assert free[index.row_of("gpu-6"), RESOURCES.index(GPU)] < 8  # the pending GPU pods landed there
    # A pending pod of its own changes the classes: placed again.
    view.upsert(PODS, bound_pod("pending-9", "", cpu=2))
    assert rebuilds(view) == before + 1
    assert_kept_equals_rebuilt(view)


def test_decisions_through_the_kept_arrays_count_the_rebuilt_free_capacity() -> None:
    view = cluster(8)
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "40", GPU: "4"}}}]}}
    shape = shape_of_template(template)
    demand = GroupDemand(shape, shape, 2, 8, NAMESPACE)
    request = vector(shape.request_map, RESOURCES)
    for k in range(6):
        view.upsert(PODS, bound_pod(f"p{k}", f"gpu-{k}", cpu=20 + 10 * k, gpu=k % 3))
        kept = fit_groups(index_for(view), demand)
        with index_for(view).lock:
            free, _ = free_after_pending_rebuilt(index_for(view), RESOURCES, NAMESPACE)
        # same shape, every node eligible: groups are the pod slots of the rebuilt free capacity
        assert kept.fits == min(8, int(pod_caps(free, request).sum()) // 2)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_one_class_kept_in_order_places_as_place_pending_after_row_changes(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12))
    amounts = st.lists(st.integers(-2, 9), min_size=2, max_size=2)
    free = np.array(data.draw(st.lists(amounts, min_size=n, max_size=n)), dtype=np.int64)
    usable = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    request = np.array([data.draw(st.integers(0, 3)), data.draw(st.integers(1, 3))], dtype=np.int64)
    entry = PendingClass({}, count=data.draw(st.integers(1, 12)))
    kept = derived.RESERVE
    derived.RESERVE = data.draw(st.integers(0, 3))
    try:
        placed = derived._Placed(entry, request, n)
        placed.place(free.copy(), usable)
        for _ in range(data.draw(st.integers(1, 8))):
            row = data.draw(st.integers(0, n - 1))
            old = free[[row]].copy()
            free[row] = data.draw(amounts)
            rows = np.array([row], dtype=np.intp)
            if placed.update(rows, old, free[[row]], usable[rows]) is None:
                placed = derived._Placed(entry, request, n)  # the plan places the class again
                placed.place(free.copy(), usable)
            (expected,) = place_pending(free.copy(), usable, [request], [entry.count])
            assert placed.pods().tolist() == expected.tolist()
    finally:
        derived.RESERVE = kept


def test_a_row_past_the_kept_ones_is_not_filled_before_rows_never_kept() -> None:
    # One pod to place, nothing kept in reserve: only row 0 (one slot) is kept in order.
    free = np.array([[0, 1], [0, 2], [0, 3]], dtype=np.int64)
    usable = np.ones(3, dtype=bool)
    request = np.array([0, 1], dtype=np.int64)
    entry = PendingClass({}, count=1)
    kept = derived.RESERVE
    derived.RESERVE = 0
    try:
        placed = derived._Placed(entry, request, 3)
        placed.place(free.copy(), usable)
        rows = np.array([2], dtype=np.intp)
        assert placed.update(rows, free[[2]], np.array([[0, 4]]), usable[rows]) == {}  # still past it
        rows = np.array([0], dtype=np.intp)
        # row 0 full: the pod belongs on row 1, which was never kept, so the class is placed again
        assert placed.update(rows, free[[0]], np.array([[0, 0]]), usable[rows]) is None
    finally:
        derived.RESERVE = kept
