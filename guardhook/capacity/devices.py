"""DRA devices as capacity columns: how many devices of each DeviceClass are free on each node.

A node's devices come from its ResourceSlices (node-local devices, newest generation of each
pool, as guardhook.cluster.dra.devices_by_node). A device counts for a DeviceClass when the
class's CEL selectors hold for it (guardhook.cluster.dra.ClassMatcher); when they cannot be judged
without Kubernetes' own CEL library the device is counted and the class is reported as
`unjudged`. A device is free
when no ResourceClaim's `status.allocation` holds it and no NoSchedule / NoExecute taint (its own,
or a DeviceTaintRule's) is on it — the scheduler's allocator does not hand such devices to a claim
that does not tolerate them, and claims guardhook counts carry no device tolerations.

Each class is counted under one resource name, `DeviceClassRecord.column`: its
`extendedResourceName` (KEP-5004), else the implicit `deviceclass.resource.kubernetes.io/<class>`.
Both names of a class map to that column. On a node whose `allocatable` lists the name (a device
plugin serves it there), the scheduler does not use DRA for it, and neither does this module.
A device that matches two classes counts for both (the model assumes classes do not overlap).

The table is built once and then kept: a ResourceSlice change recounts its pool only, a
ResourceClaim change moves the devices it takes or frees, a node seen for the first time widens
the rows (and counts the pools waiting for it). Only a DeviceClass or DeviceTaintRule change
rebuilds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from guardhook.cluster.dra import (
    FILTERING_DEVICE_EFFECTS,
    ClassMatcher,
    DeviceClassRecord,
    DeviceId,
    DeviceTaintRuleRecord,
    ResourceClaimRecord,
    ResourceSliceRecord,
    effective_taints,
    rule_selects,
)
from guardhook.cluster.dra import Device as DraDevice

PoolKey = tuple[str, str]
"""(driver, pool name)."""


class DeviceCounts:
    """Free DRA devices per DeviceClass column and node row, kept current incrementally.

    `free[column]`: int64 per row, devices of the class neither allocated nor tainted.
    `published[column]`: devices of the class per row, whatever their state.
    `names`: every resource name that requests a class → its column.
    `classes`: column → DeviceClass name. `unjudged`: classes whose selectors were not judged.
    `tainted`: column → devices kept out by a NoSchedule / NoExecute device taint.
    `placed`: each counted device's row and columns; `blocked`: counted devices a taint keeps out.
    `allocated`: devices ResourceClaims hold (a live reference count kept by an Allocation).
    """

    def __init__(
        self,
        rows: int,
        classes: Iterable[DeviceClassRecord] = (),
        rules: Iterable[DeviceTaintRuleRecord] = (),
        matcher: ClassMatcher | None = None,
        allocated: Mapping[DeviceId, int] | None = None,
    ) -> None:
        self.rows = rows
        self.free: dict[str, np.ndarray] = {}
        self.published: dict[str, np.ndarray] = {}
        self.names: dict[str, str] = {}
        self.classes: dict[str, str] = {}
        self.unjudged: set[str] = set()
        self.tainted: dict[str, int] = {}
        self.placed: dict[DeviceId, tuple[int, tuple[str, ...]]] = {}
        self.blocked: set[DeviceId] = set()
        self.allocated: Mapping[DeviceId, int] = allocated if allocated is not None else {}
        self._class_list = sorted(classes, key=lambda c: c.name)
        self._by_name = {c.name: c for c in self._class_list}
        self._rules = list(rules)
        self._matcher = matcher or ClassMatcher()
        self._slices: dict[PoolKey, dict[str, ResourceSliceRecord]] = {}
        self._counted: dict[PoolKey, list[DeviceId]] = {}
        self._waiting: set[PoolKey] = set()
        for device_class in self._class_list:
            column = device_class.column
            self.classes[column] = device_class.name
            self.published[column] = np.zeros(rows, dtype=np.int64)
            self.free[column] = np.zeros(rows, dtype=np.int64)
            self.tainted[column] = 0
            for name in device_class.resource_names:
                self.names.setdefault(name, column)

    def column_of(self, resource: str) -> str | None:
        """The device column `resource` is counted under, or None when no DeviceClass maps it."""
        return self.names.get(resource)

    # ---- slices and rows ---------------------------------------------------------------------

    def set_slice(
        self, old: ResourceSliceRecord | None, new: ResourceSliceRecord | None, row_of: Mapping[str, int]
    ) -> None:
        """Apply one ResourceSlice change (old None: added; new None: removed) and recount the
        pools it touches."""
        touched = set()
        if old is not None:
            self._slices.get((old.driver, old.pool), {}).pop(old.name, None)
            touched.add((old.driver, old.pool))
        if new is not None:
            self._slices.setdefault((new.driver, new.pool), {})[new.name] = new
            touched.add((new.driver, new.pool))
        for pool in touched:
            self._recount(pool, row_of)

    def grow(self, rows: int, row_of: Mapping[str, int]) -> None:
        """Widen to `rows` rows (nodes first seen) and count the pools that waited for them."""
        if rows <= self.rows:
            return
        pad = np.zeros(rows - self.rows, dtype=np.int64)
        for column in self.published:
            self.published[column] = np.concatenate([self.published[column], pad])
            self.free[column] = np.concatenate([self.free[column], pad])
        self.rows = rows
        for pool in list(self._waiting):
            self._recount(pool, row_of)

    def _recount(self, pool: PoolKey, row_of: Mapping[str, int]) -> None:
        for gone in self._counted.pop(pool, []):
            self._count(gone, -1)
        self._waiting.discard(pool)
        slices = self._slices.get(pool)
        if not slices:
            self._slices.pop(pool, None)
            return
        newest = max(piece.generation for piece in slices.values())  # only the newest generation counts
        counted = []
        for piece in slices.values():
            if piece.generation != newest:
                continue
            for device in piece.devices:
                if not device.node_name or device.id in self.placed:
                    continue  # reachable from several nodes (no node's capacity), or named twice
                row = row_of.get(device.node_name)
                if row is None or row >= self.rows:
                    self._waiting.add(pool)  # its node is not in the index yet
                    continue
                columns = self._matching_columns(device)
                if not columns:
                    continue
                self.placed[device.id] = (row, columns)
                rules = [r for r in self._rules if _rule_applies(r, device, self._by_name, self._matcher)]
                if any(t.effect in FILTERING_DEVICE_EFFECTS for t in effective_taints(device, rules)):
                    self.blocked.add(device.id)
                self._count(device.id, +1)
                counted.append(device.id)
        if counted:
            self._counted[pool] = counted

    def _count(self, device: DeviceId, sign: int) -> None:
        """Add (+1) or remove (-1) one placed device's contribution to every count."""
        row, columns = self.placed[device]
        blocked = device in self.blocked
        available = not blocked and not self.allocated.get(device)
        for column in columns:
            self.published[column][row] += sign
            if blocked:
                self.tainted[column] += sign
            elif available:
                self.free[column][row] += sign
        if sign < 0:
            del self.placed[device]
            self.blocked.discard(device)

    def _matching_columns(self, device: DraDevice) -> tuple[str, ...]:
        matched = []
        for device_class in self._class_list:
            verdict = self._matcher.matches(device_class, device)
            if verdict is None:
                self.unjudged.add(device_class.name)
            if verdict is not False:
                matched.append(device_class.column)
        return tuple(matched)

    # ---- claims ------------------------------------------------------------------------------

    def take(self, device: DeviceId, sign: int) -> None:
        """A device became allocated (`sign` +1) or free (-1): move it out of / into `free`
        (devices not counted here, or tainted, change nothing)."""
        placed = self.placed.get(device)
        if placed is None or device in self.blocked:
            return
        row, columns = placed
        for column in columns:
            self.free[column][row] -= sign


