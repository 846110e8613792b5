"""ResourceSlice and ResourceClaim list pages decoded straight into typed structs (msgspec), as
pods are (guardhook.cluster.podwire): issue 53's fleet lists 32,500 slices of 8 devices and
30,874 claims of 8 results, and orjson's dicts of them cost ~10 µs an object before any record
was made of them.

The typed shapes hold only what `ResourceSliceRecord.from_object` / `ResourceClaimRecord.from_object`
read; a device or an allocation result with any other field (v1beta1's `basic`, taints, counters,
shared capacity, admin access, ...) makes the whole page the typed decoder's refusal, and the page
is then decoded into dicts (`paging.decode`) and read by `from_object` as before. So every record
is the one `from_object` makes of the same JSON (tests/test_capacity_fill_kinds.py).

A page's items are `dra.Decoded`: a dict of the item's metadata (what the list path asks of an
item: its key and resourceVersion) carrying the record made here, which `from_object` returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from guardhook.cluster import interning
from guardhook.cluster.dra import (
    AllocatedDevice,
    ConsumerRef,
    Decoded,
    Device,
    DeviceId,
    DeviceRequest,
    ResourceClaimRecord,
    ResourceSliceRecord,
    _claim_requests,
    _counter_set,
    _maps,
    _single_node,
)
from guardhook.cluster.model import as_dict, as_list
from guardhook.cluster.paging import Page, decode

_NULL = msgspec.Raw(b"null")


class _Meta(msgspec.Struct, gc=False):
    name: Any = None
    namespace: Any = None
    uid: Any = None
    resourceVersion: Any = None


class _Device(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A device of nothing but its name, attributes and capacity (their JSON text kept: equal text
    is an equal map, compared rather than decoded again)."""

    name: Any = None
    attributes: msgspec.Raw = _NULL
    capacity: msgspec.Raw = _NULL


class _SliceSpec(msgspec.Struct, gc=False):
    driver: Any = None
    nodeName: Any = None
    pool: Any = None
    allNodes: Any = None
    nodeSelector: Any = None
    perDeviceNodeSelection: Any = None
    sharedCounters: Any = None
    devices: list[_Device] | None = None


class _Slice(msgspec.Struct, gc=False):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _SliceSpec | None = None


