"""The 65,000-node fill beyond the pods (issue 53): nodes, ResourceSlices, ResourceClaims and the
DRA device table, each read or counted a faster way. Every test compares against the way before
(each entry read alone, one node at a time, the table kept slice by slice, a fresh build)."""

from __future__ import annotations

from typing import Any

import orjson

from guardhook.capacity import index_for
from guardhook.cluster import dra, drawire
from guardhook.cluster.dra import ResourceClaimRecord, ResourceSliceRecord
from guardhook.cluster.model import NodeRecord, as_dict
from guardhook.cluster.paging import decode
from guardhook.cluster.podwire import item_versions
from guardhook.cluster.resources import parse_resource_list
from guardhook.cluster.view.live import Reflector, page_decoder
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import NODES, ClusterView, object_key

from gpu_cluster import (
    DRIVER,
    GPU,
    allocated_claim,
    device_class,
    device_counts,
    mig_cluster,
    node,
    node_object,
    resource_slice,
    taint_rule,
)

# ---- ResourceClaims: a claim's results read together ----------------------------------------------


def test_a_claims_results_read_together_equal_each_result_read_alone() -> None:
    results: list[Any] = [
        {"request": "gpus", "driver": DRIVER, "pool": "n0", "device": "gpu-0"},
        {"request": "gpus", "driver": DRIVER, "pool": "n0", "device": "gpu-1"},
        {"request": "nics", "driver": "nic.example.com", "pool": "n0", "device": "nic-0"},
        {"request": "gpus", "driver": 7, "pool": "n1", "device": 3},  # mistyped: read as text
        {"request": "gpus", "driver": 7, "pool": "n1"},  # no device
        "not an entry",
        {
            "request": "shared",
            "driver": DRIVER,
            "pool": "n1",
            "device": "gpu-0",
            "consumedCapacity": {"memory": "10Gi"},
        },
        {"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-2"},
        {},
    ]
    together = dra._allocated_all(results)
    alone = tuple(dra._allocated(r if isinstance(r, dict) else {}) for r in results)
    assert together == alone
    assert [type(entry) for entry in together] == [type(entry) for entry in alone]
    assert together[3].id == ("7", "n1", "3")
    assert together[6].consumed == (("gpu.nvidia.com/memory", 10 * 2**30),)
    # One string for every result's driver and pool (interned), as each read alone gives.
    assert together[1].id.driver is together[7].id.driver is alone[0].id.driver


def test_a_claim_record_holds_its_results_as_before() -> None:
    claim = allocated_claim("a", "n2", [0, 3, 5])
    record = ResourceClaimRecord.from_object(claim)
    assert [d.id for d in record.allocated] == [(DRIVER, "n2", f"gpu-{i}") for i in (0, 3, 5)]
    assert {d.request for d in record.allocated} == {"gpus"}
    assert record.allocation_node == "n2"


# ---- ResourceSlices: plain devices made without the other fields' reads ---------------------------

GPU_ATTRIBUTES = {"type": {"string": "gpu"}}


def test_a_slices_devices_read_together_equal_each_device_read_alone() -> None:
    raws: list[Any] = [
        {
            "name": "gpu-0",
            "attributes": {"type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "80Gi"}},
        },
        {
            "name": "gpu-1",
            "attributes": {"type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "80Gi"}},
        },
        {"name": "gpu-2"},  # neither attributes nor capacity
        {"name": "gpu-3", "attributes": ["not", "a", "map"], "capacity": "80Gi"},
        {"name": "gpu-4", "nodeName": "elsewhere", "attributes": {}},
        {"name": "gpu-5", "taints": [{"key": "xid", "effect": "NoSchedule"}]},
        {"name": "gpu-6", "basic": {"attributes": {"type": {"string": "gpu"}}}},  # v1beta1
        {"name": "gpu-7", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "8Gi"}}},
        "not a device",
    ]
    together = dra._devices(raws, DRIVER, "n0", "n0")
    alone = tuple(dra._device(as_dict(raw), DRIVER, "n0", "n0") for raw in raws)
    assert together == alone
    assert together[4].node_name == "elsewhere"
    assert together[5].taints and together[7].multiple
    assert together[0].attributes is together[1].attributes  # shared maps, as before


