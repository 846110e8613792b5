"""Policy `group-taint`: the blast radius of a NoExecute taint, counted in whole groups per set
(an LWS, a set of Workload API gangs; guardhook.groups).

A NoExecute taint evicts every pod that does not tolerate it, through the taint eviction
controllers, which guardhook exempts (they are the repair path): one `kubectl taint nodes` or one
DRA DeviceTaintRule can break every group of every LWS at once. Judged:
- a Node CREATE with, or UPDATE (a PATCH arrives as UPDATE) adding, a `NoExecute` taint: the pods
  bound to that node;
- a `resource.k8s.io` DeviceTaintRule CREATE/UPDATE whose taint has effect `NoExecute` (not
  `None`, DRA's preview, nor `NoSchedule`): the pods using allocated devices it selects, as far as
  the view can tell (guardhook.policies.shared.device_taint_rules).
Pods that tolerate the taint forever are skipped; a toleration with `tolerationSeconds` only delays
the eviction, so such a pod counts as lost. For each set the groups it would lose are added to those
already broken (the view — where a group a taint already in force dooms is broken, so taints in a
row add up — and the eviction ledger); a violation when that exceeds the budget B (the set's
annotation `guardhook.io/max-disrupted-groups`, else `maxDisruptedGroups`; guardhook.budget). The
message lists the sets and their groups. A taint within budget records the groups it dooms in the
ledger (not on a dry run), so the next taint of a `kubectl taint nodes a b c` counts them before the
view shows this one (guardhook.policies.shared.taint_blast); `ledgerTTLSeconds` follows
`group-eviction`.

The node lifecycle and taint eviction controllers (both `node-controller`) and kubelets are
exempt by default: this guards humans and tools, not the repair path.

Fail mode: open. With a stale view the request is allowed with a warning saying it was not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from guardhook.cluster.going import Unless, describe_taint
from guardhook.cluster.model import PodRecord, Taint, node_taints
from guardhook.cluster.taints import added_no_execute, eviction_delay
from guardhook.policies.base import ALLOW, Judgement, Policy, PolicyContext, stale_judgement, target
from guardhook.policies.shared.device_taint_rules import (
    DEVICE_TAINT_RULES,
    RESOURCE_GROUP,
    adds_no_execute,
    rule_blast,
)
from guardhook.policies.shared.taint_blast import Blast, Victim, judge_blast

NODES = "nodes"


class GroupTaint(Policy):
    """The `group-taint` policy (see the module docstring): Node and DeviceTaintRule writes that
    add a NoExecute taint, judged against the group budget shared with `group-eviction`."""

    id = "group-taint"
    targets = (target("", NODES), target(RESOURCE_GROUP, DEVICE_TAINT_RULES))
    default_actions = ("Warn",)
    fail_closed = False
    params = {"maxDisruptedGroups": 1, "ledgerTTLSeconds": 120, "minMaxDisruptedGroups": 0}
    shared_params = {
        "maxDisruptedGroups": "group-eviction",
        "ledgerTTLSeconds": "group-eviction",
        "minMaxDisruptedGroups": "group-eviction",
    }
    param_minimums = {"ledgerTTLSeconds": 1}

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Warn (by default) when a NoExecute taint breaks more whole groups of a set than its
        budget allows; see the module docstring."""
        resource: Mapping[str, Any] = ctx.request.get("resource") or {}
        if resource.get("resource") == NODES:
            return self._judge_node(ctx)
        return self._judge_rule(ctx)

    def _judge_rule(self, ctx: PolicyContext) -> Judgement:
        change = adds_no_execute(ctx)
        if change is None:
            return ALLOW
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        return judge_blast(ctx, rule_blast(ctx.view, change))

    def _judge_node(self, ctx: PolicyContext) -> Judgement:
        old = node_taints(ctx.old_object) if ctx.operation == "UPDATE" else ()
        taints = added_no_execute(node_taints(ctx.object), old)
        if not taints:
            return ALLOW
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        name = ctx.name
        what = f"NoExecute taint {describe_taints(taints)} on node {name}"
        victims = node_victims(ctx.view.pods_on_node(name), taints)
        return judge_blast(ctx, Blast(what, victims, unless=Unless(node=name, taints=taints)))


def describe_taints(taints: Iterable[Taint]) -> str:
    """`key=value:NoExecute, key2:NoExecute`, as `kubectl taint` writes them."""
    return ", ".join(describe_taint(t) for t in taints)


def node_victims(pods: Iterable[PodRecord], taints: Sequence[Taint]) -> list[Victim]:
    """The running pods among `pods` that `taints` evict (now or after a toleration expires);
    judge_blast leaves out those of no group (each pod resolved once, there)."""
    victims = []
    for pod in pods:
        if pod.terminal or pod.terminating:
            continue
        delay = eviction_delay(pod.tolerations, taints)
        if delay is not None:
            victims.append(Victim(pod, delay))
    return victims


POLICY = GroupTaint()
