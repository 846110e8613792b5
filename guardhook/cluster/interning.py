"""Equal parts of view records shared instead of copied, so a view of a large cluster stays small.

In a fleet most of what a pod record holds repeats from pod to pod: the namespace, the node name,
label values (the LWS name, the template hash, a group's key), a group's annotations, the owner
reference of every replica of a StatefulSet, the requests and tolerations of one pod template.
Decoded from JSON, each of those is a fresh object per pod (about 1 KB per pod of strings alone).
Records are frozen and nothing mutates their maps, so equal parts are shared:

- strings through `sys.intern` (CPython frees an interned string with its last user, so the table
  does not grow with churn); not the strings that are unique per object (a pod's name and uid):
  interning one shares nothing and costs an entry in the interpreter's table (~60 B a pod);
- the empty map (`EMPTY`): most pods of a fleet have no annotations, many no labels, and an empty
  dict is 64 B each (250 MB over the 2 million pods of issue 53's cluster);
- maps and tuples through small LRU caches: a list returns pods in name order, so the replicas of
  one template arrive together and a few thousand entries catch them; a cache that misses (labels
  unique per pod) only costs its bounded size.

Every function takes decoded JSON and never raises on malformed input (the same rules as the
`guardhook.cluster.model` helpers it stands in for).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

CACHE_SIZE = 4096
"""Entries each LRU cache holds (a few MB at most)."""

_intern = sys.intern

EMPTY: dict[str, str] = {}
"""The one empty label / annotation map every record without any shares. Never mutated (no record's
maps are)."""


def text(value: Any) -> str:
    """`str(value or "")`, interned when `value` is a string."""
    if type(value) is str:
        return _intern(value)
    return str(value or "")


def str_map(value: Any) -> dict[str, str]:
    """`model.str_map(value)` (only string keys and values kept) with its values interned (keys
    come interned from the JSON decoder's key cache)."""
    if not isinstance(value, dict) or not value:
        return EMPTY
    mapped = {key: _intern(item) for key, item in value.items() if type(key) is str and type(item) is str}
    if len(mapped) == len(value):
        return mapped
    # Something other than a plain str: keep str subclasses as model.str_map does, drop the rest.
    kept = {key: item for key, item in value.items() if isinstance(key, str) and isinstance(item, str)}
    return kept or EMPTY


def typed_str_map(value: dict[str, str]) -> dict[str, str]:
    """A copy of `value`, a map already known to hold only strings (a typed decoder checked it),
    with its keys and values interned: msgspec, unlike orjson, shares the strings of repeated
    keys only up to 32 bytes (most of an LWS pod's label keys are longer). `EMPTY` when `value` is
    empty."""
    if not value:
        return EMPTY
    return {_intern(key): _intern(item) for key, item in value.items()}


def shared_str_map(value: Any) -> dict[str, str]:
    """`str_map(value)`, shared with an equal map read recently: for small maps that repeat across
    pods (a group's annotations). The result must not be mutated."""
    if type(value) is dict and len(value) <= 4:
        try:  # looked up by the decoded pairs: a hit (the common case) builds nothing
            return _shared_map(tuple(value.items()))
        except TypeError:  # a value that is not hashable (malformed): filtered, not shared
            pass
    return str_map(value)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _shared_map(pairs: tuple[tuple[Any, Any], ...]) -> dict[str, str]:
    return {_intern(key): value for key, value in str_map(dict(pairs)).items()} or EMPTY


def shared_map(value: dict[str, Any]) -> dict[str, Any]:
    """`value` (a map of strings to hashable values, such as a device's attributes or capacity),
    or an equal map read recently: every GPU of one model publishes the same attributes, so a
    fleet's hundreds of thousands of devices share a few maps. `EMPTY` when empty. The result must
    not be mutated."""
    if not value:
        return EMPTY
    try:
        return _shared_any(tuple(value.items()))
    except TypeError:  # a value that is not hashable: kept as it is, not shared
        return value


@functools.lru_cache(maxsize=CACHE_SIZE)
def _shared_any(pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    return {_intern(key): value for key, value in pairs}
