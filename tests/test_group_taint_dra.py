"""Policy group-taint on DRA DeviceTaintRules: the fleet with a GPU per-node ResourceSlice and one
allocated ResourceClaim per pod, judged by the engine, by `guardhook check` and a real TLS server."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.config import build_config

from conftest import Server, clean_env, load_review
from helpers import find

DRIVER = "gpu.nvidia.com"
Objects = list[dict[str, Any]]


def dra_fleet(edit: Callable[[Objects], None] | None = None) -> Objects:
    """The sample fleet on DRA: each GPU node publishes 8 devices, each pod holds a claim
    `<pod>-gpus` of its node's 8 devices, named in `status.resourceClaimStatuses`."""
    objects = copy.deepcopy(embedded_fleet_objects())
    for pod in [o for o in objects if o["kind"] == "Pod"]:
        node, name = pod["spec"]["nodeName"], pod["metadata"]["name"]
        pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpus"}]
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}]
        objects.append(claim(f"{name}-gpus", node, pod["metadata"]["namespace"]))
    for node in [o for o in objects if o["kind"] == "Node" and o["metadata"]["name"].startswith("gpu-")]:
        objects.append(resource_slice(node["metadata"]["name"]))
    objects.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        }
    )
    if edit is not None:
        edit(objects)
    return objects


def resource_slice(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "type": {"string": "gpu"}}}
                for i in range(8)
            ],
        },
    }


def claim(name: str, node: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 8}}]}
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpus", "driver": DRIVER, "pool": node, "device": f"gpu-{i}"}
                        for i in range(8)
                    ]
                }
            }
        },
    }


def rule(
    selector: dict[str, Any] | None, effect: str = "NoExecute", version: str = "v1beta2"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "example.com/xid", "value": "79", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "gpu-fault"},
        "spec": spec,
    }


