"""The DRA kinds in the cluster view (guardhook.cluster.dra, store lookups): every version's shape,
devices per node, allocated devices per claim, the pods that use a claim, scheduling gates, and
the live view listing the newest served version through the real `kubernetes` client."""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.capacity import index_for
from guardhook.cluster.dra import (
    ClassMatcher,
    DeviceClassRecord,
    DeviceId,
    DeviceTaint,
    DeviceTaintRuleRecord,
    ResourceClaimRecord,
    ResourceSliceRecord,
    effective_taints,
    rule_selects,
)
from guardhook.cluster.kube_transport import KubeTransport, reflector_client
from guardhook.cluster.listing import list_cluster
from guardhook.cluster.model import PodRecord
from guardhook.cluster.sources import KUBECONFIG, Source
from guardhook.cluster.view.live import Reflector, snapshot
from guardhook.cluster.view.static import view_from_objects, view_from_paths
from guardhook.cluster.view.store import (
    DEVICETAINTRULES,
    DRA_KINDS,
    RESOURCECLAIMS,
    RESOURCESLICES,
    ClusterView,
)

from fake_apiserver import FakeApiServer
from gpu_cluster import resource_slice

DRIVER = "gpu.nvidia.com"
GPU_CLASS_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def slice_v1(node: str, gpus: int, generation: int = 1, name: str | None = None) -> dict[str, Any]:
    """A node-local ResourceSlice as the NVIDIA DRA driver publishes it (resource.k8s.io/v1)."""
    return resource_slice(node, gpus, generation=generation, name=name or f"{node}-{DRIVER}-abcde")


