"""The capacity and group indexes as a relist fills them (issue 53, the fill's CPU): the DRA device
table judged once per distinct device, slices listed before their DeviceClass, and the view's pod
changes handed to the indexes a slice at a time. Every test compares against what the indexes
counted before (one change at a time, or a fresh build)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guardhook.capacity import index as capacity_index
from guardhook.capacity import index_for
from guardhook.cluster.dra import ClassMatcher, ResourceClaimRecord, claim_spec_requests
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import NODES, ClusterView
from guardhook.cluster.view.store import PODS as POD_KIND
from guardhook.groups.index import group_index

from gpu_cluster import GPU, allocated_claim, device_class, device_counts, node, resource_slice, taint_rule


def _nic_slice(node_name: str) -> dict[str, Any]:
    """A slice whose devices are NICs of the GPU driver: the GPU class's selector refuses them."""
    piece = resource_slice(node_name, gpus=2, name=f"{node_name}-nics")
    piece["spec"]["pool"]["name"] = f"{node_name}-nics"
    for device in piece["spec"]["devices"]:
        device["name"] = "nic-" + device["name"]
        device["attributes"]["type"] = {"string": "nic"}
    return piece


def test_identical_devices_are_judged_once_per_table_and_other_devices_on_their_own() -> None:
    nodes = [f"n{i}" for i in range(6)]
    objects = [node(n) for n in nodes] + [resource_slice(n) for n in nodes] + [_nic_slice("n0")]
    objects += [device_class(), allocated_claim("taken", "n1", range(3)), taint_rule("n2")]
    view = view_from_objects(objects)
    judged: list[tuple[str, ...]] = []

    class Counting(ClassMatcher):
        def matches(self, device_class: Any, device: Any) -> bool | None:
            judged.append(device.id)
            return super().matches(device_class, device)

    index = index_for(view)
    index._matcher = Counting()
    index._devices = None  # rebuilt with the counting matcher
    counts = device_counts(view)
    # 48 GPUs and 2 NICs, two distinct kinds of device: two judgements, not 50.
    assert len(judged) == 2
    assert counts["published"][GPU] == {n: 8 for n in nodes}
    assert counts["free"][GPU] == {"n0": 8, "n1": 5, "n2": 0, "n3": 8, "n4": 8, "n5": 8}
    assert counts["tainted"] == {GPU: 8}


def test_slices_listed_before_their_device_class_are_counted_when_it_arrives() -> None:
    nodes = [f"n{i}" for i in range(4)]
    later = [device_class(), allocated_claim("taken", "n1", range(2)), taint_rule("n3")]
    view = view_from_objects([node(n) for n in nodes])
    index_for(view)  # subscribed before anything else, as `guardhook serve` does
    for n in nodes:
        view.upsert("resourceslices", resource_slice(n))
    view.upsert("resourceslices", _nic_slice("n0"))
    assert device_counts(view)["published"] == {}
    view.upsert("deviceclasses", later[0])
    view.upsert("resourceclaims", later[1])
    view.upsert("devicetaintrules", later[2])
    fresh = view_from_objects(
        [node(n) for n in nodes] + [resource_slice(n) for n in nodes] + [_nic_slice("n0"), *later]
    )
    assert device_counts(view) == device_counts(fresh)
    assert device_counts(view)["free"][GPU] == {"n0": 8, "n1": 6, "n2": 8, "n3": 0}


# ---- the view's pod changes a slice at a time ----------------------------------------------------


def test_a_slice_of_pods_is_told_once_to_a_batch_listener_and_one_by_one_to_the_others() -> None:
    view = ClusterView("test")
    one_by_one: list[tuple[str, str | None, str | None]] = []
    batches: list[list[tuple[str | None, str | None]]] = []
    view.subscribe(lambda kind, old, new: one_by_one.append((kind, old and old.phase, new and new.phase)))
    view.subscribe(
        lambda kind, old, new: pytest.fail("a batch listener's one-by-one call for a slice"),
        (POD_KIND,),
        batch=lambda kind, changes: batches.append([(o and o.phase, n and n.phase) for o, n in changes]),
    )
    view.upsert_all(
        POD_KIND, [_pod("p", phase="Pending"), _pod("q", phase="Pending"), _pod("p", "a", phase="Running")]
    )
    assert batches == [[(None, "Pending"), (None, "Pending"), ("Pending", "Running")]]
    assert one_by_one == [
        ("pods", None, "Pending"),
        ("pods", None, "Pending"),
        ("pods", "Pending", "Running"),
    ]
    told: list[tuple[str | None, str | None]] = []
    other = ClusterView("test")
    other.subscribe(lambda kind, old, new: told.append((old and old.phase, new and new.phase)), (POD_KIND,))
    other.upsert(POD_KIND, _pod("p", phase="Pending"))  # one pod upserted: the listener, as before
    assert told == [(None, "Pending")]