def test_a_slice_record_is_partitioned_as_its_devices_say() -> None:
    plain = ResourceSliceRecord.from_object(resource_slice("n0"))
    assert not plain.partitioned
    shared = resource_slice("n1", gpus=2)
    shared["spec"]["devices"][1]["allowMultipleAllocations"] = True
    assert ResourceSliceRecord.from_object(shared).partitioned
    assert any(d.partitioned for d in ResourceSliceRecord.from_object(shared).devices)


# ---- the DRA device table: rebuilt at once, as kept slice by slice --------------------------------


def _dra_objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [node(f"n{i}") for i in range(6)]
    slices = [resource_slice(f"n{i}") for i in range(6)]
    slices[4] = resource_slice("n4", taints=[{"key": "xid", "effect": "NoSchedule"}])
    other_driver_rule = taint_rule("n0")
    other_driver_rule["metadata"]["name"] = "other-driver"
    other_driver_rule["spec"]["deviceSelector"]["driver"] = "nic.example.com"  # selects none of these
    rest = [
        device_class(),
        taint_rule("n2"),
        other_driver_rule,
        allocated_claim("a", "n1", range(3)),
        allocated_claim("b", "n5", [7]),
    ]
    return nodes + slices, rest


def test_a_rebuilt_device_table_counts_what_one_kept_slice_by_slice_counts() -> None:
    listed, rest = _dra_objects()
    fresh = view_from_objects(listed + rest)  # built at once (build_counts)
    kept = view_from_objects([o for o in listed if o["kind"] == "Node"] + rest)
    device_counts(kept)  # the table built, then every slice applied to it one by one
    for obj in listed:
        if obj["kind"] == "ResourceSlice":
            kept.upsert("resourceslices", obj)
    assert device_counts(kept) == device_counts(fresh)
    assert device_counts(fresh)["free"][GPU] == {"n0": 8, "n1": 5, "n2": 0, "n3": 8, "n4": 0, "n5": 7}
    assert device_counts(fresh)["tainted"] == {GPU: 16}
    # A slice republished and one removed move the kept table as a rebuild would.
    kept.upsert("resourceslices", resource_slice("n3", gpus=4, generation=2))
    kept.remove("resourceslices", ("", f"n0-{DRIVER}-x2v9k"))
    rebuilt = view_from_objects(
        [o for o in listed if o["metadata"]["name"] not in (f"n0-{DRIVER}-x2v9k", f"n3-{DRIVER}-x2v9k")]
        + [resource_slice("n3", gpus=4, generation=2), *rest]
    )
    assert device_counts(kept) == device_counts(rebuilt)


def test_a_partitioned_pools_table_rebuilt_at_once_counts_as_kept_slice_by_slice() -> None:
    objects = mig_cluster(nodes=3)
    fresh = view_from_objects(objects)
    kept = view_from_objects([o for o in objects if o["kind"] != "ResourceSlice"])
    device_counts(kept)
    for obj in objects:
        if obj["kind"] == "ResourceSlice":
            kept.upsert("resourceslices", obj)
    assert device_counts(kept) == device_counts(fresh)
    assert any(device_counts(fresh)["partitioned"].values())


def test_claims_told_after_a_class_change_count_as_a_fresh_build() -> None:
    listed, rest = _dra_objects()
    view = view_from_objects(listed + [device_class()])
    device_counts(view)  # built for the class as it was
    view.upsert("devicetaintrules", taint_rule("n2"))  # the table is now behind the view ...
    for claim in rest:
        if claim["kind"] == "ResourceClaim":
            view.upsert("resourceclaims", claim)  # ... so claims only move the allocation
    rebuilt = view_from_objects(listed + [device_class(), taint_rule("n2"), *rest[3:]])
    assert device_counts(view) == device_counts(rebuilt)


# ---- nodes: a page's nodes written at once -------------------------------------------------------


