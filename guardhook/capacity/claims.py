"""A pod template's DRA device requests, as resource amounts the solver places.

Two paths lead a pod to devices (Kubernetes DRA docs, KEP-4381 and KEP-5004):

- `spec.resourceClaims[].resourceClaimTemplateName`: each pod gets its own claim stamped from the
  template; every request of it asks `count` devices of a DeviceClass (`allocationMode:
  ExactCount`). Those become requests for the class's column (guardhook.capacity.devices).
- an extended resource in a container's requests that a DeviceClass maps (`nvidia.com/gpu` with
  `spec.extendedResourceName`, or `deviceclass.resource.kubernetes.io/<class>`): counted under
  the class's column.

What is not counted is said in the notes: a template missing from the view, `allocationMode: All`,
requests' own CEL selectors (the class's devices are counted), `firstAvailable` (the first
subrequest is counted), and claims shared by name (`resourceClaimName`: one claim for every pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from guardhook.capacity.devices import DeviceCounts
from guardhook.capacity.shapes import PodShape
from guardhook.cluster.dra import IMPLICIT_EXTENDED_RESOURCE_PREFIX, DeviceRequest
from guardhook.cluster.model import as_dict, pod_claim_refs
from guardhook.cluster.view.store import ClusterView


def with_devices(
    shape: PodShape, template: Mapping[str, Any], namespace: str, view: ClusterView, devices: DeviceCounts
) -> tuple[PodShape, tuple[str, ...]]:
    """`shape` (read from `template`) with its DRA device requests added under their DeviceClass
    columns, and notes on what could not be counted. Hold the view's lock."""
    spec = as_dict(template.get("spec"))
    if not devices.names and not spec.get("resourceClaims"):
        return shape, ()  # no DeviceClass maps a resource and no claims: nothing to count
    requests = dict(shape.requests)
    for name in list(requests):
        column = devices.column_of(name)
        if column is not None and column != name:
            requests[column] = requests.get(column, 0) + requests.pop(name)
    notes: list[str] = []
    for ref in pod_claim_refs(spec):
        if ref.claim_name:
            notes.append(
                f"shared ResourceClaim {ref.claim_name} is one claim for every pod: not counted per pod"
            )
            continue
        claim_template = view.resource_claim_template(namespace, ref.template_name)
        if claim_template is None:
            notes.append(
                f"ResourceClaimTemplate {namespace}/{ref.template_name} is not in the view: "
                "its devices were not counted"
            )
            continue
        for request in claim_template.requests:
            counted, note = _counted(request, devices)
            if note:
                notes.append(f"ResourceClaimTemplate {ref.template_name}: {note}")
            if counted is not None:
                column, amount = counted
                requests[column] = requests.get(column, 0) + amount
    if requests == dict(shape.requests):
        return shape, tuple(notes)
    return replace(shape, requests=tuple(sorted(requests.items()))), tuple(notes)


def _counted(request: DeviceRequest, devices: DeviceCounts) -> tuple[tuple[str, int] | None, str]:
    """(column, devices) one request takes, or None; and what was approximated."""
    note = ""
    if request.alternatives:
        first = request.alternatives[0]
        note = f"request {request.name} has firstAvailable: counted its first subrequest {first.name}"
        request = first
    if request.allocation_mode == "All":
        return None, f"request {request.name} takes All devices of its class: not counted"
    if request.selectors:
        note = (note + "; " if note else "") + f"request {request.name}'s CEL selectors not judged"
    implicit = IMPLICIT_EXTENDED_RESOURCE_PREFIX + request.device_class
    column = devices.column_of(implicit) or implicit  # a class not in the view offers no devices
    return (column, request.count), note
