"""An incrementally updated index of node capacity, kept beside the cluster view.

The index holds, per node row, allocatable and requested amounts as numpy columns (one per
resource name, `pods` counting bound pods), cordoned / not-ready flags, label value columns built
on first use, and taint-set classes. It subscribes to the view's pod and node changes, so a decision
reads arrays instead of rescanning the cluster: every per-request step is a vector operation.

Counted as the scheduler counts (NodeResourcesFit): a pod holds its requests on its node while it
is bound and not terminal (Succeeded/Failed). Unbound, non-terminal pods are kept as *pending*,
except those held by `spec.schedulingGates` (the scheduler does not place them; Kueue holds
quota-less workloads so): they are only counted. Rows are never reused: a removed node's row
stays, dead, so pods still naming it keep their place.

Nodes are filtered as kube-scheduler filters them: NodeUnschedulable lets a pod onto a cordoned
node (`spec.unschedulable`) when it tolerates `node.kubernetes.io/unschedulable:NoSchedule`, and
TaintToleration judges every NoSchedule / NoExecute taint, including the `not-ready` and
`unreachable` taints the node lifecycle controller sets; the Ready condition itself is never read.

DRA: resources a DeviceClass maps (guardhook.capacity.devices) are counted from ResourceSlices
and ResourceClaims on the nodes whose `allocatable` does not list them, rebuilt lazily when one
of those kinds changed in the view.

Between changes a decision's derived arrays (free capacity after pending pods, eligibility masks)
are kept per `state()`: a `version` bumped by every change a decision can see — a pod update that
moves no requests, node or phase class (a status report) is not one — and the view's DeviceClass
and DeviceTaintRule generations. Arrays spanning every row that a change moves only in a few
rows (free capacity after the pending pods, guardhook.capacity.derived) are instead kept across
changes and brought up to date from the rows `changed_since` names.

Reads must hold `lock` (the view's lock), since the view calls the listener under it.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from guardhook.capacity.devices import Allocation, DeviceCounts, build_counts
from guardhook.capacity.shapes import NODE_NAME_FIELD, PODS, NodeRequirement, PodShape
from guardhook.cluster.dra import ClassMatcher
from guardhook.cluster.going import DRAIN_CONDITIONS
from guardhook.cluster.lws import GROUP_KEY_LABEL
from guardhook.cluster.model import TERMINAL_PHASES, NodeRecord, PodRecord, Taint, digits
from guardhook.cluster.resources import Resources
from guardhook.cluster.view.gcpause import collector_paused
from guardhook.cluster.view.store import (
    DEVICECLASSES,
    DEVICETAINTRULES,
    NODES,
    RESOURCECLAIMS,
    RESOURCESLICES,
    ClusterView,
)
from guardhook.cluster.view.store import PODS as POD_KIND

DRAIN_CONDITIONS_SET = frozenset(DRAIN_CONDITIONS)
"""Node lifecycle conditions that flag a row as about to go (guardhook.cluster.going)."""

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
"""What NodeUnschedulable checks a cordoned node against (k8s.io/api core/v1 TaintNodeUnschedulable)."""
NOT_READY_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
"""The node lifecycle controller's taints for a NotReady / Unknown Ready condition."""


@dataclass
class PendingClass:
    """Pending pods with identical `requests` (pods slot included): how many, and how many of them
    belong to an LWS group (label group-key), per namespace."""

    requests: dict[str, int]
    count: int = 0
    group_pods: dict[str, int] = field(default_factory=dict)


ABSENT = -1
"""Label column value of a node without that label."""

_INITIAL_ROWS = 64

FLUSH_AT = 1 << 16
"""Buffered pod request changes (`CapacityIndex._buffer`) applied to the arrays at once when this many
are waiting (and before any read of the requested amounts)."""

SHAPES_KEPT = 4096
"""Requests maps `CapacityIndex._shape` numbers before a flush forgets them all (a cluster of
pods whose maps are not shared would otherwise make them grow with every pod)."""

REMEMBERED_KEPT = 64
"""Derived arrays (`remembered`) kept for one state of the index: a few per template and namespace."""

CHANGED_KEPT = 8192
"""Rows `changed_since` remembers; past this many changes between two reads, everything is taken
as changed (a read then rebuilds its arrays, as it would after a node change)."""

KEPT_KEPT = 8
"""Incrementally maintained objects (`kept`) the index holds before it forgets them all."""