def build_counts(
    rows: int,
    classes: Iterable[DeviceClassRecord],
    slices: Iterable[ResourceSliceRecord],
    rules: Iterable[DeviceTaintRuleRecord],
    row_of: Mapping[str, int],
    matcher: ClassMatcher,
    allocated: Mapping[DeviceId, int],
) -> DeviceCounts:
    """The table for these classes, slices and rules over `rows` rows (`row_of`: node name →
    row), with the devices in `allocated` (a live reference count, see Allocation) not free."""
    counts = DeviceCounts(rows, classes, rules, matcher, allocated)
    for piece in slices:
        counts._slices.setdefault((piece.driver, piece.pool), {})[piece.name] = piece
    for pool in list(counts._slices):
        counts._recount(pool, row_of)
    return counts


def _rule_applies(
    rule: DeviceTaintRuleRecord,
    device: DraDevice,
    classes: Mapping[str, DeviceClassRecord],
    matcher: ClassMatcher,
) -> bool:
    """Whether a DeviceTaintRule selects `device` (dra.rule_selects) for counting free devices: a
    DeviceClass not in the view matches nothing; a selector that cannot be judged counts as
    matching."""
    if rule.device_class and rule.device_class not in classes:
        return False
    return rule_selects(rule, device.id, device, classes.get, matcher) is not False


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
