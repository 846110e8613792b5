"""`guardhook uninstall`: take guardhook out of a cluster leaving nothing that blocks a drain or
holds a leader unready, then say what `kubectl delete -k` removes after it.

The steps, in this order, each safe to repeat (a second run finds nothing left to do):

1. Delete guardhook's webhook configurations (every Validating/MutatingWebhookConfiguration with an
   entry named `*.guardhook.io`). First, because the eviction entry fails closed: with its pods gone
   it would refuse every eviction in opted-in namespaces; and because a leader created while the
   group-readiness entry is still there would get a gate after step 4 released the others.
2. Stop the reconcilers: scale the Deployment (`--namespace`/`--deployment`) to 0, so pdb-sync does
   not recreate the PDBs step 3 deletes, nor group-readiness set a condition False again; then wait
   (at most `--wait` seconds, default WAIT_SECONDS) until the Deployment's pods are gone: a pod in
   its preStop delay and graceful stop still holds the readiness reconciler's Lease and would set a
   released leader's condition back to False. Pods still there at the end are an error (exit 1).
3. Delete every per-group PDB guardhook wrote (label `app.kubernetes.io/managed-by: guardhook`,
   guardhook.pdbsync.desired.is_managed): left behind, a whole group's PDB blocks drains for as long
   as its LWS lives.
4. Release every held readiness gate: a pod (a leader) carrying `guardhook.io/group-ready` whose
   condition is not True gets it True (reason GuardhookUninstalled), whether or not its LWS is
   there. A readiness gate cannot be removed from a running pod, so without this the leader stays
   unready until its group is recreated.
5. Delete guardhook's admission-policy floor (every ValidatingAdmissionPolicy and Binding labelled
   `app.kubernetes.io/component: admission-policy-floor`, guardhook.floor), bindings first: left
   behind, it keeps refusing single-worker deletes and LWS-wide PDBs with guardhook gone. Last, so
   it holds while the webhook configurations and the Deployment go.

Then the cluster is listed again: anything of steps 1, 3, 4 or 5 still there is reported and the exit
code is 1 (rerun it). `--dry-run` prints the steps and changes nothing. What is left (the namespace
with the Deployment, Service, ConfigMap, Secret and ledger Leases; the ClusterRoles and their
bindings) holds nothing up and goes with `kubectl delete -k` of the overlay that installed it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from guardhook.commands import argtypes
from guardhook.commands.common import live_client, require_cluster

if TYPE_CHECKING:
    from kubernetes import client

    from guardhook.cluster.view.store import ClusterView
    from guardhook.readiness.desired import Entry

UNINSTALLED = "GuardhookUninstalled"
RELEASE_MESSAGE = "guardhook is being uninstalled; gate released"
EXIT_LEFT_OVER = 1
WAIT_SECONDS = 120.0
"""Default bound on waiting for guardhook's pods to stop: the manifests' terminationGracePeriodSeconds
(45: preStop 10 s + gunicorn's 25 s graceful stop) with room for a slow kubelet."""
POLL_SECONDS = 1.0
LEFT_FOR_KUBECTL = (
    "left for `kubectl delete -k manifests/overlays/<the overlay you installed>` (or "
    "`kubectl delete namespace {namespace}` and the ClusterRoles/ClusterRoleBindings labelled "
    "app.kubernetes.io/name=guardhook): nothing there blocks a drain or holds a leader"
)


@dataclass
class UninstallPlan:
    """What uninstall does: webhook configurations to delete ((kind, name)), the Deployment to
    scale to 0 ("namespace/name"), managed PDBs to delete ((namespace, name)), leaders to release."""

    webhooks: list[tuple[str, str]] = field(default_factory=list)
    deployment: str = ""
    pdbs: list[tuple[str, str]] = field(default_factory=list)
    releases: list[Entry] = field(default_factory=list)
    absent_deployment: str = ""
    """The Deployment (namespace/name) that a `--cluster-state` does not hold; `deployment` is then
    empty and step 2 says so instead of naming it as a step."""
    floor: list[tuple[str, str]] = field(default_factory=list)
    """The admission-policy floor's policies and bindings ((kind, name)), bindings first."""

    @property
    def leftovers(self) -> list[str]:
        """Steps 1, 3, 4 and 5 still to do, one line each (what a verification finds left)."""
        return [
            *(f"{kind} {name}" for kind, name in self.webhooks),
            *(f"PodDisruptionBudget {ns}/{name}" for ns, name in self.pdbs),
            *(f"{kind} {name}" for kind, name in self.floor),
            *(f"held readiness gate of pod {e.namespace}/{e.pod}" for e in self.releases),
        ]

    def steps(self) -> list[dict[str, Any]]:
        """The steps for scripts, in order: one object per change, `{"step": 1-5, "kind",
        "name" ("namespace/name" for a namespaced object), "action": delete|scale-to-zero|release}`.
        No step 2 when the cluster state showed no Deployment (`deployment` empty)."""
        out: list[dict[str, Any]] = [
            {"step": 1, "kind": kind, "name": name, "action": "delete"} for kind, name in self.webhooks
        ]
        if self.deployment:
            out.append({"step": 2, "kind": "Deployment", "name": self.deployment, "action": "scale-to-zero"})
        out += [
            {"step": 3, "kind": "PodDisruptionBudget", "name": f"{ns}/{name}", "action": "delete"}
            for ns, name in self.pdbs
        ]
        out += [
            {"step": 4, "kind": "Pod", "name": f"{e.namespace}/{e.pod}", "action": "release"}
            for e in self.releases
        ]
        out += [{"step": 5, "kind": kind, "name": name, "action": "delete"} for kind, name in self.floor]
        return out

    def lines(self) -> list[str]:
        """The steps for people, in order."""
        out = [f"1. delete {kind} {name}" for kind, name in self.webhooks] or [
            "1. no guardhook webhook configuration"
        ]
        if self.deployment:
            out.append(f"2. scale Deployment {self.deployment} to 0 replicas")
        else:
            out.append(f"2. no Deployment {self.absent_deployment} in the cluster state")
        out += [f"3. delete PodDisruptionBudget {ns}/{name}" for ns, name in self.pdbs] or [
            "3. no per-group PodDisruptionBudget"
        ]
        out += [
            f"4. release pod {e.namespace}/{e.pod} (guardhook.io/group-ready=True)" for e in self.releases
        ] or ["4. no held readiness gate"]
        out += [f"5. delete {kind} {name}" for kind, name in self.floor] or ["5. no admission-policy floor"]
        return out


def add_parser(commands: Any) -> None:
    """Register `guardhook uninstall` on the CLI's subparsers."""
    cmd = commands.add_parser(
        "uninstall",
        help="remove guardhook's webhooks, per-group PDBs and held readiness gates (then kubectl delete -k)",
    )
    cmd.add_argument("--dry-run", action="store_true", help="print the steps; change nothing")
    cmd.add_argument(
        "--namespace", default="guardhook-system", help="guardhook's namespace (default guardhook-system)"
    )
    cmd.add_argument("--deployment", default="guardhook", help="guardhook's Deployment (default guardhook)")
    cmd.add_argument(
        "--wait",
        type=argtypes.seconds_or_zero,
        default=WAIT_SECONDS,
        metavar="SECONDS",
        help=f"how long to wait for guardhook's pods to stop after scaling to 0 (default {WAIT_SECONDS:g})",
    )
    cmd.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    cmd.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="uninstall from the cluster of this kubeconfig (default: in-cluster config, then $KUBECONFIG, "
        "then ~/.kube/config)",
    )
    cmd.add_argument(
        "--cluster-state",
        action="append",
        default=[],
        metavar="PATH",
        help="print the steps for these manifests or `kubectl get -o yaml` dumps (repeatable); "
        "changes nothing",
    )
    cmd.set_defaults(run=run_uninstall)


