"""The admission wire format, typed as the Kubernetes API names it.

Source: k8s.io/api/admission/v1 (AdmissionReview, AdmissionRequest, AdmissionResponse) and
k8s.io/apimachinery/pkg/apis/meta/v1 (Status, GroupVersionKind, GroupVersionResource). The v1beta1
shape is field-for-field the same; only `apiVersion` differs.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

ADMISSION_V1 = "admission.k8s.io/v1"
ADMISSION_V1BETA1 = "admission.k8s.io/v1beta1"
ADMISSION_VERSIONS = (ADMISSION_V1, ADMISSION_V1BETA1)

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]

KubeObject = dict[str, Any]
"""Any Kubernetes object as decoded JSON (apiVersion, kind, metadata, spec, status)."""


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class UserInfo(TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict, total=False):
    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str
    requestKind: GroupVersionKind
    requestResource: GroupVersionResource
    requestSubResource: str
    name: str
    namespace: str
    operation: Operation
    userInfo: UserInfo
    object: KubeObject | None
    oldObject: KubeObject | None
    dryRun: bool
    options: KubeObject | None


class Status(TypedDict, total=False):
    """metav1.Status as carried in AdmissionResponse.status."""

    code: int
    message: str
    reason: str
    status: str


class JSONPatchOp(TypedDict):
    op: str
    path: str
    value: NotRequired[Any]


class AdmissionResponse(TypedDict, total=False):
    uid: str
    allowed: bool
    status: Status
    patch: str
    patchType: Literal["JSONPatch"]
    warnings: list[str]
    auditAnnotations: dict[str, str]


class AdmissionReview(TypedDict, total=False):
    apiVersion: str
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest
    response: AdmissionResponse


def is_dry_run(request: AdmissionRequest) -> bool:
    """Whether `request` changes nothing: `request.dryRun` is true, or it is an Eviction whose body
    carries `deleteOptions.dryRun: [All]`.

    The second case is the one `kubectl drain --dry-run=server` makes: the eviction subresource's
    REST handler sends admission `dryRun: false` for the Eviction CREATE and applies the body's
    `deleteOptions.dryRun` only afterwards, to the pod delete it makes (kubernetes
    pkg/registry/core/pod/storage/eviction.go, `propagateDryRun`). A malformed `deleteOptions` is
    not a dry run (the API server refuses such a body before it deletes anything)."""
    if request.get("dryRun") is True:
        return True
    body = request.get("object")
    if not isinstance(body, dict) or body.get("kind") != "Eviction":
        return False
    options = body.get("deleteOptions")
    flags = options.get("dryRun") if isinstance(options, dict) else None
    return isinstance(flags, list) and "All" in flags
