"""Pod list pages decoded into typed structs (guardhook.cluster.podwire) give the records the dict
path (`PodRecord.from_object`) gives, and a page the typed decoder refuses is read the old way."""

from __future__ import annotations

import copy
import gc
import json
import sys
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardhook.cluster import podwire
from guardhook.cluster.model import PodRecord
from guardhook.cluster.paging import decode
from guardhook.cluster.podwire import PodWire, decode_pod_page, item_version, pod_record
from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.wire import KubeObject

from conftest import REVIEWS
from helpers import PodPage

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def _page(items: list[Any], **meta: Any) -> bytes:
    return json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}).encode()


def _both_ways(data: bytes) -> tuple[list[PodRecord], list[PodRecord]]:
    """(records through decode_pod_page and pod_record, records through orjson and from_object)."""
    typed = [pod_record(item) for item in decode_pod_page(data)["items"]]
    plain = [PodRecord.from_object(item) for item in decode(data)["items"]]
    return typed, plain


def _captured_pods() -> list[KubeObject]:
    """Pods as a real API server wrote them: the object and oldObject of every captured review of a
    pod (managedFields, full container specs, every status condition), and the sample fleet."""
    pods = []
    for path in sorted(REVIEWS.glob("*.json")):
        request = json.loads(path.read_text())["request"]
        for field in ("object", "oldObject"):
            obj = request.get(field)
            if isinstance(obj, dict) and obj.get("kind") == "Pod":
                pods.append(obj)
    fleet = [obj for obj in embedded_fleet_objects() if obj.get("kind") == "Pod"]
    return pods + [orjson.loads(orjson.dumps(obj)) for obj in fleet]


def test_captured_pods_take_the_typed_path_and_read_as_from_object() -> None:
    pods = _captured_pods()
    assert len(pods) > 20
    data = _page(pods, resourceVersion="77", **{"continue": "next"})
    page = decode_pod_page(data)
    assert page["metadata"] == {"resourceVersion": "77", "continue": "next"}
    assert all(type(item) is PodWire for item in page["items"])
    typed, plain = _both_ways(data)
    assert typed == plain
    assert [item_version(item) for item in page["items"]] == [
        str(pod["metadata"].get("resourceVersion") or "") for pod in pods
    ]


def test_a_page_the_typed_decoder_refuses_is_read_as_dicts_and_loses_no_pod() -> None:
    pods = _captured_pods()[:3]
    odd = copy.deepcopy(pods[1])
    odd["metadata"]["labels"]["replicas"] = 3  # not a string: the API server never sends one
    data = _page([pods[0], odd, pods[2]])
    page = decode_pod_page(data)
    assert [type(item) for item in page["items"]] == [dict, dict, dict]
    typed, plain = _both_ways(data)
    assert typed == plain and len(typed) == 3
    assert "replicas" not in typed[1].labels  # as from_object reads a mistyped label


def test_an_integer_beyond_64_bits_and_null_items_do_not_fail_the_page() -> None:
    # Tolerations and container resources are read from their JSON text (as from_object reads
    # them): an integer past 64 bits in them keeps the typed path and reads as the dict path does.
    pod = copy.deepcopy(_captured_pods()[0])
    pod["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "tolerationSeconds": 2**70 + 1}]
    pod["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": 2**64 + 3}}
    assert type(decode_pod_page(_page([pod]))["items"][0]) is PodWire
    typed, plain = _both_ways(_page([pod]))
    assert typed == plain
    assert typed[0].tolerations[0].seconds == plain[0].tolerations[0].seconds
    assert decode_pod_page(b'{"kind": "PodList", "metadata": {}, "items": null}')["items"] == []


def test_container_resources_of_any_shape_keep_the_typed_path_and_read_as_from_object() -> None:
    # A container's resources are read from their JSON text (looked up by it), so an odd quantity
    # no longer sends the whole page to the dict path: it reads as `from_object` reads it.
    pods = copy.deepcopy(_captured_pods()[:4])
    pods[0]["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": 2**64 + 3}}
    pods[1]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": ["1"]}, "limits": None}
    pods[2]["spec"]["containers"][0]["resources"] = None
    pods[3]["spec"]["containers"] = [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}]
    page = decode_pod_page(_page(pods))
    assert {type(item) for item in page["items"]} == {PodWire}
    typed, plain = _both_ways(_page(pods))
    assert typed == plain
    assert typed[0].requests["nvidia.com/gpu"] == 2**63 - 1 and typed[3].requests["cpu"] == 1000  # clamped


