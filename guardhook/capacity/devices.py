"""DRA devices as capacity columns: how many devices of each DeviceClass are free on each node.

A node's devices come from its ResourceSlices (node-local devices, newest generation of each
pool, as guardhook.cluster.dra.devices_by_node). A device counts for a DeviceClass when the
class's CEL selectors hold for it (guardhook.cluster.dra.ClassMatcher); when they cannot be judged
without Kubernetes' own CEL library the device is counted and the class is reported as
`unjudged`. A device is free
when no ResourceClaim's `status.allocation` holds it and no NoSchedule / NoExecute taint (its own,
or a DeviceTaintRule's) is on it — the scheduler's allocator does not hand such devices to a claim
that does not tolerate them, and claims guardhook counts carry no device tolerations.

Partitionable devices (KEP-4815) and shared devices (KEP-5075) are counted by the structured
allocator's rules (k8s.io/dynamic-resource-allocation/structured, `checkAvailableCounters` and
consumable_capacity.go), pool by pool: a pool's counters are its slices' `sharedCounters` less
what its allocated devices consume (`consumesCounters`); a device that consumes counters is free
only when, with its own consumption taken too, no counter of the pool goes below zero. So one
allocated `1g.24gb` MIG partition keeps its whole GPU from being free. For each DeviceClass
column the free devices of such a pool are taken greedily, those consuming the fewest counters
first, each taking its counters (a count of devices that can be allocated together, not of
devices each free alone). A device with `allowMultipleAllocations` counts once per allocation
its capacity still covers: per capacity, what is left after the claims' `consumedCapacity`,
divided by what one allocation takes (`requestPolicy.default`, else the whole capacity) — the
request's own `capacity.requests` is not read (see `pool_free`).

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
from typing import Any

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

MAX_SHARES = 1024
"""The most allocations one shared device is counted for (a device whose capacities set no limit
would otherwise count without end)."""

COLUMNS_KEPT = 4096
"""Distinct device maps whose matching columns a table remembers before it forgets them all."""

Counters = dict[str, dict[str, int]]
"""Counter set name -> counter name -> amount."""


def available_counters(slices: Iterable[ResourceSliceRecord], allocated: Mapping[DeviceId, int]) -> Counters:
    """A pool's counters left (structured allocator, checkAvailableCounters): every counter set its
    `slices` (one pool, newest generation) publish in `sharedCounters`, less what each device in
    `allocated` consumes. A counter may go negative (then nothing more fits); consumption of a
    counter no set publishes is ignored, as the allocator does."""
    slices = list(slices)
    left: Counters = {cs.name: dict(cs.counters) for s in slices for cs in s.shared_counters}
    for piece in slices:
        for device in piece.devices:
            if device.consumes and allocated.get(device.id):
                _consume(left, device, -1)
    return left


def _consume(left: Counters, device: DraDevice, sign: int) -> None:
    for consumption in device.consumes:
        counters = left.get(consumption.name)
        if counters is None:
            continue
        for name, amount in consumption.counters:
            if name in counters:
                counters[name] += sign * amount


def counters_fit(left: Counters, device: DraDevice) -> bool:
    """Whether `device` can be allocated from the counters `left`: with its consumption taken, no
    counter of the pool is below zero (the allocator compares every counter of every set)."""
    if not device.consumes:
        return True
    return not overdrawn(left) and _own_fit(left, device)


def overdrawn(left: Counters) -> bool:
    """Whether a counter of the pool is already below zero (then no device consuming counters fits)."""
    return any(value < 0 for counters in left.values() for value in counters.values())


def _own_fit(left: Counters, device: DraDevice) -> bool:
    """Whether the counters `device` consumes stay at or above zero. With no counter of the pool
    below zero (checked once by the caller) this is the allocator's whole check: taking a device
    lowers only the counters it consumes."""
    for consumption in device.consumes:
        counters = left.get(consumption.name)
        if counters is None:
            continue
        for name, amount in consumption.counters:
            value = counters.get(name)
            if value is not None and value - amount < 0:
                return False
    return True


def shares_left(device: DraDevice, consumed: Mapping[str, int]) -> int:
    """How many more allocations a device takes: 1 for an ordinary device (callers check it is not
    allocated); for one with `allowMultipleAllocations`, per capacity what `consumed` (the claims'
    consumedCapacity) leaves, divided by one allocation's default share, the least over its
    capacities (MAX_SHARES when none limits it)."""
    if not device.multiple:
        return 1
    shares = MAX_SHARES
    per = dict(device.share)
    for name, full in device.capacity.items():
        each = per.get(name, full)
        if each > 0:
            shares = min(shares, (full - consumed.get(name, 0)) // each)
    return max(shares, 0)


def pool_free(
    devices: Iterable[tuple[DraDevice, int, tuple[str, ...]]],
    left: Counters,
    allocated: Mapping[DeviceId, int],
    consumed: Mapping[DeviceId, Mapping[str, int]],
) -> tuple[dict[tuple[int, str], int], dict[str, int]]:
    """Free devices of one partitioned pool: ((row, column) -> count, column -> devices that are
    not allocated but cannot all be, their counters being taken). `devices` are the pool's
    counted, untainted devices with their row and columns; `left` its available_counters.

    Per column, the most devices that can be allocated together (each within the counters the
    others leave, as the allocator checks them one after another): devices consuming from
    disjoint counter sets are independent, and within one group of sets the best choice is
    searched exactly when the group is small (MAX_EXACT), else taken greedily, the devices
    consuming the smallest share of the counters first."""
    free: dict[tuple[int, str], int] = {}
    held: dict[str, int] = {}
    by_column: dict[str, list[tuple[DraDevice, int]]] = {}
    for device, row, columns in devices:
        for column in columns:
            by_column.setdefault(column, []).append((device, row))
    for column, members in by_column.items():
        needing: list[tuple[DraDevice, int]] = []
        for device, row in members:
            taken = bool(allocated.get(device.id))
            if taken and not device.multiple:
                continue
            if not taken and device.consumes:
                needing.append((device, row))
                continue
            _add(free, (row, column), shares_left(device, consumed.get(device.id, {})))
        chosen = best_packing([d for d, _ in needing], left)
        rows = {d.id: row for d, row in needing}
        for device in chosen:
            _add(free, (rows[device.id], column), shares_left(device, consumed.get(device.id, {})))
        if len(needing) > len(chosen):
            held[column] = len(needing) - len(chosen)
    return free, held


def _add(free: dict[tuple[int, str], int], key: tuple[int, str], count: int) -> None:
    if count:
        free[key] = free.get(key, 0) + count


MAX_EXACT = 12
"""Largest group of devices sharing counter sets whose best packing is searched exactly."""


def best_packing(devices: list[DraDevice], left: Counters) -> list[DraDevice]:
    """The largest set of `devices` (all consuming counters, none allocated) that can be allocated
    together from the counters `left`; see pool_free."""
    if overdrawn(left):
        return []
    groups: dict[frozenset[str], list[DraDevice]] = {}
    for device in devices:
        sets = frozenset(c.name for c in device.consumes)
        merged = [key for key in groups if key & sets]
        for key in merged:
            sets |= key
        groups[sets] = [d for key in merged for d in groups.pop(key)] + [device]
    chosen: list[DraDevice] = []
    for sets, group in groups.items():
        chosen.extend(_pack(group, {name: left[name] for name in sets if name in left}))
    return chosen


def _pack(group: list[DraDevice], left: Counters) -> list[DraDevice]:
    """The largest subset of `group` that fits the counters `left` (only the group's sets, none
    below zero): greedy, then an exact search when the group is small and greedy left some out."""

    def weight(device: DraDevice) -> float:
        return sum(
            amount / max(left.get(c.name, {}).get(name, 0), 1)
            for c in device.consumes
            for name, amount in c.counters
        )

    order = sorted(group, key=lambda d: (weight(d), d.id))
    counters = {name: dict(values) for name, values in left.items()}
    best: list[DraDevice] = []
    for device in order:  # greedy: a lower bound, and the answer for a large group
        if _own_fit(counters, device):
            _consume(counters, device, -1)
            best.append(device)
    if len(order) > MAX_EXACT or len(best) == len(order):
        return best
    current: list[DraDevice] = []
    counters = {name: dict(values) for name, values in left.items()}

    def search(i: int) -> None:
        nonlocal best
        if len(current) + len(order) - i <= len(best):
            return  # even taking every device left cannot beat the best found
        if i == len(order):
            best = list(current)
            return
        device = order[i]
        if _own_fit(counters, device):
            _consume(counters, device, -1)
            current.append(device)
            search(i + 1)
            current.pop()
            _consume(counters, device, +1)
        search(i + 1)

    search(0)
    return best


class DeviceCounts:
    """Free DRA devices per DeviceClass column and node row, kept current incrementally.

    `free[column]`: int64 per row, devices of the class neither allocated nor tainted.
    `published[column]`: devices of the class per row, whatever their state.
    `names`: every resource name that requests a class → its column.
    `classes`: column → DeviceClass name. `unjudged`: classes whose selectors were not judged.
    `tainted`: column → devices kept out by a NoSchedule / NoExecute device taint.
    `placed`: each counted device's row and columns; `blocked`: counted devices a taint keeps out.
    `allocated`: devices ResourceClaims hold (a live reference count kept by an Allocation);
    `consumed`: the capacity claims consume of shared devices (kept by the same Allocation).
    `partitioned`: columns with devices of a partitioned pool (counter sets or shared devices);
    `held`: column -> devices left out because the counters they consume are taken.
    """

    def __init__(
        self,
        rows: int,
        classes: Iterable[DeviceClassRecord] = (),
        rules: Iterable[DeviceTaintRuleRecord] = (),
        matcher: ClassMatcher | None = None,
        allocated: Mapping[DeviceId, int] | None = None,
        consumed: Mapping[DeviceId, Mapping[str, int]] | None = None,
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
        self.consumed: Mapping[DeviceId, Mapping[str, int]] = consumed if consumed is not None else {}
        self.partitioned: dict[str, int] = {}
        self.held: dict[str, int] = {}
        self._pool_of: dict[DeviceId, PoolKey] = {}
        self._pool_devices: dict[PoolKey, list[DraDevice]] = {}
        self._pool_free: dict[PoolKey, tuple[dict[tuple[int, str], int], dict[str, int]]] = {}
        self._class_list = sorted(classes, key=lambda c: c.name)
        self._by_name = {c.name: c for c in self._class_list}
        self._rules = list(rules)
        self._matcher = matcher or ClassMatcher()
        self._slices: dict[PoolKey, dict[str, ResourceSliceRecord]] = {}
        self._counted: dict[PoolKey, list[DeviceId]] = {}
        self._waiting: set[PoolKey] = set()
        self._deferred: tuple[dict[str, list[int]], dict[str, list[int]]] | None = None
        """Rows counted per column, published and free, kept while `build_counts` builds the
        table (see `_count_all`)."""
        # The columns of a device's driver, attribute and capacity maps, by the maps' identity (a
        # fleet's devices share them, guardhook.cluster.dra): the classes' CEL is judged once per
        # distinct device, not looked up by sorted items for each of 260,000 devices. The maps
        # are held in the value, so the ids stay theirs.
        self._columns_of: dict[
            tuple[str, int, int], tuple[Mapping[str, Any], Mapping[str, int], tuple[str, ...]]
        ] = {}
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
        self._unfree(pool)
        self._count_all(self._counted.pop(pool, []), -1)
        self._pool_devices.pop(pool, None)
        self._waiting.discard(pool)
        slices = self._slices.get(pool)
        if not slices:
            self._slices.pop(pool, None)
            return
        if not self._class_list:
            # No DeviceClass: no device counts for any column (a view whose slices are listed
            # before its classes; the classes' arrival rebuilds the table).
            return
        newest = max(piece.generation for piece in slices.values())  # only the newest generation counts
        current = [piece for piece in slices.values() if piece.generation == newest]
        partitioned = any(piece.partitioned for piece in current)
        # The rules whose driver and pool select this pool: a device none can select and without
        # taints of its own is not asked about taints at all (most devices of a fleet).
        rules = [
            r
            for r in self._rules
            if r.has_selector and (not r.driver or r.driver == pool[0]) and (not r.pool or r.pool == pool[1])
        ]
        placed, columns_of = self.placed, self._matching_columns
        counted: list[DeviceId] = []
        # A slice's devices are one node's, and share their maps: the row and the columns of the
        # device before are taken again when its node name and maps are the very same objects.
        last_node, last_row = None, None
        last_attributes: Any = None
        last_capacity: Any = None
        last_driver = ""
        last_columns: tuple[str, ...] = ()
        for piece in current:
            for device in piece.devices:
                node = device.node_name
                if not node or device.id in placed:
                    continue  # reachable from several nodes (no node's capacity), or named twice
                if node is not last_node:
                    last_node, last_row = node, row_of.get(node)
                row = last_row
                if row is None or row >= self.rows:
                    self._waiting.add(pool)  # its node is not in the index yet
                    continue
                if (
                    device.attributes is last_attributes
                    and device.capacity is last_capacity
                    and device.id.driver == last_driver
                ):
                    columns = last_columns
                else:
                    columns = columns_of(device)
                    last_attributes, last_capacity = device.attributes, device.capacity
                    last_driver, last_columns = device.id.driver, columns
                if not columns:
                    continue
                placed[device.id] = (row, columns)
                if (device.taints or rules) and self._tainted(device, rules):
                    self.blocked.add(device.id)
                if partitioned:
                    self._pool_of[device.id] = pool
                    self._pool_devices.setdefault(pool, []).append(device)
                counted.append(device.id)
        if counted:
            self._count_all(counted, +1)
            self._counted[pool] = counted
        if partitioned:
            self._refree(pool)

    def _unfree(self, pool: PoolKey) -> None:
        """Take back a partitioned pool's free counts (see pool_free)."""
        free, held = self._pool_free.pop(pool, ({}, {}))
        for (row, column), count in free.items():
            self.free[column][row] -= count
        for column, count in held.items():
            self.held[column] -= count

    def _refree(self, pool: PoolKey) -> None:
        """Count a partitioned pool's free devices again (its slices or its allocations changed)."""
        self._unfree(pool)
        members = [
            (device, *self.placed[device.id])
            for device in self._pool_devices.get(pool, ())
            if device.id not in self.blocked
        ]
        slices = [s for s in self._slices.get(pool, {}).values()]
        newest = max((s.generation for s in slices), default=0)
        left = available_counters((s for s in slices if s.generation == newest), self.allocated)
        free, held = pool_free(members, left, self.allocated, self.consumed)
        for (row, column), count in free.items():
            self.free[column][row] += count
        for column, count in held.items():
            self.held[column] = self.held.get(column, 0) + count
        self._pool_free[pool] = (free, held)

    def _count_all(self, devices: list[DeviceId], sign: int) -> None:
        """Add (+1) or remove (-1) placed devices' contributions to every count. The moves are
        summed per (column, row) first (a pool's devices are mostly one node's); while the table
        is being built (`_deferred`, only additions) their rows are kept per column until
        `_settle` adds them to the arrays at once: a numpy scalar update per device and column
        cost ~1 us each over 260,000 devices."""
        if not devices:
            return
        placed, blocked_set, pool_of, allocated = self.placed, self.blocked, self._pool_of, self.allocated
        deferred = self._deferred if sign > 0 else None
        published: dict[tuple[str, int], int] = {}
        free: dict[tuple[str, int], int] = {}
        for device in devices:
            row, columns = placed[device]
            blocked = device in blocked_set
            partitioned = device in pool_of  # its free count is the pool's (see _refree)
            available = not blocked and not partitioned and not allocated.get(device)
            for column in columns:
                if partitioned:
                    self.partitioned[column] = self.partitioned.get(column, 0) + sign
                if blocked:
                    self.tainted[column] += sign
                if deferred is not None:
                    deferred[0].setdefault(column, []).append(row)
                    if available:
                        deferred[1].setdefault(column, []).append(row)
                    continue
                at = (column, row)
                published[at] = published.get(at, 0) + sign
                if available:
                    free[at] = free.get(at, 0) + sign
            if sign < 0:
                del placed[device]
                blocked_set.discard(device)
                pool_of.pop(device, None)
        for (column, row), amount in published.items():
            self.published[column][row] += amount
        for (column, row), amount in free.items():
            self.free[column][row] += amount

    def _settle(self) -> None:
        """Add the devices `_count_all` deferred while the table was built to its arrays."""
        deferred, self._deferred = self._deferred, None
        if deferred is None:
            return
        for moves, arrays in ((deferred[0], self.published), (deferred[1], self.free)):
            for column, rows in moves.items():
                arrays[column] += np.bincount(np.array(rows, dtype=np.intp), minlength=self.rows)

    def _tainted(self, device: DraDevice, rules: list[DeviceTaintRuleRecord] | None = None) -> bool:
        """Whether a NoSchedule / NoExecute taint (the device's own or a DeviceTaintRule's) keeps
        `device` from being allocated. `rules`: the rules to ask (every rule that may select the
        device; default all)."""
        rules = self._rules if rules is None else rules
        if not device.taints and not rules:
            return False
        rules = [
            r
            for r in rules
            if r.matches_id(device.id) and _rule_applies(r, device, self._by_name, self._matcher)
        ]
        return any(t.effect in FILTERING_DEVICE_EFFECTS for t in effective_taints(device, rules))

    def _matching_columns(self, device: DraDevice) -> tuple[str, ...]:
        key = (device.id.driver, id(device.attributes), id(device.capacity))
        known = self._columns_of.get(key)
        if known is not None:
            return known[2]
        columns = self._judge_columns(device)
        if len(self._columns_of) >= COLUMNS_KEPT:  # devices whose maps are not shared
            self._columns_of.clear()
        self._columns_of[key] = (device.attributes, device.capacity, columns)
        return columns

    def _judge_columns(self, device: DraDevice) -> tuple[str, ...]:
        matched = []
        for device_class in self._class_list:
            verdict = self._matcher.matches(device_class, device)
            if verdict is None:
                self.unjudged.add(device_class.name)
            if verdict is not False:
                matched.append(device_class.column)
        return tuple(matched)

    # ---- claims ------------------------------------------------------------------------------

    def rows_taking(self, device: DeviceId) -> list[int]:
        """The rows whose `free` counts a `take` of `device` may move: its own, every row of its
        pool when the pool is partitioned (counters or shared capacity), none when not counted."""
        placed = self.placed.get(device)
        if placed is None:
            return []
        pool = self._pool_of.get(device)
        if pool is not None:
            return [self.placed[member.id][0] for member in self._pool_devices.get(pool, ())]
        return [placed[0]]

    def take(self, device: DeviceId, sign: int) -> None:
        """A device became allocated (`sign` +1) or free (-1): move it out of / into `free`
        (devices not counted here, or tainted, change nothing)."""
        placed = self.placed.get(device)
        if placed is None:
            return
        pool = self._pool_of.get(device)
        if pool is not None:  # counters or shared capacity: the whole pool may change
            self._refree(pool)
            return
        if device in self.blocked or not sign:
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
    consumed: Mapping[DeviceId, Mapping[str, int]] | None = None,
) -> DeviceCounts:
    """The table for these classes, slices and rules over `rows` rows (`row_of`: node name →
    row), with the devices in `allocated` (a live reference count, see Allocation) not free and
    the capacity in `consumed` taken from shared devices."""
    counts = DeviceCounts(rows, classes, rules, matcher, allocated, consumed)
    for piece in slices:
        counts._slices.setdefault((piece.driver, piece.pool), {})[piece.name] = piece
    counts._deferred = ({}, {})
    for pool in list(counts._slices):
        counts._recount(pool, row_of)
    counts._settle()
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
        self.consumed: dict[DeviceId, dict[str, int]] = {}
        """Capacity the claims' `consumedCapacity` takes of each shared device (KEP-5075)."""

    def change(
        self, old: ResourceClaimRecord | None, new: ResourceClaimRecord | None
    ) -> list[tuple[DeviceId, int]]:
        """Apply one claim change; returns the devices that became taken (+1) or free (-1), and
        (device, 0) for a shared device whose consumed capacity changed."""
        moved: list[tuple[DeviceId, int]] = []
        shared = self._consume(old, -1) | self._consume(new, +1)
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
        if shared:  # a shared device's consumed capacity (KEP-5075): most claims take none
            done = {device for device, _ in moved}
            moved.extend((device, 0) for device in sorted(shared - done))
        return moved

    def _consume(self, claim: ResourceClaimRecord | None, sign: int) -> set[DeviceId]:
        """Add (+1) or take back (-1) a claim's consumed capacity; returns the devices touched."""
        touched: set[DeviceId] = set()
        for entry in claim.allocated if claim else ():
            if not entry.consumed:
                continue
            amounts = self.consumed.setdefault(entry.id, {})
            for name, amount in entry.consumed:
                amounts[name] = amounts.get(name, 0) + sign * amount
                if not amounts[name]:
                    del amounts[name]
            if not amounts:
                del self.consumed[entry.id]
            touched.add(entry.id)
        return touched
