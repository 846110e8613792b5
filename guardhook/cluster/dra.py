"""Dynamic Resource Allocation (`resource.k8s.io`) objects as the cluster view keeps them.

Kubernetes publishes devices in ResourceSlices (one driver, one pool; node-local when
`spec.nodeName` is set, or per device with `spec.perDeviceNodeSelection` and `devices[].nodeName`),
and pods get them through ResourceClaims (directly, from a ResourceClaimTemplate, or — KEP-5004 —
from an extended resource such as `nvidia.com/gpu` that a DeviceClass maps with
`spec.extendedResourceName`). A claim's devices are the ones in `status.allocation.devices.results`.

Every served version is read (the API server converts between them, but a manifest or an older
server sends its own): `resource.k8s.io/v1` (GA in 1.34) and `v1beta2` keep a device's fields at
the device and a request's under `exactly`; `v1beta1` (1.32–1.33) nests a device's fields under
`basic` and keeps a request's fields on the request. DeviceTaintRule is `v1alpha3` (1.33–1.35)
or `v1beta2`. Shapes from k8s.io/api/resource/{v1,v1beta2,v1beta1,v1alpha3}/types.go.

Partitionable devices (KEP-4815): a slice may publish `spec.sharedCounters` (counter sets of its
pool) and a device `consumesCounters` from them; consumable capacity (KEP-5075): a device with
`allowMultipleAllocations` is shared by several claims, each consuming part of its `capacity`
(the claim's `status.allocation.devices.results[].consumedCapacity`).

Records are compact and never raise on a malformed object: missing or mistyped fields are empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import msgspec

from guardhook.cluster import interning
from guardhook.cluster.model import (
    PodClaimRef,
    Toleration,
    as_dict,
    as_list,
    metadata,
    pod_claim_names,
    pod_claim_refs,
    scheduling_gates,
)
from guardhook.cluster.resources import quantity_to_units
from guardhook.wire import KubeObject

__all__ = [
    "AllocatedDevice",
    "ClassMatcher",
    "CounterSet",
    "Device",
    "DeviceClassRecord",
    "DeviceId",
    "DeviceRequest",
    "DeviceTaint",
    "DeviceTaintRuleRecord",
    "PodClaimRef",
    "ResourceClaimRecord",
    "ResourceClaimTemplateRecord",
    "ResourceSliceRecord",
    "allocated_devices",
    "claim_spec_requests",
    "devices_by_node",
    "effective_taints",
    "pod_claim_names",
    "pod_claim_refs",
    "scheduling_gates",
]

RESOURCE_API_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
"""Versions serving ResourceSlice, ResourceClaim(Template) and DeviceClass, newest first."""
TAINT_RULE_VERSIONS = ("v1beta2", "v1alpha3")
"""Versions serving DeviceTaintRule, newest first (alpha v1alpha3 in 1.33–1.35)."""

IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
"""KEP-5004: every DeviceClass can also be requested as `deviceclass.resource.kubernetes.io/<name>`."""

FILTERING_DEVICE_EFFECTS = ("NoSchedule", "NoExecute")
"""Device taint effects that keep a device from being allocated to a claim that does not tolerate
them (KEP-5055; `None` is informational only)."""


class DeviceId(NamedTuple):
    """A device's identity across the cluster: (driver, pool, device name)."""

    driver: str
    pool: str
    device: str


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """One taint on a device (ResourceSlice `devices[].taints` or a DeviceTaintRule's `taint`)."""

    key: str
    value: str
    effect: str

    @staticmethod
    def parse(raw: Any) -> DeviceTaint:
        """A DeviceTaint from one decoded taint (`{key, value, effect}`); missing or mistyped
        fields become "" (never raises)."""
        raw = as_dict(raw)
        return DeviceTaint(
            str(raw.get("key") or ""), str(raw.get("value") or ""), str(raw.get("effect") or "")
        )


