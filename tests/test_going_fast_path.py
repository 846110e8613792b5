"""`Going.doomed`'s fast path (issue 53) answers as the slow rule does: for random nodes (lifecycle
and other conditions True or not, taints of every effect, cordoned or not), random pods (on a node,
on a node the view lacks, pending; tolerations of every shape, claims that exist or not, a
disruption condition, terminal or not) and random DRA device taints (a ResourceSlice's own, and
DeviceTaintRules by driver / pool / device, with and without a selector or a DeviceClass), the
answer is `"marked <disruption>"` for a marked pod and otherwise `node_doom(pod) or
device_doom(pod)`, which `doomed` skips for a pod on a node with no condition and no taint that
holds no claim."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guardhook.cluster.going import GRACEFUL_SHUTDOWN, MAINTENANCE_CONDITIONS, Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.static import view_from_objects

from gpu_cluster import DRIVER, device_class

NAMESPACE = "batch"
NODES = ("n0", "n1", "n2")
MISSING_NODE = "gone"
"""A node pods are bound to (and devices published for) that the view does not hold."""
DEVICES = ("gpu-0", "gpu-1")
CLAIMS = ("c0", "c1", "c2", "c3")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TAINT_KEYS = ("example.com/maintenance", "node.kubernetes.io/unreachable", "karpenter.sh/disrupted")
CONDITIONS = (GRACEFUL_SHUTDOWN, *MAINTENANCE_CONDITIONS, "MemoryPressure")

taints = st.lists(
    st.fixed_dictionaries(
        {"key": st.sampled_from(TAINT_KEYS), "effect": st.sampled_from(EFFECTS)},
        optional={"value": st.sampled_from(["true", "79"])},
    ),
    max_size=3,
)
tolerations = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(TAINT_KEYS),
            "operator": st.sampled_from(["Exists", "Equal"]),
            "value": st.sampled_from(["true", "79"]),
            "effect": st.sampled_from(EFFECTS),
            "tolerationSeconds": st.sampled_from([-5, 0, 60]),
        },
    ),
    max_size=2,
)


@st.composite
def node_objects(draw: st.DrawFn, name: str) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": draw(st.sampled_from(["True", "False"]))}]
    for kind in draw(st.lists(st.sampled_from(CONDITIONS), unique=True, max_size=2)):
        conditions.append(
            {
                "type": kind,
                "status": draw(st.sampled_from(["True", "False", "Unknown"])),
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }
        )
    spec: dict[str, Any] = {"taints": draw(taints)}
    if draw(st.booleans()):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {"allocatable": {"cpu": "96", "pods": "110"}, "conditions": conditions},
    }


@st.composite
def resource_slices(draw: st.DrawFn, node: str) -> dict[str, Any]:
    devices = []
    for name in DEVICES:
        device: dict[str, Any] = {"name": name, "attributes": {"type": {"string": "gpu"}}}
        found = draw(st.lists(st.sampled_from(["NoSchedule", "NoExecute"]), max_size=2))
        if found:
            device["taints"] = [{"key": "example.com/xid", "value": "79", "effect": e} for e in found]
        devices.append(device)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


@st.composite
def taint_rules(draw: st.DrawFn, index: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "taint": {"key": "example.com/xid", "value": "79", "effect": draw(st.sampled_from(EFFECTS[::2]))}
    }
    if draw(st.integers(0, 4)):  # mostly a selector; without one a rule selects no device
        selector: dict[str, Any] = {"driver": DRIVER, "pool": draw(st.sampled_from((*NODES, MISSING_NODE)))}
        if draw(st.booleans()):
            selector["device"] = draw(st.sampled_from(DEVICES))
        if draw(st.integers(0, 3)) == 0:  # a class the view may lack: the rule cannot be judged
            selector["deviceClassName"] = draw(st.sampled_from([DRIVER, "absent-class"]))
        spec["deviceSelector"] = selector
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"rule-{index}"},
        "spec": spec,
    }


@st.composite
def claims(draw: st.DrawFn, name: str) -> dict[str, Any]:
    pool = draw(st.sampled_from((*NODES, MISSING_NODE)))
    devices = draw(st.lists(st.sampled_from(DEVICES), min_size=1, unique=True))
    request = {"deviceClassName": DRIVER, "count": len(devices), "tolerations": draw(tolerations)}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpus", "driver": DRIVER, "pool": pool, "device": d} for d in devices
                    ]
                }
            }
        },
    }


@st.composite
def pods(draw: st.DrawFn, index: int) -> dict[str, Any]:
    node = draw(st.sampled_from((*NODES, MISSING_NODE, "")))
    phase = (
        draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded", "Failed"])) if node else "Pending"
    )
    status: dict[str, Any] = {"phase": phase}
    if draw(st.integers(0, 5)) == 0:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
        ]
    held = draw(st.lists(st.sampled_from(CLAIMS), unique=True, max_size=2))
    if held:
        status["resourceClaimStatuses"] = [
            {"name": f"r{i}", "resourceClaimName": c} for i, c in enumerate(held)
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c"}], "tolerations": draw(tolerations)}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{index}", "namespace": NAMESPACE},
        "spec": spec,
        "status": status,
    }


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A view's objects: nodes, their slices (and one of the missing node), claims (some named by
    pods but absent), DeviceTaintRules and pods."""
    objects: list[dict[str, Any]] = [draw(node_objects(n)) for n in NODES]
    objects += [draw(resource_slices(n)) for n in (*NODES, MISSING_NODE)]
    objects += [draw(claims(c)) for c in CLAIMS if draw(st.integers(0, 4))]
    objects += [draw(taint_rules(i)) for i in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        objects.append(device_class())
    objects += [draw(pods(i)) for i in range(draw(st.integers(1, 8)))]
    return objects


def _slow_rule(going: Going, pod: PodRecord) -> str:
    """`doomed` without its fast path: the disruption condition, else the node's doom, else the
    devices'."""
    if pod.disruption:
        return f"marked {pod.disruption}"
    return going.node_doom(pod) or going.device_doom(pod)


# A pod on a node whose only reason is a graceful shutdown (no taint), and one on an untainted node
# holding a claim whose device a rule taints: each doomed, each outside a fast path missing that case.
@example(
    [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n0"},
            "spec": {},
            "status": {"conditions": [{"type": GRACEFUL_SHUTDOWN, "status": "True"}]},
        },
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}, "status": {}},
        {
            "apiVersion": "resource.k8s.io/v1alpha3",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "rule-0"},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": "n1"},
                "taint": {"key": "example.com/xid", "effect": "NoExecute"},
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c0", "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER}}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p0", "namespace": NAMESPACE},
            "spec": {"nodeName": "n0"},
            "status": {"phase": "Running"},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1", "namespace": NAMESPACE},
            "spec": {"nodeName": "n1"},
            "status": {
                "phase": "Running",
                "resourceClaimStatuses": [{"name": "r", "resourceClaimName": "c0"}],
            },
        },
    ]
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters())
def test_doomed_answers_as_the_slow_rule_for_every_pod(objects: list[dict[str, Any]]) -> None:
    view = view_from_objects(objects)
    fast, slow = Going(view), Going(view)
    for pod in view.all_pods():
        assert fast.doomed(pod) == _slow_rule(slow, pod), (pod.name, pod.node_name, pod.claims)
