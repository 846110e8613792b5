"""List a live cluster's objects once (for `guardhook audit`), as plain decoded JSON.

Lists go through the `kubernetes` library's typed APIs (auth, TLS, kubeconfig handled there), paged
with `limit`/`continue` as the API server's list chunking documents. A list's items carry no
`kind`/`apiVersion`, so both are filled in from the list. A resource the cluster does not serve
(a CRD that is not installed, e.g. KEDA's ScaledObject) is skipped with a note; a 404 for a
built-in resource (pods, nodes…) means the server is not a Kubernetes API server and is an error.
A kind served at several API versions (resource.k8s.io) is listed at the newest one the server
serves: each version is tried, newest first, and a 404 moves on to the next.

RBAC: a kind that only some checks read (a CRD, the scalers, InferencePools, the DRA kinds,
NodePools, and the coverage report's Namespaces and webhook configurations: `Listed.unchecked`) is
skipped when the list is forbidden (403), with a note naming the resource and what goes unchecked,
and named in `ClusterObjects.unreadable`. A 403 on a kind every check needs (pods, nodes, Services,
StatefulSets, PDBs, LeaderWorkerSets) is `ListForbidden`: a report without them would be empty,
not partial. Every (apiGroup, resource) listed here is what guardhook's ClusterRole
`guardhook-view` (manifests/base/rbac.yaml) must grant; tests/test_rbac.py keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from guardhook.cluster.dra import DRA_VERSIONS, RESOURCE_API_GROUP, TAINT_RULE_VERSIONS
from guardhook.cluster.jobsets import JOBSET_API_VERSION
from guardhook.cluster.lws import LWS_API_GROUP, LWS_API_VERSION
from guardhook.cluster.nodepools import KARPENTER_API_VERSION
from guardhook.cluster.paging import pages, request_page
from guardhook.cluster.podgroups import SCHEDULING_API_VERSION
from guardhook.cluster.view.live import CONNECT_TIMEOUT_SECONDS, PAGE_SIZE, READ_TIMEOUT_SECONDS
from guardhook.wire import KubeObject

ListCall = Callable[..., Any]


class ListForbidden(Exception):
    """RBAC forbids (403) listing a kind every check needs; the message names the resource and the
    role that should grant it, in one line."""


@dataclass(frozen=True)
class Listed:
    """A cluster-wide list call of the typed API: the apiVersion/kind of its items and the
    `resource` (plural) it lists, the name RBAC rules grant. `optional`: the cluster may not serve
    it (a CRD, or autoscaling/v2 before Kubernetes 1.23). `older`: the same kind at older API
    versions, tried in order when the server does not serve this one. `unchecked`: what goes
    unchecked when RBAC forbids the list (then it is skipped with a note); "" for a kind every
    check needs, whose 403 is an error."""

    api_version: str
    kind: str
    resource: str
    call: Callable[[client.ApiClient], ListCall]
    optional: bool = False
    older: tuple[Listed, ...] = ()
    unchecked: str = ""

    @property
    def group(self) -> str:
        """The API group ("" for the core group), as RBAC rules name it."""
        return self.api_version.rpartition("/")[0]

    @property
    def forms(self) -> tuple[Listed, ...]:
        """This version and the older ones, newest first."""
        return (self, *self.older)


def _custom(group: str, version: str, plural: str) -> Callable[[client.ApiClient], ListCall]:
    def bind(api: client.ApiClient) -> ListCall:
        return partial(client.CustomObjectsApi(api).list_cluster_custom_object, group, version, plural)

    return bind


def _crd(api_version: str, kind: str, plural: str, unchecked: str) -> Listed:
    """An optional custom resource at one version, skipped with a note when forbidden."""
    group, _, version = api_version.rpartition("/")
    return Listed(
        api_version, kind, plural, _custom(group, version, plural), optional=True, unchecked=unchecked
    )


def _versions(group: str, versions: tuple[str, ...], kind: str, plural: str, unchecked: str) -> Listed:
    """An optional kind served at `versions` of `group` (newest first)."""
    forms = [_crd(f"{group}/{v}", kind, plural, unchecked) for v in versions]
    return replace(forms[0], older=tuple(forms[1:]))


_DEVICES = "DRA devices are not counted (spare groups, rebuilds, device taints that doom groups)"
_COVERAGE = "the protection gaps it would show are not checked"
_FLOOR = "whether guardhook's admission-policy floor is installed and in sync is not checked"


DRA_LISTS: tuple[Listed, ...] = (
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "ResourceSlice", "resourceslices", _DEVICES),
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "ResourceClaim", "resourceclaims", _DEVICES),
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "ResourceClaimTemplate", "resourceclaimtemplates", _DEVICES),
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "DeviceClass", "deviceclasses", _DEVICES),
    _versions(RESOURCE_API_GROUP, TAINT_RULE_VERSIONS, "DeviceTaintRule", "devicetaintrules", _DEVICES),
)
"""resource.k8s.io: v1 since Kubernetes 1.34, v1beta2 from 1.33, v1beta1 from 1.32; DeviceTaintRule
v1alpha3 (1.33–1.35, behind the DRADeviceTaints gate) then v1beta2."""

LISTS: tuple[Listed, ...] = (
    Listed("v1", "Node", "nodes", lambda api: client.CoreV1Api(api).list_node),
    Listed("v1", "Pod", "pods", lambda api: client.CoreV1Api(api).list_pod_for_all_namespaces),
    Listed("v1", "Service", "services", lambda api: client.CoreV1Api(api).list_service_for_all_namespaces),
    Listed(
        "apps/v1",
        "StatefulSet",
        "statefulsets",
        lambda api: client.AppsV1Api(api).list_stateful_set_for_all_namespaces,
    ),
    Listed(
        "policy/v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        lambda api: client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces,
    ),
    Listed(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        lambda api: client.AutoscalingV2Api(api).list_horizontal_pod_autoscaler_for_all_namespaces,
        optional=True,
        unchecked="HorizontalPodAutoscalers aimed at LeaderWorkerSets are not checked",
    ),
    _crd(
        "keda.sh/v1alpha1",
        "ScaledObject",
        "scaledobjects",
        "KEDA ScaledObjects aimed at LeaderWorkerSets are not checked",
    ),
    # Not skipped when forbidden: without LWSs there are no groups, and the report would be empty.
    Listed(
        LWS_API_VERSION,
        "LeaderWorkerSet",
        "leaderworkersets",
        _custom(LWS_API_GROUP, "v1", "leaderworkersets"),
        optional=True,
    ),
    # Gateway API Inference Extension InferencePools (leader-service): two API groups, not versions
    # of one kind, so each is its own optional list.
    _crd(
        "inference.networking.k8s.io/v1",
        "InferencePool",
        "inferencepools",
        "InferencePools (inference.networking.k8s.io) selecting LWS pods are not checked",
    ),
    _crd(
        "inference.networking.x-k8s.io/v1alpha2",
        "InferencePool",
        "inferencepools",
        "InferencePools (inference.networking.x-k8s.io) selecting LWS pods are not checked",
    ),
    *DRA_LISTS,
    _crd(
        KARPENTER_API_VERSION,
        "NodePool",
        "nodepools",
        "nodes Karpenter NodePools could add are not counted for rebuilds",
    ),
    _crd(
        SCHEDULING_API_VERSION,
        "PodGroup",
        "podgroups",
        "Workload API PodGroups (disruptionMode all) are not counted as groups",
    ),
    _crd(
        SCHEDULING_API_VERSION,
        "Workload",
        "workloads",
        "a Workload's guardhook.io/max-disrupted-groups is not read (its PodGroups' is)",
    ),
    _crd(
        JOBSET_API_VERSION,
        "JobSet",
        "jobsets",
        "JobSets' failure policies are not read (a one-pod Job is no group)",
    ),
    Listed(
        "v1", "Namespace", "namespaces", lambda api: client.CoreV1Api(api).list_namespace, unchecked=_COVERAGE
    ),
    Listed(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        lambda api: client.AdmissionregistrationV1Api(api).list_validating_webhook_configuration,
        unchecked=_COVERAGE,
    ),
    Listed(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        lambda api: client.AdmissionregistrationV1Api(api).list_mutating_webhook_configuration,
        unchecked=_COVERAGE,
    ),
    # The admission-policy floor (guardhook.floor): served from Kubernetes 1.30 (v1).
    Listed(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        lambda api: client.AdmissionregistrationV1Api(api).list_validating_admission_policy,
        optional=True,
        unchecked=_FLOOR,
    ),
    Listed(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        lambda api: client.AdmissionregistrationV1Api(api).list_validating_admission_policy_binding,
        optional=True,
        unchecked=_FLOOR,
    ),
)


@dataclass
class ClusterObjects:
    """Everything listed, plus notes on lists that were skipped (not served by this cluster), and
    the kinds (as resource names: "namespaces") that could not be read."""

    objects: list[KubeObject] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def list_cluster(api: client.ApiClient, lists: tuple[Listed, ...] = LISTS) -> ClusterObjects:
    """List every kind in `lists`. Raises ListForbidden for a 403 on a kind every check needs,
    ApiException for any other error but a 404 (not served) on an optional kind or a 403 on a kind
    with `unchecked`, and urllib3/OSError when the API server cannot be reached."""
    result = ClusterObjects()
    for listed in lists:
        try:
            result.objects += _list_served(api, listed)
        except ApiException as exc:
            if exc.status == 403 or (listed.unchecked and exc.status == 404 and not listed.optional):
                _skip_forbidden(listed, int(exc.status), result)
                continue
            if exc.status != 404:
                raise
            if not listed.optional:
                raise ApiException(
                    status=404,
                    reason=f"the server answered 404 for {listed.kind} ({listed.api_version}), which every "
                    "Kubernetes API server serves: is the kubeconfig's server URL a Kubernetes API server?",
                ) from exc
            versions = ", ".join(form.api_version for form in listed.forms)
            result.notes.append(f"{listed.kind} ({versions}) is not served by this cluster: skipped")
    return result


def rbac_rule(listed: Listed) -> str:
    """The grant `listed` needs, as `kubectl create clusterrole --resource` names it."""
    return f"get/list/watch on {listed.resource}{'.' + listed.group if listed.group else ''}"


def _skip_forbidden(listed: Listed, status: int, result: ClusterObjects) -> None:
    """Record a forbidden (or, for a coverage kind, unserved) list as a note, or raise ListForbidden."""
    if not listed.unchecked:
        raise ListForbidden(
            f"RBAC forbids listing {listed.resource} ({listed.api_version}, HTTP 403), which every check "
            f"needs: grant {rbac_rule(listed)} (ClusterRole guardhook-view, manifests/base/rbac.yaml)"
        )
    result.unreadable.append(listed.resource)
    grant = f"; RBAC: grant {rbac_rule(listed)} (ClusterRole guardhook-view)" if status == 403 else ""
    result.notes.append(f"{listed.kind} cannot be listed (HTTP {status}): {listed.unchecked}{grant}")


def _list_served(api: client.ApiClient, listed: Listed) -> list[KubeObject]:
    """The objects of `listed` at the newest version served; raises the last 404 when none is."""
    for form in listed.older and listed.forms:
        try:
            return list(_list_all(api, form))
        except ApiException as exc:
            if exc.status != 404 or form is listed.forms[-1]:
                raise
    return list(_list_all(api, listed))


def _list_all(api: client.ApiClient, listed: Listed) -> Iterator[KubeObject]:
    call = listed.call(api)
    # Bounded like the reflectors' lists: a server that stops answering fails the audit, never hangs it.
    timeout = (CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)
    for page in pages(lambda token: request_page(call, token, PAGE_SIZE, timeout)):
        for item in page.get("items") or []:
            if isinstance(item, dict):
                item.setdefault("apiVersion", listed.api_version)
                item.setdefault("kind", listed.kind)
                yield item