class Device(msgspec.Struct, frozen=True, gc=False):
    """One published device. `node_name` is the node it is local to ("" when it is reachable from a
    node selector or every node instead). `attributes` map fully qualified names
    (`<domain>/<name>`; unqualified names get the driver as domain) to str / int / bool / version
    text; `capacity` maps qualified names to amounts in base units.

    A frozen msgspec Struct rather than a frozen dataclass (as `PodRecord`): made in C, ~10x
    faster than a dataclass's `__init__` of eight fields, and 260,000 are made at 65,000 nodes."""

    id: DeviceId
    node_name: str
    attributes: Mapping[str, Any]
    capacity: Mapping[str, int]
    taints: tuple[DeviceTaint, ...] = ()
    consumes: tuple[CounterSet, ...] = ()
    """`consumesCounters`: the counters the device takes from its pool's counter sets while
    allocated (KEP-4815)."""
    multiple: bool = False
    """`allowMultipleAllocations` (KEP-5075): several claims may share the device."""
    share: tuple[tuple[str, int], ...] = ()
    """Per qualified capacity name, what one allocation consumes when its request names no amount:
    the capacity's `requestPolicy.default`, else the whole capacity (the allocator's
    fillEmptyRequestQuantity)."""

    @property
    def partitioned(self) -> bool:
        """Whether the device consumes counters or may be allocated several times: its freedom then
        depends on the rest of its pool, not on itself alone."""
        return bool(self.consumes) or self.multiple


class CounterSet(NamedTuple):
    """A counter set: `name` and its counters as sorted (counter, amount) pairs — a slice's
    `sharedCounters[]` entry, or a device's `consumesCounters[]` entry (then `name` is the
    `counterSet` it consumes from)."""

    name: str
    counters: tuple[tuple[str, int], ...]


def _counter_set(raw: Mapping[str, Any], name_field: str) -> CounterSet:
    counters = []
    for name, value in as_dict(raw.get("counters")).items():
        try:
            counters.append((str(name), quantity_to_units(str(name), as_dict(value).get("value"))))
        except (ValueError, ArithmeticError, TypeError):
            continue
    return CounterSet(str(raw.get(name_field) or ""), tuple(sorted(counters)))


class Decoded(dict[str, Any]):
    """A list page's ResourceSlice or ResourceClaim whose record the typed page decoder already
    made (guardhook.cluster.drawire): a dict of the item's `metadata` (name, namespace,
    resourceVersion: what the list path asks of an item), with the `record`, which
    `from_object` returns."""

    __slots__ = ("record",)

    def __init__(self, fields: dict[str, Any], record: Any) -> None:
        super().__init__(fields)
        self.record = record