class CapacityIndex:
    """Per-node capacity as arrays, fed by ClusterView change notifications.

    Units: guardhook.cluster.resources (cpu millicores, memory bytes, counts), `pods` as a count.
    """

    def __init__(self, lock: Any = None) -> None:
        self.lock = lock if lock is not None else threading.RLock()
        self.rows = 0
        self._row_of: dict[str, int] = {}
        self._names: list[str] = []
        self._labels: list[dict[str, str]] = []
        self._columns: dict[str, int] = {PODS: 0}
        size = _INITIAL_ROWS
        # Column-major: a decision reads whole resource columns.
        self._alloc = np.zeros((size, 1), dtype=np.int64, order="F")
        self._used = np.zeros((size, 1), dtype=np.int64, order="F")
        # A pod's requests are added to `_used` in batches: a numpy scalar update costs ~4x a list
        # append, and a 2-million-pod list makes ~6 million of them (docs/performance.md). Rows,
        # columns and signed amounts wait here until `_flush` (before `_used` is read).
        self._buffer: tuple[list[int], list[int], list[int]] = ([], [], [])
        # A pod's requests are buffered as a row, a shape and a sign: the shape numbers a requests
        # map (the pods of one template share one map, guardhook.cluster.resources), looked up by
        # the map's identity, so a pod costs three appends whatever it requests.
        self._shapes: list[tuple[Resources, list[int], list[int]]] = []
        self._shape_of: dict[int, int] = {}
        self._alive = np.zeros(size, dtype=bool)
        self._alive_count = 0
        self._usable = np.zeros(size, dtype=bool)
        self._cordoned = np.zeros(size, dtype=bool)
        self._not_ready = np.zeros(size, dtype=bool)
        self._maintenance = np.zeros(size, dtype=bool)
        self._taint_class = np.zeros(size, dtype=np.int32)
        self._taint_sets: dict[tuple[Taint, ...], int] = {(): 0}
        # Nodes taken whose amounts and flags are not written yet, by row (`_settle_nodes`).
        self._nodes_waiting: dict[int, NodeRecord] = {}
        self._columns_known: Resources | None = None
        self._label_columns: dict[str, np.ndarray] = {}
        self._label_values: dict[str, dict[str, int]] = {}
        self._pending: dict[tuple[tuple[str, int], ...], PendingClass] = {}
        self._group_pods: dict[str, np.ndarray] = {}
        self.gated = 0
        """Non-terminal, unbound pods held by scheduling gates (not counted as pending)."""
        # Weak: the index is the value of a weak mapping keyed by the view (index_for), and a strong
        # reference back would keep every view alive.
        self._view_ref: weakref.ref[ClusterView] | None = None
        self._matcher = ClassMatcher()
        self._allocation = Allocation()
        self._devices: tuple[tuple[int, int], DeviceCounts] | None = None
        self.version = 0
        """Bumped by every change a decision can see (a pod update that moves no requests is none)."""
        self._remembered: dict[tuple[Any, ...], Any] = {}
        self._remembered_state: tuple[int, int, int] = (-1, 0, 0)
        # Which rows' free amounts moved, for arrays kept per changed row (`changed_since`): a pod
        # change touches one row. `_epoch` moves when more than rows moved (a node, a column, the
        # rows grown, a ResourceSlice, the DRA counts rebuilt): a reader then rebuilds everything.
        self._changed: list[int] = []
        self._epoch = 0
        self.pending_version = 0
        """Bumped by every change of the pending pods (`pending`)."""
        self._kept: dict[tuple[Any, ...], Any] = {}
        self._devices_built = 0

    def _view(self) -> ClusterView | None:
        """The view this index follows; None for an index without one or whose view is gone."""
        return None if self._view_ref is None else self._view_ref()

    # ---- building and feeding ----------------------------------------------------------------

    @classmethod
    def of_view(cls, view: ClusterView) -> CapacityIndex:
        """Build an index from everything in `view` and subscribe it to the view's changes."""
        with view.lock:
            index = cls(view.lock)
            index._view_ref = weakref.ref(view)
            for node in view.nodes():
                index.on_change(NODES, None, node)
            for pod in view.all_pods():
                index.on_change(POD_KIND, None, pod)
            for claim in view.resource_claims():
                index.on_change(RESOURCECLAIMS, None, claim)
            view.subscribe(index.on_change, batch=index.on_changes)
            index.devices()  # count DRA devices now, not on the first decision
            return index

    def on_change(self, kind: str, old: Any, new: Any) -> None:
        """ClusterView listener: apply one pod, node or ResourceClaim change (see store.Listener)."""
        if kind == POD_KIND:  # the bulk of the changes, first
            if old is not None:
                if new is not None and _same_footprint(old, new):
                    return  # a status update: nothing the index counts moved
                self._apply_pod(old, -1)
            if new is not None:
                self._apply_pod(new, +1)
            self.version += 1
            return
        self.version += 1
        if kind == RESOURCECLAIMS:
            moved = self._allocation.change(old, new)
            if self._devices_current():
                counts = self._devices[1]  # type: ignore[index]
                for device, sign in moved:
                    self._rows_changed(counts.rows_taking(device))
                    counts.take(device, sign)
        elif kind == RESOURCESLICES:
            if self._devices_current():
                self._devices[1].set_slice(old, new, self._row_of)  # type: ignore[index]
            self._everything_changed()
        elif kind == NODES:
            self._everything_changed()
            if new is not None:
                self._set_node(new)
            elif old is not None:
                self._drop_node(old.name)

    def _devices_current(self) -> bool:
        """Whether the DRA device counts are built and follow the view's DeviceClasses and
        DeviceTaintRules. Counts a class or rule change left behind are not kept up to date: the
        next read rebuilds them from the slices and the claims' allocation (an initial list
        brings every claim after the class, ~31,000 at 65,000 nodes)."""
        if self._devices is None:
            return False
        view = self._view()
        return view is not None and self._devices[0] == _device_generations(view)

    def on_changes(self, kind: str, changes: list[tuple[Any, Any]]) -> None:
        """ClusterView batch listener (guardhook.cluster.view.store.BatchListener): the pods of one
        slice of a relist, in order, counted as `on_change` counts them one by one. A new bound
        pod (the bulk of an initial list) is buffered here without a call of its own."""
        if kind != POD_KIND:
            for old, new in changes:
                self.on_change(kind, old, new)
            return
        rows, shapes, signs = self._buffer
        row_of, shape_of, group_pods = self._row_of, self._shape_of, self._group_pods
        on_change = self.on_change
        moved = 0
        # A list returns a node's pods, and a template's, one after another: the row and shape of
        # the pod before are taken again when its node name and requests map are the very same.
        last_node, last_row, last_requests, last_shape = None, 0, None, 0
        for old, new in changes:
            node = new.node_name if new is not None else ""
            if old is not None or not node or new.phase in TERMINAL_PHASES:
                on_change(kind, old, new)  # a replacement, an unbound or a terminal pod
                rows, shapes, signs = self._buffer  # it may have flushed (a new buffer) ...
                last_requests = None  # ... and forgotten the shapes
                continue
            moved += 1
            if node is last_node:
                row = last_row
            else:
                found = row_of.get(node)
                row = self._row(node) if found is None else found
                last_node, last_row = node, row
            requests = new.requests
            if requests is last_requests:
                shape = last_shape
            else:
                known = shape_of.get(id(requests))
                shape = self._shape(requests) if known is None else known
                last_requests, last_shape = requests, shape
            rows.append(row)
            shapes.append(shape)
            signs.append(1)
            if GROUP_KEY_LABEL in new.labels:
                counts = group_pods.get(new.namespace)
                if counts is None:
                    counts = group_pods[new.namespace] = np.zeros(len(self._alive), dtype=np.int32)
                counts[row] += 1
        self.version += moved
        if len(rows) >= FLUSH_AT:
            self._flush()

    def _apply_pod(self, pod: PodRecord, sign: int) -> None:
        if pod.phase in TERMINAL_PHASES:  # PodRecord.terminal, without the property's call
            return
        node = pod.node_name
        if not node:
            if pod.gated:
                self.gated += sign
            else:
                self._count_pending(pod, sign)
                self.pending_version += 1
            return
        row = self._row_of.get(node)
        if row is None:
            row = self._row(node)
        requests = pod.requests
        shape = self._shape_of.get(id(requests))
        if shape is None:
            shape = self._shape(requests)
        rows, shapes, signs = self._buffer
        rows.append(row)
        shapes.append(shape)
        signs.append(sign)
        if len(rows) >= FLUSH_AT:
            self._flush()
        if GROUP_KEY_LABEL in pod.labels:
            counts = self._group_pods.get(pod.namespace)
            if counts is None:
                counts = self._group_pods[pod.namespace] = np.zeros(len(self._alive), dtype=np.int32)
            counts[row] += sign

    def _shape(self, requests: Resources) -> int:
        """The number `_flush` knows `requests` (one record's map) by, its columns made now."""
        columns, amounts = [0], [1]  # the pods column: one pod
        for name, amount in requests.items():
            if name != PODS:
                columns.append(self._column(name))
                amounts.append(amount)
        shape = len(self._shapes)
        self._shapes.append((requests, columns, amounts))  # held: the id stays this map's
        self._shape_of[id(requests)] = shape
        return shape

    def _flush(self) -> None:
        """Apply the buffered request changes to `_used` (rows and columns only ever grow, so a
        buffered position stays valid across `_grow_rows` and `_column`): each distinct requests
        map of the buffer as one row of amounts, added to the buffered rows one column at a time.

        Shape numbers are small (below `len(self._shapes)`): the distinct ones are found by
        counting (`np.bincount`), not sorting (`np.unique` took ~9 ms of a 65,536-pod flush's
        ~21 ms), and a column's `np.add.at` on its own contiguous column is ~7x faster than one
        over the 2-D array."""
        self._settle_nodes()
        rows, shapes, signs = self._buffer
        if rows:
            n = len(rows)
            numbers = np.fromiter(shapes, dtype=np.intp, count=n)
            used = np.flatnonzero(np.bincount(numbers))
            at = np.zeros(len(self._shapes), dtype=np.intp)
            at[used] = np.arange(len(used), dtype=np.intp)
            inverse = at[numbers]
            amounts = np.zeros((len(used), self._used.shape[1]), dtype=np.int64)
            for place, shape in enumerate(used.tolist()):
                _, columns, values = self._shapes[shape]
                amounts[place, columns] = values
            positions = np.fromiter(rows, dtype=np.intp, count=n)
            # A list only adds pods: no sign to apply then.
            sign = None if signs.count(1) == n else np.fromiter(signs, dtype=np.int64, count=n)
            for column in np.flatnonzero(amounts.any(axis=0)).tolist():
                moved = amounts[:, column][inverse]
                np.add.at(self._used[:, column], positions, moved if sign is None else moved * sign)
            self._buffer = ([], [], [])
            self._rows_changed(rows)  # the rows whose free amounts moved (`changed_since`)
        if len(self._shapes) > SHAPES_KEPT:  # maps no record may share any more: let them go
            self._shapes.clear()
            self._shape_of.clear()

    def _count_pending(self, pod: PodRecord, sign: int) -> None:
        requests = {**pod.requests, PODS: 1}
        key = tuple(sorted(requests.items()))
        entry = self._pending.get(key)
        if entry is None:
            entry = self._pending[key] = PendingClass(requests)
        entry.count += sign
        if GROUP_KEY_LABEL in pod.labels:
            entry.group_pods[pod.namespace] = entry.group_pods.get(pod.namespace, 0) + sign
        if entry.count <= 0:
            del self._pending[key]

    def _set_node(self, node: NodeRecord) -> None:
        """Take `node` into its row: its row, columns and labels now, its allocatable amounts and
        flags when `_settle_nodes` writes the nodes waiting at once (before any read of them)."""
        row = self._row(node.name)
        allocatable = node.allocatable
        if allocatable is not self._columns_known:  # a pool's nodes share one map (model)
            for name in allocatable:
                self._column(name)  # may widen the arrays: now, not while they are written
            self._columns_known = allocatable
        self._nodes_waiting[row] = node
        self._labels[row] = node.labels  # the record's own map: records are frozen, never mutated
        for key, labels in self._label_columns.items():
            labels[row] = self._value_id(key, node.labels.get(key))

    def _settle_nodes(self) -> None:
        """Write the nodes `_set_node` took since the last read into the arrays, a whole list
        page's at once: ~12 numpy scalar writes a node cost ~2 us each node (65,000 at issue
        53's scale). Every read of the node arrays comes here first."""
        if not self._nodes_waiting:
            return
        # `node_count` is read without the view's lock (group-capacity asks it first); the
        # nodes are taken under it, so they are written under it too.
        with self.lock:
            self._write_nodes()

    def _write_nodes(self) -> None:
        waiting = self._nodes_waiting
        if not waiting:
            return
        self._nodes_waiting = {}
        rows = np.fromiter(waiting, dtype=np.intp, count=len(waiting))
        by_map: dict[int, tuple[Resources, list[int]]] = {}
        cordoned, not_ready, maintenance, usable, classes = [], [], [], [], []
        taint_sets = self._taint_sets
        for row, node in waiting.items():
            allocatable = node.allocatable
            found = by_map.get(id(allocatable))
            if found is None:
                by_map[id(allocatable)] = (allocatable, [row])
            else:
                found[1].append(row)
            taints = node.taints
            if node.unschedulable and UNSCHEDULABLE_TAINT not in taints:
                taints = (*taints, UNSCHEDULABLE_TAINT)  # NodeUnschedulable judges a cordon as this taint
            held_back = bool(taints) and any(
                t.key in NOT_READY_KEYS and t.effect in ("NoSchedule", "NoExecute") for t in taints
            )
            cordoned.append(node.unschedulable)
            not_ready.append(held_back)
            maintenance.append(bool(node.conditions) and not DRAIN_CONDITIONS_SET.isdisjoint(node.conditions))
            usable.append(not node.unschedulable and not held_back)
            classes.append(taint_sets.setdefault(taints, len(taint_sets)))
        self._alive_count += len(rows) - int(np.count_nonzero(self._alive[rows]))
        self._alive[rows] = True
        self._cordoned[rows] = cordoned
        self._not_ready[rows] = not_ready
        self._maintenance[rows] = maintenance
        self._usable[rows] = usable
        self._taint_class[rows] = classes
        self._alloc[rows, :] = 0
        columns = self._columns
        for allocatable, members in by_map.values():
            at = np.array(members, dtype=np.intp)
            for name, amount in allocatable.items():
                self._alloc[at, columns[name]] = amount

    def _drop_node(self, name: str) -> None:
        row = self._row_of.get(name)
        if row is None:
            return
        self._settle_nodes()  # a node taken before, written first
        self._alive_count -= bool(self._alive[row])
        self._alive[row] = False
        self._usable[row] = False
        self._cordoned[row] = False
        self._not_ready[row] = False
        self._maintenance[row] = False
        self._alloc[row, :] = 0
        self._labels[row] = {}
        for column in self._label_columns.values():
            column[row] = ABSENT

    def _row(self, name: str) -> int:
        row = self._row_of.get(name)
        if row is not None:
            return row
        row = self.rows
        if row == len(self._alive):
            self._grow_rows()
        self._row_of[name] = row
        self._names.append(name)
        self._labels.append({})
        for column in self._label_columns.values():
            column[row] = ABSENT
        self.rows += 1
        return row

    def _rows_changed(self, rows: Sequence[int]) -> None:
        if len(self._changed) + len(rows) > CHANGED_KEPT:
            self._everything_changed()  # without first copying a flush's 65,536 rows in
            return
        self._changed.extend(rows)

    def _everything_changed(self) -> None:
        self._changed.clear()
        self._epoch += 1

    def _grow_rows(self) -> None:
        self._everything_changed()
        extra = len(self._alive)
        self._alloc = np.asfortranarray(np.vstack([self._alloc, np.zeros_like(self._alloc[:extra])]))
        self._used = np.asfortranarray(np.vstack([self._used, np.zeros_like(self._used[:extra])]))
        self._alive = np.concatenate([self._alive, np.zeros(extra, dtype=bool)])
        self._usable = np.concatenate([self._usable, np.zeros(extra, dtype=bool)])
        self._cordoned = np.concatenate([self._cordoned, np.zeros(extra, dtype=bool)])
        self._not_ready = np.concatenate([self._not_ready, np.zeros(extra, dtype=bool)])
        self._maintenance = np.concatenate([self._maintenance, np.zeros(extra, dtype=bool)])
        self._taint_class = np.concatenate([self._taint_class, np.zeros(extra, dtype=np.int32)])
        for key, column in self._label_columns.items():
            self._label_columns[key] = np.concatenate([column, np.full(extra, ABSENT, dtype=np.int32)])
        for namespace, counts in self._group_pods.items():
            self._group_pods[namespace] = np.concatenate([counts, np.zeros(extra, dtype=np.int32)])

    def _column(self, resource: str) -> int:
        column = self._columns.get(resource)
        if column is not None:
            return column
        self._everything_changed()
        column = len(self._columns)
        self._columns[resource] = column
        pad = np.zeros((len(self._alive), 1), dtype=np.int64)
        self._alloc = np.asfortranarray(np.hstack([self._alloc, pad]))
        self._used = np.asfortranarray(np.hstack([self._used, pad]))
        return column

    def _value_id(self, key: str, value: str | None) -> int:
        if value is None:
            return ABSENT
        values = self._label_values.setdefault(key, {})
        return values.setdefault(value, len(values))

    # ---- reads (hold `lock`) -----------------------------------------------------------------

    @property
    def node_count(self) -> int:
        """Nodes present in the view (dead rows excluded)."""
        self._settle_nodes()
        return self._alive_count

    def free(self, resources: Sequence[str]) -> np.ndarray:
        """A fresh (rows × len(resources)) int64 matrix of allocatable minus requested; a resource
        no node offers is 0 everywhere. Dead rows are 0 allocatable (so never fit). A resource a
        DeviceClass maps is, on the rows whose allocatable does not list it, the count of free DRA
        devices of that class (see `devices`)."""
        self._flush()
        return self._free_of(resources, slice(0, self.rows), self.rows)

    def free_rows(self, resources: Sequence[str], rows: np.ndarray) -> np.ndarray:
        """`free(resources)[rows]`, reading only `rows` (int row numbers)."""
        self._flush()
        return self._free_of(resources, rows, len(rows))

    def _free_of(self, resources: Sequence[str], rows: slice | np.ndarray, n: int) -> np.ndarray:
        columns = [self._columns.get(name) for name in resources]
        out = np.zeros((n, len(resources)), dtype=np.int64, order="F")  # column reads are the hot path
        for i, column in enumerate(columns):
            if column is not None:
                out[:, i] = self._alloc[rows, column] - self._used[rows, column]
        devices = self.devices() if self._view() is not None else None
        if devices is None or not devices.names:
            return out
        for i, (name, column) in enumerate(zip(resources, columns, strict=True)):
            device_column = devices.column_of(name)
            if device_column is not None:
                alive = self._alive[rows]
                by_dra = alive if column is None else alive & (self._alloc[rows, column] == 0)
                out[by_dra, i] = devices.free[device_column][rows][by_dra]
        return out

    def mark(self) -> tuple[int, ...]:
        """Where the index stands for `changed_since`. Hold `lock`."""
        self._flush()
        if self._view() is not None:
            self.devices()  # counts rebuilt now, so the mark says so
        return (self._epoch, self.rows, self._devices_built, len(self._changed))

    def changed_since(self, mark: tuple[int, ...]) -> tuple[tuple[int, ...], np.ndarray | None]:
        """The index's `mark` now, and the rows whose `free` amounts may have moved since `mark`
        (sorted, distinct), or None when more than rows moved (every array derived from `free`
        must be made again: a node changed, the rows grew, a resource or ResourceSlice came, the
        DRA counts were rebuilt, or too many rows changed). The rows the nodes' flags, labels and
        taints give (`usable`, `eligible`) only move in the None case. Hold `lock`."""
        now = self.mark()
        if now[:3] != mark[:3] or now[3] < mark[3]:
            return now, None
        # sorted(set()) rather than np.unique: a few rows, and np.unique imports numpy.ma on first use
        return now, np.array(sorted(set(self._changed[mark[3] :])), dtype=np.intp)

    def kept(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """An object made once per `key` and kept across changes (unlike `remembered`): for
        arrays a reader keeps current per changed row itself (`changed_since`). Hold `lock`."""
        found = self._kept.get(key)
        if found is None:
            if len(self._kept) >= KEPT_KEPT:
                self._kept.clear()
            found = self._kept[key] = make()
        return found

    def devices(self) -> DeviceCounts:
        """Free DRA devices per DeviceClass column and row (guardhook.capacity.devices): built on
        first use and rebuilt when a DeviceClass or DeviceTaintRule changed; ResourceSlice and
        ResourceClaim changes are applied as they come, and nodes first seen widen it. An index
        without a view has none."""
        view = self._view()
        if view is None:
            return DeviceCounts(self.rows)
        key = _device_generations(view)
        if self._devices is None or self._devices[0] != key:
            # Every device placed anew (260,000 at 65,000 nodes): collections over the view's
            # heap would find nothing to free (guardhook.cluster.view.gcpause).
            with collector_paused():
                counts = build_counts(
                    self.rows,
                    view.device_classes(),
                    view.resource_slices(),
                    view.device_taint_rules(),
                    self._row_of,
                    self._matcher,
                    self._allocation.refs,
                    self._allocation.consumed,
                )
            self._devices = (key, counts)
            self._devices_built += 1
        elif self._devices[1].rows < self.rows:
            self._devices[1].grow(self.rows, self._row_of)
        return self._devices[1]

    def row_of(self, node_name: str) -> int | None:
        """The row of node `node_name` (None when the index never saw it)."""
        return self._row_of.get(node_name)

    def fresh_free(self, resources: Sequence[str], row: int) -> np.ndarray:
        """What an empty node shaped like `row` offers, over `resources`: its allocatable, and for
        a resource a DeviceClass maps (not in its allocatable), every DRA device it publishes."""
        self._settle_nodes()
        out = np.zeros(len(resources), dtype=np.int64)
        devices = self.devices()
        for i, name in enumerate(resources):
            column = self._columns.get(name)
            if column is not None:
                out[i] = self._alloc[row, column]
            device_column = devices.column_of(name)
            if device_column is not None and out[i] == 0:
                out[i] = devices.published[device_column][row]
        return out

    def usable(self) -> np.ndarray:
        """Bool per row: a node in the view a pod without special tolerations may use — neither
        cordoned nor tainted not-ready / unreachable (where pending pods, whose tolerations the
        view does not keep, are placed)."""
        self._settle_nodes()
        return self._usable[: self.rows].copy()

    def alive(self) -> np.ndarray:
        """Bool per row: a node present in the view."""
        self._settle_nodes()
        return self._alive[: self.rows].copy()

    def cordoned(self) -> np.ndarray:
        """Bool per row: `spec.unschedulable` (cordoned)."""
        self._settle_nodes()
        return self._cordoned[: self.rows].copy()

    def maintenance(self) -> np.ndarray:
        """Bool per row: a node lifecycle condition (KEP-5683, guardhook.cluster.going.DRAIN_CONDITIONS:
        MaintenancePlanned, DrainInProgress, ...) True — the node is about to go, though neither
        cordoned nor tainted, so kube-scheduler still places pods there."""
        self._settle_nodes()
        return self._maintenance[: self.rows].copy()

    def not_ready(self) -> np.ndarray:
        """Bool per row: tainted node.kubernetes.io/not-ready or /unreachable (NoSchedule or
        NoExecute), as the node lifecycle controller marks a node whose Ready is not True."""
        self._settle_nodes()
        return self._not_ready[: self.rows].copy()

    def pending(self) -> list[PendingClass]:
        """Non-terminal pods bound to no node, counted per distinct request (they claim capacity
        before any new group)."""
        return list(self._pending.values())

    def eligible(self, shape: PodShape) -> np.ndarray:
        """Bool per row: every filtering taint tolerated (a cordon as the unschedulable taint;
        not-ready / unreachable are taints like any other), nodeSelector and required node
        affinity (ORed terms of ANDed requirements) matched. Read-only (see `remembered`)."""
        return self.remembered(("eligible", shape.constraints), lambda: self._eligible(shape))

    def _eligible(self, shape: PodShape) -> np.ndarray:
        self._settle_nodes()
        n = self.rows
        mask = self._alive[:n].copy()
        for key, value in shape.node_selector:
            mask &= self.label_column(key) == self._label_values.get(key, {}).get(value, -2)
        if shape.affinity_terms is not None:
            any_term = np.zeros(n, dtype=bool)
            for term in shape.affinity_terms:
                if not term:
                    continue  # an empty term matches no node
                this = np.ones(n, dtype=bool)
                for requirement in term:
                    this &= self._requirement_mask(requirement)
                any_term |= this
            mask &= any_term
        tolerated = np.array([shape.tolerates_all(t) for t in self._taint_sets], dtype=bool)
        mask &= tolerated[self._taint_class[:n]]
        return mask

    def state(self) -> tuple[int, int, int]:
        """What a decision's arrays follow: `version`, and the view's DeviceClass and
        DeviceTaintRule generations (the device counts are rebuilt from those)."""
        view = self._view()
        return (self.version, 0, 0) if view is None else (self.version, *_device_generations(view))

    def remembered(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """`build()`, made once per `key` while the index's `state` stays the same, as
        kube-scheduler's snapshot copies only the nodes whose generation moved: between two
        decisions a serving fleet's pods mostly just report status. Arrays in the answer are made
        read-only, so no caller can change what the next decision reads. Hold `lock`."""
        state = self.state()
        if state != self._remembered_state or len(self._remembered) >= REMEMBERED_KEPT:
            self._remembered.clear()
            self._remembered_state = state
        found = self._remembered.get(key)
        if found is None:
            found = self._remembered[key] = build()
            for part in found if isinstance(found, tuple) else (found,):
                if isinstance(part, np.ndarray):
                    part.flags.writeable = False
        return found

    def label_column(self, key: str) -> np.ndarray:
        """Value ids of label `key` per row (ABSENT where unset), built on first use."""
        column = self._label_columns.get(key)
        if column is None:
            column = np.full(len(self._alive), ABSENT, dtype=np.int32)
            for row, labels in enumerate(self._labels):
                column[row] = self._value_id(key, labels.get(key))
            self._label_columns[key] = column
        return column[: self.rows]

    def label_value_count(self, key: str) -> int:
        """How many distinct values of label `key` have been seen (domain ids are below it)."""
        self.label_column(key)
        return len(self._label_values.get(key, {}))

    def holding_groups(self, namespace: str) -> np.ndarray:
        """Bool per row: holds a bound, non-terminal pod of an LWS group (label group-key) in
        `namespace`."""
        counts = self._group_pods.get(namespace)
        if counts is None:
            return np.zeros(self.rows, dtype=bool)
        return counts[: self.rows] > 0

    def _requirement_mask(self, requirement: NodeRequirement) -> np.ndarray:
        n = self.rows
        if requirement.field:
            return self._field_mask(requirement)
        column = self.label_column(requirement.key)
        values = self._label_values.get(requirement.key, {})
        op = requirement.operator
        if op in ("In", "NotIn"):
            ids = [values[v] for v in requirement.values if v in values]
            hit = np.isin(column, ids)
            return hit if op == "In" else ~hit
        if op == "Exists":
            return column != ABSENT
        if op == "DoesNotExist":
            return column == ABSENT
        if op in ("Gt", "Lt") and len(requirement.values) == 1 and _is_int(requirement.values[0]):
            bound = int(requirement.values[0])
            numbers = np.full(len(values) + 1, math.nan)
            for value, vid in values.items():
                if _is_int(value):
                    numbers[vid] = int(value)
            as_numbers = numbers[np.where(column == ABSENT, len(values), column)]
            with np.errstate(invalid="ignore"):
                return as_numbers > bound if op == "Gt" else as_numbers < bound
        return np.zeros(n, dtype=bool)  # unknown operator or malformed Gt/Lt: matches nothing

    def _field_mask(self, requirement: NodeRequirement) -> np.ndarray:
        n = self.rows
        hit = np.zeros(n, dtype=bool)
        if requirement.key != NODE_NAME_FIELD or requirement.operator not in ("In", "NotIn"):
            return hit
        for name in requirement.values:
            row = self._row_of.get(name)
            if row is not None:
                hit[row] = True
        return hit if requirement.operator == "In" else ~hit

    def names(self, rows: Iterable[int]) -> list[str]:
        """Node names of `rows`."""
        return [self._names[r] for r in rows]


def _device_generations(view: ClusterView) -> tuple[int, int]:
    """The view's (DeviceClass, DeviceTaintRule) generations: the device counts are rebuilt when
    either moves."""
    return (view.generation(DEVICECLASSES), view.generation(DEVICETAINTRULES))


def _same_footprint(old: PodRecord, new: PodRecord) -> bool:
    """Whether two records of one pod count alike in the index: same node, requests, phase class,
    gate and group membership (a status-only update)."""
    return (
        old.node_name == new.node_name
        and old.terminal == new.terminal
        and old.gated == new.gated
        and old.requests == new.requests
        and (GROUP_KEY_LABEL in old.labels) == (GROUP_KEY_LABEL in new.labels)
    )


def _is_int(text: str) -> bool:
    return digits(text.lstrip("-"))


_INDEXES: weakref.WeakKeyDictionary[ClusterView, CapacityIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def index_for(view: ClusterView) -> CapacityIndex:
    """The capacity index of `view`, built and subscribed on first use (later calls are O(1))."""
    with _INDEXES_LOCK:
        index = _INDEXES.get(view)
        if index is None:
            index = CapacityIndex.of_view(view)
            _INDEXES[view] = index
        return index
