"""Pod records share their repeated parts (guardhook.cluster.interning) and read the same as unshared."""

from __future__ import annotations

import copy
import sys

import orjson
import pytest

from guardhook.cluster import interning
from guardhook.cluster.dra import DeviceId, ResourceClaimRecord, ResourceSliceRecord
from guardhook.cluster.model import OwnerRef, PodRecord, Toleration, str_map
from guardhook.cluster.podwire import decode_pod_page, pod_record
from guardhook.cluster.resources import pod_requests, shared_pod_requests
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.wire import KubeObject


def _decoded_pods() -> list[KubeObject]:
    """The fleet's pods, each decoded from its own JSON bytes (as a list page delivers them: no two
    pods share a string object)."""
    pods = [obj for obj in embedded_fleet_objects() if obj.get("kind") == "Pod"]
    return [orjson.loads(orjson.dumps(pod)) for pod in pods]


def _tolerating(pod: KubeObject) -> KubeObject:
    pod = copy.deepcopy(pod)
    pod["spec"]["tolerations"] = [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
    ]
    return orjson.loads(orjson.dumps(pod))


def test_records_read_as_the_unshared_parsers_read() -> None:
    for obj in _decoded_pods():
        record = PodRecord.from_object(obj)
        meta, spec = obj["metadata"], obj["spec"]
        assert record.labels == str_map(meta.get("labels"))
        assert record.annotations == str_map(meta.get("annotations"))
        assert record.owners == OwnerRef.parse_all(meta)
        assert record.requests == pod_requests(spec)
        assert record.tolerations == Toleration.parse_all(spec)