def test_annotations_owners_of_any_shape_keep_the_typed_path_and_read_as_from_object() -> None:
    # Annotations, owner references and tolerations are read from their JSON text: a value of
    # another type than the API's there reads as from_object reads it, and the page stays typed.
    pods = copy.deepcopy(_captured_pods()[:3])
    pods[0]["metadata"]["annotations"] = {"a": "x", "n": 3, "m": None}
    pods[1]["metadata"]["ownerReferences"] = [{"kind": None, "name": "o", "controller": "yes"}]
    pods[2]["spec"]["tolerations"] = [{"key": 1, "operator": None, "tolerationSeconds": 1.5}]
    page = decode_pod_page(_page(pods))
    assert {type(item) for item in page["items"]} == {PodWire}
    typed, plain = _both_ways(_page(pods))
    assert typed == plain
    assert typed[0].annotations == {"a": "x"} and typed[1].owners[0].kind == "None"


def test_a_large_annotation_text_reads_the_same_and_is_not_kept_by_its_text() -> None:
    pod = copy.deepcopy(_captured_pods()[0])
    pod["metadata"]["annotations"] = {"big": "x" * (podwire.SHARED_TEXT + 1)}
    held = podwire._shared_annotations.cache_info().currsize
    typed, plain = _both_ways(_page([pod]))
    assert typed == plain and typed[0].annotations["big"] == "x" * (podwire.SHARED_TEXT + 1)
    assert podwire._shared_annotations.cache_info().currsize == held


def test_pods_of_one_page_share_strings_and_parts_on_the_typed_path() -> None:
    workers = [
        pod
        for pod in _captured_pods()
        if pod["metadata"].get("labels", {}).get(WORKER_INDEX) not in (None, "0")
    ]
    first, second = (pod_record(item) for item in decode_pod_page(_page(workers[:2]))["items"])
    key = "leaderworkerset.sigs.k8s.io/name"
    assert first.labels[key] is second.labels[key]
    label_keys = {k: k for k in first.labels}
    assert all(label_keys[k] is k for k in second.labels if k in label_keys)  # interned keys
    assert first.requests is second.requests
    assert first.owners[0].kind == "StatefulSet" and first.namespace is second.namespace


def test_a_pod_like_the_one_before_takes_its_parts_from_the_memo_which_holds_no_page() -> None:
    # Two pods with the same owner, annotation, toleration and resources texts: the second takes
    # the first's parts from the one-entry memo; a third with other texts reads its own. The memo
    # keeps copies of the texts, never the page they were decoded from.
    pod = _captured_pods()[0]
    other = copy.deepcopy(pod)
    other["metadata"]["annotations"] = {"note": "another text"}
    data = _page([pod, copy.deepcopy(pod), other])
    held = sys.getrefcount(data)
    items = decode_pod_page(data)["items"]

    def asked() -> int:  # calls of the annotation texts' cache
        info = podwire._shared_annotations.cache_info()
        return info.hits + info.misses

    first = pod_record(items[0])
    before = asked()
    second = pod_record(items[1])
    assert asked() == before  # from the memo
    third = pod_record(items[2])
    assert asked() == before + 1
    del items
    assert second.annotations is first.annotations and second.more is first.more
    assert third.annotations == {"note": "another text"} and third.requests is first.requests
    assert (first, second, third) == tuple(PodRecord.from_object(p) for p in (pod, pod, other))
    gc.collect()
    assert sys.getrefcount(data) == held  # no Raw view into the page is left behind


