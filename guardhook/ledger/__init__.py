"""The eviction disruption ledger: group disruptions the budget policies allowed (evictions, drain
deletes, resize restarts, and the groups a NoExecute taint dooms) and the cluster view may not
show yet, recorded atomically so concurrent disruptions cannot exceed a budget.

This plays the part of a PodDisruptionBudget's `status.disruptedPods` (policy/v1): an allowed
eviction is written down *before* the answer, and counts as a broken group until the view shows
it seen through or the entry's expiry passes (so an eviction refused later by a PDB or another
webhook does not hold budget for ever); the counting rule is guardhook.budget's (`reading`).
The ledger is keyed by set (guardhook.groups.SetRef); each set is stored under the key earlier
versions used (`stored_key`), so Leases written before keep counting.

Two implementations share the `Ledger` protocol: `MemoryLedger` (one process, static views) and
`LeaseLedger` (one coordination.k8s.io/v1 Lease per set, shared by every guardhook replica).
"""

from __future__ import annotations

from guardhook.cluster.sources import Source
from guardhook.ledger.base import (
    CAUSES,
    Disruption,
    Entries,
    Ledger,
    LedgerError,
    LedgerKey,
    Plan,
    StoredKey,
    stored_key,
)
from guardhook.ledger.memory import MemoryLedger


def open_ledger(source: Source, namespace: str) -> Ledger:
    """The ledger for a cluster source: a Lease ledger in `namespace` for a live source (built
    from `guardhook.cluster.kube.api_client`), else an in-memory one. Raises what `api_client` raises."""
    if not source.live:
        return MemoryLedger()
    from guardhook.cluster.kube import api_client
    from guardhook.ledger.lease import LeaseLedger

    # No urllib3 retries: the ledger sits on the webhook's request path, and an unreachable API
    # server must reach the policy's failure mode within the webhook's timeout.
    return LeaseLedger(api_client(source, retries=False), namespace)


__all__ = [
    "CAUSES",
    "Disruption",
    "Entries",
    "Ledger",
    "LedgerError",
    "LedgerKey",
    "MemoryLedger",
    "Plan",
    "StoredKey",
    "open_ledger",
    "stored_key",
]