class _Result(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    request: Any = None
    driver: Any = None
    pool: Any = None
    device: Any = None


class _DeviceAllocation(msgspec.Struct, gc=False):
    results: list[_Result] | None = None


class _Allocation(msgspec.Struct, gc=False):
    devices: _DeviceAllocation | None = None
    nodeSelector: Any = None


class _ClaimStatus(msgspec.Struct, gc=False):
    allocation: _Allocation | None = None
    reservedFor: Any = None


class _Claim(msgspec.Struct, gc=False):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: msgspec.Raw = _NULL
    status: _ClaimStatus | None = None


class _SlicePage(msgspec.Struct, gc=False):
    metadata: Any = None
    items: list[_Slice] | None = None


class _ClaimPage(msgspec.Struct, gc=False):
    metadata: Any = None
    items: list[_Claim] | None = None


_slice_pages = msgspec.json.Decoder(_SlicePage)
_claim_pages = msgspec.json.Decoder(_ClaimPage)
_NO_SPEC = _SliceSpec()


def _listed(meta: _Meta, record: Any) -> Decoded:
    return Decoded(
        {
            "metadata": {
                "name": meta.name,
                "namespace": meta.namespace,
                "resourceVersion": meta.resourceVersion,
            }
        },
        record,
    )


def _typed_page(data: bytes | str, pages: msgspec.json.Decoder[Any], record: Callable[[Any], Any]) -> Page:
    """`data` decoded by `pages` with each item made by `record`, or by `paging.decode` (items as
    dicts) when the typed decoder refuses it. Raises ValueError when `data` is not JSON."""
    try:
        page = pages.decode(data)
    except msgspec.DecodeError:
        return decode(data)
    out: Page = {"items": [_listed(item.metadata, record(item)) for item in page.items or ()]}
    if page.metadata is not None:
        out["metadata"] = page.metadata
    return out


def decode_slice_page(data: bytes | str) -> Page:
    """A ResourceSliceList page (JSON bytes) as a `Page` of `Decoded` items; a page the typed
    decoder refuses is `paging.decode(data)` (items as dicts). Raises ValueError when `data` is
    not JSON."""
    return _typed_page(data, _slice_pages, _slice_record)


def decode_claim_page(data: bytes | str) -> Page:
    """A ResourceClaimList page (JSON bytes) as a `Page` of `Decoded` items; a page the typed
    decoder refuses is `paging.decode(data)` (items as dicts). Raises ValueError when `data` is
    not JSON."""
    return _typed_page(data, _claim_pages, _claim_record)


_last_texts: tuple[Any, ...] = ("", b"", b"", interning.EMPTY, interning.EMPTY)
"""The capacity and attributes text `_maps_of` read last (with the driver), and their maps."""


def _maps_of(capacity: msgspec.Raw, attributes: msgspec.Raw, driver: str) -> tuple[Any, Any]:
    """`dra._maps` of a device's capacity and attributes given as JSON text: those of the device
    read before when the text is the same (a slice's devices, node after node)."""
    global _last_texts
    last = _last_texts  # one read: another reflector's thread may replace it (whole)
    if last[0] == driver and last[1] == capacity and last[2] == attributes:
        return last[3], last[4]
    raw_capacity, raw_attributes = orjson.loads(memoryview(capacity)), orjson.loads(memoryview(attributes))
    maps = _maps(
        raw_capacity if isinstance(raw_capacity, dict) else {},
        raw_attributes if isinstance(raw_attributes, dict) else {},
        driver,
    )
    # Copies: a decoded Raw is a view of the whole page, which the last texts would keep alive.
    _last_texts = (driver, capacity.copy(), attributes.copy(), *maps)
    return maps


def _slice_record(item: _Slice) -> ResourceSliceRecord:
    """`ResourceSliceRecord.from_object` of the same JSON."""
    text = interning.text
    spec = item.spec or _NO_SPEC
    driver = text(spec.driver)
    pool = as_dict(spec.pool)
    pool_name = text(pool.get("name"))
    node_name = text(spec.nodeName)
    generation = pool.get("generation")
    new = tuple.__new__
    devices = []
    for raw in spec.devices or ():
        capacity, attributes = _maps_of(raw.capacity, raw.attributes, driver)
        devices.append(
            Device(new(DeviceId, (driver, pool_name, text(raw.name))), node_name, attributes, capacity)
        )
    return ResourceSliceRecord(
        str(item.metadata.name or ""),
        driver,
        pool_name,
        generation if isinstance(generation, int) else 0,
        node_name,
        spec.allNodes is True,
        isinstance(spec.nodeSelector, dict),
        spec.perDeviceNodeSelection is True,
        tuple(devices),
        tuple(_counter_set(as_dict(raw), "name") for raw in as_list(spec.sharedCounters)),
    )


def _claim_record(item: _Claim) -> ResourceClaimRecord:
    """`ResourceClaimRecord.from_object` of the same JSON."""
    meta, status = item.metadata, item.status
    allocation = status.allocation if status is not None else None
    devices = allocation.devices if allocation is not None else None
    return ResourceClaimRecord(
        str(meta.namespace or ""),
        str(meta.name or ""),
        str(meta.uid or ""),
        _requests_of(item.spec),
        _results(devices.results or []) if devices is not None else (),
        _single_node(as_dict(allocation.nodeSelector)) if allocation is not None else "",
        tuple(
            ConsumerRef(str(c.get("resource") or ""), str(c.get("name") or ""), str(c.get("uid") or ""))
            for c in map(as_dict, as_list(status.reservedFor if status is not None else None))
        ),
    )


_last_spec: tuple[msgspec.Raw, tuple[DeviceRequest, ...]] = (_NULL, ())
"""The claim spec text `_requests_of` read last, and its requests."""


def _requests_of(spec: msgspec.Raw) -> tuple[DeviceRequest, ...]:
    """`dra._claim_requests` of a claim's spec given as JSON text: the requests of the claim read
    before when the text is the same (one template's claims), the spec not decoded again."""
    global _last_spec
    last = _last_spec  # one read: another reflector's thread may replace it (whole)
    if last[0] == spec and spec is not _NULL:
        return last[1]
    requests = _claim_requests(as_dict(orjson.loads(memoryview(spec))))
    _last_spec = (spec.copy(), requests)  # a copy: a decoded Raw is a view of its whole page
    return requests


def _results(results: list[_Result]) -> tuple[AllocatedDevice, ...]:
    """`dra._allocated_all` of the same results (none of them with `consumedCapacity`)."""
    text = interning.text
    new = tuple.__new__
    out = []
    last_driver: Any = None
    last_pool: Any = None
    last_request: Any = None
    driver = pool = request = ""
    for raw in results:
        value = raw.driver
        if value != last_driver or last_driver is None:
            driver = text(value)
            last_driver = value if type(value) is str else None
        value = raw.pool
        if value != last_pool or last_pool is None:
            pool = text(value)
            last_pool = value if type(value) is str else None
        value = raw.request
        if value != last_request or last_request is None:
            request = text(value)
            last_request = value if type(value) is str else None
        out.append(new(AllocatedDevice, (request, new(DeviceId, (driver, pool, text(raw.device))), ())))
    return tuple(out)