def test_the_reflector_lists_typed_pod_pages_into_the_view_and_tells_listeners() -> None:
    pods = _captured_pods()

    heard: list[tuple[str, Any, Any]] = []
    view = ClusterView("test")
    view.subscribe(lambda kind, old, new: heard.append((kind, old, new)))
    reflector = Reflector(PODS, view, PodPage(pods, resource_version="900"))
    reflector.relist()
    by_key = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
    assert set(view.keys(PODS)) == set(by_key)
    for key, pod in by_key.items():
        assert view.pod(*key) == PodRecord.from_object(pod)
        assert str(reflector.versions[key]) == pod["metadata"].get("resourceVersion", "")
    assert reflector.resource_version == "900"
    assert len([h for h in heard if h[0] == PODS]) == len(pods)


# ---- generated pods: both paths agree on whatever the typed decoder takes -----------------------

_text = st.sampled_from(["", "a", "gpu-node-1", "2026-11-30T01:02:03Z", "True", "False", "Ready"])
_maybe = st.one_of(st.none(), _text, st.integers(-3, 3), st.booleans())
_quantity = st.one_of(st.sampled_from(["1", "500m", "1Gi", "8", "bad"]), st.integers(0, 9), st.just(1.5))


def _optional(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


_condition = _optional(
    {
        "type": st.one_of(
            st.sampled_from(["Ready", "ContainersReady", "DisruptionTarget", "TerminationTarget", "g/x"]),
            st.integers(0, 1),
        ),
        "status": st.one_of(st.sampled_from(["True", "False", "Unknown"]), st.none()),
        "reason": _maybe,
        "message": _text,
        "lastTransitionTime": st.one_of(_text, st.none()),
        "lastProbeTime": st.none(),
    }
)
_container = _optional(
    {
        "name": _text,
        "resources": _optional(
            {
                "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _quantity),
                "limits": st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu"]), _quantity),
            }
        ),
        "restartPolicy": st.sampled_from(["Always", "Never"]),
    }
)
_pod = _optional(
    {
        "metadata": _optional(
            {
                "namespace": st.one_of(_text, st.none()),
                "name": _text,
                "uid": _text,
                "resourceVersion": _text,
                "labels": st.dictionaries(_text, st.one_of(_text, st.integers(0, 2)), max_size=3),
                "annotations": st.dictionaries(_text, _text, max_size=6),
                "deletionTimestamp": st.one_of(_text, st.none()),
                "creationTimestamp": st.one_of(_text, st.none()),
                "ownerReferences": st.lists(
                    _optional(
                        {
                            "kind": _text,
                            "name": _text,
                            "uid": _text,
                            "apiVersion": _text,
                            "controller": st.one_of(st.booleans(), st.none()),
                        }
                    ),
                    max_size=2,
                ),
            }
        ),
        "spec": _optional(
            {
                "nodeName": _text,
                "containers": st.lists(_container, max_size=2),
                "initContainers": st.lists(_container, max_size=2),
                "overhead": st.dictionaries(st.sampled_from(["cpu", "memory"]), _quantity, max_size=1),
                "tolerations": st.lists(
                    _optional(
                        {
                            "key": _text,
                            "operator": st.sampled_from(["Exists", "Equal", ""]),
                            "value": _text,
                            "effect": st.sampled_from(["NoExecute", "NoSchedule", ""]),
                            "tolerationSeconds": st.one_of(st.integers(-1, 600), st.just(300.0), st.none()),
                        }
                    ),
                    max_size=2,
                ),
                "schedulingGates": st.lists(_optional({"name": _text}), max_size=2),
                "resourceClaims": st.lists(
                    _optional(
                        {"name": _text, "resourceClaimName": _text, "resourceClaimTemplateName": _text}
                    ),
                    max_size=2,
                ),
                "readinessGates": st.lists(
                    _optional({"conditionType": st.one_of(_text, st.none())}), max_size=2
                ),
            }
        ),
        "status": _optional(
            {
                "phase": st.sampled_from(["Running", "Pending", "Succeeded", "Failed", ""]),
                "conditions": st.lists(_condition, max_size=4),
                "resourceClaimStatuses": st.lists(_optional({"resourceClaimName": _text}), max_size=2),
                "extendedResourceClaimStatus": _optional({"resourceClaimName": _text}),
            }
        ),
    }
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_pod, min_size=1, max_size=3))
def test_generated_pods_read_the_same_on_both_paths(pods: list[dict[str, Any]]) -> None:
    typed, plain = _both_ways(_page(pods))
    assert typed == plain
