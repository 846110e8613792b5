"""The group key: its type and its rules (what an ordinal is, how keys sort, which count).

A group's key within its set is always a string (`GroupKey`): an Ordinal LWS group's ordinal
("3", as its `group-index` label says it), a Hash group's 40-character key (lws KEP-898), a gang's
name. These rules are the group model's (guardhook.groups): every reader of groups, the ledger
and the plans use them; the facts they rest on (the key length, the labels) are the LWS API's
(guardhook.cluster.lws).
"""

from __future__ import annotations

from guardhook.cluster.lws import HASH_KEY_LENGTH
from guardhook.cluster.model import digits

GroupKey = str
"""A group's key within its set, always a string: an Ordinal LWS group's ordinal ("3", as its
group-index label says it), a Hash group's 40-character key. Only the Lease ledger's wire form
keeps an ordinal as a JSON number (guardhook.ledger.base), so replicas of two versions agree."""

ORDINAL_DIGITS = 10
"""An ordinal is at most 10 digits (spec.replicas is an int32); a longer all-digit key is a key."""


def ordinal(key: GroupKey) -> int | None:
    """The ordinal `key` stands for ("3" -> 3), or None for a Hash key (or anything else)."""
    return int(key) if len(key) <= ORDINAL_DIGITS and digits(key) else None


def ordinal_key(index: int) -> GroupKey:
    """The key of ordinal group `index` ("3" for 3)."""
    return str(index)


def key_order(key: GroupKey) -> tuple[bool, int, str]:
    """A sort key putting ordinal groups first in numeric order, then Hash keys in text order."""
    number = ordinal(key)
    return (True, 0, key) if number is None else (False, number, "")


def below_replicas(key: GroupKey, replicas: int) -> bool:
    """Whether group `key` is one `spec.replicas` asks for: an ordinal below it; a Hash group
    always (Hash groups have no order: the leader Deployment's ReplicaSet chooses whom to remove)."""
    number = ordinal(key)
    return number is None or 0 <= number < replicas


def is_hash_key(value: str) -> bool:
    """Whether a group-index label value is a Hash group key (40 lowercase letters or digits)."""
    return len(value) == HASH_KEY_LENGTH and value.isascii() and value.isalnum() and value.lower() == value