def _node_state(view: ClusterView) -> dict[str, Any]:
    index = index_for(view)
    with view.lock:
        return {
            "count": index.node_count,
            "names": index.names(range(index.rows)),
            "free": index.free(["cpu", "memory", "pods", GPU]).tolist(),
            "usable": index.usable().tolist(),
            "alive": index.alive().tolist(),
            "cordoned": index.cordoned().tolist(),
            "not_ready": index.not_ready().tolist(),
            "maintenance": index.maintenance().tolist(),
            "fresh": [index.fresh_free(["cpu", GPU], row).tolist() for row in range(index.rows)],
        }


def _nodes() -> list[dict[str, Any]]:
    draining = node("n4")
    draining["status"]["conditions"].append({"type": "DrainInProgress", "status": "True"})
    return [
        node("n0", gpus=8),
        node("n1"),
        node("n2", unschedulable=True),
        node("n3", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
        draining,
        node_object("n5", {"cpu": "4", "example.com/fpga": "1"}),
        node("n1", gpus=4),  # n1 again: the last one counts
    ]


def test_nodes_taken_before_a_read_count_as_nodes_read_one_at_a_time() -> None:
    together, alone = ClusterView("test"), ClusterView("test")
    index_for(together), index_for(alone)
    for obj in _nodes():
        together.upsert(NODES, obj)
        alone.upsert(NODES, obj)
        _node_state(alone)  # read after every node
    assert _node_state(together) == _node_state(alone)
    state = _node_state(together)
    assert state["count"] == 6
    assert state["usable"] == [True, True, False, False, True, True]
    assert state["maintenance"] == [False, False, False, False, True, False]
    assert state["fresh"][1] == [96000, 4]


def test_a_node_removed_before_a_read_is_gone_and_one_added_again_counts() -> None:
    view = ClusterView("test")
    index_for(view)
    for obj in _nodes()[:3]:
        view.upsert(NODES, obj)
    view.remove(NODES, ("", "n1"))  # before any read of the nodes taken
    state = _node_state(view)
    assert state["count"] == 2
    assert state["alive"] == [True, False, True]
    view.upsert(NODES, node("n1"))
    assert _node_state(view)["alive"] == [True, True, True]
    assert _node_state(view)["count"] == 3


def test_nodes_listing_the_same_allocatable_share_one_parsed_map() -> None:
    first, second = NodeRecord.from_object(node("a")), NodeRecord.from_object(node("b"))
    assert first.allocatable is second.allocatable
    assert first.allocatable == parse_resource_list(node("a")["status"]["allocatable"])
    odd = node_object("c", {"cpu": 4, "memory": "1Gi"})  # a number, not a quantity string
    assert NodeRecord.from_object(odd).allocatable == parse_resource_list({"cpu": 4, "memory": "1Gi"})
    assert NodeRecord.from_object(node_object("d", {})).allocatable == {}


# ---- typed list pages: slices and claims decoded straight into their records ----------------------


def _page_of(items: list[Any]) -> bytes:
    return orjson.dumps(
        {
            "kind": "List",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "77", "continue": "c"},
            "items": items,
        }
    )


def _as_listed(decoder: Any, record: Any, data: bytes) -> tuple[Any, ...]:
    page = decoder(data)
    items = page["items"]
    return (
        page["metadata"],
        [record(item) for item in items],
        [object_key(item) for item in items],
        item_versions(items),
        [type(item) for item in items],
    )


def _versioned(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(100 + i), "uid": f"u{i}"}}
        for i, obj in enumerate(objects)
    ]


