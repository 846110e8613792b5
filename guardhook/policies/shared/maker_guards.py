"""Other eviction guards: admission webhooks besides guardhook's on `pods/eviction`.

A group maker may ship its own workload-aware eviction guard (Kthena's ModelServing eviction
webhook, volcano-sh/kthena #1481 / PR #1485, budgets ServingGroups with its own `minAvailable`).
Two webhooks judging one eviction with two budgets give a drain two answers. `audit` lists every
entry of another webhook configuration whose rules match `pods/eviction` CREATE
(`eviction_guards`), and group-eviction's `deferToMakerGuards` lets guardhook step aside for a
maker: each item `<maker>=<webhook entry name>` (the maker as guardhook.groups.ref.MAKERS names
it, e.g. `Kthena ModelServing=modelserving-eviction.kthena.io`) makes an eviction of that maker's
group allowed with an audit annotation naming the entry — while the view shows that entry
installed and matching evictions; otherwise guardhook keeps judging (a guard that is gone guards
nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.view.store import ClusterView
from guardhook.cluster.webhooks import WebhookEntry, overlap
from guardhook.groups.ref import GroupRef
from guardhook.policies.base import Judgement

DEFER_PARAM = "deferToMakerGuards"
DEFERRED_KEY = "deferred-to"
EVICTION = frozenset({("", "pods/eviction", "CREATE")})


@dataclass(frozen=True)
class EvictionGuard:
    """Another webhook entry on `pods/eviction`: its configuration (kind, name) and the entry."""

    kind: str
    configuration: str
    entry: WebhookEntry

    def describe(self) -> str:
        """`entry (ValidatingWebhookConfiguration name, failurePolicy Fail, calls service ns/svc:443 /p)`."""
        return (
            f"{self.entry.name} ({self.kind} {self.configuration}, failurePolicy "
            f"{self.entry.failure_policy}, calls {self.entry.target})"
        )

    def as_dict(self) -> dict[str, str]:
        """camelCase, as Kubernetes writes JSON."""
        return {
            "kind": self.kind,
            "configuration": self.configuration,
            "entry": self.entry.name,
            "failurePolicy": self.entry.failure_policy,
            "target": self.entry.target,
        }


def eviction_guards(view: ClusterView) -> list[EvictionGuard]:
    """Every entry of another (not `*.guardhook.io`) webhook configuration whose rules match
    `pods/eviction` CREATE, by configuration and entry name, among the webhook configurations the
    view holds (none when it may not read them: `audit` says so among what it could not check)."""
    found = [
        EvictionGuard(record.kind, record.name, entry)
        for record in view.webhook_configurations()
        for entry in record.entries
        if not entry.own and overlap(entry.matches, EVICTION)
    ]
    return sorted(found, key=lambda g: (g.kind, g.configuration, g.entry.name))


def deferrals(params: Mapping[str, Any]) -> dict[str, str]:
    """maker -> webhook entry name, from `deferToMakerGuards` (`<maker>=<entry>` items)."""
    found: dict[str, str] = {}
    for item in params.get(DEFER_PARAM) or ():
        maker, sep, entry = str(item).partition("=")
        if sep and maker.strip() and entry.strip():
            found[maker.strip()] = entry.strip()
    return found


def item_problem(items: Sequence[Any]) -> str | None:
    """Why `deferToMakerGuards` is malformed, or None."""
    for item in items:
        maker, sep, entry = str(item).partition("=") if isinstance(item, str) else ("", "", "")
        if not sep or not maker.strip() or not entry.strip():
            return "must be a list of `<maker>=<webhook entry name>` strings"
    return None


def deferred(view: ClusterView, ref: GroupRef | None, params: Mapping[str, Any]) -> Judgement | None:
    """Allow, with the audit annotation `deferred-to`, an eviction of a pod of `ref`'s group when
    group-eviction defers that maker to a webhook entry the view shows installed on
    `pods/eviction`; None (judge as usual) otherwise."""
    if ref is None:
        return None
    name = deferrals(params).get(ref.maker)
    if not name:
        return None
    guard = next((g for g in eviction_guards(view) if g.entry.name == name), None)
    if guard is None:
        return None
    why = f"{ref.describe()} is guarded by {ref.maker}'s own eviction webhook {guard.describe()}"
    return Judgement(audit_annotations=((DEFERRED_KEY, f"allowed: {why}; guardhook recorded nothing"),))