class ResourceSliceRecord(msgspec.Struct, frozen=True, gc=False):
    """A ResourceSlice: `devices` of one `driver` in one `pool` (pool `generation`); `node_name`
    when the whole slice is local to one node, `all_nodes` / `node_selector` for devices reachable
    from several nodes (network-attached), `per_device_nodes` when each device names its own."""

    name: str
    driver: str
    pool: str
    generation: int
    node_name: str
    all_nodes: bool
    node_selector: bool
    per_device_nodes: bool
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...] = ()
    """`spec.sharedCounters`: counter sets the pool's devices consume from (KEP-4815)."""

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: ("", name), the object being cluster-scoped."""
        return ("", self.name)

    @property
    def partitioned(self) -> bool:
        """Whether the slice publishes counter sets or a device that consumes counters or allows
        multiple allocations (its pool is then counted as a whole)."""
        # Device.partitioned read inline: asked of every device of every pool a rebuild counts
        return bool(self.shared_counters) or any(d.consumes or d.multiple for d in self.devices)

    @staticmethod
    def from_object(obj: KubeObject) -> ResourceSliceRecord:
        """The record of a decoded ResourceSlice (resource.k8s.io v1, v1beta2 or v1beta1);
        malformed fields become empty values (never raises). A typed list page's item
        (`Decoded`) carries its record already."""
        if type(obj) is Decoded:
            return cast(ResourceSliceRecord, obj.record)
        spec = as_dict(obj.get("spec"))
        # Interned: a fleet's slices repeat the driver, and the pool and node name are those its pods
        # and claims name (guardhook.cluster.interning).
        driver = interning.text(spec.get("driver"))
        pool = as_dict(spec.get("pool"))
        pool_name = interning.text(pool.get("name"))
        node_name = interning.text(spec.get("nodeName"))
        generation = pool.get("generation")
        devices = _devices(as_list(spec.get("devices")), driver, pool_name, node_name)
        return ResourceSliceRecord(
            name=str(metadata(obj).get("name") or ""),
            driver=driver,
            pool=pool_name,
            generation=generation if isinstance(generation, int) else 0,
            node_name=node_name,
            all_nodes=spec.get("allNodes") is True,
            node_selector=isinstance(spec.get("nodeSelector"), dict),
            per_device_nodes=spec.get("perDeviceNodeSelection") is True,
            devices=devices,
            shared_counters=tuple(
                _counter_set(as_dict(raw), "name") for raw in as_list(spec.get("sharedCounters"))
            ),
        )


_PLAIN_DEVICE = frozenset({"name", "attributes", "capacity"})
"""The fields of a device that has nothing but its name, attributes and capacity (v1 / v1beta2:
most devices a fleet publishes)."""


def _devices(raws: list[Any], driver: str, pool: str, slice_node: str) -> tuple[Device, ...]:
    """`_device` of each of a slice's devices (a malformed entry read as an empty one). A device
    with no field but its name, attributes and capacity is made here without the rest's reads
    (260,000 devices at 65,000 nodes): local to the slice's node, untainted, consuming nothing."""
    text = interning.text
    out = []
    for raw in raws:
        if type(raw) is dict and raw.keys() <= _PLAIN_DEVICE:
            raw_capacity, raw_attributes = raw.get("capacity"), raw.get("attributes")
            capacity, attributes = _maps(
                raw_capacity if isinstance(raw_capacity, dict) else {},
                raw_attributes if isinstance(raw_attributes, dict) else {},
                driver,
            )
            out.append(
                Device(
                    _new(DeviceId, (driver, pool, text(raw.get("name")))), slice_node, attributes, capacity
                )
            )
        else:
            out.append(_device(as_dict(raw), driver, pool, slice_node))
    return tuple(out)


def _device(raw: Mapping[str, Any], driver: str, pool: str, slice_node: str) -> Device:
    # v1beta1 nests everything but the name under `basic`; v1 / v1beta2 keep it on the device.
    basic = raw.get("basic")
    body = basic if isinstance(basic, dict) else raw
    node = body.get("nodeName")
    node = interning.text(node) if node else slice_node
    # A fleet's devices repeat their names, attributes and capacity node after node: shared, a
    # device costs its identity and record (~170 B) instead of ~680 B (docs/performance.md).
    capacity, attributes = _maps(as_dict(body.get("capacity")), as_dict(body.get("attributes")), driver)
    multiple = body.get("allowMultipleAllocations") is True
    return Device(
        DeviceId(driver, pool, interning.text(raw.get("name"))),
        node,
        attributes,
        capacity,
        tuple(DeviceTaint.parse(t) for t in as_list(body.get("taints"))) if "taints" in body else (),
        tuple(_counter_set(as_dict(c), "counterSet") for c in as_list(body.get("consumesCounters")))
        if "consumesCounters" in body
        else (),
        multiple,
        _shares(as_dict(body.get("capacity")), driver, capacity) if multiple else (),
    )


_last_maps: tuple[Any, ...] = ("", {}, {}, interning.EMPTY, interning.EMPTY)
"""The raw capacity and attributes `_maps` read last (with the driver), and what it made of them."""


