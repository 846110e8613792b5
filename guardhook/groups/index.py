"""The view's group index: the pods of each LeaderWorkerSet group, kept in step with the view.

The cluster view (guardhook.cluster.view) holds raw records; this index files every pod it holds
under its group by the one placement rule (guardhook.groups.placement.group_of_pod: controller
ownerReference first, labels second) and follows the view's change notifications under the view's
lock, as guardhook.capacity's index does, so a reader holding the lock sees the two agree.
`group_index(view)` builds it on first use (O(pods) once) and returns the same index after; the
functions below are what policies, plans and reconcilers call.

Keys are strings (guardhook.groups.keys.GroupKey): an ordinal "3" or a Hash group's key. Only the
groups that have pods are held: a reader visits those, never every index below `spec.replicas`
(an int32, up to 2^31 - 1).
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from typing import Any

from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.groups.keys import GroupKey, key_order
from guardhook.groups.placement import group_of_pod

SetKey = tuple[str, str]
"""(namespace, LWS name)."""


class GroupIndex:
    """The pods of every LWS group a view holds pods of, by (namespace, LWS name, group key)."""

    def __init__(self, view: ClusterView) -> None:
        # The view's lock, not the view: the index is the value of a weak mapping keyed by the view,
        # and must not keep its key alive.
        self._lock = view.lock
        self._pods_by_group: dict[tuple[str, str, GroupKey], dict[str, PodRecord]] = defaultdict(dict)
        self._groups_by_lws: dict[SetKey, set[GroupKey]] = defaultdict(set)

    @classmethod
    def of_view(cls, view: ClusterView) -> GroupIndex:
        """An index of every pod in `view`, subscribed to the view's pod changes. Subscribed first,
        then filled from one snapshot: a change that lands between the two (only a caller already
        holding the lock can make one) is heard and then read again, never missed."""
        with view.lock:
            index = cls(view)
            view.subscribe(index.on_change, (PODS,), batch=index.on_changes)
            for pod in view.all_pods():
                index._add(pod)
            return index

    def on_change(self, kind: str, old: Any, new: Any) -> None:
        """ClusterView listener (guardhook.cluster.view.store.Listener): refile one pod."""
        if old is not None:
            self._remove(old)
        if new is not None:
            self._add(new)

    def on_changes(self, kind: str, changes: list[tuple[Any, Any]]) -> None:
        """ClusterView batch listener (guardhook.cluster.view.store.BatchListener): refile the
        pods of one slice of a relist, in order, as `on_change` one by one."""
        by_group, by_lws, remove = self._pods_by_group, self._groups_by_lws, self._remove
        for old, new in changes:
            if old is not None:
                remove(old)
            if new is not None:  # `_add`, inline (a relist files millions of pods through here)
                placed = group_of_pod(new)
                if placed is not None:
                    lws_name, key = placed
                    by_group[(new.namespace, lws_name, key)][new.name] = new
                    by_lws[(new.namespace, lws_name)].add(key)

    def _add(self, pod: PodRecord) -> None:
        placed = group_of_pod(pod)
        if placed is not None:
            lws_name, key = placed
            self._pods_by_group[(pod.namespace, lws_name, key)][pod.name] = pod
            self._groups_by_lws[(pod.namespace, lws_name)].add(key)

    def _remove(self, pod: PodRecord) -> None:
        placed = group_of_pod(pod)
        if placed is None:
            return
        lws_name, key = placed
        group_key = (pod.namespace, lws_name, key)
        group = self._pods_by_group.get(group_key)
        if group is None or group.pop(pod.name, None) is None or group:
            return
        del self._pods_by_group[group_key]
        keys = self._groups_by_lws.get((pod.namespace, lws_name))
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._groups_by_lws[(pod.namespace, lws_name)]

    def pods(self, namespace: str, lws_name: str, key: GroupKey) -> list[PodRecord]:
        """The pods of one group (terminal ones included; see guardhook.groups.health)."""
        with self._lock:
            return list(self._pods_by_group.get((namespace, lws_name, key), {}).values())

    def keys(self, namespace: str, lws_name: str) -> list[GroupKey]:
        """The keys of LWS `namespace/lws_name`'s groups that have at least one pod (terminal ones
        included, as in `pods`): ordinals ascending, then Hash keys (keys.key_order)."""
        with self._lock:
            return sorted(self._groups_by_lws.get((namespace, lws_name), ()), key=key_order)

    def lws_pods(self, namespace: str, lws_name: str) -> dict[GroupKey, tuple[PodRecord, ...]]:
        """One consistent snapshot of LWS `namespace/lws_name`'s pods: group key -> its pods, for
        every group with pods, all taken under the view's lock, so no watch event lands between
        two groups of one decision. O(the LWS's pods)."""
        with self._lock:
            return {
                key: tuple(self._pods_by_group.get((namespace, lws_name, key), {}).values())
                for key in self._groups_by_lws.get((namespace, lws_name), ())
            }


_INDEXES: weakref.WeakKeyDictionary[ClusterView, GroupIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.RLock()  # re-entered when building calls back into a decision (tests)


def group_index(view: ClusterView) -> GroupIndex:
    """The group index of `view`, built and subscribed on first use (later calls are O(1))."""
    index = _INDEXES.get(view)
    if index is not None:
        return index
    with view.lock, _INDEXES_LOCK:  # the view's lock first, as every listener call holds it
        index = _INDEXES.get(view)
        if index is None:
            index = _INDEXES.setdefault(view, GroupIndex.of_view(view))
        return index


def group_pods(view: ClusterView, namespace: str, lws_name: str, key: GroupKey) -> list[PodRecord]:
    """`GroupIndex.pods` of `view`'s index."""
    return group_index(view).pods(namespace, lws_name, key)


def group_keys(view: ClusterView, namespace: str, lws_name: str) -> list[GroupKey]:
    """`GroupIndex.keys` of `view`'s index."""
    return group_index(view).keys(namespace, lws_name)


def lws_pods(view: ClusterView, namespace: str, lws_name: str) -> dict[GroupKey, tuple[PodRecord, ...]]:
    """`GroupIndex.lws_pods` of `view`'s index."""
    return group_index(view).lws_pods(namespace, lws_name)
