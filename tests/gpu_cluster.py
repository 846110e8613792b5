"""Builders for the GPU clusters of the capacity-model tests: nodes, DRA objects as a DRA driver
and the scheduler write them (resource.k8s.io/v1), gated pods, Karpenter NodePools, and
LeaderWorkerSet CREATE / scale reviews edited from the captured s33 / s29 reviews; and what the
capacity index's DRA device table counts for such a cluster (`device_counts`)."""

from __future__ import annotations

import copy
from typing import Any

from guardhook.capacity import index_for
from guardhook.cluster.view.store import ClusterView

from conftest import load_review

DRIVER = "gpu.nvidia.com"
GPU = "nvidia.com/gpu"
NAMESPACE = "serve"
GPU_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def node_object(
    name: str,
    allocatable: dict[str, str],
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node as the kubelet reports it: `allocatable`, the hostname label plus `labels`, `taints`,
    a cordon, and the Ready condition."""
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def node(
    name: str,
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    """A GPU node of 96 cpu / 2000Gi. `gpus` > 0 lists nvidia.com/gpu in allocatable (a device
    plugin); a DRA node lists none there and publishes a ResourceSlice instead."""
    allocatable = {"cpu": "96", "memory": "2000Gi", "pods": "110"}
    if gpus:
        allocatable[GPU] = str(gpus)
    return node_object(name, allocatable, labels, taints, unschedulable, ready)


def resource_slice(
    node_name: str,
    gpus: int = 8,
    taints: list[dict[str, str]] | None = None,
    generation: int = 1,
    name: str | None = None,
) -> dict[str, Any]:
    """The node-local ResourceSlice the NVIDIA DRA driver publishes for `gpus` GPUs (pool
    `generation`; `name` defaults to the driver's generated one)."""
    device_extra = {"taints": taints} if taints else {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node_name}-{DRIVER}-x2v9k"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                    **device_extra,
                }
                for i in range(gpus)
            ],
        },
    }


def device_class(extended: str = GPU, selector: str = GPU_SELECTOR, name: str = DRIVER) -> dict[str, Any]:
    """A DeviceClass for the driver's GPUs; `extended` maps it to an extended resource (KEP-5004)."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def allocated_claim(
    name: str, node_name: str, devices: range | list[int], namespace: str = "other"
) -> dict[str, Any]:
    """A ResourceClaim the scheduler allocated `devices` (indexes) of `node_name`'s pool to."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": len(devices)}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpus", "driver": DRIVER, "pool": node_name, "device": f"gpu-{i}"}
                        for i in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                },
            }
        },
    }


def claim_template(
    name: str = "gpus-8", count: int = 8, namespace: str = NAMESPACE, **request: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": count, **request}}
                    ]
                }
            }
        },
    }


def taint_rule(node_name: str, effect: str = "NoExecute") -> dict[str, Any]:
    """A DeviceTaintRule (v1alpha3) tainting every device of `node_name`'s pool."""
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"broken-{node_name}"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": node_name},
            "taint": {"key": "example.com/xid", "value": "79", "effect": effect},
        },
    }


def pod(
    name: str, gpus: int = 8, node_name: str = "", gates: tuple[str, ...] = (), namespace: str = "batch"
) -> dict[str, Any]:
    """A pod asking 90 cpu and `gpus` nvidia.com/gpu; pending unless `node_name`; gated by `gates`."""
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "90", GPU: str(gpus)}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": "Pending" if not node_name else "Running"},
    }


def node_pool(
    name: str, limits: dict[str, str] | None = None, used: dict[str, str] | None = None, **template: Any
) -> dict[str, Any]:
    """A Karpenter v1 NodePool: `template` holds spec.template.spec fields (requirements, taints)."""
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                **template,
            }
        }
    }
    if limits:
        spec["limits"] = limits
    pool: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }
    if used is not None:
        pool["status"] = {"resources": used}
    return pool


def lws_create(
    replicas: int = 1,
    size: int = 4,
    gpus: int = 8,
    claim: str = "",
    labels: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    name: str = "llm-s",
) -> dict[str, Any]:
    """The captured s33 LWS CREATE with `replicas` × `size` pods of 90 cpu, 1500Gi and `gpus`
    nvidia.com/gpu each; `claim` names a ResourceClaimTemplate the pods take GPUs from instead."""
    request = copy.deepcopy(load_review("s33-lws-create-fits.validating")["request"])
    lws = request["object"]
    lws["metadata"]["name"] = request["name"] = name
    lws["metadata"]["labels"] = labels or {}
    lws["spec"]["replicas"] = replicas
    template = lws["spec"]["leaderWorkerTemplate"]
    template["size"] = size
    for part in ("leaderTemplate", "workerTemplate"):
        spec = template[part]["spec"]
        resources = spec["containers"][0]["resources"]
        resources["limits"] = {GPU: str(gpus)} if gpus and not claim else {}
        resources["requests"] = {
            "cpu": "90",
            "memory": "1500Gi",
            **({GPU: str(gpus)} if gpus and not claim else {}),
        }
        if claim:
            spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": claim}]
            spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
        if tolerations:
            spec["tolerations"] = tolerations
    return request