def slice_v1beta1(node: str, gpus: int) -> dict[str, Any]:
    """The same in resource.k8s.io/v1beta1 (Kubernetes 1.32): device fields under `basic`."""
    obj = slice_v1(node, gpus)
    obj["apiVersion"] = "resource.k8s.io/v1beta1"
    obj["spec"]["devices"] = [
        {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
        for d in obj["spec"]["devices"]
    ]
    return obj


def claim_v1(
    name: str, node: str, devices: list[str], namespace: str = "default", reserved: tuple[str, ...] = ()
) -> dict[str, Any]:
    """An allocated ResourceClaim (resource.k8s.io/v1) holding `devices` of `node`'s pool."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": len(devices)}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpus", "driver": DRIVER, "pool": node, "device": d} for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": r, "uid": f"uid-{r}"} for r in reserved],
        },
    }


def device_class(name: str = DRIVER, extended: str = "nvidia.com/gpu") -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": GPU_CLASS_SELECTOR}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def taint_rule(version: str, **selector: str) -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"rule-{version}"},
        "spec": {
            "deviceSelector": selector,
            "taint": {"key": "example.com/broken", "value": "xid-79", "effect": "NoExecute"},
        },
    }


def dra_pod(name: str, **extra: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }
    for path, value in extra.items():
        section, field = path.split("__")
        pod[section][field] = value
    return pod


# ---- parsing every served version --------------------------------------------------------------


def test_a_v1_slice_and_a_v1beta1_slice_publish_the_same_devices() -> None:
    for obj in (slice_v1("n1", 2), slice_v1beta1("n1", 2)):
        record = ResourceSliceRecord.from_object(obj)
        assert [d.id for d in record.devices] == [
            DeviceId(DRIVER, "n1", "gpu-0"),
            DeviceId(DRIVER, "n1", "gpu-1"),
        ]
        assert {d.node_name for d in record.devices} == {"n1"}
        device = record.devices[0]
        assert device.attributes[f"{DRIVER}/type"] == "gpu"  # unqualified names get the driver's domain
        assert device.capacity[f"{DRIVER}/memory"] == 80 << 30


def test_per_device_node_selection_and_network_attached_slices() -> None:
    obj = slice_v1("ignored", 2)
    del obj["spec"]["nodeName"]
    obj["spec"]["perDeviceNodeSelection"] = True
    obj["spec"]["devices"][0]["nodeName"] = "n7"
    obj["spec"]["devices"][1]["allNodes"] = True
    record = ResourceSliceRecord.from_object(obj)
    assert record.per_device_nodes
    assert [d.node_name for d in record.devices] == ["n7", ""]
    view = view_from_objects([obj])
    assert [d.id.device for d in view.devices_on_node("n7")] == ["gpu-0"]
    assert sum(len(v) for v in view.devices_by_node().values()) == 1  # the all-nodes device is no node's


def test_only_the_newest_pool_generation_counts() -> None:
    old = slice_v1("n1", 4, generation=1, name="old")
    new = slice_v1("n1", 2, generation=2, name="new")
    view = view_from_objects([old, new])
    assert len(view.devices_on_node("n1")) == 2
    assert sorted(d.device for d in view.published_devices()) == ["gpu-0", "gpu-1"]


def test_claim_requests_in_v1_and_v1beta1_and_its_allocation() -> None:
    v1 = claim_v1("c", "n1", ["gpu-0", "gpu-1"])
    beta = copy.deepcopy(v1)
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    beta["spec"]["devices"]["requests"] = [{"name": "gpus", "deviceClassName": DRIVER, "count": 2}]
    for obj in (v1, beta):
        record = ResourceClaimRecord.from_object(obj)
        (request,) = record.requests
        assert (request.device_class, request.count, request.allocation_mode) == (DRIVER, 2, "ExactCount")
        assert record.allocation_node == "n1"
        assert [a.id.device for a in record.allocated] == ["gpu-0", "gpu-1"]
    alternatives = copy.deepcopy(v1)
    alternatives["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": "big", "deviceClassName": "h100", "count": 1},
                {"name": "small", "deviceClassName": "l4", "count": 2},
            ],
        }
    ]
    (request,) = ResourceClaimRecord.from_object(alternatives).requests
    assert [(a.name, a.device_class, a.count) for a in request.alternatives] == [
        ("big", "h100", 1),
        ("small", "l4", 2),
    ]


def test_device_class_extended_resource_names() -> None:
    explicit = DeviceClassRecord.from_object(device_class())
    assert explicit.resource_names == ("nvidia.com/gpu", f"deviceclass.resource.kubernetes.io/{DRIVER}")
    assert explicit.column == "nvidia.com/gpu"
    implicit = DeviceClassRecord.from_object(device_class(name="a100", extended=""))
    assert implicit.column == "deviceclass.resource.kubernetes.io/a100"


def test_device_class_selectors_are_judged_with_cel_or_said_to_be_unjudgeable() -> None:
    gpu = ResourceSliceRecord.from_object(slice_v1("n1", 1)).devices[0]
    matcher = ClassMatcher()
    assert matcher.matches(DeviceClassRecord.from_object(device_class()), gpu) is True
    other = DeviceClassRecord("nic", ("device.driver == 'nic.example.com'",), "")
    assert matcher.matches(other, gpu) is False
    big = DeviceClassRecord("big", (f"device.capacity['{DRIVER}'].memory >= {64 << 30}",), "")
    assert matcher.matches(big, gpu) is True
    # Kubernetes' quantity library is not in cel-python: not judged, never guessed
    quantity = DeviceClassRecord(
        "q", (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0",), ""
    )
    assert matcher.matches(quantity, gpu) is None


def test_device_taint_rules_of_both_versions_taint_the_devices_they_select() -> None:
    device = ResourceSliceRecord.from_object(slice_v1("n1", 1)).devices[0]
    alpha = DeviceTaintRuleRecord.from_object(
        taint_rule("v1alpha3", driver=DRIVER, pool="n1", deviceClassName=DRIVER)
    )
    beta = DeviceTaintRuleRecord.from_object(taint_rule("v1beta2", driver=DRIVER, pool="n2"))
    assert alpha.device_class == DRIVER and alpha.matches_id(device.id)
    assert not beta.matches_id(device.id)
    no_selector = DeviceTaintRuleRecord.from_object(
        {
            "kind": "DeviceTaintRule",
            "metadata": {"name": "x"},
            "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
        }
    )
    assert not no_selector.matches_id(device.id)  # without a selector, no device is matched
    assert effective_taints(device, [alpha, beta]) == (
        DeviceTaint("example.com/broken", "xid-79", "NoExecute"),
    )


def test_rule_selects_says_when_the_view_cannot_tell() -> None:
    device = ResourceSliceRecord.from_object(slice_v1("n1", 1)).devices[0]
    classes = {DRIVER: DeviceClassRecord.from_object(device_class())}
    matcher = ClassMatcher()
    by_class = DeviceTaintRuleRecord.from_object(
        taint_rule("v1alpha3", driver=DRIVER, deviceClassName=DRIVER)
    )
    assert rule_selects(by_class, device.id, device, classes.get, matcher) is True
    unknown: list[str] = []
    assert rule_selects(by_class, device.id, None, classes.get, matcher, unknown) is None  # not published
    assert unknown == ["deviceClassName"]
    missing = dataclasses.replace(by_class, device_class="missing")
    assert rule_selects(missing, device.id, device, classes.get, matcher) is None
    other_pool = dataclasses.replace(by_class, pool="n2")
    assert rule_selects(other_pool, device.id, None, classes.get, matcher) is False  # the id decides
    quantity = (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0",)
    unknown = []
    cel = dataclasses.replace(by_class, device_class="", selectors=quantity)
    assert rule_selects(cel, device.id, device, classes.get, matcher, unknown) is None
    assert unknown == ["selectors"]
    nic = dataclasses.replace(missing, selectors=("device.driver == 'nic.example.com'",))
    assert rule_selects(nic, device.id, device, classes.get, matcher) is False  # a False part wins


# ---- pods: claims and scheduling gates -----------------------------------------------------------


def test_pods_using_a_claim_by_spec_status_extended_claim_and_reserved_for() -> None:
    by_spec = dra_pod("a", spec__resourceClaims=[{"name": "gpus", "resourceClaimName": "shared"}])
    by_template = dra_pod(
        "b",
        spec__resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "tpl"}],
        status__resourceClaimStatuses=[{"name": "gpus", "resourceClaimName": "b-gpus-x7k2p"}],
    )
    by_extended = dra_pod(
        "c",
        status__extendedResourceClaimStatus={
            "resourceClaimName": "c-extended-resources-q9z",
            "requestMappings": [
                {
                    "containerName": "c",
                    "resourceName": "nvidia.com/gpu",
                    "requestName": "container-0-request-0",
                }
            ],
        },
    )
    reserved = dra_pod("d")
    claim = claim_v1("shared", "n1", ["gpu-0"], reserved=("d",))
    view = view_from_objects([by_spec, by_template, by_extended, reserved, claim])
    assert [p.name for p in view.pods_using_claim("default", "shared")] == ["a", "d"]
    assert [p.name for p in view.pods_using_claim("default", "b-gpus-x7k2p")] == ["b"]
    assert [p.name for p in view.pods_using_claim("default", "c-extended-resources-q9z")] == ["c"]
    assert view.claim_devices("default", "shared") == (DeviceId(DRIVER, "n1", "gpu-0"),)
    view.remove("pods", ("default", "a"))
    assert [p.name for p in view.pods_using_claim("default", "shared")] == ["d"]


def test_scheduling_gates_are_read() -> None:
    gated = PodRecord.from_object(dra_pod("g", spec__schedulingGates=[{"name": "kueue.x-k8s.io/admission"}]))
    assert gated.gated and gated.scheduling_gates == ("kueue.x-k8s.io/admission",)
    assert not PodRecord.from_object(dra_pod("free")).gated


def test_store_lookups_and_removal() -> None:
    objects = [
        slice_v1("n1", 4),
        slice_v1("n2", 4),
        claim_v1("c", "n1", ["gpu-0"]),
        device_class(),
        taint_rule("v1alpha3", driver=DRIVER),
    ]
    view = view_from_objects(objects)
    assert {d.node_name for d in view.devices_on_node("n2")} == {"n2"}
    assert len(view.resource_slices()) == 2 and len(view.resource_claims()) == 1
    assert view.resource_claim("default", "c") is not None and view.resource_claims("other") == []
    assert [c.name for c in view.device_classes()] == [DRIVER] and view.device_class(DRIVER) is not None
    assert [r.name for r in view.device_taint_rules()] == ["rule-v1alpha3"]
    assert view.allocated_devices() == {DeviceId(DRIVER, "n1", "gpu-0")}
    generation = view.generation(RESOURCECLAIMS)
    view.remove(RESOURCECLAIMS, ("default", "c"))
    assert view.allocated_devices() == set() and view.generation(RESOURCECLAIMS) != generation
    assert view.synced  # a static view has every kind, DRA ones included


def test_manifests_of_dra_objects_load_into_the_static_view(tmp_path: Path) -> None:
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [slice_v1beta1("n1", 8), claim_v1("c", "n1", ["gpu-3"])],
    }
    (tmp_path / "dra.yaml").write_text(yaml.safe_dump(listed))
    view = view_from_paths([tmp_path])
    assert len(view.devices_on_node("n1")) == 8 and view.claim_devices("default", "c")


# ---- the live view: newest served version, skipped when not served -------------------------------


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_live_reflector_lists_the_newest_served_version_and_follows_the_watch(tmp_path: Path) -> None:
    fake = FakeApiServer(unserved=["resource.k8s.io/v1"]).start()  # a 1.33 server: v1beta2 is newest
    try:
        fake.put(RESOURCESLICES, strip(slice_v1("n1", 4)))
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        transport = KubeTransport(reflector_client(Source(KUBECONFIG, (str(kubeconfig),))), idle_seconds=0.3)
        reflector = Reflector(RESOURCESLICES, ClusterView("test"), transport)
        thread = threading.Thread(target=reflector.run, daemon=True)
        thread.start()
        try:
            wait_for(lambda: len(reflector.view.devices_on_node("n1")) == 4, "the first list")
            assert transport.served_version(RESOURCESLICES) == "resource.k8s.io/v1beta2"
            fake.put(RESOURCESLICES, strip(slice_v1("n2", 2)))
            wait_for(lambda: len(reflector.view.devices_on_node("n2")) == 2, "the watched slice")
            assert any(
                "/apis/resource.k8s.io/v1beta2/resourceslices?" in r and "watch=true" in r
                for r in fake.requests
            )
        finally:
            reflector.stop()
            transport.close()
            thread.join(5)
    finally:
        fake.stop()


def test_snapshot_and_audit_skip_dra_kinds_a_server_does_not_serve(tmp_path: Path) -> None:
    # a 1.31 server: no resource.k8s.io at the versions guardhook reads
    unserved = [
        "resource.k8s.io/v1",
        "resource.k8s.io/v1beta2",
        "resource.k8s.io/v1beta1",
        "resource.k8s.io/v1alpha3",
    ]
    fake = FakeApiServer(unserved=unserved).start()
    try:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        api = reflector_client(Source(KUBECONFIG, (str(kubeconfig),)))
        view = snapshot(ClusterView("test"), KubeTransport(api))
        assert view.synced and all(view.count(kind) == 0 for kind in DRA_KINDS)
        listed = list_cluster(api)
        assert any(
            n.startswith("ResourceSlice (resource.k8s.io/v1, resource.k8s.io/v1beta2") for n in listed.notes
        )
        assert any(
            n.startswith("DeviceTaintRule (resource.k8s.io/v1beta2, resource.k8s.io/v1alpha3)")
            for n in listed.notes
        )
    finally:
        fake.stop()


def test_audit_lists_dra_kinds_with_the_served_api_version(tmp_path: Path) -> None:
    fake = FakeApiServer(unserved=["resource.k8s.io/v1beta2"]).start()  # 1.34 alpha gate off: v1alpha3 rules
    try:
        fake.put(RESOURCESLICES, strip(slice_v1("n1", 1)))
        fake.put(DEVICETAINTRULES, strip(taint_rule("v1alpha3", driver=DRIVER)))
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        listed = list_cluster(reflector_client(Source(KUBECONFIG, (str(kubeconfig),))))
        versions = {
            o["kind"]: o["apiVersion"]
            for o in listed.objects
            if o["kind"] in ("ResourceSlice", "DeviceTaintRule")
        }
        assert versions == {
            "ResourceSlice": "resource.k8s.io/v1",
            "DeviceTaintRule": "resource.k8s.io/v1alpha3",
        }
    finally:
        fake.stop()


def test_snapshot_lists_karpenter_nodepools(tmp_path: Path) -> None:
    pool = {
        "metadata": {"name": "gpu-h100"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]}
                    ],
                    "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                }
            },
            "limits": {"nvidia.com/gpu": "64", "cpu": "1000"},
        },
        "status": {"resources": {"nvidia.com/gpu": "16", "cpu": "384", "nodes": "2"}},
    }
    fake = FakeApiServer().start()
    try:
        fake.put("nodepools", pool)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        view = snapshot(
            ClusterView("test"), KubeTransport(reflector_client(Source(KUBECONFIG, (str(kubeconfig),))))
        )
        (record,) = view.node_pools()
        assert (
            record.name == "gpu-h100"
            and record.limits["nvidia.com/gpu"] == 64
            and record.used["cpu"] == 384_000
        )
        assert record.requirements == (("karpenter.k8s.aws/instance-family", "In", ("p5",)),)
        assert [t.key for t in record.taints] == ["nvidia.com/gpu"]
        assert any(r.startswith("GET /apis/karpenter.sh/v1/nodepools") for r in fake.requests)
    finally:
        fake.stop()


MALFORMED = [
    {"spec": None, "status": []},
    {
        "spec": {
            "devices": [
                1,
                "x",
                {"basic": []},
                {"name": 3, "capacity": {"m": {"value": None}}, "attributes": []},
            ]
        }
    },
    {"spec": {"pool": "p", "nodeName": ["n"], "devices": {"a": 1}}},
    {
        "spec": {"devices": {"requests": [None, {"exactly": [], "firstAvailable": [1]}]}},
        "status": {"allocation": 1},
    },
    {
        "status": {
            "allocation": {"devices": {"results": [1, {"driver": None}]}, "nodeSelector": []},
            "reservedFor": [2],
        }
    },
    {
        "spec": {
            "selectors": [{"cel": None}, 5],
            "extendedResourceName": 7,
            "deviceSelector": [],
            "taint": "x",
        }
    },
    {
        "spec": {
            "template": {"spec": {"requirements": [1, {"values": "a"}], "taints": [None]}},
            "limits": {"cpu": "x"},
        }
    },
    {
        "spec": {"resourceClaims": [1], "schedulingGates": [None, {"name": 2}]},
        "status": {"resourceClaimStatuses": [3]},
    },
]


@pytest.mark.parametrize("shape", MALFORMED)
def test_malformed_dra_and_nodepool_objects_never_raise(shape: dict[str, Any]) -> None:
    view = view_from_objects([])
    kinds = [
        "resourceslices",
        "resourceclaims",
        "resourceclaimtemplates",
        "deviceclasses",
        "devicetaintrules",
        "nodepools",
        "pods",
    ]
    for kind in kinds:
        view.upsert(kind, {"metadata": {"name": "x", "namespace": "default"}, **copy.deepcopy(shape)})
    view.upsert(
        "deviceclasses",
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "1 +"}}]}},
    )
    view.upsert("nodes", {"metadata": {"name": "x"}, "status": {"allocatable": {"cpu": "1"}}})
    view.devices_by_node()
    view.allocated_devices()
    view.pods_using_claim("default", "x")
    with view.lock:
        assert index_for(view).devices().rows >= 1  # the capacity index counts what it can
