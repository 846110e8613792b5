"""Partitionable devices (KEP-4815: shared counter sets) and consumable capacity (KEP-5075:
`allowMultipleAllocations`) in group-capacity (issue 37 item 1).

The counter rule is checked against the examples of the structured allocator's own tests
(kubernetes staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting,
`partitionable-devices-*`: counter sets, devices, allocated devices and what the allocator
allocates), transcribed as data; the scale-up cases use slices shaped as the NVIDIA DRA driver's
DynamicMIG mode publishes them (tests/gpu_cluster.mig_slices), each with its control."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_capacity_models import judge, message, model_of

from guardhook.capacity import index_for
from guardhook.capacity.devices import available_counters, best_packing, pool_free
from guardhook.cluster.dra import DeviceId, ResourceClaimRecord, ResourceSliceRecord
from guardhook.cluster.view.static import view_from_objects

from gpu_cluster import (
    DRIVER,
    claim_of,
    claim_template,
    device_class,
    lws_create,
    mig_cluster,
    mig_slices,
    node,
    shared_slice,
)

GI = 1 << 30

# ---- differential: the allocator's own examples ------------------------------------------------


def _slices(
    devices: dict[str, dict[str, dict[str, str]]], sets: dict[str, dict[str, str]], pool: str = "pool-1"
):
    """A devices slice and a counters slice of one pool, as the allocator tests build them
    (sliceWithDevices / sliceWithCounterSets)."""
    spec = {
        "driver": "driver-a",
        "nodeName": "node-1",
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
    }
    with_devices = {
        "metadata": {"name": f"{pool}-devices"},
        "spec": {
            **spec,
            "devices": [
                {
                    "name": name,
                    "consumesCounters": [
                        {"counterSet": cs, "counters": {c: {"value": v} for c, v in counters.items()}}
                        for cs, counters in consumption.items()
                    ],
                }
                for name, consumption in devices.items()
            ],
        },
    }
    with_counters = {
        "metadata": {"name": f"{pool}-counters"},
        "spec": {
            **spec,
            "sharedCounters": [
                {"name": cs, "counters": {c: {"value": v} for c, v in counters.items()}}
                for cs, counters in sets.items()
            ],
        },
    }
    return [ResourceSliceRecord.from_object(with_devices), ResourceSliceRecord.from_object(with_counters)]


# (name, devices, counter sets, allocated devices, devices the allocator gives a claim asking for N)
ALLOCATOR_EXAMPLES = [
    (
        "partitionable-devices-single-device",
        {"device-1": {"counter-set-1": {"memory": "4Gi"}}},
        {"counter-set-1": {"memory": "8Gi"}},
        [],
        1,
    ),
    (
        "partitionable-devices-multiple-devices",  # device-1 and device-3 (4Gi + 4Gi of 8Gi)
        {
            "device-1": {"counter-set-1": {"memory": "4Gi"}},
            "device-2": {"counter-set-1": {"memory": "6Gi"}},
            "device-3": {"counter-set-1": {"memory": "4Gi"}},
        },
        {"counter-set-1": {"memory": "8Gi"}},
        [],
        2,
    ),
    (
        "partitionable-devices-multiple-counters",  # device-2 and device-3: the greedy order is not enough
        {
            "device-1": {
                "counter-set-1": {"memory": "4Gi", "cpus": "6"},
                "counter-set-2": {"cpus": "4", "memory": "2Gi"},
            },
            "device-2": {
                "counter-set-1": {"memory": "6Gi", "cpus": "4"},
                "counter-set-2": {"cpus": "6", "memory": "6Gi"},
            },
            "device-3": {
                "counter-set-1": {"memory": "4Gi", "cpus": "4"},
                "counter-set-2": {"cpus": "4", "memory": "4Gi"},
            },
        },
        {"counter-set-1": {"cpus": "8", "memory": "18Gi"}, "counter-set-2": {"cpus": "12", "memory": "18Gi"}},
        [],
        2,
    ),
    (
        "partitionable-devices-unused-counters-in-counter-set",  # request of 2: device-2 and device-3
        {
            "device-1": {"counter-set-1": {"memory": "5Gi"}},
            "device-2": {"counter-set-1": {"memory": "4Gi"}},
            "device-3": {"counter-set-1": {"memory": "4Gi"}},
        },
        {"counter-set-1": {"memory": "8Gi", "unused": "1Gi"}},
        [],
        2,
    ),
    (
        "partitionable-devices-no-capacity-available",  # device-2 (16Gi of 18Gi) allocated: nothing
        {
            "device-1": {"counter-set-1": {"memory": "4Gi"}},
            "device-2": {"counter-set-1": {"memory": "16Gi"}},
        },
        {"counter-set-1": {"memory": "18Gi"}},
        ["device-2"],
        0,
    ),
]


@pytest.mark.parametrize(
    ("devices", "sets", "allocated", "most"), [pytest.param(*e[1:], id=e[0]) for e in ALLOCATOR_EXAMPLES]
)
def test_counter_rule_agrees_with_the_allocator_examples(
    devices: dict[str, Any], sets: dict[str, Any], allocated: list[str], most: int
) -> None:
    slices = _slices(devices, sets)
    taken = {DeviceId("driver-a", "pool-1", name): 1 for name in allocated}
    left = available_counters(slices, taken)
    published = [d for s in slices for d in s.devices if d.id not in taken]
    assert len(best_packing(published, left)) == most
    free, held = pool_free(((d, 0, ("a",)) for d in published), left, taken, {})
    assert free.get((0, "a"), 0) == most
    assert held.get("a", 0) == len(published) - most


def test_an_overdrawn_counter_lets_nothing_in_even_from_another_counter() -> None:
    """The allocator compares every counter of the pool: one gone negative blocks every device."""
    slices = _slices(
        {
            "device-1": {"counter-set-1": {"memory": "4Gi"}},
            "device-2": {"counter-set-1": {"memory": "16Gi", "cpus": "9"}},
        },
        {"counter-set-1": {"memory": "32Gi", "cpus": "8"}},
    )
    taken = {DeviceId("driver-a", "pool-1", "device-2"): 1}
    assert best_packing([slices[0].devices[0]], available_counters(slices, taken)) == []
    assert len(best_packing([slices[0].devices[0]], available_counters(slices, {}))) == 1  # control


# ---- DynamicMIG: a partition held keeps its GPU from being allocated whole ---------------------


MIG_CASES = [
    pytest.param(mig_cluster(), lws_create(replicas=4, size=1, gpus=1), True, id="four-free-gpus-take-four"),
    pytest.param(
        mig_cluster() + [claim_of("part", "gpu-0", ["gpu-0-mig-1g18gb-19-0"])],
        lws_create(replicas=4, size=1, gpus=1),
        False,
        id="one-partition-held-leaves-three-whole-gpus",
    ),
    pytest.param(
        mig_cluster() + [claim_of("part", "gpu-0", ["gpu-0-mig-1g18gb-19-0"])],
        lws_create(replicas=3, size=1, gpus=1),
        True,
        id="control-three-fit-beside-the-partition",
    ),
    pytest.param(
        mig_cluster() + [claim_of("whole", "gpu-0", ["gpu-0"])],
        lws_create(replicas=4, size=1, gpus=1),
        False,
        id="control-whole-gpu-held",
    ),
    pytest.param(
        mig_cluster()
        + [claim_template("mig", 7, deviceClassName="mig-1g.18gb"), claim_of("whole", "gpu-0", ["gpu-0"])],
        lws_create(replicas=4, size=1, claim="mig"),
        False,
        id="a-whole-gpu-held-takes-its-partitions",
    ),
    pytest.param(
        mig_cluster()
        + [claim_template("mig", 7, deviceClassName="mig-1g.18gb"), claim_of("whole", "gpu-0", ["gpu-1"])],
        lws_create(replicas=3, size=1, claim="mig"),
        True,
        id="control-partitions-of-the-free-gpus",
    ),
]


@pytest.mark.parametrize(("objects", "request_", "allowed"), MIG_CASES)
def test_mig_partitions_and_whole_gpus_share_counters(
    objects: list[dict[str, Any]], request_: dict[str, Any], allowed: bool
) -> None:
    response = judge(objects, request_)
    assert response["allowed"] is allowed, message(response)
    assert "DRA allocator's counter rule" in model_of(response)


def test_the_model_line_says_how_many_devices_the_counters_keep_out() -> None:
    response = judge(
        mig_cluster() + [claim_of("part", "gpu-0", ["gpu-0-mig-1g18gb-19-0"])],
        lws_create(replicas=4, size=1, gpus=1),
    )
    assert "1 devices whose counters allocated devices take left out" in model_of(response)
    control = judge(mig_cluster(), lws_create(replicas=4, size=1, gpus=1))
    assert "left out" not in model_of(control)


def test_before_counters_were_read_the_partition_left_the_gpu_free() -> None:
    """The same state read without `consumesCounters` (as before issue 37) lets 4 groups in."""
    objects = copy.deepcopy(mig_cluster()) + [claim_of("part", "gpu-0", ["gpu-0-mig-1g18gb-19-0"])]
    for obj in objects:
        for device in obj.get("spec", {}).get("devices", []) if obj["kind"] == "ResourceSlice" else []:
            device.pop("consumesCounters", None)
    assert judge(objects, lws_create(replicas=4, size=1, gpus=1))["allowed"] is True


# ---- consumable capacity: a shared device counts once per allocation it still covers -----------

SMALL = {"cpu": "1", "memory": "1Gi"}


def _small(request: dict[str, Any]) -> dict[str, Any]:
    """`request` with every pod asking 1 cpu / 1Gi (many pods per node)."""
    template = request["object"]["spec"]["leaderWorkerTemplate"]
    for part in ("leaderTemplate", "workerTemplate"):
        resources = template[part]["spec"]["containers"][0]["resources"]
        resources["requests"] = {**resources["requests"], **SMALL}
    return request


SHARED = {"memory": {"value": "80Gi", "requestPolicy": {"default": "20Gi", "validRange": {"min": "10Gi"}}}}
SHARED_CASES = [
    pytest.param([shared_slice("gpu-0", **SHARED)], [], 4, True, id="four-shares-of-a-free-device"),
    pytest.param(
        [shared_slice("gpu-0", **SHARED)],
        [claim_of("one", "gpu-0", ["gpu-0"], consumedCapacity={"memory": "20Gi"})],
        3,
        True,
        id="an-allocation-leaves-three-shares",
    ),
    pytest.param(
        [shared_slice("gpu-0", **SHARED)],
        [claim_of("one", "gpu-0", ["gpu-0"], consumedCapacity={"memory": "20Gi"})],
        4,
        False,
        id="control-not-four",
    ),
    pytest.param(
        [shared_slice("gpu-0", memory={"value": "80Gi"})],
        [claim_of("one", "gpu-0", ["gpu-0"], consumedCapacity={"memory": "80Gi"})],
        1,
        False,
        id="without-a-default-one-allocation-takes-it-all",
    ),
    pytest.param(
        [shared_slice("gpu-0", memory={"value": "80Gi"})], [], 1, True, id="control-free-device-takes-one"
    ),
]


@pytest.mark.parametrize(("slices", "claims", "replicas", "allowed"), SHARED_CASES)
def test_shared_devices_count_what_their_capacity_still_covers(
    slices: list[dict[str, Any]], claims: list[dict[str, Any]], replicas: int, allowed: bool
) -> None:
    objects = [device_class(), node("gpu-0"), *slices, *claims]
    response = judge(objects, _small(lws_create(replicas=replicas, size=1, gpus=1)))
    assert response["allowed"] is allowed, message(response)


# ---- records and the incremental table -----------------------------------------------------------


def test_slice_and_claim_records_read_counters_and_consumed_capacity() -> None:
    counters, devices = (ResourceSliceRecord.from_object(s) for s in mig_slices("n", gpus=1, partitions=1))
    assert counters.shared_counters[0].name == "gpu-0-counter-set"
    assert dict(counters.shared_counters[0].counters)["memory-slice-7"] == 1
    assert devices.devices[1].consumes[0].counters == (
        ("memory", 18 * GI),
        ("memory-slice-0", 1),
        ("multiprocessors", 16),
    )
    assert counters.partitioned and devices.partitioned
    shared = ResourceSliceRecord.from_object(shared_slice("n", **SHARED)).devices[0]
    assert shared.multiple and shared.share == ((f"{DRIVER}/memory", 20 * GI),)
    claim = ResourceClaimRecord.from_object(
        claim_of("c", "n", ["gpu-0"], consumedCapacity={"memory": "20Gi"})
    )
    assert claim.allocated[0].consumed == ((f"{DRIVER}/memory", 20 * GI),)


def _free(view: Any) -> dict[str, list[int]]:
    index = index_for(view)
    with view.lock:
        devices = index.devices()
        return {column: [int(v) for v in table[: index.rows]] for column, table in devices.free.items()}


DEVICE_NAMES = ["gpu-0", "gpu-1", *(f"gpu-{g}-mig-1g18gb-19-{p}" for g in range(2) for p in range(3))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.sampled_from(DEVICE_NAMES)), max_size=10))
def test_incremental_counts_of_partitioned_pools_equal_a_fresh_build(
    ops: list[tuple[bool, int, str]],
) -> None:
    base = [
        device_class(),
        device_class(extended="", selector="device.attributes['gpu.nvidia.com'].type == 'mig'", name="mig"),
    ]
    base += [node("gpu-0"), *mig_slices("gpu-0", gpus=2, partitions=3)]
    view = view_from_objects(base)
    index_for(view)
    claims: dict[str, dict[str, Any]] = {}
    for add, n, device in ops:
        name = f"c{n}"
        if add:
            claims[name] = claim_of(name, "gpu-0", [device])
            view.upsert("resourceclaims", claims[name])
        else:
            claims.pop(name, None)
            view.remove("resourceclaims", ("other", name))
    assert _free(view) == _free(view_from_objects(base + list(claims.values())))
