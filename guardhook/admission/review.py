"""Judge one request offline the way the API server runs webhooks: mutating admission first, its
patch applied to the object, then validating admission on the patched object."""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch

from guardhook.admission.engine import Engine, Verdict
from guardhook.wire import AdmissionRequest, AdmissionResponse


def review_both(engine: Engine, request: AdmissionRequest, endpoint: str = "both") -> AdmissionResponse:
    """The combined response for `request`: `endpoint` "mutate" or "validate" runs one phase,
    "both" runs mutate, applies the patch, validates the result and merges the answers (the patch
    of the mutating phase, the decision and warnings of both)."""
    if endpoint in ("mutate", "validate"):
        return engine.judge(request, endpoint).response  # type: ignore[arg-type]
    return verdict_both(engine, request).response


def verdict_both(engine: Engine, request: AdmissionRequest) -> Verdict:
    """Mutate, apply the patch, validate: the merged response plus the decisions of both phases
    (what `check` and `audit` report)."""
    mutating = engine.judge(request, "mutate")
    mutated = mutating.response
    patched = _apply_patch(request, mutated)
    validating = engine.judge(patched, "validate")
    validated = validating.response
    merged: AdmissionResponse = dict(validated)  # type: ignore[assignment]
    if mutated.get("patch"):
        merged["patch"] = mutated["patch"]
        merged["patchType"] = "JSONPatch"
    warnings = [*mutated.get("warnings", []), *validated.get("warnings", [])]
    if warnings:
        merged["warnings"] = warnings
    return Verdict(merged, [*mutating.decisions, *validating.decisions])


def _apply_patch(request: AdmissionRequest, response: AdmissionResponse) -> AdmissionRequest:
    if not response.get("patch") or not isinstance(request.get("object"), dict):
        return request
    ops = json.loads(base64.b64decode(response["patch"]))
    patched: AdmissionRequest = copy.copy(request)
    patched["object"] = jsonpatch.apply_patch(request["object"], ops)
    return patched
