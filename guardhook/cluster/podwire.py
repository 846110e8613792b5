"""Pod list pages decoded straight into typed structs, and pod records built from those.

A relist of a large cluster is mostly pods (150,000 in issue 26's fleet), and building a
`PodRecord` from a decoded dict costs about twice what the JSON decoding does: every field is
read with `dict.get` and checked for its type, because `PodRecord.from_object` takes whatever a
manifest, a dump or a review may hold. A pod list page from the API server is typed (the API
server serializes `k8s.io/api/core/v1.Pod`), so it is decoded here with msgspec into structs of
only the fields a record reads: the decoder checks each type in C, skips every other field
(managedFields, env, volumes, ...) without building it, and the record is then put together
from attributes. The parts many pods share (a container's resources, the annotations, owner
references and tolerations) are kept as their JSON text (`msgspec.Raw`) and read once per text.

The semantics are `PodRecord.from_object`'s, field for field (tests/test_pod_wire.py checks
both paths give equal records); a part kept as text that is not of the API's types is read by
`from_object`'s own readers. A page msgspec refuses (another field of another type than the API
defines, JSON that is not an object) is decoded as before (`paging.decode`) into dicts, which
`pod_record` hands to `from_object`: a page is never lost to the fast path.
"""

from __future__ import annotations

import functools
import operator
import sys
from collections.abc import Iterable
from typing import Any

import msgspec

from guardhook.cluster import interning
from guardhook.cluster.model import (
    DISRUPTION_CONDITIONS,
    NO_CONDITIONS,
    ConditionRecord,
    OwnerRef,
    PodExtras,
    PodRecord,
    Toleration,
    as_dict,
    pod_claim_names,
    pod_extras,
    readiness_gates,
    scheduling_gates,
    shared_owners,
    timestamp_seconds,
)
from guardhook.cluster.paging import Page, decode
from guardhook.cluster.resources import Resources, pod_requests, shared_pod_requests
from guardhook.wire import KubeObject

_intern = sys.intern

_NULL = msgspec.Raw(b"null")
"""A field the page does not carry, as `msgspec.Raw` (the JSON text `null`)."""


class MetaWire(msgspec.Struct, frozen=True, gc=False):
    """The pod's metadata fields a record reads (meta/v1 ObjectMeta). The annotations and owner
    references stay JSON text (`msgspec.Raw`, a view of the page): the pods of one group or
    controller carry the same text, so their parts are looked up by it (`_shared_annotations`,
    `_shared_owners`) and built only for the first of them.

    The fields of these structs are declared in the order the API server writes them (k8s.io/api's
    field order): msgspec looks a key up among a struct's fields from the one after the last it
    found, so each is found at the first guess."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""  # noqa: N815
    creationTimestamp: str | None = None  # noqa: N815
    deletionTimestamp: str | None = None  # noqa: N815
    labels: dict[str, str] = {}
    annotations: msgspec.Raw = _NULL
    ownerReferences: msgspec.Raw = _NULL  # noqa: N815


_NO_RESOURCES = _NULL


class ContainerWire(msgspec.Struct, frozen=True, gc=False):
    """A container's resources as the JSON text the API server wrote (`msgspec.Raw`, a view of
    the page): the pods of one template carry the same text, so their requests are looked up by
    it (`_requests_of_text`) and the text is decoded only for the first of them."""

    resources: msgspec.Raw = _NO_RESOURCES


class SpecWire(msgspec.Struct, frozen=True, gc=False):
    """The pod spec fields a record reads. The rare ones (init containers, overhead, claims and
    gates) stay as decoded JSON and go through the same readers as `from_object`'s."""

    initContainers: Any = None  # noqa: N815
    containers: list[ContainerWire] = []
    nodeName: str = ""  # noqa: N815
    tolerations: msgspec.Raw = _NULL  # every pod of a fleet: the API server's defaults, as text
    readinessGates: Any = None  # noqa: N815
    overhead: Any = None
    schedulingGates: Any = None  # noqa: N815
    resourceClaims: Any = None  # noqa: N815
    resources: Any = None
    schedulingGroup: Any = None  # noqa: N815


class ConditionWire(msgspec.Struct, frozen=True, gc=False):
    type: str | None = None
    status: str | None = None
    lastTransitionTime: str | None = None  # noqa: N815
    reason: str | None = None
    message: str | None = None


class StatusWire(msgspec.Struct, frozen=True, gc=False):
    phase: str = ""
    conditions: list[ConditionWire] = []
    resourceClaimStatuses: Any = None  # noqa: N815
    extendedResourceClaimStatus: Any = None  # noqa: N815
    allocatedResources: Any = None  # noqa: N815
    resources: Any = None


