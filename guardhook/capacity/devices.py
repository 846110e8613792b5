"""DRA devices as capacity columns: how many devices of each DeviceClass are free on each node.

A node's devices come from its ResourceSlices (guardhook.cluster.dra.devices_by_node: node-local
devices, newest pool generation). A device counts for a DeviceClass when the class's CEL selectors
hold for it (guardhook.cluster.dra.ClassMatcher); when they cannot be judged without Kubernetes'
own CEL library the device is counted and the class is reported as `unjudged`. A device is free
when no ResourceClaim's `status.allocation` holds it and no NoSchedule / NoExecute taint (its own,
or a DeviceTaintRule's) is on it — the scheduler's allocator does not hand such devices to a claim
that does not tolerate them, and claims guardhook counts carry no device tolerations.

Each class is counted under one resource name, `DeviceClassRecord.column`: its
`extendedResourceName` (KEP-5004), else the implicit `deviceclass.resource.kubernetes.io/<class>`.
Both names of a class map to that column. On a node whose `allocatable` lists the name (a device
plugin serves it there), the scheduler does not use DRA for it, and neither does this module.
A device that matches two classes counts for both (the model assumes classes do not overlap).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from guardhook.cluster.dra import (
    FILTERING_DEVICE_EFFECTS,
    ClassMatcher,
    DeviceClassRecord,
    DeviceId,
    DeviceTaintRuleRecord,
    ResourceClaimRecord,
    effective_taints,
)
from guardhook.cluster.dra import Device as DraDevice


@dataclass
class DeviceCounts:
    """Free DRA devices per DeviceClass column and node row.

    `free[column]`: int64 per row, devices of the class neither allocated nor tainted.
    `published[column]`: devices of the class per row, whatever their state.
    `names`: every resource name that requests a class → its column.
    `classes`: column → DeviceClass name. `unjudged`: classes whose selectors were not judged.
    `tainted`: column → devices kept out by a NoSchedule / NoExecute device taint.
    """

    rows: int
    free: dict[str, np.ndarray] = field(default_factory=dict)
    published: dict[str, np.ndarray] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)
    unjudged: set[str] = field(default_factory=set)
    tainted: dict[str, int] = field(default_factory=dict)
    placed: dict[DeviceId, tuple[int, tuple[str, ...]]] = field(default_factory=dict)
    """Each counted device's row and columns."""
    blocked: set[DeviceId] = field(default_factory=set)
    """Counted devices kept out of `free` by a taint."""

    def column_of(self, resource: str) -> str | None:
        """The device column `resource` is counted under, or None when no DeviceClass maps it."""
        return self.names.get(resource)


def count_published(
    classes: Iterable[DeviceClassRecord],
    devices_by_node: Mapping[str, list[DraDevice]],
    row_of: Mapping[str, int],
    rows: int,
    rules: Iterable[DeviceTaintRuleRecord],
    matcher: ClassMatcher,
) -> DeviceCounts:
    """Devices per class column and row (`row_of` maps node names to rows; devices of nodes not
    in it are left out). Allocation is applied separately (`apply_allocation`)."""
    counts = DeviceCounts(rows)
    classes = sorted(classes, key=lambda c: c.name)
    by_name = {c.name: c for c in classes}
    rules = list(rules)
    for device_class in classes:
        column = device_class.column
        counts.classes[column] = device_class.name
        counts.published[column] = np.zeros(rows, dtype=np.int64)
        counts.free[column] = np.zeros(rows, dtype=np.int64)
        counts.tainted[column] = 0
        for name in device_class.resource_names:
            counts.names.setdefault(name, column)
    for node, devices in devices_by_node.items():
        row = row_of.get(node)
        if row is None or row >= rows:
            continue
        for device in devices:
            matched = _matching_columns(device, classes, matcher, counts)
            if not matched:
                continue
            counts.placed[device.id] = (row, matched)
            applying = [r for r in rules if _rule_applies(r, device, by_name, matcher)]
            blocked = any(t.effect in FILTERING_DEVICE_EFFECTS for t in effective_taints(device, applying))
            if blocked:
                counts.blocked.add(device.id)
            for column in matched:
                counts.published[column][row] += 1
                if blocked:
                    counts.tainted[column] += 1
                else:
                    counts.free[column][row] += 1
    return counts


def _rule_applies(
    rule: DeviceTaintRuleRecord,
    device: DraDevice,
    classes: Mapping[str, DeviceClassRecord],
    matcher: ClassMatcher,
) -> bool:
    """Whether a DeviceTaintRule selects `device`: driver / pool / device name, and (v1alpha3) the
    named DeviceClass and CEL selectors, judged like a class's (a class not in the view matches
    nothing; a selector that cannot be judged counts as matching)."""
    if not rule.matches_id(device.id):
        return False
    if rule.device_class:
        device_class = classes.get(rule.device_class)
        if device_class is None or matcher.matches(device_class, device) is False:
            return False
    if rule.selectors:
        as_class = DeviceClassRecord(f"DeviceTaintRule {rule.name}", rule.selectors, "")
        return matcher.matches(as_class, device) is not False
    return True


def _matching_columns(
    device: DraDevice, classes: list[DeviceClassRecord], matcher: ClassMatcher, counts: DeviceCounts
) -> tuple[str, ...]:
    matched = []
    for device_class in classes:
        verdict = matcher.matches(device_class, device)
        if verdict is None:
            counts.unjudged.add(device_class.name)
        if verdict is not False:
            matched.append(device_class.column)
    return tuple(matched)


class Allocation:
    """Devices held by ResourceClaims' allocations, kept from claim changes (a reference count
    per device, so a device two claims name is freed only when both let go)."""

    def __init__(self) -> None:
        self.refs: dict[DeviceId, int] = {}

    def change(
        self, old: ResourceClaimRecord | None, new: ResourceClaimRecord | None
    ) -> list[tuple[DeviceId, int]]:
        """Apply one claim change; returns the devices that became taken (+1) or free (-1)."""
        moved: list[tuple[DeviceId, int]] = []
        for entry in {e.id for e in (old.allocated if old else ())}:
            count = self.refs.get(entry, 0) - 1
            if count <= 0:
                self.refs.pop(entry, None)
                moved.append((entry, -1))
            else:
                self.refs[entry] = count
        for entry in {e.id for e in (new.allocated if new else ())}:
            count = self.refs.get(entry, 0) + 1
            self.refs[entry] = count
            if count == 1:
                moved.append((entry, +1))
        return moved


def apply_allocation(published: DeviceCounts, taken: Iterable[DeviceId]) -> DeviceCounts:
    """A copy of `published` with every device in `taken` (allocated to some claim) taken out of
    `free` (a tainted device is not free already)."""
    counts = DeviceCounts(
        published.rows,
        free={column: array.copy() for column, array in published.free.items()},
        published=published.published,
        names=published.names,
        classes=published.classes,
        unjudged=published.unjudged,
        tainted=published.tainted,
        placed=published.placed,
        blocked=published.blocked,
    )
    for device in taken:
        take(counts, device, +1)
    return counts


def take(counts: DeviceCounts, device: DeviceId, sign: int) -> None:
    """Take (`sign` +1) or free (-1) one counted, untainted device in `counts.free`, in place."""
    placed = counts.placed.get(device)
    if placed is None or device in counts.blocked:
        return
    row, columns = placed
    for column in columns:
        counts.free[column][row] -= sign