def test_a_typed_slice_page_lists_the_records_and_keys_a_dict_page_lists() -> None:
    odd = resource_slice("n3", gpus=2)
    odd["spec"]["devices"][1]["attributes"] = "not a map"
    odd["spec"]["devices"][0]["name"] = 5
    no_spec = {"kind": "ResourceSlice", "metadata": {"name": "empty"}, "spec": None}
    network = resource_slice("n4", gpus=1)
    del network["spec"]["nodeName"]
    network["spec"]["nodeSelector"] = {"nodeSelectorTerms": []}
    network["spec"]["sharedCounters"] = [{"name": "set", "counters": {"memory": {"value": "80Gi"}}}]
    plain = [resource_slice("n0"), resource_slice("n1", generation=3), odd, no_spec, network]
    data = _page_of(_versioned(plain))
    typed = _as_listed(drawire.decode_slice_page, ResourceSliceRecord.from_object, data)
    as_dicts = _as_listed(decode, ResourceSliceRecord.from_object, data)
    assert typed[:4] == as_dicts[:4]
    assert typed[4] == [dra.Decoded] * 5 and as_dicts[4] == [dict] * 5
    # A device the typed shape does not hold (its own taints, v1beta1's `basic`, counters it
    # consumes): the page is decoded into dicts, and read as before; a slice of shared counters
    # and no device is read typed.
    beta = resource_slice("n5", gpus=1)
    device = beta["spec"]["devices"][0]
    beta["spec"]["devices"][0] = {"name": device.pop("name"), "basic": device}
    tainted = resource_slice("n2", taints=[{"key": "xid", "effect": "NoSchedule"}])
    others = [tainted, beta, *(o for o in mig_cluster(1) if o["kind"] == "ResourceSlice")]
    assert any(not o["spec"].get("devices") for o in others)
    for other in others:
        data = _page_of(_versioned([*plain, other]))
        typed = _as_listed(drawire.decode_slice_page, ResourceSliceRecord.from_object, data)
        assert typed[:4] == _as_listed(decode, ResourceSliceRecord.from_object, data)[:4]
        assert typed[4] == [dict if other["spec"].get("devices") else dra.Decoded] * 6


def test_a_typed_claim_page_lists_the_records_and_keys_a_dict_page_lists() -> None:
    reserved = allocated_claim("r", "n1", range(2))
    reserved["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u"}, "odd"]
    unallocated = allocated_claim("u", "n2", [])
    del unallocated["status"]
    null_status = {**allocated_claim("s", "n2", [0]), "status": None}
    mistyped = allocated_claim("m", "n3", range(3))
    mistyped["status"]["allocation"]["devices"]["results"][1]["driver"] = 7
    claims = [allocated_claim("a", "n0", range(8)), reserved, unallocated, null_status, mistyped]
    data = _page_of(_versioned(claims))
    typed = _as_listed(drawire.decode_claim_page, ResourceClaimRecord.from_object, data)
    as_dicts = _as_listed(decode, ResourceClaimRecord.from_object, data)
    assert typed[:4] == as_dicts[:4]
    assert typed[4] == [dra.Decoded] * 5
    # A result the typed shape does not hold (consumed capacity of a shared device): dicts.
    shared = allocated_claim("c", "n0", [0])
    shared["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {"memory": "1Gi"}
    data = _page_of(_versioned([*claims, shared]))
    listed = _as_listed(drawire.decode_claim_page, ResourceClaimRecord.from_object, data)
    assert listed == _as_listed(decode, ResourceClaimRecord.from_object, data)
    assert listed[4] == [dict] * 6


def test_a_relist_of_typed_pages_fills_the_view_as_dict_pages_do() -> None:
    objects = _versioned(
        [node(f"n{i}") for i in range(4)]
        + [resource_slice(f"n{i}") for i in range(4)]
        + [device_class(), allocated_claim("a", "n1", range(3)), allocated_claim("b", "n2", [1])]
    )
    fresh = view_from_objects(objects)
    view = ClusterView("test")
    index_for(view)
    for kind in ("nodes", "resourceslices", "deviceclasses", "resourceclaims"):
        listed = [
            o for o in objects if o["kind"].lower() + ("es" if o["kind"].endswith("ss") else "s") == kind
        ]
        reflector = Reflector(kind, view, _Pages({kind: listed}))
        reflector.relist()
        assert reflector.versions.get(object_key(listed[0])) is not None
    assert device_counts(view) == device_counts(fresh)
    assert view.resource_claims() == fresh.resource_claims()


class _Pages:
    """A transport listing each kind's objects in pages of two, decoded as the live view decodes."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects

    def list_page(self, kind: str, continue_token: str | None, limit: int) -> dict[str, Any]:
        start = int(continue_token or 0)
        items = self.objects.get(kind, [])[start : start + 2]
        more = start + 2 < len(self.objects.get(kind, []))
        meta = {"resourceVersion": "500", **({"continue": str(start + 2)} if more else {})}
        return page_decoder(kind)(orjson.dumps({"metadata": meta, "items": items}))

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Any:
        return iter(())

    def close(self) -> None:
        pass