_NO_META, _NO_SPEC, _NO_STATUS = MetaWire(), SpecWire(), StatusWire()


class PodWire(msgspec.Struct, frozen=True, gc=False):
    """One item of a pod list page, as `decode_pod_page` reads it."""

    metadata: MetaWire = _NO_META
    spec: SpecWire = _NO_SPEC
    status: StatusWire = _NO_STATUS


class PodListWire(msgspec.Struct, frozen=True, gc=False):
    metadata: dict[str, Any] = {}
    items: list[PodWire] | None = None


_decoder = msgspec.json.Decoder(PodListWire)


def decode_pod_page(data: bytes | str) -> Page:
    """A PodList page (JSON bytes as the API server sent them) as a `Page` whose items are
    `PodWire` structs; a page the typed decoder refuses is `paging.decode(data)` (items as
    dicts). Raises ValueError when `data` is not JSON."""
    try:
        page = _decoder.decode(data)
    except msgspec.DecodeError:
        return decode(data)
    return {"metadata": page.metadata, "items": page.items or []}


def pod_record(obj: KubeObject | PodWire) -> PodRecord:
    """The record of a pod given as decoded JSON (`PodRecord.from_object`) or as a list page's
    `PodWire` (the same record, built from typed fields)."""
    if type(obj) is PodWire:
        return _record(obj)
    return PodRecord.from_object(obj)  # type: ignore[arg-type]


def pod_records(objects: Iterable[KubeObject | PodWire]) -> list[PodRecord]:
    """`[pod_record(obj) for obj in objects]` (a slice of a list page), one call fewer a pod."""
    return [_record(obj) if type(obj) is PodWire else PodRecord.from_object(obj) for obj in objects]  # type: ignore[arg-type]


def item_version(obj: KubeObject | PodWire) -> str:
    """metadata.resourceVersion of a list page's item, decoded JSON or PodWire ("" when absent)."""
    if type(obj) is PodWire:
        return obj.metadata.resourceVersion
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def item_versions(objects: Iterable[KubeObject | PodWire]) -> list[str]:
    """`[item_version(obj) for obj in objects]`, a PodWire's read without a call."""
    return [obj.metadata.resourceVersion if type(obj) is PodWire else item_version(obj) for obj in objects]


def _record(pod: PodWire) -> PodRecord:
    global _last_shared  # noqa: PLW0603 (a one-entry memo, replaced whole: see `_last_shared`)
    meta, spec, status = pod.metadata, pod.spec, pod.status
    conditions = status.conditions
    if conditions:
        # As `_conditions` (the first entry of a type wins), read without building the map: the
        # types in one C-level pass, then C-level searches of that list.
        types = list(map(_type_of, conditions))
        ready = "Ready" in types and conditions[types.index("Ready")].status == "True"
        containers_ready = (
            "ContainersReady" in types and conditions[types.index("ContainersReady")].status == "True"
        )
        disrupted = _DISRUPTED in types or _TERMINATING in types
    else:
        ready = containers_ready = disrupted = False
    containers = spec.containers
    plain = not (
        spec.readinessGates
        or spec.schedulingGates
        or spec.resourceClaims
        or spec.schedulingGroup
        or status.resourceClaimStatuses
        or status.extendedResourceClaimStatus
        or disrupted
    )
    if plain and len(containers) == 1 and not (spec.initContainers or spec.overhead or spec.resources):
        # Most pods. Their owners, annotations, tolerations and requests are looked up by their
        # texts together, first in the one-entry memo of the pod before: a list returns the pods
        # of one group or template together, so the next pod usually carries the very same texts,
        # compared as they lie in the page (`msgspec.Raw` compares by content), neither copied nor
        # hashed. Else each in its own cache, by a copy of its text.
        texts = (meta.ownerReferences, meta.annotations, spec.tolerations, containers[0].resources)
        last = _last_shared
        if texts == last[0]:
            owners, annotations, requests, extras = last[1]
        else:
            owners = _owners_of(bytes(texts[0]))
            annotations = _annotations_of(bytes(texts[1]))
            extras = _tolerations_only(bytes(texts[2]))
            requests = _requests_of_text(bytes(texts[3]))
            # Copies (`Raw.copy`): the memo must not hold the page the texts lie in.
            _last_shared = (tuple(text.copy() for text in texts), (owners, annotations, requests, extras))
    else:
        owners = _owners_of(bytes(meta.ownerReferences))
        annotations = _annotations_of(bytes(meta.annotations))
        if len(containers) == 1 and not (spec.initContainers or spec.overhead or spec.resources):
            requests = _requests_of_text(bytes(containers[0].resources))
        elif not (spec.resources and (status.allocatedResources or status.resources)):
            requests = _requests(spec)
        else:
            requests = _resized_requests(spec, status)
        extras = (
            _tolerations_only(bytes(spec.tolerations))
            if plain
            else _extras(spec, status, _conditions(conditions) if conditions else _NONE_FOUND)
        )
    labels = meta.labels
    # Positional, in PodRecord's field order: msgspec matches keyword arguments by name (~0.3 us a pod).
    return PodRecord(
        _intern(meta.namespace),
        meta.name,  # unique per pod: not interned (guardhook.cluster.interning)
        meta.uid,
        # interning.typed_str_map, inline (a call fewer a pod)
        {_intern(key): _intern(value) for key, value in labels.items()} if labels else interning.EMPTY,
        annotations,
        _intern(spec.nodeName),
        _intern(status.phase),
        ready,
        bool(meta.deletionTimestamp),
        owners,
        requests,
        containers_ready,
        _seconds(meta.creationTimestamp) if meta.creationTimestamp else 0.0,
        extras,
    )