def test_replicas_of_one_template_share_owners_requests_tolerations_and_strings() -> None:
    pods = [
        obj
        for obj in _decoded_pods()
        if obj["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/name")
    ]
    workers = [
        obj for obj in pods if obj["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] != "0"
    ]
    first, second = (PodRecord.from_object(_tolerating(obj)) for obj in workers[:2])
    assert first.owners[0].name == second.owners[0].name  # same leader's worker StatefulSet
    assert first.owners is second.owners
    assert first.requests is second.requests
    assert first.tolerations is second.tolerations and first.tolerations[0].seconds == 300
    assert first.namespace is second.namespace
    name_label = "leaderworkerset.sigs.k8s.io/name"
    assert first.labels[name_label] is second.labels[name_label]
    assert first.annotations is second.annotations  # same group: size and leader-name


def test_malformed_maps_and_quantities_read_as_before() -> None:
    class Tag(str):
        pass

    assert interning.str_map({"a": "1", "b": 2, 3: "c"}) == {"a": "1"}
    kept = interning.str_map({"a": Tag("x")})
    assert kept == {"a": "x"} and isinstance(kept["a"], Tag)
    assert interning.str_map(["not", "a", "map"]) == {}
    spec = {"containers": [{"resources": {"requests": {"cpu": ["unhashable"], "memory": "1Gi"}}}]}
    record = PodRecord.from_object({"metadata": {"name": "p"}, "spec": spec})
    assert record.requests == pod_requests(spec) == {"memory": 1024**3}


def test_small_maps_read_through_the_shared_cache_keep_only_strings() -> None:
    # Looked up by the decoded pairs: values that are unhashable, or equal but not strings
    # (1 == True), never reach a record, and an equal map is the same object.
    assert interning.shared_str_map({"a": ["unhashable"], "b": "2"}) == {"b": "2"}
    assert interning.shared_str_map({"a": 1}) == {} and interning.shared_str_map({"a": True}) == {}
    assert interning.shared_str_map({"a": 1.0, "b": "x"}) == {"b": "x"}
    first = interning.shared_str_map(orjson.loads(b'{"size": "4", "leader-name": "lws-0"}'))
    second = interning.shared_str_map(orjson.loads(b'{"size": "4", "leader-name": "lws-0"}'))
    assert first == {"size": "4", "leader-name": "lws-0"} and first is second


def test_pod_records_are_frozen_and_copied_with_changes() -> None:
    record = PodRecord.from_object(_decoded_pods()[0])
    with pytest.raises(AttributeError):
        record.terminating = True  # type: ignore[misc]
    changed = record.with_fields(terminating=True, namespace="other")
    assert changed.terminating and changed.namespace == "other" and changed.key == ("other", record.name)
    assert not record.terminating and changed.labels == record.labels
    assert changed == record.with_fields(terminating=True, namespace="other") and changed != record
    with pytest.raises(TypeError):
        record.with_fields(no_such_field=1)


def test_creation_timestamps_read_with_and_without_a_zone() -> None:
    meta = {"name": "p", "creationTimestamp": "2026-11-30T12:34:56Z"}
    assert PodRecord.from_object({"metadata": meta}).created == 1796042096.0
    meta["creationTimestamp"] = "2026-11-30T12:34:56+01:00"
    assert PodRecord.from_object({"metadata": meta}).created == 1796042096.0 - 3600
    for unreadable in ("2026-11-30T12:34:56", "yesterday", 1796042096):
        meta["creationTimestamp"] = unreadable
        assert PodRecord.from_object({"metadata": meta}).created == 0.0


def test_shared_template_requests_read_as_pod_requests_reads() -> None:
    # 1, 1.0 and True are equal lookup keys: each must read as pod_requests reads it.
    for cpu in ("1", 1, 1.0, True, "1", 1.5, "500m", ["unhashable"]):
        spec = {"containers": [{"resources": {"requests": {"cpu": cpu}, "limits": {"memory": "1Gi"}}}]}
        assert shared_pod_requests(spec) == pod_requests(spec), cpu
    spec = {"containers": [{"resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "8"}}}]}
    again = orjson.loads(orjson.dumps(spec))
    assert shared_pod_requests(spec) is shared_pod_requests(again) == {"cpu": 2000, "nvidia.com/gpu": 8}
    with_init = {**spec, "initContainers": [{"resources": {"requests": {"cpu": "4"}}}]}
    assert shared_pod_requests(with_init) == pod_requests(with_init) == {"cpu": 4000, "nvidia.com/gpu": 8}
    assert shared_pod_requests("not a spec") == {} and shared_pod_requests({"containers": "x"}) == {}


def test_numbers_in_labels_and_annotations_are_ascii_digits_only() -> None:
    from guardhook.cluster.lws import int_annotation
    from guardhook.cluster.model import digits, scaled
    from guardhook.groups.placement import group_member

    assert digits("12") and not digits("") and not digits("²") and not digits("٣") and not digits("-1")
    assert int_annotation({"k": "²"}, "k", 7) == 7 and int_annotation({"k": "٣"}, "k", 7) == 7
    assert scaled("²%", 10, True, 5) == 5 and scaled("²", 10, True, 5) == 5
    labels = {
        "leaderworkerset.sigs.k8s.io/name": "llm",
        "leaderworkerset.sigs.k8s.io/group-index": "1",
        "leaderworkerset.sigs.k8s.io/worker-index": "²",
    }
    assert group_member("serve", labels, {}) is None  # unreadable position: not an LWS pod
    labels["leaderworkerset.sigs.k8s.io/worker-index"] = "1"
    member = group_member("serve", labels, {"leaderworkerset.sigs.k8s.io/size": "²"})
    assert (
        member is not None and member.size is None and (member.group_index, member.worker_index) == ("1", 1)
    )


def _bare_pod(name: str, **metadata: object) -> dict[str, object]:
    return {"metadata": {"namespace": "ns", "name": name, **metadata}, "spec": {"nodeName": "n1"}}


def test_pods_without_labels_or_annotations_share_one_empty_map_on_both_paths() -> None:
    bare = [_bare_pod("a"), _bare_pod("b", labels={}, annotations={}), _bare_pod("c", labels={"x": 1})]
    page = orjson.dumps({"kind": "PodList", "metadata": {}, "items": bare[:2]})
    records = [PodRecord.from_object(orjson.loads(orjson.dumps(pod))) for pod in bare]
    records += [pod_record(item) for item in decode_pod_page(page)["items"]]
    assert all(type(record).__name__ == "PodRecord" for record in records)
    for record in records:  # a label of another type than string is dropped: empty too
        assert record.labels == {} and record.labels is interning.EMPTY
        assert record.annotations == {} and record.annotations is interning.EMPTY
    assert interning.EMPTY == {}  # never written to through a record


def test_pod_names_are_not_interned_on_either_path() -> None:
    # A name is unique per pod: interning it shares nothing and costs an entry in the
    # interpreter's table. A fresh copy interned is then a different object from the record's.
    name = "worker-" + "".join(["not-interned", "-7"])
    page = orjson.dumps({"kind": "PodList", "metadata": {}, "items": [_bare_pod(name)]})
    typed = pod_record(decode_pod_page(page)["items"][0])
    plain = PodRecord.from_object(orjson.loads(orjson.dumps(_bare_pod(name))))
    for record in (typed, plain):
        assert record.name == name
        assert sys.intern("".join(name)) is not record.name
    assert typed.namespace is plain.namespace  # shared strings still are


def _slice(node: str) -> KubeObject:
    devices = [
        {
            "name": f"gpu-{d}",
            "attributes": {"type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for d in range(2)
    ]
    spec = {"driver": "gpu.example.com", "nodeName": node, "pool": {"name": node, "generation": 1}}
    return orjson.loads(
        orjson.dumps({"metadata": {"name": f"{node}-gpus"}, "spec": {**spec, "devices": devices}})
    )


def _claim(node: str) -> KubeObject:
    results = [{"request": "gpus", "driver": "gpu.example.com", "pool": node, "device": "gpu-0"}]
    claim = {
        "metadata": {"name": f"{node}-claim", "namespace": "ns"},
        "status": {"allocation": {"devices": {"results": results}}},
    }
    return orjson.loads(orjson.dumps(claim))


def test_a_device_whose_maps_differ_from_the_one_before_is_read_anew() -> None:
    # Equal raw maps reuse what the device before made of them; any difference (a value, or the
    # driver that qualifies the names) is parsed again.
    plain = _slice("node-a")
    other = copy.deepcopy(plain)
    other["spec"]["devices"][1]["capacity"]["memory"]["value"] = "40Gi"
    other["spec"]["devices"][1]["attributes"]["type"] = {"int": 3}
    devices = ResourceSliceRecord.from_object(other).devices
    assert [d.capacity for d in devices] == [
        {"gpu.example.com/memory": 80 * 2**30},
        {"gpu.example.com/memory": 40 * 2**30},
    ]
    assert [d.attributes for d in devices] == [{"gpu.example.com/type": "gpu"}, {"gpu.example.com/type": 3}]
    renamed = copy.deepcopy(plain)
    renamed["spec"]["driver"] = "tpu.example.com"
    ResourceSliceRecord.from_object(plain)
    assert ResourceSliceRecord.from_object(renamed).devices[0].capacity == {
        "tpu.example.com/memory": 80 * 2**30
    }


def test_devices_of_many_nodes_share_names_attributes_and_capacity() -> None:
    first, second = (ResourceSliceRecord.from_object(_slice(node)) for node in ("node-a", "node-b"))
    assert first.devices[0].attributes == {"gpu.example.com/type": "gpu"}
    assert first.devices[0].capacity == {"gpu.example.com/memory": 80 * 2**30}
    assert first.devices[0].attributes is second.devices[0].attributes
    assert first.devices[0].capacity is second.devices[0].capacity
    assert first.devices[1].id.device is second.devices[1].id.device
    assert first.driver is second.driver
    claim_a, claim_b = (ResourceClaimRecord.from_object(_claim(node)) for node in ("node-a", "node-b"))
    entry_a, entry_b = claim_a.allocated[0], claim_b.allocated[0]
    assert entry_a.id == DeviceId("gpu.example.com", "node-a", "gpu-0")
    assert entry_a.id.device is entry_b.id.device and entry_a.request is entry_b.request
    assert entry_a.id.pool is first.pool  # the claim names the slice's pool: one string


def test_unhashable_device_attributes_are_kept_unshared() -> None:
    assert interning.shared_map({"a": ["x"]}) == {"a": ["x"]}
    assert interning.shared_map({}) is interning.EMPTY


def test_rare_fields_live_in_one_shared_extras_and_read_and_change_as_fields() -> None:
    from guardhook.cluster.model import NO_EXTRAS

    workers = [
        obj
        for obj in _decoded_pods()
        if obj["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/worker-index")
        not in (None, "0")
    ]
    first, second = (PodRecord.from_object(_tolerating(obj)) for obj in workers[:2])
    assert first.tolerations[0].key == "node.kubernetes.io/not-ready"
    assert first.more is second.more  # equal extras of two pods: one object
    bare = PodRecord.from_object(orjson.loads(orjson.dumps(_bare_pod("x"))))
    assert bare.more is NO_EXTRAS and bare.claims == () and bare.pod_group == "" and not bare.gated
    changed = bare.with_fields(pod_group="gang", scheduling_gates=("kueue",), phase="Pending")
    assert (changed.pod_group, changed.gated, changed.phase) == ("gang", True, "Pending")
    assert bare.more is NO_EXTRAS and NO_EXTRAS.pod_group == ""  # the shared extras are untouched
    assert changed == bare.with_fields(phase="Pending", scheduling_gates=("kueue",), pod_group="gang")
    with pytest.raises(TypeError):
        bare.with_fields(more_than_a_field=1)