def _pod(
    name: str,
    node_name: str = "",
    phase: str = "Running",
    cpu: str = "1",
    group: int | None = None,
    gated: bool = False,
    namespace: str = "default",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/wait"}]
    labels = {}
    if group is not None:
        labels = {
            "leaderworkerset.sigs.k8s.io/name": "lws",
            "leaderworkerset.sigs.k8s.io/group-index": str(group),
            "leaderworkerset.sigs.k8s.io/worker-index": name[-1] if name[-1].isdigit() else "0",
            "leaderworkerset.sigs.k8s.io/group-key": f"key-{group}",
        }
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
        "status": {"phase": phase},
    }


POD_CHANGES = st.lists(
    st.tuples(
        st.integers(0, 7),  # which pod
        st.sampled_from(["", "n0", "n1", "n2", "late"]),  # its node ("late": not in the view yet)
        st.sampled_from(["Running", "Pending", "Succeeded"]),
        st.sampled_from(["1", "2", "500m"]),
        st.one_of(st.none(), st.integers(0, 2)),  # its LWS group
        st.booleans(),  # gated
        st.sampled_from(["default", "other"]),
    ),
    max_size=40,
)


def _state(view: ClusterView) -> dict[str, Any]:
    capacity, groups = index_for(view), group_index(view)
    with view.lock:
        names = ["cpu", "pods"]
        return {
            "free": capacity.free(names).tolist(),
            "rows": capacity.names(range(capacity.rows)),
            "pending": sorted(
                (
                    tuple(sorted(c.requests.items())),
                    c.count,
                    sorted((ns, n) for ns, n in c.group_pods.items() if n),
                )
                for c in capacity.pending()
            ),
            "gated": capacity.gated,
            "holding": {ns: capacity.holding_groups(ns).tolist() for ns in ("default", "other")},
            "groups": {
                ns: {key: sorted(p.name for p in pods) for key, pods in groups.lws_pods(ns, "lws").items()}
                for ns in ("default", "other")
            },
        }


@settings(max_examples=150, deadline=None)
@given(POD_CHANGES, st.integers(1, 6))
@example(  # a replacement flushes midway, between two pods of one requests map: its shape is forgotten
    [(0, "n0", "Running", "1", None, False, "default")] * 2
    + [(0, "n0", "Running", "2", None, False, "default"), (2, "n0", "Running", "1", None, False, "default")],
    4,
)
def test_indexes_fed_a_slice_at_a_time_count_what_they_count_one_pod_at_a_time(
    changes: list[tuple[Any, ...]], size: int
) -> None:
    """A relist's slices (replacements of a pod within one slice, unbound, gated and terminal pods,
    a node the index has not seen, flushes of the buffered requests midway) leave the capacity and
    group indexes as the same changes applied one pod at a time, and as indexes built afresh."""
    pods = [
        _pod(f"p{i}", node, phase, cpu, group, gated, ns) for i, node, phase, cpu, group, gated, ns in changes
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(capacity_index, "FLUSH_AT", 3)
        patch.setattr(capacity_index, "SHAPES_KEPT", 0)  # each flush forgets the numbered maps
        sliced, single = ClusterView("test"), ClusterView("test")
        for view in (sliced, single):
            index_for(view), group_index(view)  # subscribed first, as guardhook serve's are
            for n in ("n0", "n1", "n2"):
                view.upsert(NODES, node(n))
        for at in range(0, len(pods), size):
            sliced.upsert_all(POD_KIND, pods[at : at + size])
        for obj in pods:
            single.upsert(POD_KIND, obj)
        assert index_for(sliced).version == index_for(single).version
        assert _state(sliced) == _state(single)
        fresh = view_from_objects([node(n) for n in ("n0", "n1", "n2")] + pods)
        # Built afresh: the same counts on the nodes (a pod that left "late" leaves its row, dead).
        now, then = _state(sliced), _state(fresh)
        assert {k: now[k] for k in ("groups", "pending", "gated")} == {
            k: then[k] for k in ("groups", "pending", "gated")
        }
        assert now["free"][:3] == then["free"][:3]
        assert {ns: rows[:3] for ns, rows in now["holding"].items()} == {
            ns: rows[:3] for ns, rows in then["holding"].items()
        }


def test_claims_of_one_spec_share_their_requests_and_another_spec_reads_its_own() -> None:
    first, second = allocated_claim("a", "n0", range(8)), allocated_claim("b", "n1", range(8))
    other = allocated_claim("c", "n2", range(2))  # count 2
    records = [ResourceClaimRecord.from_object(c) for c in (first, second, other, first)]
    assert records[0].requests is records[1].requests  # equal specs, one after the other
    assert [r.requests[0].count for r in records] == [8, 8, 2, 8]
    assert records[0].requests == claim_spec_requests(first["spec"])
    assert records[2].requests == claim_spec_requests(other["spec"])
    assert [d.id.device for d in records[2].allocated] == ["gpu-0", "gpu-1"]
