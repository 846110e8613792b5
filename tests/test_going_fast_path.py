"""`Going.doomed`'s fast path (issue 53) answers as the slow rule does: for random nodes (lifecycle
and other conditions True or not, taints of every effect, cordoned or not), random pods (on a node,
on a node the view lacks, pending; tolerations of every shape, claims that exist or not, a
disruption condition, terminal or not) and random DRA device taints (a ResourceSlice's own, and
DeviceTaintRules by driver / pool / device, with and without a selector or a DeviceClass), the
answer is `"marked <disruption>"` for a marked pod and otherwise `node_doom(pod) or
device_doom(pod)`, which `doomed` skips for a pod on a node with no condition and no taint that
holds no claim. A fast path that skipped on a node with a condition but no taint, with a taint but
no condition, or for a claim held on a clean or missing node fails it (the explicit example, and
the random cases alone)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guardhook.cluster.going import GRACEFUL_SHUTDOWN, MAINTENANCE_CONDITIONS, Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.static import view_from_objects

from gpu_cluster import DRIVER, allocated_claim, device_class, node_object, pod, resource_slice, taint_rule

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


def _set_condition(node: dict[str, Any], kind: str, status: str) -> dict[str, Any]:
    """`node` with a condition `kind` of `status` added, set at a fixed time."""
    entry = {"type": kind, "status": status, "lastTransitionTime": "2026-12-01T00:00:00Z"}
    node["status"]["conditions"].append(entry)
    return node


def _holding(obj: dict[str, Any], claims: list[str]) -> dict[str, Any]:
    """Pod `obj` using `claims`, named as the API server names a template's claims."""
    if claims:
        obj["status"]["resourceClaimStatuses"] = [
            {"name": f"r{i}", "resourceClaimName": claim} for i, claim in enumerate(claims)
        ]
    return obj


@st.composite
def node_objects(draw: st.DrawFn, name: str) -> dict[str, Any]:
    allocatable = {"cpu": "96", "pods": "110"}
    found = node_object(
        name, allocatable, taints=draw(taints), unschedulable=draw(st.booleans()), ready=draw(st.booleans())
    )
    for kind in draw(st.lists(st.sampled_from(CONDITIONS), unique=True, max_size=2)):
        _set_condition(found, kind, draw(st.sampled_from(["True", "False", "Unknown"])))
    return found


@st.composite
def resource_slices(draw: st.DrawFn, node: str) -> dict[str, Any]:
    """`node`'s slice of DEVICES, each with its own NoSchedule / NoExecute taints or none."""
    found = resource_slice(node, gpus=len(DEVICES))
    for device in found["spec"]["devices"]:
        effects = draw(st.lists(st.sampled_from(["NoSchedule", "NoExecute"]), max_size=2))
        if effects:
            device["taints"] = [{"key": "example.com/xid", "value": "79", "effect": e} for e in effects]
    return found


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
    devices = draw(st.lists(st.sampled_from(range(len(DEVICES))), min_size=1, unique=True))
    found = allocated_claim(name, pool, devices, NAMESPACE)
    found["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = draw(tolerations)
    return found


@st.composite
def pods(draw: st.DrawFn, index: int) -> dict[str, Any]:
    node = draw(st.sampled_from((*NODES, MISSING_NODE, "")))
    found = pod(f"p{index}", gpus=0, node_name=node, namespace=NAMESPACE)
    found["spec"]["tolerations"] = draw(tolerations)
    status = found["status"]
    if node:
        status["phase"] = draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded", "Failed"]))
    if draw(st.integers(0, 5)) == 0:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
        ]
    return _holding(found, draw(st.lists(st.sampled_from(CLAIMS), unique=True, max_size=2)))


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


def _slow_rule(going: Going, record: PodRecord) -> str:
    """`doomed` without its fast path: the disruption condition, else the node's doom, else the
    devices'."""
    if record.disruption:
        return f"marked {record.disruption}"
    return going.node_doom(record) or going.device_doom(record)


# Four pods each doomed for a reason only the slow rule sees unless the fast path checks it: a node's
# graceful shutdown (no taint), a node's NoExecute taint (no condition), a DeviceTaintRule on the
# device a pod holds on an untainted node, and the same on a node the view lacks.
@example(
    [
        _set_condition(node_object("n0", {}), GRACEFUL_SHUTDOWN, "True"),
        node_object("n1", {}),
        taint_rule("n1"),
        allocated_claim("c0", "n1", [0], NAMESPACE),
        node_object("n2", {}, taints=[{"key": "example.com/maintenance", "effect": "NoExecute"}]),
        pod("p0", gpus=0, node_name="n0", namespace=NAMESPACE),
        _holding(pod("p1", gpus=0, node_name="n1", namespace=NAMESPACE), ["c0"]),
        pod("p2", gpus=0, node_name="n2", namespace=NAMESPACE),
        _holding(pod("p3", gpus=0, node_name=MISSING_NODE, namespace=NAMESPACE), ["c0"]),
    ]
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters())
def test_doomed_answers_as_the_slow_rule_for_every_pod(objects: list[dict[str, Any]]) -> None:
    view = view_from_objects(objects)
    fast, slow = Going(view), Going(view)
    for record in view.all_pods():
        assert fast.doomed(record) == _slow_rule(slow, record), (record.name, record.node_name, record.claims)