def rule_request(new: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The captured node UPDATE (n01) re-aimed at a DeviceTaintRule, as the API server sends one."""
    request = copy.deepcopy(load_review("n01-node-taint-noexecute.validating")["request"])
    version = new["apiVersion"].split("/")[1]
    gvk = {"group": "resource.k8s.io", "version": version, "kind": "DeviceTaintRule"}
    gvr = {"group": "resource.k8s.io", "version": version, "resource": "devicetaintrules"}
    request.update(kind=gvk, requestKind=gvk, resource=gvr, requestResource=gvr, name="gpu-fault")
    request.update(operation="UPDATE" if old else "CREATE", object=new, oldObject=old)
    return request


def judged(
    request: dict[str, Any], objects: Objects | None = None, view: ClusterView | None = None
) -> dict[str, Any]:
    view = view or view_from_objects(objects if objects is not None else dra_fleet())
    return dict(Engine(view, build_config({})).judge(request, "validate").response)


def warned(response: dict[str, Any]) -> list[str]:
    assert response["allowed"] is True
    return [w for w in response.get("warnings", []) if w.startswith("[group-taint]")]


def group_0_broken(objects: Objects) -> None:
    objects.remove(find(objects, "Pod", "llm-xl-0-1"))


def tolerating(pod: str, **toleration: Any) -> Callable[[Objects], None]:
    def edit(objects: Objects) -> None:
        group_0_broken(objects)
        request = find(objects, "ResourceClaim", f"{pod}-gpus")["spec"]["devices"]["requests"][0]
        request["exactly"]["tolerations"] = [toleration]

    return edit


@pytest.mark.parametrize(
    ("case", "selector", "effect", "edit", "warn"),
    [
        ("every device of the driver: 4 groups", {"driver": DRIVER}, "NoExecute", None, True),
        ("empty selector: every device", {}, "NoExecute", None, True),
        ("no selector: no device", None, "NoExecute", None, False),
        ("effect None: a preview", {"driver": DRIVER}, "None", None, False),
        ("effect NoSchedule", {"driver": DRIVER}, "NoSchedule", None, False),
        ("one node's pool: 1 group, within budget", {"pool": "gpu-node-06"}, "NoExecute", None, False),
        ("one node's pool, group 0 broken", {"pool": "gpu-node-06"}, "NoExecute", group_0_broken, True),
        (
            "one device, group 0 broken",
            {"pool": "gpu-node-06", "device": "gpu-3"},
            "NoExecute",
            group_0_broken,
            True,
        ),
        ("a device nobody holds", {"pool": "gpu-node-17"}, "NoExecute", group_0_broken, False),
        ("another driver", {"driver": "nic.example.com"}, "NoExecute", group_0_broken, False),
        (
            "the claim tolerates the taint",
            {"pool": "gpu-node-06"},
            "NoExecute",
            tolerating("llm-xl-1-2", key="example.com/xid", operator="Exists", effect="NoExecute"),
            False,
        ),
        (
            "the claim tolerates it for 60 s only",
            {"pool": "gpu-node-06"},
            "NoExecute",
            tolerating("llm-xl-1-2", key="example.com/xid", operator="Exists", tolerationSeconds=60),
            True,
        ),
        (
            "the claim tolerates another value",
            {"pool": "gpu-node-06"},
            "NoExecute",
            tolerating("llm-xl-1-2", key="example.com/xid", value="48", effect="NoExecute"),
            True,
        ),
    ],
)
def test_device_taint_rule_table(case: str, selector: Any, effect: str, edit: Any, warn: bool) -> None:
    response = judged(rule_request(rule(selector, effect)), dra_fleet(edit))
    assert bool(warned(response)) is warn, (case, response)


@pytest.mark.parametrize("version", ["v1alpha3", "v1beta2", "v1"])
def test_every_served_version_is_judged_and_the_message_lists_groups(version: str) -> None:
    (warning,) = warned(judged(rule_request(rule({"driver": DRIVER}, version=version))))
    assert "DeviceTaintRule gpu-fault (example.com/xid=79:NoExecute)" in warning
    assert "LeaderWorkerSet serve/llm-xl would lose 4 whole groups of 4" in warning
    for index in range(4):
        assert f"group {index} (llm-xl-{index}, llm-xl-{index}-1" in warning


def test_update_from_preview_to_no_execute_is_judged_and_an_unchanged_rule_is_not() -> None:
    preview, enforce = rule({"driver": DRIVER}, "None"), rule({"driver": DRIVER})
    assert warned(judged(rule_request(enforce, old=preview)))
    assert not warned(judged(rule_request(enforce, old=copy.deepcopy(enforce))))
    widened = rule({"driver": DRIVER})
    narrow = rule({"pool": "gpu-node-06"})
    assert warned(judged(rule_request(widened, old=narrow)))


def test_a_pod_using_its_claim_through_an_extended_resource_is_counted() -> None:
    def extended(objects: Objects) -> None:
        group_0_broken(objects)
        pod = find(objects, "Pod", "llm-xl-1-2")
        del pod["spec"]["resourceClaims"], pod["status"]["resourceClaimStatuses"]
        pod["status"]["extendedResourceClaimStatus"] = {
            "requestMappings": [
                {"containerName": "main", "resourceName": "nvidia.com/gpu", "requestName": "gpus"}
            ],
            "resourceClaimName": "llm-xl-1-2-gpus",
        }

    (warning,) = warned(judged(rule_request(rule({"pool": "gpu-node-06"})), dra_fleet(extended)))
    assert "group 1 (llm-xl-1-2)" in warning


@pytest.mark.parametrize(
    ("selector", "warn", "unknown"),
    [
        ({"deviceClassName": "gpu.nvidia.com"}, True, False),  # the class's CEL selects every GPU
        ({"deviceClassName": "missing-class"}, True, True),  # not in the view: counted, and said so
        (
            {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].index == 3"}}]},
            True,
            False,
        ),
        (
            {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].index == 9"}}]},
            False,
            False,
        ),
        (
            {"selectors": [{"cel": {"expression": "device.capacity['x'].y.isGreaterThan(quantity('1'))"}}]},
            True,
            True,
        ),
    ],
)
def test_v1alpha3_class_and_cel_selectors(selector: dict[str, Any], warn: bool, unknown: bool) -> None:
    response = judged(rule_request(rule(selector, version="v1alpha3")))
    found = warned(response)
    assert any("would lose" in w for w in found) is warn
    assert any("the view cannot tell" in w for w in found) is unknown


def test_a_device_published_only_in_an_older_pool_generation_is_not_known() -> None:
    """gpu-node-06's pool was republished (generation 2, its GPUs not yet listed): the generation-1
    slice no longer counts, so the rule's CEL cannot be judged on its devices — counted as selected
    and said so, not judged (and cleared) on the stale slice."""

    def republished(objects: Objects) -> None:
        group_0_broken(objects)
        newer = resource_slice("gpu-node-06")
        newer["metadata"]["name"] = "gpu-node-06-gpu-2"
        newer["spec"]["pool"]["generation"] = 2
        newer["spec"]["devices"] = []
        objects.append(newer)

    index_9 = {"cel": {"expression": "device.attributes['gpu.nvidia.com'].index == 9"}}
    selector = {"pool": "gpu-node-06", "selectors": [index_9]}
    request = rule_request(rule(selector, version="v1alpha3"))
    assert warned(judged(request, dra_fleet(group_0_broken))) == []  # generation 1: no GPU has index 9
    note, warning = warned(judged(request, dra_fleet(republished)))
    assert "the view cannot tell whether its CEL selectors select 8 allocated devices" in note
    assert "would lose 1 whole group of 4: group 1 (llm-xl-1-2)" in warning


def test_stale_view_fails_open_with_a_warning() -> None:
    view = view_from_objects(dra_fleet())
    view.mark_broken(PODS, now=0.0)
    (warning,) = warned(judged(rule_request(rule({"driver": DRIVER})), view=view))
    assert "not checked" in warning


def test_deny_is_configurable() -> None:
    config = build_config({"policies": {"group-taint": {"actions": ["Deny"]}}})
    view = view_from_objects(dra_fleet())
    response = Engine(view, config).judge(rule_request(rule({"driver": DRIVER})), "validate").response
    assert response["allowed"] is False and response["status"]["message"].startswith("[group-taint]")


# ---- `guardhook check` and a real TLS server -----------------------------------------------------


def write(path: Path, objects: Objects) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def test_check_judges_device_taint_rules_and_nodes_against_the_cluster_state(tmp_path: Path) -> None:
    state = write(tmp_path / "state.yaml", dra_fleet(group_0_broken))
    node = copy.deepcopy(find(embedded_fleet_objects(), "Node", "gpu-node-06"))
    node["spec"]["taints"] = [{"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"}]
    manifests = write(tmp_path / "change.yaml", [rule({"pool": "gpu-node-10"}), node, rule({}, "None")])
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "guardhook",
            "check",
            str(manifests),
            "--cluster-state",
            str(state),
            "--format=json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(tmp_path),
    )
    assert printed.returncode == 0, printed.stderr  # Warn by default: reported, not failing
    found = [v for v in json.loads(printed.stdout)["violations"] if v["policy"] == "group-taint"]
    assert {(v["kind"], v["name"], v["action"]) for v in found} == {
        ("DeviceTaintRule", "gpu-fault", "Warn"),
        ("Node", "gpu-node-06", "Warn"),
    }
    assert any("group 2 (llm-xl-2-2)" in v["message"] for v in found)
    assert any("group 1 (llm-xl-1-2)" in v["message"] for v in found)


def test_real_server_warns_on_a_device_taint_rule(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    server = fresh_server("--cluster-state", str(write(tmp_path / "state.yaml", dra_fleet())))
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    review["request"] = rule_request(rule({"driver": DRIVER}))
    answer = server.post("/validate", review)
    assert answer.status_code == 200
    response = answer.json()["response"]
    assert response["uid"] == review["request"]["uid"] and warned(response)
    review["request"] = rule_request(rule({"driver": DRIVER}, "None"))
    assert "warnings" not in server.post("/validate", review).json()["response"]
