"""The DeviceTaintRule part of policy `group-taint`: which pods a NoExecute device taint evicts.

The device taint eviction controller (`device-taint-eviction-controller`, KEP-5055) evicts every pod
using a ResourceClaim whose allocated devices carry a NoExecute taint the claim's request does not
tolerate (a toleration with `tolerationSeconds` only delays it). A DeviceTaintRule taints every
device its `spec.deviceSelector` selects: `driver`, `pool`, `device` (each unset = any); in
`v1alpha3` of Kubernetes 1.33–1.34 also `deviceClassName` and CEL `selectors`, removed later. An
empty selector selects every device; no selector selects none.

Everything is read from the cluster view (guardhook.cluster.dra records, ClusterView lookups): the
claims' `status.allocation.devices.results` (driver / pool / device per request), the requests'
tolerations, and the pods using each claim (`spec.resourceClaims`, `status.resourceClaimStatuses`,
`status.extendedResourceClaimStatus`, the claim's `status.reservedFor`).

What the view cannot tell, reported as a warning and counted as selected (over- rather than
under-warning): whether a device is selected by a DeviceClass or CEL selector when the device is
not published in any ResourceSlice of the view (only slices of a pool's newest generation
count, as for the scheduler's allocator), the class is not in the view, or the expression
needs Kubernetes' CEL library (quantities, semver) that cel-python lacks. Devices not allocated to
any claim evict nobody; claims or pods the view does not hold cannot be counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.dra import (
    ClassMatcher,
    Device,
    DeviceId,
    DeviceTaintRuleRecord,
    ResourceClaimRecord,
    request_tolerations,
    rule_selects,
)
from guardhook.cluster.going import Unless
from guardhook.cluster.taints import NO_EXECUTE, eviction_delay
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import resolve
from guardhook.policies.base import PolicyContext
from guardhook.policies.shared.taint_blast import Blast, Victim

RESOURCE_GROUP = "resource.k8s.io"
DEVICE_TAINT_RULES = "devicetaintrules"


@dataclass(frozen=True)
class RuleChange:
    """A DeviceTaintRule request that adds a NoExecute device taint: the rule as it will be."""

    rule: DeviceTaintRuleRecord

    @property
    def what(self) -> str:
        """`DeviceTaintRule <name> (<key>[=<value>]:<effect>)`, how messages name the rule."""
        taint = self.rule.taint
        value = f"={taint.value}" if taint.value else ""
        return f"DeviceTaintRule {self.rule.name} ({taint.key}{value}:{taint.effect})"


def adds_no_execute(ctx: PolicyContext) -> RuleChange | None:
    """The rule when this CREATE/UPDATE makes it taint devices NoExecute anew; None when its effect
    is not NoExecute (`None`, DRA's preview, or `NoSchedule`), it selects nothing, or an UPDATE
    leaves an already NoExecute rule's selector and taint as they were."""
    rule = DeviceTaintRuleRecord.from_object(ctx.object)
    if rule.taint.effect != NO_EXECUTE or not rule.has_selector:
        return None
    if ctx.operation == "UPDATE" and ctx.old_object:
        old = DeviceTaintRuleRecord.from_object(ctx.old_object)
        if old.has_selector and _same_reach(old, rule):
            return None
    return RuleChange(rule)


def _same_reach(old: DeviceTaintRuleRecord, new: DeviceTaintRuleRecord) -> bool:
    return (old.driver, old.pool, old.device, old.device_class, old.selectors, old.taint) == (
        new.driver,
        new.pool,
        new.device,
        new.device_class,
        new.selectors,
        new.taint,
    )


def rule_blast(view: ClusterView, change: RuleChange) -> Blast:
    """The running group members (guardhook.groups.resolve) the rule's NoExecute taint evicts,
    through their allocated claims, and what the view could not tell."""
    rule = change.rule
    selecting = _Selection(view, rule)
    victims: dict[tuple[str, str], Victim] = {}
    for claim in view.resource_claims():
        delay = _claim_delay(claim, rule, selecting)
        if delay is None:
            continue
        for pod in view.pods_using_claim(claim.namespace, claim.name):
            if pod.terminal or pod.terminating or resolve(view, pod) is None:
                continue
            known = victims.get(pod.key)
            if known is None or delay < known.delay:
                victims[pod.key] = Victim(pod, delay)
    return Blast(change.what, list(victims.values()), selecting.notes(), Unless(rule=rule.name))


def _claim_delay(
    claim: ResourceClaimRecord, rule: DeviceTaintRuleRecord, selecting: _Selection
) -> int | None:
    """Seconds until the rule evicts the users of `claim` (shortest over its tainted devices), or
    None when no allocated device is selected or every selected one's request tolerates it."""
    delays = []
    for entry in claim.allocated:
        if not selecting.selects(entry.id):
            continue
        delay = eviction_delay(request_tolerations(claim, entry.request), (rule.taint,))
        if delay is not None:
            delays.append(delay)
    return min(delays) if delays else None


class _Selection:
    """Whether the rule selects a device (dra.rule_selects): driver / pool / device name from the
    allocation itself; a v1alpha3 DeviceClass or CEL selector judged on the device as a
    ResourceSlice of its pool's newest generation publishes it (ClusterView.published_devices)."""

    def __init__(self, view: ClusterView, rule: DeviceTaintRuleRecord) -> None:
        self.view = view
        self.rule = rule
        self.unknown: dict[str, list[str]] = {}
        """why -> the allocated devices whose selection the view cannot judge that way."""
        self._devices: dict[DeviceId, Device] | None = None
        self._needs_devices = bool(rule.device_class or rule.selectors)
        self._matcher = ClassMatcher()
        self._labels = {
            "deviceClassName": f"its DeviceClass {rule.device_class} selects",
            "selectors": "its CEL selectors select",
        }

    def selects(self, device: DeviceId) -> bool:
        """dra.rule_selects, with what the view cannot tell counted as selected and noted."""
        if self._devices is None:  # newest pool generation only, as the allocator sees them
            self._devices = self.view.published_devices() if self._needs_devices else {}
        unknown: list[str] = []
        verdict = rule_selects(
            self.rule, device, self._devices.get(device), self.view.device_class, self._matcher, unknown
        )
        for part in unknown:
            self.unknown.setdefault(self._labels[part], []).append("/".join(device))
        return verdict is not False

    def notes(self) -> tuple[str, ...]:
        """One line per selector the view could not judge, naming a few of the devices."""
        out = []
        for label, devices in sorted(self.unknown.items()):
            shown = ", ".join(devices[:3]) + (f" and {len(devices) - 3} more" if len(devices) > 3 else "")
            out.append(
                f"the view cannot tell whether {label} {len(devices)} allocated device"
                f"{'s' if len(devices) > 1 else ''} ({shown}): a device not published in any "
                f"ResourceSlice, a DeviceClass not in the view, or CEL that needs Kubernetes' CEL "
                f"library; counted as selected"
            )
        return tuple(out)
