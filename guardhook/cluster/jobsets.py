"""JobSets (kubernetes-sigs/jobset, `jobset.x-k8s.io/v1alpha2`): what guardhook reads of one, its
failure policy, to say whether a failed Job restarts the whole JobSet (guardhook.groups.jobset).

`spec.failurePolicy` (api/jobset/v1alpha2/jobset_types.go FailurePolicy): `maxRestarts`,
`restartStrategy` (`Recreate`, the default; `BlockingRecreate`; `InPlaceRestart`) and `rules`,
each with an `action` (`FailJobSet`, `RestartJobSet`, `RestartJobSetAndIgnoreMaxRestarts`,
`RestartJob`, `RestartJobAndIgnoreMaxRestarts`), `onJobFailureReasons`,
`onJobFailureMessagePatterns` and `targetReplicatedJobs` (empty lists match anything). For a
failed Job the first matching rule acts; with no match the action is `RestartJobSet`; with no
failure policy at all the JobSet fails (pkg/controllers/failure_policy.go executeFailurePolicy).
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.model import as_dict, as_list, metadata
from guardhook.wire import KubeObject

JOBSET_API_GROUP = "jobset.x-k8s.io"
JOBSET_API_VERSION = f"{JOBSET_API_GROUP}/v1alpha2"
RESTART_JOBSET = "RestartJobSet"
RESTARTS_WHOLE = (RESTART_JOBSET, "RestartJobSetAndIgnoreMaxRestarts")
"""Actions that recreate every Job of the JobSet (RestartJobSet fails it once `maxRestarts` is
spent: whole either way)."""
LOST_POD_REASON = "BackoffLimitExceeded"
"""The Job failure reason a lost pod leads to once the Job's backoffLimit is spent (k8s.io/api
batch/v1 JobReasonBackoffLimitExceeded): the failure a disruption causes."""
DEFAULT_RESTART_STRATEGY = "Recreate"


@dataclass(frozen=True, slots=True)
class FailureRule:
    """One `spec.failurePolicy.rules` entry: its name, action, failure reasons and replicatedJob
    targets (empty: any), and whether it also asks for message patterns (which a guess cannot
    judge)."""

    name: str
    action: str
    reasons: tuple[str, ...]
    targets: tuple[str, ...]
    message_patterns: bool

    def applies(self, replicated_job: str, reason: str) -> bool:
        """Whether the rule can match a failed Job of `replicated_job` failing for `reason`."""
        return (not self.targets or replicated_job in self.targets) and (
            not self.reasons or reason in self.reasons
        )


@dataclass(frozen=True, slots=True)
class JobSetRecord:
    """A JobSet as guardhook reads it: `policy` False when it has no `spec.failurePolicy` (a
    failed Job fails the JobSet), else its `rules`, `restart_strategy` and `max_restarts`."""

    namespace: str
    name: str
    policy: bool = False
    rules: tuple[FailureRule, ...] = ()
    restart_strategy: str = DEFAULT_RESTART_STRATEGY
    max_restarts: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def restarts_whole(self, replicated_job: str, reason: str = LOST_POD_REASON) -> str:
        """Why a Job of `replicated_job` failing for `reason` restarts the whole JobSet, or ""
        when it does not: the first rule that applies acts (a rule with message patterns may not
        match, so it counts only when its action restarts the whole JobSet: the stricter reading),
        else the default RestartJobSet."""
        if not self.policy:
            return ""
        for rule in self.rules:
            if not rule.applies(replicated_job, reason):
                continue
            if rule.action in RESTARTS_WHOLE:
                return f"failurePolicy rule {rule.name} ({rule.action}) recreates every Job"
            if not rule.message_patterns:
                return ""
        return f"failurePolicy's default action {RESTART_JOBSET} recreates every Job"

    @staticmethod
    def from_object(obj: KubeObject) -> JobSetRecord:
        """The record of a decoded JobSet (never raises)."""
        meta = metadata(obj)
        spec = as_dict(obj.get("spec"))
        raw = spec.get("failurePolicy")
        policy = as_dict(raw)
        rules = []
        for index, entry in enumerate(as_list(policy.get("rules"))):
            entry = as_dict(entry)
            rules.append(
                FailureRule(
                    name=str(entry.get("name") or f"failurePolicyRule{index}"),
                    action=str(entry.get("action") or ""),
                    reasons=tuple(str(r) for r in as_list(entry.get("onJobFailureReasons"))),
                    targets=tuple(str(t) for t in as_list(entry.get("targetReplicatedJobs"))),
                    message_patterns=bool(as_list(entry.get("onJobFailureMessagePatterns"))),
                )
            )
        max_restarts = policy.get("maxRestarts")
        return JobSetRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            policy=isinstance(raw, dict),
            rules=tuple(rules),
            restart_strategy=str(policy.get("restartStrategy") or DEFAULT_RESTART_STRATEGY),
            max_restarts=max_restarts if isinstance(max_restarts, int) else 0,
        )
