"""guardhook.capacity.derived: the decision-time arrays kept per changed row (free capacity after
the pending pods, the pending placement, pod counts per request) equal the same arrays made again
over every row, after random pod, node, claim and ResourceSlice changes."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from guardhook.capacity import GroupDemand, fit_groups, index_for, shape_of_template
from guardhook.capacity.derived import plan_for
from guardhook.capacity.placing import pod_caps, vector
from guardhook.capacity.solver import free_after_pending_rebuilt
from guardhook.cluster.lws import GROUP_KEY_LABEL
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import NODES, PODS, RESOURCECLAIMS, RESOURCESLICES, ClusterView

from gpu_cluster import GPU, allocated_claim, device_class, node, resource_slice

RESOURCES = ["cpu", "memory", GPU, "pods"]
NAMESPACE = "default"


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


@settings(max_examples=120, deadline=None)
@given(st.lists(change, min_size=1, max_size=25), st.sets(st.integers(0, 24)))
def test_kept_arrays_equal_the_rebuilt_ones_after_random_changes(
    changes: list[tuple[str, int, int, int, bool]], read_after: set[int]
) -> None:
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


def test_a_pod_change_away_from_the_pending_pods_rows_keeps_the_placement() -> None:
    view = cluster(8)
    index = index_for(view)
    with index.lock:
        plan = plan_for(index, tuple(RESOURCES))
        rebuilds = plan.rebuilds
    # The pending pods take the tightest rows (the lowest row numbers of equal nodes); a small pod
    # on the last node leaves its row as loose as the rows the pending pods passed over.
    view.upsert(PODS, bound_pod("side", "gpu-7", cpu=1))
    with index.lock:
        plan = plan_for(index, tuple(RESOURCES))
        assert plan.rebuilds == rebuilds
    assert_kept_equals_rebuilt(view)
    # A pod that makes a row the tightest moves the placement: made again, and still equal.
    view.upsert(PODS, bound_pod("big", "gpu-6", cpu=80))
    with index.lock:
        plan = plan_for(index, tuple(RESOURCES))
        assert plan.rebuilds > rebuilds
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
