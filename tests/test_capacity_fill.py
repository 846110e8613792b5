"""The capacity and group indexes as a relist fills them (issue 53, the fill's CPU): the DRA device
table judged once per distinct device, slices listed before their DeviceClass, and the view's pod
changes handed to the indexes a slice at a time. Every test compares against what the indexes
counted before (one change at a time, or a fresh build)."""

from __future__ import annotations

from typing import Any

from guardhook.capacity import index_for
from guardhook.cluster.dra import ClassMatcher
from guardhook.cluster.view.static import view_from_objects
from guardhook.cluster.view.store import ClusterView

from gpu_cluster import GPU, allocated_claim, device_class, node, resource_slice, taint_rule


def _counts(view: ClusterView) -> dict[str, Any]:
    index = index_for(view)
    with view.lock:
        devices = index.devices()
        names = index.names(range(index.rows))
        return {
            "free": {c: dict(zip(names, devices.free[c].tolist(), strict=True)) for c in devices.free},
            "published": {
                c: dict(zip(names, devices.published[c].tolist(), strict=True)) for c in devices.published
            },
            "tainted": dict(devices.tainted),
            "unjudged": sorted(devices.unjudged),
        }


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
    counts = _counts(view)
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
    assert _counts(view)["published"] == {}
    view.upsert("deviceclasses", later[0])
    view.upsert("resourceclaims", later[1])
    view.upsert("devicetaintrules", later[2])
    fresh = view_from_objects(
        [node(n) for n in nodes] + [resource_slice(n) for n in nodes] + [_nic_slice("n0"), *later]
    )
    assert _counts(view) == _counts(fresh)
    assert _counts(view)["free"][GPU] == {"n0": 8, "n1": 6, "n2": 8, "n3": 0}
