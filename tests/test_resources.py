"""Pod requests counted as kube-scheduler counts them."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import yaml

from guardhook.capacity.shapes import shape_of_template
from guardhook.cluster.model import PodRecord
from guardhook.cluster.resources import CPU, pod_requests, quantity_to_units

from conftest import FIXTURES

GPU = "nvidia.com/gpu"


def test_quantities_convert_to_millicores_and_bytes() -> None:
    assert quantity_to_units("cpu", "500m") == 500
    assert quantity_to_units("cpu", "90") == 90_000
    assert quantity_to_units("memory", "1Gi") == 1024**3
    assert quantity_to_units("memory", "1.5k") == 1500
    assert quantity_to_units("nvidia.com/gpu", 8) == 8


def test_limits_stand_in_for_missing_requests() -> None:
    spec = {
        "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}, "requests": {"cpu": "2"}}}
        ]
    }
    assert pod_requests(spec) == {"nvidia.com/gpu": 8, "cpu": 2000}


def test_sidecars_add_and_init_containers_count_as_a_maximum() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "big-init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    # steady: 1 + 0.5 = 1.5 cpu; init peak: 0.5 (sidecar) + 3 = 3.5 cpu, 1Gi; plus overhead 0.1.
    assert pod_requests(spec) == {"cpu": 3600, "memory": 1024**3}


def test_malformed_entries_are_skipped() -> None:
    spec = {"containers": [{"resources": {"requests": {"cpu": "lots", "memory": "1Mi"}}}, "junk"]}
    assert pod_requests(spec) == {"memory": 1024**2}


def test_quantities_above_int64_are_clamped_to_its_maximum() -> None:
    # Kubernetes reads quantities as int64; a larger one (1e999, 10Ei) must not become a
    # 1000-digit int that the capacity index's int64 arrays cannot hold.
    top = 2**63 - 1
    assert quantity_to_units("pods", "1e999") == top
    assert quantity_to_units("memory", "10Ei") == top
    assert quantity_to_units("memory", "8Ei") == top  # 2^63, one above the maximum
    assert quantity_to_units("memory", "7Ei") == 7 * 2**60  # fits: kept exact
    assert quantity_to_units("cpu", "10P") == top  # 1e16 cores is 1e19 millicores
    assert quantity_to_units("memory", "-1e999") == -(2**63)


def test_sums_of_huge_requests_saturate_at_int64() -> None:
    huge = {"resources": {"requests": {"memory": "6Ei"}}}
    spec = {"containers": [huge, huge], "overhead": {"memory": "6Ei"}}
    assert pod_requests(spec) == {"memory": 2**63 - 1}


# ---- wrong types, field by field, on captured pods ---------------------------------------------

WRONG_VALUES = ("a string", ["a", "list"], 7, None)
LIST_FIELDS = ("containers", "initContainers")


@functools.cache
def _captured_pods() -> list[dict[str, Any]]:
    return yaml.safe_load((FIXTURES / "fleet" / "pods.yaml").read_text())["items"]


def _captured_pod() -> dict[str, Any]:
    """A captured fleet pod given every part pod_requests reads: a second container, a sidecar and
    a plain init container (copies of its own container) and an overhead."""
    pod = copy.deepcopy(_captured_pods()[0])
    spec = pod["spec"]
    (container,) = spec["containers"]
    spec["containers"].append({**copy.deepcopy(container), "name": "second"})
    spec["initContainers"] = [
        {**copy.deepcopy(container), "name": "sidecar", "restartPolicy": "Always"},
        {**copy.deepcopy(container), "name": "init"},
    ]
    spec["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    return pod


def _paths(spec: dict[str, Any], prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field pod_requests reads, as a path into the pod spec."""
    paths: list[tuple[Any, ...]] = [("overhead",), *((field,) for field in LIST_FIELDS)]
    for field in LIST_FIELDS:
        for index, container in enumerate(spec[field]):
            at = (field, index)
            paths += [at, (*at, "resources"), (*at, "resources", "requests"), (*at, "resources", "limits")]
            paths += [(*at, "resources", "requests", name) for name in container["resources"]["requests"]]
            paths += [(*at, "resources", "limits", name) for name in container["resources"]["limits"]]
            if field == "initContainers":
                paths.append((*at, "restartPolicy"))
    return paths


def _edited(spec: dict[str, Any], path: tuple[Any, ...], value: Any, remove: bool = False) -> dict[str, Any]:
    edited = copy.deepcopy(spec)
    parent = edited
    for step in path[:-1]:
        parent = parent[step]
    if remove and isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif remove:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return edited


PATHS = _paths(_captured_pod()["spec"])


def _wrong_for(path: tuple[Any, ...]) -> tuple[Any, ...]:
    """The wrong values for the field at `path`: a string, a list, a number, null, and an object
    where a list or a container belongs. A number is a right value for a quantity (resource.Quantity
    reads JSON numbers), so it is left out there."""
    quantity = len(path) > 1 and path[-2] in ("requests", "limits")
    wrong = [v for v in WRONG_VALUES if not (quantity and isinstance(v, int))]
    if path[-1] in LIST_FIELDS or isinstance(path[-1], int):
        wrong.append({"name": "an object"})
    return tuple(wrong)


@pytest.mark.parametrize(
    ("path", "value"),
    [(path, value) for path in PATHS for value in _wrong_for(path)],
    ids=lambda p: ".".join(map(str, p)) if isinstance(p, tuple) else repr(p),
)
def test_a_field_of_the_wrong_type_counts_as_absent_and_the_rest_still_counts(
    path: tuple[Any, ...], value: Any
) -> None:
    pod = _captured_pod()
    spec = _edited(pod["spec"], path, value)
    absent = pod_requests(_edited(pod["spec"], path, None, remove=True))
    assert pod_requests(spec) == absent
    assert absent[GPU] > 0 and absent[CPU] > 0  # what the other containers request still counts
    # The same spec read by the view (shared per template) and by the capacity solver's shapes.
    record = PodRecord.from_object({**pod, "spec": spec})
    assert dict(record.requests) == absent
    shape = dict(shape_of_template({"spec": spec}).requests)
    assert {name: amount for name, amount in shape.items() if name != "pods"} == absent


@pytest.mark.parametrize("value", WRONG_VALUES, ids=repr)
def test_a_spec_of_the_wrong_type_requests_nothing(value: Any) -> None:
    assert pod_requests(value) == {}
    assert dict(PodRecord.from_object({**_captured_pod(), "spec": value}).requests) == {}


def test_resource_names_that_are_not_strings_are_skipped() -> None:
    spec = _captured_pod()["spec"]
    base = pod_requests(spec)
    spec["containers"][0]["resources"]["requests"][1] = "2"  # a YAML key read as an int
    spec["overhead"][None] = "1"
    assert pod_requests(spec) == base
    assert dict(shape_of_template({"spec": spec}).requests)[GPU] == base[GPU]