_type_of = operator.attrgetter("type")
_DISRUPTED, _TERMINATING = DISRUPTION_CONDITIONS

_last_shared: tuple[tuple[msgspec.Raw, ...], tuple[Any, ...]] = ((), ())
"""The texts (owner references, annotations, tolerations, a single container's resources) of
the last plain pod `_record` read and what was made of them: (texts, (owners, annotations,
requests, extras)). Replaced whole, never mutated, so a reader on another thread sees one pair or
the other, never a mix; what it holds is what the caches would answer for those texts."""


SHARED_TEXT = 1024
"""The longest JSON text (bytes) of a pod's annotations, owner references or tolerations whose
parts are remembered by that text (`_shared_annotations`, ...): the pods of one group, controller
or fleet carry the same text, and a longer one (a tenant's large annotation) would make each cache
entry as large (at most `interning.CACHE_SIZE` entries each)."""


class OwnerWire(msgspec.Struct, frozen=True, gc=False):
    """metadata.ownerReferences[] (meta/v1 OwnerReference), as `_read_owners` decodes them."""

    apiVersion: str = ""  # noqa: N815
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


_annotations_decoder = msgspec.json.Decoder(dict[str, str] | None)
_owners_decoder = msgspec.json.Decoder(list[OwnerWire] | None)


def _read_annotations(text: bytes) -> dict[str, str]:
    # A text not of the API's types (a value that is no string) reads as from_object reads it:
    # decoded as the dict path decodes a page, then read by its reader.
    try:
        notes = _annotations_decoder.decode(text)
    except msgspec.DecodeError:
        return interning.shared_str_map(decode(text))
    return interning.typed_str_map(notes) if notes else interning.EMPTY


def _read_owners(text: bytes) -> tuple[OwnerRef, ...]:
    # As _read_annotations: typed (the pods of each LWS group have an owner of their own, so a
    # relist reads many of these), else as from_object reads them.
    try:
        refs = _owners_decoder.decode(text)
    except msgspec.DecodeError:
        return OwnerRef.parse_all_shared({"ownerReferences": decode(text)})
    if not refs:
        return ()
    return shared_owners(tuple((r.kind, r.name, r.uid, r.apiVersion, r.controller is True) for r in refs))


def _read_tolerations(text: bytes) -> tuple[Toleration, ...]:
    return Toleration.parse_all_shared({"tolerations": decode(text)})


def _read_tolerations_only(text: bytes) -> PodExtras:
    # The extras of a pod without gates, claims, a PodGroup or a disruption condition (most pods):
    # its tolerations alone, so the extras are looked up by their text.
    return pod_extras("", _read_tolerations(text), (), (), (), NO_CONDITIONS, "")


_shared_annotations = functools.lru_cache(maxsize=interning.CACHE_SIZE)(_read_annotations)
_shared_owners = functools.lru_cache(maxsize=interning.CACHE_SIZE)(_read_owners)
_shared_tolerations_only = functools.lru_cache(maxsize=interning.CACHE_SIZE)(_read_tolerations_only)


def _owners_of(text: bytes) -> tuple[OwnerRef, ...]:
    return _shared_owners(text) if len(text) <= SHARED_TEXT else _read_owners(text)


def _annotations_of(text: bytes) -> dict[str, str]:
    return _shared_annotations(text) if len(text) <= SHARED_TEXT else _read_annotations(text)


