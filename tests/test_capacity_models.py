"""group-capacity on 2026 GPU clusters, policy by policy through the engine (no HTTP): DRA devices
(issue 14 item 1), scheduling-gated pods (item 2), kube-scheduler's node filter (item 6), and the
model every answer states. The HTTP / `guardhook review` runs are in test_capacity_models_http.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_capacity import brute_force_groups

from guardhook.admission.engine import Engine
from guardhook.capacity import index_for
from guardhook.cluster.view.static import view_from_objects
from guardhook.commands.check import check
from guardhook.config import ConfigError, build_config, default_config
from guardhook.policies.group_capacity import MODEL_ANNOTATION

from gpu_cluster import (
    GPU,
    allocated_claim,
    claim_template,
    device_class,
    dra_cluster,
    lws_create,
    node,
    node_pool,
    pod,
    resource_slice,
    taint_rule,
)


def judge(objects: list[dict[str, Any]], request: dict[str, Any], config: Any = None) -> dict[str, Any]:
    return dict(Engine(view_from_objects(objects), config, record=False).judge(request).response)


def model_of(response: dict[str, Any]) -> str:
    return str(response.get("auditAnnotations", {}).get(MODEL_ANNOTATION, ""))


def message(response: dict[str, Any]) -> str:
    return str(response.get("status", {}).get("message", ""))


# ---- item 1: DRA devices ---------------------------------------------------------------------------

# 8 DRA nodes of 8 GPUs: 2 groups of 4 pods × 8 GPUs fit exactly, 3 do not.
DRA_CASES = [
    pytest.param(
        dra_cluster(),
        lws_create(replicas=2),
        True,
        "counted DRA devices for nvidia.com/gpu",
        id="extended-resource-fits",
    ),
    pytest.param(
        dra_cluster(), lws_create(replicas=3), False, "2 of 3 new groups", id="extended-resource-short"
    ),
    pytest.param(
        [o for o in dra_cluster() if o["kind"] != "DeviceClass"] + [device_class(extended="")],
        lws_create(replicas=1),
        False,
        "short of nvidia.com/gpu",
        id="no-class-maps-the-resource",
    ),
    pytest.param(
        dra_cluster() + [allocated_claim("taken", "gpu-0", range(8))],
        lws_create(replicas=2),
        False,
        "1 of 2 new groups",
        id="allocated-devices-are-not-free",
    ),
    pytest.param(
        dra_cluster() + [allocated_claim("some", "gpu-0", range(4))],
        lws_create(replicas=2, gpus=4, size=2),
        True,
        "DeviceClass gpu.nvidia.com",
        id="half-allocated-node-still-takes-half",
    ),
    pytest.param(
        dra_cluster() + [taint_rule("gpu-0")],
        lws_create(replicas=2),
        False,
        "8 tainted devices left out",
        id="device-taint-rule-keeps-devices-out",
    ),
    pytest.param(
        dra_cluster() + [taint_rule("gpu-0", effect="None")],
        lws_create(replicas=2),
        True,
        "counted DRA devices",
        id="informational-device-taint-does-not",
    ),
    pytest.param(
        [o for o in dra_cluster() if o["kind"] != "DeviceClass"]
        + [
            device_class(selector="device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")
        ],
        lws_create(replicas=2),
        True,
        "CEL selectors need Kubernetes' CEL library",
        id="unjudgeable-selector-is-said",
    ),
    pytest.param(
        [o for o in dra_cluster() if o["kind"] != "DeviceClass"]
        + [device_class(selector="device.driver == 'other.example.com'")],
        lws_create(replicas=1),
        False,
        "short of nvidia.com/gpu",
        id="class-selector-excludes-the-devices",
    ),
    # claim templates: the pods take GPUs only through ResourceClaimTemplates
    pytest.param(
        dra_cluster() + [claim_template()],
        lws_create(replicas=2, claim="gpus-8"),
        True,
        "DeviceClass gpu.nvidia.com",
        id="claim-template-fits",
    ),
    pytest.param(
        dra_cluster() + [claim_template()],
        lws_create(replicas=3, claim="gpus-8"),
        False,
        "2 of 3 new groups",
        id="claim-template-short",
    ),
    pytest.param(
        [node(f"cpu-{i}") for i in range(8)] + [device_class(), claim_template()],
        lws_create(replicas=1, claim="gpus-8"),
        False,
        "short of nvidia.com/gpu",
        id="claim-template-without-devices-is-denied",
    ),
    pytest.param(
        dra_cluster(),
        lws_create(replicas=2, claim="gpus-8"),
        True,
        "ResourceClaimTemplate serve/gpus-8 is not in the view",
        id="missing-claim-template-is-said",
    ),
    pytest.param(
        dra_cluster() + [claim_template(allocationMode="All")],
        lws_create(replicas=2, claim="gpus-8"),
        True,
        "takes All devices of its class: not counted",
        id="all-mode-is-said",
    ),
    # a device plugin node (allocatable lists nvidia.com/gpu) is counted by allocatable, not DRA
    pytest.param(
        [device_class()] + [node(f"dp-{i}", gpus=8) for i in range(4)] + [resource_slice("dp-0")],
        lws_create(replicas=1),
        True,
        "counted DRA devices",
        id="device-plugin-nodes-keep-allocatable",
    ),
]


@pytest.mark.parametrize(("objects", "request_", "allowed", "says"), DRA_CASES)
def test_dra_devices(
    objects: list[dict[str, Any]], request_: dict[str, Any], allowed: bool, says: str
) -> None:
    response = judge(objects, request_)
    assert response["allowed"] is allowed, response
    assert says in (message(response) if not allowed else model_of(response)), response
    assert model_of(response)  # every answer states its model
    if not allowed:
        assert "Model: node allocatable less bound and pending pods' requests" in message(response)


def test_before_dra_counting_every_dra_scale_up_was_short_of_gpus() -> None:
    # without the DeviceClass's mapping the same cluster is the 2024 model's: no GPU in allocatable
    objects = [o for o in dra_cluster() if o["kind"] != "DeviceClass"]
    response = judge(objects, lws_create(replicas=1))
    assert response["allowed"] is False and "short of nvidia.com/gpu" in message(response)


def test_an_implicit_device_class_resource_name_is_counted_on_the_class_column() -> None:
    request = lws_create(replicas=2, gpus=0)
    for part in ("leaderTemplate", "workerTemplate"):
        spec = request["object"]["spec"]["leaderWorkerTemplate"][part]["spec"]
        spec["containers"][0]["resources"]["requests"][
            "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
        ] = "8"
    assert judge(dra_cluster(), request)["allowed"] is True
    request["object"]["spec"]["replicas"] = 3
    assert judge(dra_cluster(), request)["allowed"] is False


# ---- item 2: scheduling-gated pods ---------------------------------------------------------------------


def test_gated_pods_claim_nothing_and_the_model_says_so() -> None:
    cluster = [node(f"gpu-{i}", gpus=8) for i in range(4)]
    gated = [pod(f"queued-{i}", gates=("kueue.x-k8s.io/admission",)) for i in range(12)]
    response = judge(cluster + gated, lws_create(replicas=1))
    assert response["allowed"] is True
    assert "12 gated pods ignored" in model_of(response)
    pending = [pod(f"waiting-{i}") for i in range(2)]  # ungated pending pods still claim first
    response = judge(cluster + gated + pending, lws_create(replicas=1))
    assert response["allowed"] is False
    assert "12 gated pods ignored" in message(response)


def test_a_pod_whose_gates_were_removed_claims_again() -> None:
    cluster = [node(f"gpu-{i}", gpus=8) for i in range(4)]
    view = view_from_objects([*cluster, pod("q", gates=("example.com/hold",))])
    engine = Engine(view, record=False)
    assert engine.judge(lws_create(replicas=1)).response["allowed"] is True
    view.upsert("pods", pod("q"))  # the gate was lifted: now a pending pod like any other
    assert engine.judge(lws_create(replicas=1)).response["allowed"] is False


# ---- item 6: kube-scheduler's node filter --------------------------------------------------------------

NOT_READY = [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]


@pytest.mark.parametrize(
    ("nodes", "tolerations", "allowed", "warned"),
    [
        pytest.param(
            [node("a", 8, unschedulable=True)] + [node(f"n{i}", 8) for i in range(3)],
            None,
            False,
            False,
            id="cordoned-skipped",
        ),
        pytest.param(
            [node("a", 8, unschedulable=True)] + [node(f"n{i}", 8) for i in range(3)],
            [{"operator": "Exists"}],
            True,
            True,
            id="cordoned-used-by-wildcard-toleration",
        ),
        pytest.param(
            [node("a", 8, taints=NOT_READY)] + [node(f"n{i}", 8) for i in range(3)],
            [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            True,
            True,
            id="not-ready-tolerated",
        ),
        pytest.param(
            [node("a", 8, ready=False)] + [node(f"n{i}", 8) for i in range(3)],
            None,
            True,
            False,
            id="ready-condition-not-read",
        ),
        pytest.param(
            [node("a", 8, unschedulable=True)] + [node(f"n{i}", 8) for i in range(4)],
            [{"operator": "Exists"}],
            True,
            False,
            id="room-without-flagged-nodes-says-nothing",
        ),
    ],
)
def test_node_filter(nodes: list[dict[str, Any]], tolerations: Any, allowed: bool, warned: bool) -> None:
    response = judge(nodes, lws_create(replicas=1, tolerations=tolerations))
    assert response["allowed"] is allowed, response
    warnings = " ".join(response.get("warnings", []))
    assert ("fit only with cordoned, NotReady or draining nodes" in warnings) is warned, warnings


# ---- the model on a plain cluster ----------------------------------------------------------------------


def test_a_plain_cluster_answer_states_the_base_model() -> None:
    response = judge([node(f"gpu-{i}", gpus=8) for i in range(4)], lws_create(replicas=1))
    assert response["allowed"] is True and not response.get("warnings")
    assert model_of(response) == "node allocatable less bound and pending pods' requests"
    assert GPU not in model_of(response)


# ---- item 4: queues and gangs place groups themselves --------------------------------------------------


def _gang_template(request: dict[str, Any], where: str, key: str, value: Any) -> dict[str, Any]:
    template = request["object"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template.setdefault(where, {})[key] = value
    return request


QUEUE_CASES = [
    pytest.param(
        lws_create(replicas=3, labels={"kueue.x-k8s.io/queue-name": "gpu-queue"}),
        "managed by Kueue (queue gpu-queue)",
        id="kueue",
    ),
    pytest.param(
        _gang_template(lws_create(replicas=3), "spec", "schedulingGroup", {"podGroupName": "llm-replica"}),
        "gang-scheduled (spec.schedulingGroup.podGroupName llm-replica)",
        id="workload-api-1.37",
    ),
    pytest.param(
        _gang_template(lws_create(replicas=3), "spec", "workloadRef", {"name": "llm", "podGroup": "replica"}),
        "gang-scheduled (workloadRef)",
        id="workload-api-1.35-alpha",
    ),
    pytest.param(
        _gang_template(
            lws_create(replicas=3), "metadata", "labels", {"scheduling.x-k8s.io/pod-group": "llm"}
        ),
        "gang-scheduled (scheduling.x-k8s.io/pod-group)",
        id="coscheduling",
    ),
]


@pytest.mark.parametrize(("request_", "says"), QUEUE_CASES)
def test_queue_or_gang_managed_lws_gets_its_fit_as_a_warning(request_: dict[str, Any], says: str) -> None:
    cluster = [node(f"gpu-{i}", gpus=8) for i in range(8)]  # 2 groups fit, 3 are asked
    response = judge(cluster, request_)
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert says in warning and "2 of 3 new groups" in warning and "Model:" in warning


def test_lws_spec_scheduling_field_marks_a_gang() -> None:
    request = lws_create(replicas=3)
    request["object"]["spec"]["scheduling"] = {}
    response = judge([node(f"gpu-{i}", gpus=8) for i in range(8)], request)
    assert response["allowed"] is True and "gang-scheduled (spec.scheduling)" in response["warnings"][0]


@pytest.mark.parametrize(
    ("param", "request_"),
    [("kueueManaged", QUEUE_CASES[0].values[0]), ("gangScheduled", QUEUE_CASES[1].values[0])],
)
def test_each_source_can_be_set_to_deny(param: str, request_: dict[str, Any]) -> None:
    config = build_config({"policies": {"group-capacity": {param: "Deny"}}})
    response = judge([node(f"gpu-{i}", gpus=8) for i in range(8)], request_, config)
    assert response["allowed"] is False and "2 of 3 new groups" in message(response)


def test_source_actions_are_validated() -> None:
    with pytest.raises(ConfigError, match="policies.group-capacity.kueueManaged: must be one of Warn, Deny"):
        build_config({"policies": {"group-capacity": {"kueueManaged": "Audit"}}})


def test_a_queue_managed_lws_that_fits_is_a_plain_allow() -> None:
    request = lws_create(replicas=2, labels={"kueue.x-k8s.io/queue-name": "gpu-queue"})
    response = judge([node(f"gpu-{i}", gpus=8) for i in range(8)], request)
    assert response["allowed"] is True and not response.get("warnings")


# ---- item 3: node autoscalers ---------------------------------------------------------------------------

H100 = {"karpenter.sh/nodepool": "gpu-h100", "node.kubernetes.io/instance-type": "p5.48xlarge"}


def pool_node(name: str, **extra: Any) -> dict[str, Any]:
    return node(name, gpus=8, labels=H100, **extra)


AUTOSCALER_CASES = [
    pytest.param(
        [pool_node("h100-a"), node_pool("gpu-h100", limits={GPU: "56"}, used={GPU: "8"})],
        lws_create(replicas=1),
        None,
        True,
        "needs 3 new nodes from NodePool gpu-h100; limits allow 6",
        id="karpenter-provisions",
    ),
    pytest.param(
        [pool_node("h100-a"), node_pool("gpu-h100", limits={GPU: "24"}, used={GPU: "8"})],
        lws_create(replicas=1),
        None,
        False,
        "NodePool gpu-h100: its limits allow 2 more nodes, and 2 new nodes would take 0 of the 1 groups",
        id="karpenter-limits-too-low",
    ),
    pytest.param(
        [pool_node("h100-a"), node_pool("gpu-h100", limits={"nodes": "3"})],
        lws_create(replicas=1),
        None,
        False,
        "its limits allow 2 more nodes",
        id="karpenter-node-count-limit",
    ),
    pytest.param(
        [pool_node("h100-a"), node_pool("gpu-h100")],
        lws_create(replicas=2),
        None,
        True,
        "needs 7 new nodes from NodePool gpu-h100; no limit set",
        id="karpenter-without-limits",
    ),
    pytest.param(
        [
            pool_node(
                "h100-a", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
            ),
            node_pool("gpu-h100"),
        ],
        lws_create(replicas=1),
        None,
        False,
        "its nodes' taint nvidia.com/gpu=present:NoSchedule is not tolerated",
        id="pool-taint-not-tolerated",
    ),
    pytest.param(
        [
            node("cpu-0"),
            node_pool(
                "gpu-h100",
                requirements=[
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}
                ],
            ),
        ],
        lws_create(replicas=1),
        None,
        True,
        "NodePool gpu-h100 may add nodes for them (it runs no node, so the shape of its nodes is unknown",
        id="empty-pool-shape-unknown",
    ),
    pytest.param(
        [
            node("cpu-0"),
            node_pool("gpu-h100", taints=[{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]),
        ],
        lws_create(replicas=1),
        None,
        False,
        "NodePool gpu-h100: its taints are not tolerated by the templates",
        id="empty-pool-taint-rules-it-out",
    ),
    pytest.param(
        [node(f"a100-{i}", gpus=8, labels={"pool": "a100"}) for i in range(2)],
        lws_create(replicas=1),
        [{"name": "a100", "nodeSelector": {"pool": "a100"}, "maxNodes": 5}],
        True,
        "needs 2 new nodes from autoscaled pool a100; limits allow 3",
        id="cluster-autoscaler-pool",
    ),
    pytest.param(
        [node(f"a100-{i}", gpus=8, labels={"pool": "a100"}) for i in range(2)],
        lws_create(replicas=1),
        [{"name": "a100", "nodeSelector": {"pool": "a100"}, "maxNodes": 3}],
        False,
        "autoscaled pool a100: its limits allow 1 more nodes, and 1 new node would take 0 of the 1 groups",
        id="cluster-autoscaler-pool-at-max",
    ),
    pytest.param(
        [
            device_class(),
            node("dra-0", labels=H100),
            resource_slice("dra-0"),
            node_pool("gpu-h100", limits={"nodes": "10"}),
        ],
        lws_create(replicas=1),
        None,
        True,
        "needs 3 new nodes from NodePool gpu-h100; limits allow 9",
        id="dra-pool-node-shape-carries-its-devices",
    ),
]


@pytest.mark.parametrize(("objects", "request_", "pools", "allowed", "says"), AUTOSCALER_CASES)
def test_node_autoscalers(
    objects: list[dict[str, Any]], request_: dict[str, Any], pools: Any, allowed: bool, says: str
) -> None:
    config = build_config({"policies": {"group-capacity": {"autoscaledPools": pools}}}) if pools else None
    response = judge(objects, request_, config)
    assert response["allowed"] is allowed, response
    text = " ".join(response.get("warnings", [])) if allowed else message(response)
    assert says in text, text
    assert "Model:" in text


def test_without_pools_a_shortfall_is_denied_as_before() -> None:
    response = judge([pool_node("h100-a")], lws_create(replicas=1))
    assert response["allowed"] is False and "autoscaling" not in message(response)


def test_exclusive_topology_on_hostname_counts_each_new_node_as_a_domain() -> None:
    request = lws_create(replicas=2, size=1)
    request["object"]["metadata"]["annotations"] = {
        "leaderworkerset.sigs.k8s.io/exclusive-topology": "kubernetes.io/hostname"
    }
    response = judge([pool_node("h100-a"), node_pool("gpu-h100")], request)
    assert response["allowed"] is True
    assert "needs 1 new node from NodePool gpu-h100" in response["warnings"][0]


@pytest.mark.parametrize(
    ("pools", "error"),
    [
        ([{"name": "a"}], "entry 0 must have exactly name, nodeSelector and maxNodes"),
        ([{"name": "a", "nodeSelector": {}, "maxNodes": 3}], "nodeSelector must be a non-empty map"),
        (
            [{"name": "a", "nodeSelector": {"p": "a"}, "maxNodes": -1}],
            "maxNodes must be a non-negative integer",
        ),
        ("a", "must be a list"),
    ],
)
def test_autoscaled_pools_are_validated(pools: Any, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        build_config({"policies": {"group-capacity": {"autoscaledPools": pools}}})


def test_claim_changes_after_the_index_is_built_are_applied_incrementally() -> None:
    view = view_from_objects(dra_cluster(nodes=8))
    engine = Engine(view, record=False)
    assert engine.judge(lws_create(replicas=2)).response["allowed"] is True
    view.upsert("resourceclaims", allocated_claim("a", "gpu-0", range(8)))
    assert engine.judge(lws_create(replicas=2)).response["allowed"] is False
    view.upsert("resourceclaims", allocated_claim("b", "gpu-0", range(2)))  # names devices a holds too
    view.remove("resourceclaims", ("other", "a"))
    assert engine.judge(lws_create(replicas=2)).response["allowed"] is False  # b still holds 2 of them
    view.remove("resourceclaims", ("other", "b"))
    assert engine.judge(lws_create(replicas=2)).response["allowed"] is True
    view.upsert("resourceslices", resource_slice("gpu-0", gpus=4))  # the driver republishes fewer
    assert engine.judge(lws_create(replicas=2)).response["allowed"] is False


# ---- `check` reads the same view sources ----------------------------------------------------------------


def test_check_judges_an_lws_manifest_against_a_dra_cluster_state(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": dra_cluster(nodes=4)}))
    lws = lws_create(replicas=2)["object"]
    (tmp_path / "lws.yaml").write_text(yaml.safe_dump(lws))
    result = check([str(tmp_path / "lws.yaml")], default_config(), cluster_state=[str(cluster)])
    (finding,) = [f for f in result.findings if f.policy == "group-capacity"]
    assert finding.outcome == "denied"
    assert (
        "1 of 2 new groups" in finding.message and "counted DRA devices for nvidia.com/gpu" in finding.message
    )


# ---- provisioning is exact: the fewest new nodes, against brute force ------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fewest_new_nodes_equals_brute_force(data: st.DataObject) -> None:
    members = data.draw(st.integers(1, 2))
    gpus = [data.draw(st.integers(0, 1)) for _ in range(members)]  # bound 90-cpu pods per member (fit)
    used = [data.draw(st.integers(0, 8)) for _ in range(members)]
    size, replicas = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    gpu_request, max_nodes = (
        data.draw(st.sampled_from([2, 4, 8])),
        data.draw(st.integers(members, members + 3)),
    )
    labels = {"pool": "p"}
    objects: list[dict[str, Any]] = []
    for m in range(members):
        objects.append(node(f"m{m}", gpus=8, labels=labels))
        for k in range(gpus[m]):
            objects.append(pod(f"b{m}-{k}", gpus=used[m] // max(1, gpus[m]), node_name=f"m{m}"))
    config = build_config(
        {
            "policies": {
                "group-capacity": {
                    "autoscaledPools": [{"name": "p", "nodeSelector": labels, "maxNodes": max_nodes}]
                }
            }
        }
    )
    response = judge(objects, lws_create(replicas=replicas, size=size, gpus=gpu_request), config)
    view = view_from_objects(objects)
    free_gpus = [8 - sum(used[m] // max(1, gpus[m]) for _ in range(gpus[m])) for m in range(members)]
    free_cpu = [96 - 90 * gpus[m] for m in range(members)]
    free_pods = [110 - gpus[m] for m in range(members)]

    def fits_with(n: int) -> bool:
        c = dict(
            free=np.array(
                [[free_cpu[m], free_gpus[m], free_pods[m]] for m in range(members)] + [[96, 8, 110]] * n,
                dtype=np.int64,
            ),
            leader=np.array([90, gpu_request, 1]),
            worker=np.array([90, gpu_request, 1]),
            leader_ok=np.ones(members + n, dtype=bool),
            worker_ok=np.ones(members + n, dtype=bool),
            size=size,
            wanted=replicas,
        )
        return brute_force_groups(c, exclusive=False) >= replicas

    assert view.count("nodes") == members
    if fits_with(0):
        assert response["allowed"] is True and not response.get("warnings")
        return
    room = max_nodes - members
    needed = next((n for n in range(1, room + 1) if fits_with(n)), None)
    if needed is None:
        assert response["allowed"] is False
        assert "autoscaled pool p:" in message(response)
    else:
        assert response["allowed"] is True
        plural = "" if needed == 1 else "s"
        assert (
            f"needs {needed} new node{plural} from autoscaled pool p; limits allow {room}"
            in response["warnings"][0]
        )


@pytest.mark.parametrize(
    ("selector", "tainted"),
    [
        ({"driver": "gpu.nvidia.com", "pool": "gpu-0"}, True),
        ({"driver": "gpu.nvidia.com", "pool": "gpu-0", "deviceClassName": "gpu.nvidia.com"}, True),
        ({"driver": "gpu.nvidia.com", "pool": "gpu-0", "deviceClassName": "absent.example.com"}, False),
        (
            {
                "pool": "gpu-0",
                "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
            },
            True,
        ),
        (
            {
                "pool": "gpu-0",
                "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'nic'"}}],
            },
            False,
        ),
    ],
)
def test_v1alpha3_taint_rules_are_judged_by_class_and_selectors(
    selector: dict[str, Any], tainted: bool
) -> None:
    rule = taint_rule("gpu-0")
    rule["spec"]["deviceSelector"] = selector
    response = judge(dra_cluster() + [rule], lws_create(replicas=2))
    assert response["allowed"] is not tainted
    assert ("8 tainted devices left out" in model_of(response)) is tainted


def _counts(view: Any) -> dict[str, list[int]]:
    index = index_for(view)
    with view.lock:
        devices = index.devices()
        alive = index.alive()
        names = index.names(range(index.rows))
        return {
            f"{kind}:{column}:{name}": int(table[column][row])
            for kind, table in (("free", devices.free), ("published", devices.published))
            for column in table
            for row, name in enumerate(names)
            if alive[row]
        }


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["node", "slice", "slice-gen", "drop-slice", "claim", "drop-claim", "rule", "class"]
            ),
            st.integers(0, 2),
            st.integers(0, 4),
        ),
        max_size=12,
    )
)
def test_incremental_device_counts_equal_a_fresh_build(ops: list[tuple[str, int, int]]) -> None:
    """Slices, claims and nodes applied one by one to a built index count what a fresh index of the
    final state counts."""
    state: dict[tuple[str, str, str], dict[str, Any]] = {}

    def put(kind: str, obj: dict[str, Any]) -> None:
        state[(kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
        view.upsert(kind, obj)

    def drop(kind: str, namespace: str, name: str) -> None:
        state.pop((kind, namespace, name), None)
        view.remove(kind, (namespace, name))

    view = view_from_objects([])
    put("deviceclasses", device_class())
    put("nodes", node("n0"))
    index_for(view)  # built now: every later change is applied incrementally
    generation = 1
    for op, n, k in ops:
        name = f"n{n}"
        if op == "node":
            put("nodes", node(name))
        elif op in ("slice", "slice-gen"):
            generation += op == "slice-gen"
            piece = resource_slice(name, gpus=k)
            piece["spec"]["pool"]["generation"] = generation
            put("resourceslices", piece)
        elif op == "drop-slice":
            drop("resourceslices", "", resource_slice(name)["metadata"]["name"])
        elif op == "claim":
            put("resourceclaims", allocated_claim(f"c{n}", name, range(k)))
        elif op == "drop-claim":
            drop("resourceclaims", "other", f"c{n}")
        elif op == "rule":
            put("devicetaintrules", taint_rule(name))
        else:
            put("deviceclasses", device_class())
    assert _counts(view) == _counts(view_from_objects(list(state.values())))
