"""Which groups of a set count as broken for a budget decision: one snapshot of the set and the
ledger entries of one ledger update (`reading` states the invariant)."""

from __future__ import annotations

from collections.abc import Sequence

from guardhook.cluster.model import PodRecord
from guardhook.groups import BrokenGroups, SetSnapshot
from guardhook.ledger import Disruption, Entries


def reading(snapshot: SetSnapshot, entries: Entries) -> BrokenGroups:
    """The groups of `snapshot`'s set that count as broken for a budget decision, from ONE
    reading: one snapshot of the set's groups (guardhook.groups.SetSnapshot, taken under the
    view's lock) and the ledger `entries` read in the same ledger update (whose write is a
    compare-and-swap on them).

    The invariant, kept by every budget decision (evictions, delete-based drains, group-taint,
    resize) and across replicas sharing the ledger: at no time are more than B groups of a set
    broken by disruptions guardhook allowed, because every allowed disruption of a whole group
    is counted by every later decision, first through its ledger entry and then through the view:

    - a group counts as broken when this snapshot shows it not whole, or when an unexpired entry
      of a group of the set (`SetSnapshot.counts`) is recorded for it (`BrokenGroups.recorded`: such a group
      may have healed since, so removing from it is judged against the other broken groups, not
      allowed as from a broken one);
    - an entry stops counting only when this same snapshot shows its disruption seen through:
      its group broken (it counts through the view then), or its group whole again with the
      evicted pod replaced (a pod of that name with another uid, created after the entry was
      recorded). A pod the snapshot does not hold, or holds terminating, never frees an entry
      by itself, and no second read of the view is ever combined with this one;
    - entries leave the ledger's storage only by expiry, so a replica whose view lags counts
      them until its own snapshot shows them seen through;
    - a decision that allows a disruption (of a whole group, or of one that counts as broken: the
      snapshot may lag a group that has healed since) writes its entry with a compare-and-swap
      on the entries it read (a Lease resourceVersion precondition; a conflict re-reads the
      ledger, takes a new snapshot and plans again), so two decisions cannot both count from a
      ledger that holds neither's entry.

    Premise: a replica's view lags the API server by less than a replacement pod takes to become
    Ready (its ADDED event precedes its Ready by a container start-up and a readiness probe, and a
    broken watch makes the view stale, which answers 429). A group the snapshot shows broken is
    then broken or still healing, and removing from it breaks nothing more.

    Clocks: the entry's `recorded` is the ledger's clock and `created` the API server's (whole
    seconds); a replacement created within the second of the recording, or an entry with no
    `recorded`, counts until its TTL (the safe side)."""
    merged = snapshot.broken
    for entry in entries:
        if not snapshot.counts(entry.group) or entry.group in snapshot.broken:
            continue
        if not replaced(entry, snapshot.pods.get(entry.group, ())):
            why = f"{recorded_as(entry)}, not visible yet"
            merged = merged.with_groups((entry.group,), why, recorded=True)
    return merged


def recorded_as(entry: Disruption) -> str:
    """What ledger entry `entry` recorded, for a message: "eviction of POD recorded", "delete of
    POD recorded", "resize of POD recorded", "a NoExecute taint dooming it recorded (it evicts
    POD)" (group-taint's entries name a pod of the doomed group), or "disruption of POD recorded"
    for an entry without a known cause (written before entries had one)."""
    if entry.cause == "taint":
        return f"a NoExecute taint dooming it recorded (it evicts {entry.pod})"
    return f"{entry.cause or 'disruption'} of {entry.pod} recorded"


def superseded(entry: Disruption, record: Disruption) -> bool:
    """Whether `record` (a new entry) makes `entry` redundant: the same group, pod name and uid,
    recorded (known time) no later and expiring no later. `record` then counts its group whenever
    `entry` would (`reading`: a replacement created after `record` was recorded is also
    created after `entry` was), so dropping `entry` keeps every count; without it each retry of
    one pod's eviction (kubectl drain retries every 5 s while a PodDisruptionBudget refuses it
    after guardhook allowed it) added an entry to the Lease until its TTL."""
    return (
        (entry.group, entry.pod, entry.uid) == (record.group, record.pod, record.uid)
        and 0.0 < entry.recorded <= record.recorded
        and entry.expires <= record.expires
    )


def replaced(entry: Disruption, pods: Sequence[PodRecord]) -> bool:
    """Whether `pods` (the entry's group, whole) hold a replacement of the entry's pod: same name,
    another uid, created after the entry was recorded."""
    if not entry.recorded:
        return False
    return any(
        pod.name == entry.pod and pod.uid != entry.uid and pod.created > entry.recorded for pod in pods
    )