def _tolerations_only(text: bytes) -> PodExtras:
    return _shared_tolerations_only(text) if len(text) <= SHARED_TEXT else _read_tolerations_only(text)


def _extras(spec: SpecWire, status: StatusWire, found: dict[str, ConditionWire]) -> PodExtras:
    """The PodExtras of a pod with gates, claims, a PodGroup or a disruption condition."""
    gates = readiness_gates({"readinessGates": spec.readinessGates}) if spec.readinessGates else ()
    claimed = spec.resourceClaims or status.resourceClaimStatuses or status.extendedResourceClaimStatus
    return pod_extras(
        _disruption(found) if found else "",
        _read_tolerations(bytes(spec.tolerations)),
        scheduling_gates({"schedulingGates": spec.schedulingGates}) if spec.schedulingGates else (),
        _claims(spec, status) if claimed else (),
        gates,
        _gate_conditions(found, gates) if gates else NO_CONDITIONS,
        _intern(str(as_dict(spec.schedulingGroup).get("podGroupName") or "")) if spec.schedulingGroup else "",
    )


_NONE_FOUND: dict[str, ConditionWire] = {}
"""`_conditions` of a pod without conditions (never mutated)."""

_seconds = functools.lru_cache(maxsize=interning.CACHE_SIZE)(timestamp_seconds)
"""`model.timestamp_seconds`, remembered: the pods of one rollout were created within the same
seconds, and a list returns them together."""


def _conditions(entries: list[ConditionWire]) -> dict[str, ConditionWire]:
    # As model.conditions: by type, in the order sent, the first entry of a type wins.
    found: dict[str, ConditionWire] = {}
    for entry in entries:
        kind = entry.type
        if kind not in found and kind is not None:
            found[kind] = entry
    return found


def _disruption(found: dict[str, ConditionWire]) -> str:
    # As model.disruption_condition.
    for kind, entry in found.items():
        if kind in DISRUPTION_CONDITIONS and entry.status == "True":
            return f"{kind}/{entry.reason or ''}"
    return ""


def _gate_conditions(found: dict[str, ConditionWire], gates: tuple[str, ...]) -> dict[str, ConditionRecord]:
    # As model.gate_conditions.
    return {
        gate: ConditionRecord(
            status=entry.status or "",
            reason=entry.reason or "",
            message=entry.message or "",
            last_transition_time=entry.lastTransitionTime or "",
        )
        for gate in gates
        if (entry := found.get(gate)) is not None
    }


def _requests(spec: SpecWire) -> Resources:
    """As `resources.shared_pod_requests` of the dict spec: looked up by the containers' resources
    as JSON text when there are no init containers, no overhead and no pod-level resources."""
    containers = spec.containers
    if not spec.initContainers and not spec.overhead and not spec.resources:
        if len(containers) == 1:  # most pods: the text itself is the key, no tuple made
            return _requests_of_text(bytes(containers[0].resources))
        return _requests_of_text(tuple(bytes(container.resources) for container in containers))
    return shared_pod_requests(_dict_spec(spec))


@functools.lru_cache(maxsize=interning.CACHE_SIZE)
def _requests_of_text(texts: bytes | tuple[bytes, ...]) -> Resources:
    # The containers' resources decoded as `from_object` reads them (guardhook.cluster.paging's
    # decoder: a value of another type than the API's is read, not refused), then shared.
    each = texts if isinstance(texts, tuple) else (texts,)
    containers = [{"resources": decode(text)} for text in each]
    return shared_pod_requests({"containers": containers})


def _dict_spec(spec: SpecWire) -> dict[str, Any]:
    """The spec fields `resources.pod_requests` reads, as decoded JSON."""
    return {
        "containers": [{"resources": decode(bytes(container.resources))} for container in spec.containers],
        "initContainers": spec.initContainers,
        "overhead": spec.overhead,
        "resources": spec.resources,
    }


def _resized_requests(spec: SpecWire, status: StatusWire) -> Resources:
    """A pod mid pod-level resize: `resources.pod_requests` with its status (not shared)."""
    return pod_requests(
        _dict_spec(spec),
        {
            "allocatedResources": status.allocatedResources,
            "resources": status.resources,
            "conditions": [{"type": c.type, "reason": c.reason} for c in status.conditions],
        },
    )


def _claims(spec: SpecWire, status: StatusWire) -> tuple[str, ...]:
    return pod_claim_names(
        {"resourceClaims": spec.resourceClaims},
        {
            "resourceClaimStatuses": status.resourceClaimStatuses,
            "extendedResourceClaimStatus": status.extendedResourceClaimStatus,
        },
    )
