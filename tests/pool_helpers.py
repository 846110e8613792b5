"""InferencePool reviews built from the captured Service reviews (s12–s17): the API server's
AdmissionReview shape kept, the object, kind and resource swapped for an InferencePool of
`inference.networking.k8s.io/v1` or `inference.networking.x-k8s.io/v1alpha2` with the Service's
selector (fields as in gateway-api-inference-extension api/v1 and apix/v1alpha2)."""

from __future__ import annotations

import copy
from typing import Any

from conftest import load_review

POOL_VERSIONS = {
    "v1": ("inference.networking.k8s.io", "v1"),
    "v1alpha2": ("inference.networking.x-k8s.io", "v1alpha2"),
}


def pool_spec(version: str, selector: dict[str, str]) -> dict[str, Any]:
    """A valid pool spec of `version` selecting `selector`, on the Service's port 8000."""
    if version == "v1":
        return {
            "selector": {"matchLabels": dict(selector)},
            "targetPorts": [{"number": 8000}],
            "appProtocol": "http",
            "endpointPickerRef": {
                "group": "",
                "kind": "Service",
                "name": "llm-xl-epp",
                "port": {"number": 9002},
                "failureMode": "FailClose",
            },
        }
    return {"selector": dict(selector), "targetPortNumber": 8000, "extensionRef": {"name": "llm-xl-epp"}}


def pool_selector(pool: dict[str, Any]) -> dict[str, str]:
    """The selector map of a pool object of either version."""
    selector = pool["spec"]["selector"]
    return dict(selector.get("matchLabels", selector))


def pool_review(service_review: str, version: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    """The review body of a pool CREATE built from captured Service review `service_review`,
    with the Service's selector unless `selector` is given."""
    body = copy.deepcopy(load_review(service_review))
    request = body["request"]
    service = request["object"]
    group, api_version = POOL_VERSIONS[version]
    for field in ("kind", "requestKind"):
        request[field] = {"group": group, "version": api_version, "kind": "InferencePool"}
    for field in ("resource", "requestResource"):
        request[field] = {"group": group, "version": api_version, "resource": "inferencepools"}
    meta = {k: v for k, v in service["metadata"].items() if k != "managedFields"}
    request["object"] = {
        "apiVersion": f"{group}/{api_version}",
        "kind": "InferencePool",
        "metadata": meta,
        "spec": pool_spec(version, service["spec"]["selector"] if selector is None else selector),
    }
    return body


def as_update(body: dict[str, Any]) -> dict[str, Any]:
    """The same review as an UPDATE of an unchanged object (oldObject = object)."""
    updated = copy.deepcopy(body)
    request = updated["request"]
    request["operation"] = "UPDATE"
    request["oldObject"] = copy.deepcopy(request["object"])
    request["options"] = {
        "kind": "UpdateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "fieldManager": "kubectl-edit",
    }
    return updated