def _maps(
    raw_capacity: dict[str, Any], raw_attributes: dict[str, Any], driver: str
) -> tuple[Mapping[str, int], Mapping[str, Any]]:
    """A device's capacity and attributes (`_capacity`, `_attributes`, shared): those of the device
    read before when its raw maps are equal (a slice's devices, and node after node, publish the
    same), so they are compared, not parsed and looked up again. (Python's `==` takes `true` for
    `1`: only maps the API server's validation refuses could tell the two apart.)"""
    global _last_maps
    last = _last_maps  # one read: another reflector's thread may replace it (whole) meanwhile
    if last[0] == driver and last[1] == raw_capacity and last[2] == raw_attributes:
        return last[3], last[4]
    capacity = interning.shared_map(_capacity(raw_capacity, driver))
    attributes = interning.shared_map(_attributes(raw_attributes, driver))
    _last_maps = (driver, raw_capacity, raw_attributes, capacity, attributes)
    return capacity, attributes


def _shares(raw: Mapping[str, Any], driver: str, capacity: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """What one allocation without a capacity request consumes of each capacity: its
    `requestPolicy.default`, else the whole capacity (structured allocator,
    consumable_capacity.go fillEmptyRequestQuantity)."""
    out = []
    for name, value in raw.items():
        full = capacity.get(qualified(str(name), driver))
        if full is None:
            continue
        default = as_dict(as_dict(as_dict(value).get("requestPolicy"))).get("default")
        try:
            amount = full if default is None else quantity_to_units(str(name), default)
        except (ValueError, ArithmeticError, TypeError):
            amount = full
        out.append((qualified(str(name), driver), amount))
    return tuple(sorted(out))


def qualified(name: str, driver: str) -> str:
    """An attribute or capacity name with its domain: unqualified names belong to the driver."""
    return name if "/" in name else f"{driver}/{name}"


def _attributes(raw: Mapping[str, Any], driver: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in raw.items():
        value = as_dict(value)
        for field in ("string", "int", "bool", "version"):
            if field in value:
                out[qualified(str(name), driver)] = value[field]
                break
    return out


def _capacity(raw: Mapping[str, Any], driver: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in raw.items():
        # v1 / v1beta2 / v1beta1: DeviceCapacity {value: Quantity}; v1alpha3 had a bare Quantity.
        quantity = as_dict(value).get("value") if isinstance(value, dict) else value
        try:
            out[qualified(str(name), driver)] = quantity_to_units(str(name), quantity)
        except (ValueError, ArithmeticError, TypeError):
            continue
    return out


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim (or claim template): `count` devices of DeviceClass `device_class`
    with `allocation_mode` ExactCount (the default) or All, narrowed by CEL `selectors`.
    `alternatives` holds the `firstAvailable` subrequests (the first that can be met is used).
    `tolerations` are the device taints the request tolerates (same shape as a pod's, KEP-5055)."""

    name: str
    device_class: str
    count: int
    allocation_mode: str
    selectors: tuple[str, ...]
    alternatives: tuple[DeviceRequest, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


def _request(raw: Mapping[str, Any]) -> DeviceRequest:
    # v1 / v1beta2: the request's fields under `exactly`; v1beta1: on the request itself.
    exact = as_dict(raw.get("exactly")) if isinstance(raw.get("exactly"), dict) else raw
    count = exact.get("count")
    return DeviceRequest(
        name=str(raw.get("name") or ""),
        device_class=str(exact.get("deviceClassName") or ""),
        count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1,
        allocation_mode=str(exact.get("allocationMode") or "ExactCount"),
        selectors=_cel_selectors(exact.get("selectors")),
        alternatives=tuple(_request(as_dict(sub)) for sub in as_list(raw.get("firstAvailable"))),
        tolerations=Toleration.parse_all(exact),
    )


def _cel_selectors(raw: Any) -> tuple[str, ...]:
    return tuple(
        str(as_dict(as_dict(s).get("cel")).get("expression") or "")
        for s in as_list(raw)
        if as_dict(as_dict(s).get("cel")).get("expression")
    )


def claim_spec_requests(spec: Mapping[str, Any]) -> tuple[DeviceRequest, ...]:
    """The device requests of a ResourceClaimSpec (`{devices: {requests: [...]}}`)."""
    return tuple(_request(as_dict(r)) for r in as_list(as_dict(spec.get("devices")).get("requests")))


class AllocatedDevice(NamedTuple):
    """One `status.allocation.devices.results[]` entry: which request got which device, and the
    `consumedCapacity` of a shared device (qualified capacity name, amount; KEP-5075)."""

    request: str
    id: DeviceId
    consumed: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    """One `status.reservedFor[]` entry (a pod, normally): resource, name and uid."""

    resource: str
    name: str
    uid: str


class ResourceClaimRecord(msgspec.Struct, frozen=True, gc=False):
    """A ResourceClaim: its `requests`, the `allocated` devices (empty until the scheduler
    allocates), the node its allocation is pinned to (`allocation_node`, "" when none or not a
    single node by name) and the consumers it is `reserved_for`."""

    namespace: str
    name: str
    uid: str
    requests: tuple[DeviceRequest, ...]
    allocated: tuple[AllocatedDevice, ...]
    allocation_node: str
    reserved_for: tuple[ConsumerRef, ...]

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: (namespace, name)."""
        return (self.namespace, self.name)

    @staticmethod
    def from_object(obj: KubeObject) -> ResourceClaimRecord:
        """The record of a decoded ResourceClaim (resource.k8s.io v1, v1beta2 or v1beta1);
        malformed fields become empty values (never raises). A typed list page's item
        (`Decoded`) carries its record already."""
        if type(obj) is Decoded:
            return cast(ResourceClaimRecord, obj.record)
        meta = metadata(obj)
        status = as_dict(obj.get("status"))
        allocation = as_dict(status.get("allocation"))
        results = as_list(as_dict(allocation.get("devices")).get("results"))
        return ResourceClaimRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            requests=_claim_requests(as_dict(obj.get("spec"))),
            allocated=_allocated_all(results),
            allocation_node=_single_node(as_dict(allocation.get("nodeSelector"))),
            reserved_for=tuple(
                ConsumerRef(str(c.get("resource") or ""), str(c.get("name") or ""), str(c.get("uid") or ""))
                for c in map(as_dict, as_list(status.get("reservedFor")))
            ),
        )


_last_requests: tuple[Any, ...] = ({}, ())
"""The claim spec `_claim_requests` read last, and its requests."""


def _claim_requests(spec: dict[str, Any]) -> tuple[DeviceRequest, ...]:
    """`claim_spec_requests(spec)`, shared with the claim read before when their specs are equal
    (the claims of one template, claim after claim of a list): compared, not read again."""
    global _last_requests
    last = _last_requests  # one read: another reflector's thread may replace it (whole)
    if last[0] == spec:
        return last[1]
    requests = claim_spec_requests(spec)
    _last_requests = (spec, requests)
    return requests


def _allocated_all(results: list[Any]) -> tuple[AllocatedDevice, ...]:
    """`_allocated` of each of a claim's `status.allocation.devices.results` (a malformed entry
    read as an empty one). A claim's results repeat one request, driver and pool: each is interned
    once and compared, not looked up again, for the entries after it."""
    text = interning.text
    out = []
    last_driver: Any = None
    last_pool: Any = None
    last_request: Any = None
    driver = pool = request = ""
    for raw in results:
        if type(raw) is not dict:
            raw = raw if isinstance(raw, dict) else {}
            out.append(_allocated(raw))
            continue
        consumed = raw.get("consumedCapacity")
        if isinstance(consumed, dict) and consumed:
            out.append(_allocated(raw))
            continue
        # Only a str is remembered (text() reads anything else its own way), so an equal value is
        # the same text.
        value = raw.get("driver")
        if value != last_driver or last_driver is None:
            driver = text(value)
            last_driver = value if type(value) is str else None
        value = raw.get("pool")
        if value != last_pool or last_pool is None:
            pool = text(value)
            last_pool = value if type(value) is str else None
        value = raw.get("request")
        if value != last_request or last_request is None:
            request = text(value)
            last_request = value if type(value) is str else None
        # NamedTuples made as their generated __new__ makes them, without its Python frame
        # (~250,000 results at 65,000 nodes).
        out.append(
            _new(AllocatedDevice, (request, _new(DeviceId, (driver, pool, text(raw.get("device")))), ()))
        )
    return tuple(out)


_new = tuple.__new__


def _allocated(raw: Mapping[str, Any]) -> AllocatedDevice:
    # Interned: every result of a fleet's claims repeats the request, driver and device names, and
    # the pool is the node's (guardhook.cluster.interning).
    text = interning.text
    driver = text(raw.get("driver"))
    device = DeviceId(driver, text(raw.get("pool")), text(raw.get("device")))
    request = text(raw.get("request"))
    consumed = raw.get("consumedCapacity")
    if not isinstance(consumed, dict) or not consumed:
        return AllocatedDevice(request, device)
    amounts = []
    for name, quantity in consumed.items():
        try:
            amounts.append((qualified(str(name), driver), quantity_to_units(str(name), quantity)))
        except (ValueError, ArithmeticError, TypeError):
            continue
    return AllocatedDevice(request, device, tuple(sorted(amounts)))


def _single_node(selector: Mapping[str, Any]) -> str:
    """The node an allocation's node selector names, when it is one node by `metadata.name`
    (the scheduler writes that for node-local devices); else ""."""
    terms = as_list(selector.get("nodeSelectorTerms"))
    if len(terms) != 1:
        return ""
    for field in as_list(as_dict(terms[0]).get("matchFields")):
        field = as_dict(field)
        values = as_list(field.get("values"))
        if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
            return str(values[0])
    return ""


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplateRecord:
    """A ResourceClaimTemplate: the device `requests` of the claims it stamps out (one per pod)."""

    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...]

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: (namespace, name)."""
        return (self.namespace, self.name)

    @staticmethod
    def from_object(obj: KubeObject) -> ResourceClaimTemplateRecord:
        """The record of a decoded ResourceClaimTemplate (resource.k8s.io v1, v1beta2 or v1beta1);
        malformed fields become empty values (never raises)."""
        meta = metadata(obj)
        spec = as_dict(as_dict(obj.get("spec")).get("spec"))
        return ResourceClaimTemplateRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            requests=claim_spec_requests(spec),
        )


@dataclass(frozen=True, slots=True)
class DeviceClassRecord:
    """A DeviceClass: CEL `selectors` a device must all satisfy, and the extended resource name
    pods may request it by (`spec.extendedResourceName`, KEP-5004; "" when unset)."""

    name: str
    selectors: tuple[str, ...]
    extended_resource_name: str

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: ("", name), the object being cluster-scoped."""
        return ("", self.name)

    @property
    def resource_names(self) -> tuple[str, ...]:
        """Extended resource names that request this class: the explicit one (if any) and the
        implicit `deviceclass.resource.kubernetes.io/<name>`."""
        implicit = IMPLICIT_EXTENDED_RESOURCE_PREFIX + self.name
        return (self.extended_resource_name, implicit) if self.extended_resource_name else (implicit,)

    @property
    def column(self) -> str:
        """The resource name guardhook counts this class's devices under: the explicit extended
        resource name, else the implicit one."""
        return self.resource_names[0]

    @staticmethod
    def from_object(obj: KubeObject) -> DeviceClassRecord:
        """The record of a decoded DeviceClass (resource.k8s.io v1, v1beta2 or v1beta1);
        malformed fields become empty values (never raises)."""
        spec = as_dict(obj.get("spec"))
        return DeviceClassRecord(
            name=str(metadata(obj).get("name") or ""),
            selectors=_cel_selectors(spec.get("selectors")),
            extended_resource_name=str(spec.get("extendedResourceName") or ""),
        )


@dataclass(frozen=True, slots=True)
class DeviceTaintRuleRecord:
    """A DeviceTaintRule: `taint` on every device matching the selector's `driver`, `pool`,
    `device` (each "" = any) and — v1alpha3 only — `device_class` and CEL `selectors`. A rule
    without `spec.deviceSelector` matches no device (`has_selector` False)."""

    name: str
    has_selector: bool
    driver: str
    pool: str
    device: str
    device_class: str
    selectors: tuple[str, ...]
    taint: DeviceTaint

    @property
    def key(self) -> tuple[str, str]:
        """The view's key: ("", name), the object being cluster-scoped."""
        return ("", self.name)

    @staticmethod
    def from_object(obj: KubeObject) -> DeviceTaintRuleRecord:
        """The record of a decoded DeviceTaintRule (resource.k8s.io v1beta2 or v1alpha3);
        malformed fields become empty values (never raises)."""
        spec = as_dict(obj.get("spec"))
        selector = spec.get("deviceSelector")
        sel = as_dict(selector)
        return DeviceTaintRuleRecord(
            name=str(metadata(obj).get("name") or ""),
            has_selector=isinstance(selector, dict),
            driver=str(sel.get("driver") or ""),
            pool=str(sel.get("pool") or ""),
            device=str(sel.get("device") or ""),
            device_class=str(sel.get("deviceClassName") or ""),
            selectors=_cel_selectors(sel.get("selectors")),
            taint=DeviceTaint.parse(spec.get("taint")),
        )

    def matches_id(self, device: DeviceId) -> bool:
        """Whether driver / pool / device name select `device` (class and CEL selectors, v1alpha3
        only, are not judged here)."""
        if not self.has_selector:
            return False
        return (
            (not self.driver or self.driver == device.driver)
            and (not self.pool or self.pool == device.pool)
            and (not self.device or self.device == device.device)
        )


# ---- devices per node, allocation ---------------------------------------------------------


def newest_generation(slices: Iterable[ResourceSliceRecord]) -> list[ResourceSliceRecord]:
    """The slices of each (driver, pool)'s newest generation: the scheduler's allocator ignores a
    pool's older slices (left over while a driver republishes it)."""
    newest: dict[tuple[str, str], int] = {}
    slices = list(slices)
    for s in slices:
        pool = (s.driver, s.pool)
        newest[pool] = max(newest.get(pool, s.generation), s.generation)
    return [s for s in slices if s.generation == newest[(s.driver, s.pool)]]


def devices_by_node(slices: Iterable[ResourceSliceRecord]) -> dict[str, list[Device]]:
    """Node-local devices published by `slices`, per node name. Only the newest generation of
    each (driver, pool) counts, as the scheduler's allocator does; devices reachable from a node
    selector or all nodes (no single node) are left out."""
    out: dict[str, list[Device]] = {}
    for s in newest_generation(slices):
        for device in s.devices:
            if device.node_name:
                out.setdefault(device.node_name, []).append(device)
    return out


def published_devices(slices: Iterable[ResourceSliceRecord]) -> dict[DeviceId, Device]:
    """Every device `slices` publish (node-local or not) by id, newest pool generation only."""
    return {device.id: device for s in newest_generation(slices) for device in s.devices}


def allocated_devices(claims: Iterable[ResourceClaimRecord]) -> set[DeviceId]:
    """Every device held by the allocation of one of `claims` (a device is allocated to at most
    one claim unless it allows multiple allocations; either way it is not free)."""
    return {entry.id for claim in claims for entry in claim.allocated}


def effective_taints(device: Device, rules: Iterable[DeviceTaintRuleRecord]) -> tuple[DeviceTaint, ...]:
    """A device's own taints plus those of the DeviceTaintRules whose driver / pool / device
    select it."""
    return device.taints + tuple(rule.taint for rule in rules if rule.matches_id(device.id))


def rule_selects(
    rule: DeviceTaintRuleRecord,
    device: DeviceId,
    published: Device | None,
    class_lookup: Callable[[str], DeviceClassRecord | None],
    matcher: ClassMatcher,
    unknown: list[str] | None = None,
) -> bool | None:
    """Whether DeviceTaintRule `rule` selects `device`: True / False, or None when the view cannot
    tell. Driver / pool / device name are judged on the id; the v1alpha3 DeviceClass
    (`class_lookup`, None when the view lacks it) and CEL selectors on `published`, the device as
    a ResourceSlice publishes it (None when no slice of the view does). Any part judged False
    makes it False; otherwise a part that cannot be judged (class not in the view, device not
    published, CEL needing Kubernetes' CEL library) makes it None, and `unknown`, when given,
    receives which: "deviceClassName" and/or "selectors". Callers decide what None means."""
    if not rule.matches_id(device):
        return False
    parts: list[str] = []
    if rule.device_class:
        device_class = class_lookup(rule.device_class)
        verdict = (
            None if device_class is None or published is None else matcher.matches(device_class, published)
        )
        if verdict is False:
            return False
        if verdict is None:
            parts.append("deviceClassName")
    if rule.selectors:
        as_class = DeviceClassRecord(f"DeviceTaintRule {rule.name}", rule.selectors, "")
        verdict = None if published is None else matcher.matches(as_class, published)
        if verdict is False:
            return False
        if verdict is None:
            parts.append("selectors")
    if parts:
        if unknown is not None:
            unknown.extend(parts)
        return None
    return True


def request_tolerations(claim: ResourceClaimRecord, request: str) -> tuple[Toleration, ...]:
    """The tolerations of the request an allocation result names: `<request>` or, for a
    `firstAvailable` subrequest, `<request>/<subrequest>`."""
    name, _, sub = request.partition("/")
    found: DeviceRequest | None = next((r for r in claim.requests if r.name == name), None)
    if found is not None and sub:
        found = next((r for r in found.alternatives if r.name == sub), None)
    return found.tolerations if found is not None else ()


# ---- DeviceClass selectors ------------------------------------------------------------------


class ClassMatcher:
    """Judges whether a device belongs to a DeviceClass by evaluating the class's CEL selectors
    (cel-python) on `device.driver`, `device.attributes[domain][name]` and
    `device.capacity[domain][name]` (amounts as integers), as the DRA CEL environment names them.

    Kubernetes' CEL library (quantities, semver, `compareTo`) is not available: a selector that
    needs it, or that fails for any reason, cannot be judged and `matches` returns None. Results
    are cached per (class, device driver / attributes / capacity), so identical devices on many
    nodes cost one evaluation. Not thread-safe; callers hold the view's lock.
    """

    def __init__(self) -> None:
        self._programs: dict[str, Any] = {}
        self._results: dict[tuple[Any, ...], bool | None] = {}

    def matches(self, device_class: DeviceClassRecord, device: Device) -> bool | None:
        """True / False when every selector could be evaluated; None when one could not."""
        if not device_class.selectors:
            return True
        key = (
            device_class.selectors,
            device.id.driver,
            tuple(sorted(device.attributes.items())),
            tuple(sorted(device.capacity.items())),
        )
        if key not in self._results:
            self._results[key] = self._evaluate(device_class.selectors, device)
        return self._results[key]

    def _evaluate(self, selectors: tuple[str, ...], device: Device) -> bool | None:
        import celpy  # imported on first use: only clusters with DRA classes pay for it

        activation = {"device": celpy.json_to_cel(_cel_device(device))}
        for expression in selectors:
            try:
                program = self._programs.get(expression)
                if program is None:
                    env = celpy.Environment()
                    program = self._programs[expression] = env.program(env.compile(expression))
                result = program.evaluate(activation)
            except Exception:  # celpy raises CELEvalError / CELParseError / KeyError variants
                return None
            if not isinstance(result, bool | celpy.celtypes.BoolType):  # a CELEvalError value, or not a bool
                return None
            if not result:
                return False
        return True


def _cel_device(device: Device) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain, {})[short] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, amount in device.capacity.items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain, {})[short] = amount
    return {"driver": device.id.driver, "attributes": attributes, "capacity": capacity}