def review_of(request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def dra_cluster(nodes: int = 8, gpus: int = 8) -> list[dict[str, Any]]:
    """`nodes` DRA GPU nodes of `gpus` GPUs each (none in allocatable) and the DeviceClass mapping
    nvidia.com/gpu to them."""
    objects = [device_class()]
    for i in range(nodes):
        objects += [node(f"gpu-{i}"), resource_slice(f"gpu-{i}", gpus)]
    return objects


# ---- partitionable devices (KEP-4815) as the NVIDIA DRA driver's DynamicMIG publishes them ----------
# Shapes from NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/partitions.go and mig.go: one counter
# set `gpu-<minor>-counter-set` per GPU, with one counter per capacity (names made DNS-like) and one
# `memory-slice-<i>` counter (value 1) per memory slice; the full GPU `gpu-<minor>` consumes every
# counter, a MIG device `gpu-<minor>-mig-<profile>-<profileID>-<placementStart>` its capacities and the
# memory slices of its placement. From Kubernetes 1.35 the counters go in a slice of their own.

MIG_PROFILE = "1g.18gb"
MIG_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
FULL_GPU = {"multiprocessors": 132, "memory": "141Gi"}
MIG_1G = {"multiprocessors": 16, "memory": "18Gi"}
MEMORY_SLICES = 8


def _counters(capacity: dict[str, Any], slices: range) -> dict[str, Any]:
    counters = {name: {"value": str(value)} for name, value in capacity.items()}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in slices})
    return counters


def mig_slices(
    node_name: str, gpus: int = 1, partitions: int = 7, generation: int = 1
) -> list[dict[str, Any]]:
    """The two ResourceSlices of `node_name`'s pool as the driver's DynamicMIG mode publishes them
    (Kubernetes >= 1.35: counters and devices apart): per GPU a counter set, the full GPU and
    `partitions` 1g.18gb MIG devices at placements 0.."""
    pool = {"name": node_name, "generation": generation, "resourceSliceCount": 2}
    counter_sets = [
        {"name": f"gpu-{g}-counter-set", "counters": _counters(FULL_GPU, range(MEMORY_SLICES))}
        for g in range(gpus)
    ]
    devices: list[dict[str, Any]] = []
    for g in range(gpus):
        counter_set = f"gpu-{g}-counter-set"
        devices.append(
            {
                "name": f"gpu-{g}",
                "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H200"}},
                "capacity": {name: {"value": str(v)} for name, v in FULL_GPU.items()},
                "consumesCounters": [
                    {"counterSet": counter_set, "counters": _counters(FULL_GPU, range(MEMORY_SLICES))}
                ],
            }
        )
        for start in range(partitions):
            devices.append(
                {
                    "name": f"gpu-{g}-mig-1g18gb-19-{start}",
                    "attributes": {"type": {"string": "mig"}, "profile": {"string": MIG_PROFILE}},
                    "capacity": {name: {"value": str(v)} for name, v in MIG_1G.items()},
                    "consumesCounters": [
                        {"counterSet": counter_set, "counters": _counters(MIG_1G, range(start, start + 1))}
                    ],
                }
            )
    base = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}
    return [
        {
            **base,
            "metadata": {"name": f"{node_name}-{DRIVER}-counters"},
            "spec": {"driver": DRIVER, "nodeName": node_name, "pool": pool, "sharedCounters": counter_sets},
        },
        {
            **base,
            "metadata": {"name": f"{node_name}-{DRIVER}-devices"},
            "spec": {"driver": DRIVER, "nodeName": node_name, "pool": pool, "devices": devices},
        },
    ]


def claim_of(
    name: str, node_name: str, devices: list[str], namespace: str = "other", **result: Any
) -> dict[str, Any]:
    """A ResourceClaim the scheduler allocated the named `devices` of `node_name`'s pool to
    (`result` adds fields to each result, such as consumedCapacity)."""
    claim = allocated_claim(name, node_name, [], namespace)
    claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = len(devices)
    claim["status"]["allocation"]["devices"]["results"] = [
        {"request": "gpus", "driver": DRIVER, "pool": node_name, "device": d, **result} for d in devices
    ]
    return claim


def mig_cluster(nodes: int = 4, gpus: int = 1) -> list[dict[str, Any]]:
    """`nodes` DynamicMIG nodes of `gpus` H200 each, the DeviceClass mapping nvidia.com/gpu to full
    GPUs and a `mig-1g.18gb` class for the partitions."""
    objects = [device_class(), device_class(extended="", selector=MIG_SELECTOR, name="mig-1g.18gb")]
    for i in range(nodes):
        objects += [node(f"gpu-{i}"), *mig_slices(f"gpu-{i}", gpus)]
    return objects


def shared_slice(node_name: str, devices: int = 1, **capacity: Any) -> dict[str, Any]:
    """A slice of `devices` devices that allow multiple allocations (KEP-5075), each with
    `capacity` (name -> DeviceCapacity)."""
    piece = resource_slice(node_name, devices)
    for device in piece["spec"]["devices"]:
        device["allowMultipleAllocations"] = True
        device["capacity"] = capacity
    return piece


def device_counts(view: ClusterView) -> dict[str, Any]:
    """Everything the capacity index's DRA device table of `view` counts, as plain data to compare
    (the table built first if it is not): per class column the devices free and published per
    node, those a device taint keeps out, those of partitioned pools and those held because the
    counters they consume are taken; and the classes whose selectors were left unjudged."""
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
            "partitioned": dict(devices.partitioned),
            "held": dict(devices.held),
            "unjudged": sorted(devices.unjudged),
        }