def plan_uninstall(view: ClusterView, namespace: str, deployment: str) -> UninstallPlan:
    """The steps for the cluster `view` shows (pure: reads the view only)."""
    from guardhook.cluster.lws import LWS_KIND
    from guardhook.cluster.model import metadata
    from guardhook.groups import resolve
    from guardhook.groups.ready import GATE, GroupReadiness, gated
    from guardhook.pdbsync.desired import is_managed
    from guardhook.readiness.desired import Entry

    result = UninstallPlan(deployment=f"{namespace}/{deployment}")
    for configuration in view.webhook_configurations():
        if any(entry.own for entry in configuration.entries):
            result.webhooks.append((configuration.kind, configuration.name))
    result.webhooks.sort()
    for pdb in view.all_pdbs():
        if is_managed(pdb):
            meta = metadata(pdb)
            result.pdbs.append((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
    result.pdbs.sort()
    floor = [(r.kind, r.name) for r in view.admission_policies() if r.floor]
    result.floor = sorted(floor, key=lambda kind_name: (not kind_name[0].endswith("Binding"), kind_name[1]))
    release = GroupReadiness(True, UNINSTALLED, RELEASE_MESSAGE)
    # Every pod carrying the gate, not only leaders of LWSs the view holds: a gate outlives its
    # LWS's opt-in, and a pod whose LWS is gone (or unreadable) is held just the same.
    for pod in sorted(view.all_pods(), key=lambda p: (p.namespace, p.name)):
        current = pod.gate_conditions.get(GATE)
        if gated(pod) and not pod.terminating and (current is None or current.status != "True"):
            ref = resolve(view, pod)
            lws, group = (ref.set.name, ref.key) if ref is not None and ref.set.kind == LWS_KIND else ("", "")
            result.releases.append(
                Entry(pod.namespace, pod.name, pod.uid, lws, group, release, current, "patch")
            )
    return result


def run_uninstall(args: argparse.Namespace) -> int:
    """Plan, apply (unless `--dry-run`), verify. Exit 0 when nothing is left, 1 when something is
    (or a step failed), 2 for an unusable source (SourceError) or the bundled sample fleet."""
    from guardhook.cluster.sources import choose_source
    from guardhook.commands.common import SourceError, open_view

    source = choose_source(args.cluster_state, args.kubeconfig)
    require_cluster(source, "uninstall")
    view = open_view(source, 60.0)
    planned = plan_uninstall(view, args.namespace, args.deployment)
    if not source.live and not _has_deployment(source.paths, args.namespace, args.deployment):
        planned.absent_deployment, planned.deployment = planned.deployment, ""
    if args.dry_run or not source.live:
        _print(args, planned, [], [], dry_run=True)
        return 0
    if not view.readable("validatingwebhookconfigurations") or not view.readable(
        "mutatingwebhookconfigurations"
    ):
        raise SourceError("cannot list the webhook configurations (RBAC): run it as a cluster admin")
    api = live_client(source, retries=False)
    errors = apply_uninstall(api, planned, wait_seconds=args.wait)
    after = plan_uninstall(open_view(source, 60.0), args.namespace, args.deployment)
    _print(args, planned, errors, after.leftovers, dry_run=False)
    return EXIT_LEFT_OVER if errors or after.leftovers else 0


def _has_deployment(paths: tuple[str, ...], namespace: str, name: str) -> bool:
    """Whether the manifests at `paths` (a `--cluster-state`) hold the Deployment namespace/name:
    the view keeps no Deployments, and a dry run must not name one the state does not have."""
    from guardhook.cluster.model import metadata
    from guardhook.cluster.view.manifests import load_paths

    for manifest in load_paths(paths):
        meta = metadata(manifest.obj)
        if manifest.obj.get("kind") == "Deployment" and (meta.get("namespace"), meta.get("name")) == (
            namespace,
            name,
        ):
            return True
    return False


def apply_uninstall(
    api: client.ApiClient, planned: UninstallPlan, wait_seconds: float = WAIT_SECONDS
) -> list[str]:
    """Carry out `planned` in order, waiting up to `wait_seconds` after the scale to 0 for the
    Deployment's pods to be gone; a 404 (gone already) is no error. Returns the errors (one for
    pods still there after the wait)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from guardhook.readiness.apply import Outcome, patch_condition

    errors: list[str] = []
    admission = client.AdmissionregistrationV1Api(api)
    delete = {
        "ValidatingWebhookConfiguration": admission.delete_validating_webhook_configuration,
        "MutatingWebhookConfiguration": admission.delete_mutating_webhook_configuration,
    }

    def attempt(what: str, call: Any) -> None:
        try:
            call()
        except ApiException as exc:
            if exc.status != 404:
                errors.append(f"{what}: HTTP {exc.status} {exc.reason}")

    for kind, name in planned.webhooks:
        attempt(f"delete {kind} {name}", lambda kind=kind, name=name: delete[kind](name))
    namespace, _, deployment = planned.deployment.partition("/")
    selector: list[str] = []
    attempt(
        f"scale Deployment {planned.deployment}",
        lambda: selector.append(_scale_to_zero(client.AppsV1Api(api), namespace, deployment)),
    )
    if selector and selector[0]:
        left = _wait_for_pods_gone(client.CoreV1Api(api), namespace, selector[0], wait_seconds)
        if left:
            errors.append(
                f"Deployment {planned.deployment}: pods still stopping after {wait_seconds:g} s "
                f"({', '.join(left[:5])}); one may still hold the readiness Lease: run it again"
            )
    policy = client.PolicyV1Api(api)
    for ns, name in planned.pdbs:
        attempt(
            f"delete PodDisruptionBudget {ns}/{name}",
            lambda ns=ns, name=name: policy.delete_namespaced_pod_disruption_budget(name, ns),
        )
    delete_floor = {
        "ValidatingAdmissionPolicyBinding": admission.delete_validating_admission_policy_binding,
        "ValidatingAdmissionPolicy": admission.delete_validating_admission_policy,
    }
    outcome = Outcome()
    core: Any = client.CoreV1Api(api)  # guardhook.readiness.apply.PodStatusApi
    for entry in planned.releases:
        patch_condition(core, entry, outcome)
    for kind, name in planned.floor:
        attempt(f"delete {kind} {name}", lambda kind=kind, name=name: delete_floor[kind](name))
    return errors + outcome.errors


def _scale_to_zero(apps: Any, namespace: str, name: str) -> str:
    """Set the Deployment's replicas to 0 (read, then replace: a conflict is an error to rerun);
    returns its pods' label selector (matchLabels as `k=v,...`; "" when it has none)."""
    deployment = apps.read_namespaced_deployment(name, namespace, _preload_content=False)
    body = json.loads(deployment.data)
    body.setdefault("spec", {})["replicas"] = 0
    apps.replace_namespaced_deployment(name, namespace, body)
    labels = ((body["spec"].get("selector") or {}).get("matchLabels")) or {}
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def _wait_for_pods_gone(core: Any, namespace: str, selector: str, seconds: float) -> list[str]:
    """Poll the pods matching `selector` in `namespace` until there are none or `seconds` passed;
    the names still there (empty when all are gone). A failed list counts as still there."""
    import time

    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + seconds
    while True:
        try:
            pods = core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
            names = [str(p["metadata"]["name"]) for p in json.loads(pods.data).get("items") or []]
        except ApiException as exc:
            names = [f"(cannot list pods: HTTP {exc.status})"]
        if not names or time.monotonic() >= deadline:
            return names
        time.sleep(POLL_SECONDS)


def _print(
    args: argparse.Namespace, planned: UninstallPlan, errors: list[str], left: list[str], dry_run: bool
) -> None:
    remaining = LEFT_FOR_KUBECTL.format(namespace=args.namespace)
    if args.format == "json":
        steps = [{**step, "result": _result(step, errors, left, dry_run)} for step in planned.steps()]
        document = {"dryRun": dry_run, "steps": steps, "errors": errors, "left": left, "next": remaining}
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    print(("Would do" if dry_run else "Done") + ":")
    for line in planned.lines():
        print(f"  {line}")
    for error in errors:
        print(f"error: {error}")
    for item in left:
        print(f"still there (run it again): {item}")
    print(f"Then: {remaining}")


def _result(step: dict[str, Any], errors: list[str], left: list[str], dry_run: bool) -> str:
    """One step's result: "planned" (dry run), "failed: <error>" (an error names its object),
    "still there" (the verification found it), else "done"."""
    if dry_run:
        return "planned"
    name = str(step["name"])
    failed = [e for e in errors if f" {name}:" in e or f"/{name.rpartition('/')[2]}:" in e]
    if failed:
        return f"failed: {failed[0].partition(': ')[2]}"
    if any(item.endswith(f" {name}") for item in left):
        return "still there"
    return "done"
