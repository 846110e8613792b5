"""List a live cluster's objects once (for `guardhook audit`), as plain decoded JSON.

Lists go through the `kubernetes` library's typed APIs (auth, TLS, kubeconfig handled there), paged
with `limit`/`continue` as the API server's list chunking documents. A list's items carry no
`kind`/`apiVersion`, so both are filled in from the list. A resource the cluster does not serve
(a CRD that is not installed, e.g. KEDA's ScaledObject) is skipped with a note; a 404 for a
built-in resource (pods, nodes…) means the server is not a Kubernetes API server and is an error.
A kind served at several API versions (resource.k8s.io) is listed at the newest one the server
serves: each version is tried, newest first, and a 404 moves on to the next. Namespaces and the
webhook configurations are read only for the coverage report: a list that RBAC forbids (403) is
skipped with a note and named in `ClusterObjects.unreadable`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from guardhook.cluster.dra import DRA_VERSIONS, RESOURCE_API_GROUP, TAINT_RULE_VERSIONS
from guardhook.cluster.lws import LWS_API_GROUP, LWS_API_VERSION
from guardhook.cluster.nodepools import KARPENTER_API_GROUP, KARPENTER_API_VERSION
from guardhook.cluster.paging import pages, request_page
from guardhook.cluster.view.live import CONNECT_TIMEOUT_SECONDS, PAGE_SIZE, READ_TIMEOUT_SECONDS
from guardhook.wire import KubeObject

ListCall = Callable[..., Any]


@dataclass(frozen=True)
class Listed:
    """A cluster-wide list call of the typed API and the apiVersion/kind of its items. `optional`:
    the cluster may not serve it (a CRD, or autoscaling/v2 before Kubernetes 1.23). `older`: the
    same kind at older API versions, tried in order when the server does not serve this one."""

    api_version: str
    kind: str
    call: Callable[[client.ApiClient], ListCall]
    optional: bool = False
    older: tuple[Listed, ...] = ()
    may_be_forbidden: bool = False

    @property
    def forms(self) -> tuple[Listed, ...]:
        """This version and the older ones, newest first."""
        return (self, *self.older)


def _custom(group: str, version: str, plural: str) -> Callable[[client.ApiClient], ListCall]:
    def bind(api: client.ApiClient) -> ListCall:
        return partial(client.CustomObjectsApi(api).list_cluster_custom_object, group, version, plural)

    return bind


def _versions(group: str, versions: tuple[str, ...], kind: str, plural: str) -> Listed:
    """An optional kind served at `versions` of `group` (newest first)."""
    forms = [Listed(f"{group}/{v}", kind, _custom(group, v, plural), optional=True) for v in versions]
    return replace(forms[0], older=tuple(forms[1:]))


DRA_LISTS: tuple[Listed, ...] = (
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "ResourceSlice", "resourceslices"),
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "ResourceClaim", "resourceclaims"),
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "ResourceClaimTemplate", "resourceclaimtemplates"),
    _versions(RESOURCE_API_GROUP, DRA_VERSIONS, "DeviceClass", "deviceclasses"),
    _versions(RESOURCE_API_GROUP, TAINT_RULE_VERSIONS, "DeviceTaintRule", "devicetaintrules"),
)
"""resource.k8s.io: v1 since Kubernetes 1.34, v1beta2 from 1.33, v1beta1 from 1.32; DeviceTaintRule
v1alpha3 (1.33–1.35, behind the DRADeviceTaints gate) then v1beta2."""

LISTS: tuple[Listed, ...] = (
    Listed("v1", "Node", lambda api: client.CoreV1Api(api).list_node),
    Listed("v1", "Pod", lambda api: client.CoreV1Api(api).list_pod_for_all_namespaces),
    Listed("v1", "Service", lambda api: client.CoreV1Api(api).list_service_for_all_namespaces),
    Listed("apps/v1", "StatefulSet", lambda api: client.AppsV1Api(api).list_stateful_set_for_all_namespaces),
    Listed(
        "policy/v1",
        "PodDisruptionBudget",
        lambda api: client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces,
    ),
    Listed(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        lambda api: client.AutoscalingV2Api(api).list_horizontal_pod_autoscaler_for_all_namespaces,
        optional=True,
    ),
    Listed(
        "keda.sh/v1alpha1", "ScaledObject", _custom("keda.sh", "v1alpha1", "scaledobjects"), optional=True
    ),
    Listed(
        LWS_API_VERSION,
        "LeaderWorkerSet",
        _custom(LWS_API_GROUP, "v1", "leaderworkersets"),
        optional=True,
    ),
    # Gateway API Inference Extension InferencePools (leader-service): two API groups, not versions
    # of one kind, so each is its own optional list.
    Listed(
        "inference.networking.k8s.io/v1",
        "InferencePool",
        _custom("inference.networking.k8s.io", "v1", "inferencepools"),
        optional=True,
    ),
    Listed(
        "inference.networking.x-k8s.io/v1alpha2",
        "InferencePool",
        _custom("inference.networking.x-k8s.io", "v1alpha2", "inferencepools"),
        optional=True,
    ),
    *DRA_LISTS,
    Listed(
        KARPENTER_API_VERSION,
        "NodePool",
        _custom(KARPENTER_API_GROUP, "v1", "nodepools"),
        optional=True,
    ),
    Listed("v1", "Namespace", lambda api: client.CoreV1Api(api).list_namespace, may_be_forbidden=True),
    Listed(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        lambda api: client.AdmissionregistrationV1Api(api).list_validating_webhook_configuration,
        may_be_forbidden=True,
    ),
    Listed(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        lambda api: client.AdmissionregistrationV1Api(api).list_mutating_webhook_configuration,
        may_be_forbidden=True,
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
    """List every kind in `lists`. Raises ApiException for any error but a 404 (not served) on an
    optional kind, and urllib3/OSError when the API server cannot be reached."""
    result = ClusterObjects()
    for listed in lists:
        try:
            result.objects += _list_served(api, listed)
        except ApiException as exc:
            if listed.may_be_forbidden and exc.status in (403, 404):
                result.unreadable.append(listed.kind.lower() + "s")
                result.notes.append(
                    f"{listed.kind} cannot be listed (HTTP {exc.status}): the protection gaps it would show "
                    "are not checked"
                )
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
