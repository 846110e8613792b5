"""Decode and encode AdmissionReview (admission.k8s.io/v1 and v1beta1).

The API server treats any HTTP error from a webhook as a call failure and applies the webhook's
failurePolicy, so every decodable review is answered HTTP 200 with an AdmissionReview in the
request's apiVersion echoing the request's uid. Anything else is a `ReviewError`, which the HTTP
layer answers with 400 and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from guardhook.wire import ADMISSION_VERSIONS, AdmissionRequest, AdmissionResponse, AdmissionReview

MAX_BODY_BYTES = 6 * 1024 * 1024
"""Cap on a review body: an object and its oldObject may each be up to etcd's 1.5 MiB, JSON-escaped."""

_MAP_FIELDS = ("kind", "resource", "requestKind", "requestResource", "userInfo")
_OBJECT_FIELDS = ("object", "oldObject", "options")
_STRING_FIELDS = ("name", "namespace", "operation", "subResource", "requestSubResource")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
"""admission.k8s.io/v1 AdmissionRequest.operation: the only values the API server sends."""
_METADATA_STRINGS = ("name", "namespace", "generateName", "uid", "resourceVersion")


class ReviewError(ValueError):
    """The body is not a usable AdmissionReview; the message is the reason sent back with 400."""


@dataclass(frozen=True)
class DecodedReview:
    """A decoded review: the apiVersion to answer in, and the request."""

    api_version: str
    request: AdmissionRequest


def decode(body: bytes) -> DecodedReview:
    """Parse and check a review body. Raises ReviewError with the reason (naming the field's path)
    when it is not JSON, not an AdmissionReview of a known version, has no request or uid, has
    mistyped request fields, an operation other than CREATE/UPDATE/DELETE/CONNECT (or none), a
    mistyped object/oldObject metadata (not an object; labels or annotations not strings), or is
    over MAX_BODY_BYTES."""
    if len(body) > MAX_BODY_BYTES:
        raise ReviewError(f"body of {len(body)} bytes is over the {MAX_BODY_BYTES}-byte cap")
    try:
        doc = orjson.loads(body)
    except RecursionError:
        raise ReviewError("body is not JSON: nested too deeply") from None
    except ValueError as exc:
        raise ReviewError(f"body is not JSON: {_json_problem(body, exc)}") from None
    if not isinstance(doc, dict):
        raise ReviewError("body is not a JSON object")
    if doc.get("kind") != "AdmissionReview":
        raise ReviewError(f"kind is {_shown(doc, 'kind')}, expected AdmissionReview")
    version = doc.get("apiVersion")
    if version not in ADMISSION_VERSIONS:
        raise ReviewError(
            f"apiVersion is {_shown(doc, 'apiVersion')}, expected {' or '.join(ADMISSION_VERSIONS)}"
        )
    request = doc.get("request")
    if not isinstance(request, dict):
        raise ReviewError("review has no request")
    _check_request(request)
    return DecodedReview(api_version=version, request=request)  # type: ignore[arg-type]


# orjson's wording for what the client got wrong, where it misleads (invalid UTF-8 is reported as
# "surrogates not allowed") or speaks of the parser rather than the body.
_JSON_PROBLEMS = (
    ("surrogate", "a \\u escape is half of a UTF-16 surrogate pair"),
    ("empty document", "it is empty"),
    ("depth limit", "nested too deeply"),
    ("end of data", "it ends early"),
)


def _json_problem(body: bytes, exc: ValueError) -> str:
    """Why `body` is not JSON, in words about the body, with where (line and column) it is."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8 text ({bad.reason} at byte {bad.start})"
    message = str(getattr(exc, "msg", exc))
    reason = next((ours for theirs, ours in _JSON_PROBLEMS if theirs in message), message)
    line, column = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    if reason == "it is empty" or line is None:
        return reason[:200]
    return f"{reason[:200]} (line {line}, column {column})"


def _shown(doc: dict[str, Any], key: str) -> str:
    """A top-level field's value as a message shows it: missing, null, or its JSON, shortened."""
    if key not in doc:
        return "missing"
    value = doc[key]
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    text = orjson.dumps(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def _check_request(request: dict[str, Any]) -> None:
    uid = request.get("uid")
    if uid is not None and not isinstance(uid, str):
        raise ReviewError(f"request.uid must be a string, got {type(uid).__name__}")
    if not uid:
        raise ReviewError("request has no uid")
    for name in _MAP_FIELDS:
        if name in request and request[name] is not None and not isinstance(request[name], dict):
            raise ReviewError(f"request.{name} must be an object")
    for name in _OBJECT_FIELDS:
        if request.get(name) is not None and not isinstance(request[name], dict):
            raise ReviewError(f"request.{name} must be an object or null")
    for name in _STRING_FIELDS:
        if request.get(name) is not None and not isinstance(request[name], str):
            raise ReviewError(f"request.{name} must be a string")
    for name in ("kind", "resource", "requestKind", "requestResource"):
        for key, value in (request.get(name) or {}).items():
            if not isinstance(value, str):
                raise ReviewError(f"request.{name}.{key} must be a string")
    for name in ("object", "oldObject"):
        if request.get(name) is not None:
            _check_metadata(f"request.{name}", request[name])
    _check_user(request.get("userInfo") or {})
    if "dryRun" in request and request["dryRun"] is not None and not isinstance(request["dryRun"], bool):
        raise ReviewError("request.dryRun must be a boolean")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        shown = "missing" if operation is None else orjson.dumps(operation).decode()[:60]
        raise ReviewError(f"request.operation is {shown}, expected one of {', '.join(OPERATIONS)}")


def _check_metadata(where: str, obj: dict[str, Any]) -> None:
    # Every policy reads an object's metadata (names, labels, owner): mistyped, it would be read as
    # empty and the object allowed, so it fails closed here (a 400 naming the field).
    metadata = obj.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise ReviewError(f"{where}.metadata must be an object")
    for key in _METADATA_STRINGS:
        if metadata.get(key) is not None and not isinstance(metadata[key], str):
            raise ReviewError(f"{where}.metadata.{key} must be a string")
    for key in ("labels", "annotations"):
        value = metadata.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ReviewError(f"{where}.metadata.{key} must be an object of strings")
        for name, text in value.items():
            if not isinstance(text, str):
                raise ReviewError(
                    f"{where}.metadata.{key}[{orjson.dumps(name).decode()[:80]}] must be a string"
                )
    owners = metadata.get("ownerReferences")
    if owners is not None and not (isinstance(owners, list) and all(isinstance(o, dict) for o in owners)):
        raise ReviewError(f"{where}.metadata.ownerReferences must be a list of objects")


def _check_user(user: dict[str, Any]) -> None:
    # Exemptions match on these, so a mistyped one must be a 400, not an error in the engine.
    if user.get("username") is not None and not isinstance(user["username"], str):
        raise ReviewError("request.userInfo.username must be a string")
    groups = user.get("groups")
    if groups is not None and not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
        raise ReviewError("request.userInfo.groups must be a list of strings")


def encode(api_version: str, response: AdmissionResponse) -> AdmissionReview:
    """Wrap a response in an AdmissionReview of `api_version` (the request's version)."""
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
