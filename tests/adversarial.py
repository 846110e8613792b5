"""Malformed and adversarial AdmissionReview bodies (hypothesis strategies) and the invariant every
answer must keep: HTTP 400 with a Status and a reason, or HTTP 200 with a well-formed
AdmissionReview in the request's version echoing its uid. Shared by tests/test_fuzz.py and
bench/fuzz.py; generic over the policy REGISTRY, so each policy that lands is fuzzed too.

The bodies start from the captured reviews (so they reach deep into the policies) and are damaged:
fields set to values of the wrong type, fields deleted, requests retargeted at each policy's
resource/operation with a foreign or garbage object, huge label maps, deep nesting, invalid UTF-8,
truncation, oversized bodies.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from guardhook.admission.codec import MAX_BODY_BYTES, ReviewError, decode
from guardhook.admission.engine import Engine, Verdict
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.policies import REGISTRY
from guardhook.server.app import Runtime, create_app
from guardhook.wire import ADMISSION_VERSIONS

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GUARDHOOK_FIXTURES", REPO.parent / "shared" / "fixtures"))
REVIEW_TEXTS = {path.name: path.read_text() for path in sorted((FIXTURES / "reviews").glob("*.json"))}
REVIEWS = {name: json.loads(text) for name, text in REVIEW_TEXTS.items()}


def fresh_review(name: str) -> dict[str, Any]:
    """A private copy of a captured review (parsing is cheaper than deepcopy)."""
    return json.loads(REVIEW_TEXTS[name])


Path_ = tuple[str | int, ...]

# --- values -----------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.sampled_from(["", "DELETE", "CREATE", "UPDATE", "pods", "eviction", "scale", "0", "-1", "leader"])
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
label_keys = st.sampled_from(
    [
        "leaderworkerset.sigs.k8s.io/name",
        "leaderworkerset.sigs.k8s.io/group-index",
        "leaderworkerset.sigs.k8s.io/worker-index",
        "leaderworkerset.sigs.k8s.io/group-key",
        "leaderworkerset.sigs.k8s.io/size",
        "leaderworkerset.sigs.k8s.io/subgroup-index",
        "app",
        "role",
    ]
) | st.text(max_size=20)


def deep(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


# --- paths into a document --------------------------------------------------------------------


def paths_of(doc: Any, limit: int = 400) -> list[Path_]:
    """Paths to values inside `doc`, breadth first, at most `limit`."""
    found: list[Path_] = []
    queue: deque[tuple[Path_, Any]] = deque([((), doc)])
    while queue and len(found) < limit:
        path, value = queue.popleft()
        children: Iterable[tuple[str | int, Any]] = ()
        if isinstance(value, dict):
            children = islice(value.items(), limit)
        elif isinstance(value, list):
            children = islice(enumerate(value), limit)
        for key, child in children:
            found.append((*path, key))
            queue.append(((*path, key), child))
    return found


def set_at(doc: Any, path: Path_, value: Any) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value


def delete_at(doc: Any, path: Path_) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]


def get_at(doc: Any, path: Path_) -> Any:
    for key in path:
        doc = doc[key]
    return doc


# --- damaged reviews --------------------------------------------------------------------------


@st.composite
def retargeted(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """Point the request at one policy's resource, subresource and operation, so that policy runs
    on whatever object the review carries."""
    request = doc.get("request")
    policy = draw(st.sampled_from(REGISTRY))
    target = draw(st.sampled_from(policy.targets))
    if isinstance(request, dict):
        request["resource"] = {"group": target.group, "version": "v1", "resource": target.resource}
        request["subResource"] = target.subresource or None
        request["operation"] = draw(st.sampled_from(sorted(target.operations)))
        for name in ("object", "oldObject"):
            if draw(st.booleans()):
                other = draw(st.sampled_from(sorted(REVIEWS)))
                request[name] = fresh_review(other)["request"].get(
                    draw(st.sampled_from(["object", "oldObject"]))
                )
    return doc


@st.composite
def damage(draw: st.DrawFn, doc: dict[str, Any], objects_only: bool = False) -> dict[str, Any]:
    """One damaging edit of `doc` (in place), returned. With `objects_only`, only the request's
    object and oldObject are damaged, so the review still decodes and reaches the policies."""
    paths = paths_of(doc)
    kinds = ["set", "set", "delete", "labels", "deep", "retarget", "wrong-top", "swap-object"]
    if objects_only:
        paths = [p for p in paths if p[:2] in (("request", "object"), ("request", "oldObject"))]
        kinds = ["set", "set", "delete", "labels", "deep"]
    kind = draw(st.sampled_from(kinds))
    if kind == "set" and paths:
        set_at(doc, draw(st.sampled_from(paths)), draw(json_values))
    elif kind == "delete" and paths:
        delete_at(doc, draw(st.sampled_from(paths)))
    elif kind == "labels":
        holders = [p for p in paths if p and p[-1] in ("labels", "annotations", "selector", "matchLabels")]
        holders += [
            ("request", "oldObject", "metadata", "labels"),
            ("request", "object", "metadata", "labels"),
        ]
        path = draw(st.sampled_from(holders))
        size = draw(st.sampled_from([0, 1, 300, 3000]))
        filler = draw(st.sampled_from(["", "x", "0", "-1", "9" * 30]))
        labels: dict[str, Any] = {f"k{i}.example.com/l-{i}": filler for i in range(size)}
        labels.update(draw(st.dictionaries(label_keys, json_values, max_size=6)))
        with contextlib.suppress(KeyError, IndexError, TypeError):
            set_at(doc, path, labels)
    elif kind == "deep" and paths:
        depth = draw(st.sampled_from([10, 200, 900, 990, 5000]))
        set_at(doc, draw(st.sampled_from(paths)), deep(draw(scalars), depth, draw(st.booleans())))
    elif kind == "retarget":
        draw(retargeted(doc))
    elif kind == "wrong-top":
        key = draw(st.sampled_from(["kind", "apiVersion", "request", "uid"]))
        if key == "uid":
            if isinstance(doc.get("request"), dict):
                doc["request"]["uid"] = draw(json_values)
        else:
            doc[key] = draw(json_values | st.sampled_from(list(ADMISSION_VERSIONS)))
    elif kind == "swap-object" and isinstance(doc.get("request"), dict):
        doc["request"][draw(st.sampled_from(["object", "oldObject", "options", "userInfo"]))] = draw(
            json_values
        )
    return doc


@st.composite
def damaged_reviews(draw: st.DrawFn, max_edits: int = 4) -> dict[str, Any]:
    """A captured review with 1..max_edits damaging edits."""
    doc = fresh_review(draw(st.sampled_from(sorted(REVIEWS))))
    if draw(st.booleans()):
        draw(retargeted(doc))
    for _ in range(draw(st.integers(min_value=1, max_value=max_edits))):
        draw(damage(doc))
    return doc


def dumps(doc: Any) -> bytes:
    """Serialise a document the way a hostile client might: compact JSON, which may be nested too
    deeply for any JSON parser (that too must be a 400)."""
    try:
        return json.dumps(doc, separators=(",", ":")).encode()
    except RecursionError:
        return b"[" * 100_000


@st.composite
def byte_damaged(draw: st.DrawFn) -> bytes:
    """A serialised review with invalid UTF-8 spliced in, truncated, or wrapped in garbage."""
    body = dumps(draw(damaged_reviews(max_edits=1)))
    kind = draw(st.sampled_from(["utf8", "utf8-in-string", "truncate", "garbage", "bom", "nul"]))
    at = draw(st.integers(min_value=0, max_value=len(body)))
    if kind == "utf8":
        return (
            body[:at]
            + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
            + body[at:]
        )
    if kind == "utf8-in-string":
        quote = body.find(b'"', at)
        quote = quote if quote >= 0 else 0
        return body[: quote + 1] + b"\xc0\xaf\xfe" + body[quote + 1 :]
    if kind == "truncate":
        return body[:at]
    if kind == "garbage":
        return draw(st.binary(max_size=64)) + body[:at]
    if kind == "bom":
        return b"\xef\xbb\xbf" + body
    return body[:at] + b"\x00" + body[at:]


@st.composite
def policy_reviews(draw: st.DrawFn) -> dict[str, Any]:
    """A captured review aimed at one policy, with its object and oldObject damaged: these decode,
    so they exercise the policies rather than the codec."""
    doc = draw(retargeted(fresh_review(draw(st.sampled_from(sorted(REVIEWS))))))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        draw(damage(doc, objects_only=True))
    return doc


bodies = st.one_of(
    policy_reviews().map(dumps),
    damaged_reviews().map(dumps),
    byte_damaged(),
    st.binary(max_size=200),
    json_values.map(dumps),
)


def oversized_body() -> bytes:
    """A valid-looking review just over the body cap (a huge annotation)."""
    doc = copy.deepcopy(REVIEWS["s01-worker-delete.validating.json"])
    doc["request"]["oldObject"]["metadata"]["annotations"] = {"big": "x" * MAX_BODY_BYTES}
    return dumps(doc)


# --- the invariant ----------------------------------------------------------------------------


class BadAnswer(AssertionError):
    """An answer that breaks the contract: a 5xx, a malformed 400, or a malformed review."""


def check_answer(body: bytes, status: int, payload: bytes) -> None:
    """Raise BadAnswer unless (status, payload) is a well-formed answer to `body`."""
    if status == 400:
        status_doc = json.loads(payload)
        if (
            status_doc.get("kind") != "Status"
            or status_doc.get("code") != 400
            or not status_doc.get("message")
        ):
            raise BadAnswer(f"malformed 400: {payload[:300]!r}")
        return
    if status != 200:
        raise BadAnswer(f"HTTP {status}: {payload[:300]!r}")
    try:
        decoded = decode(body)
    except ReviewError as exc:
        raise BadAnswer(f"HTTP 200 for an undecodable body ({exc})") from None
    answer = json.loads(payload)
    check_review(answer, decoded.api_version, decoded.request["uid"])


def check_review(answer: Any, api_version: str, uid: str) -> None:
    """Raise BadAnswer unless `answer` is an AdmissionReview response of `api_version` for `uid`."""
    if answer.get("kind") != "AdmissionReview" or answer.get("apiVersion") != api_version:
        raise BadAnswer(f"not an AdmissionReview of {api_version}: {str(answer)[:300]}")
    response = answer.get("response")
    if not isinstance(response, dict) or response.get("uid") != uid:
        raise BadAnswer(f"response does not echo uid {uid!r}: {str(answer)[:300]}")
    if not isinstance(response.get("allowed"), bool):
        raise BadAnswer(f"allowed is not a boolean: {response}")
    if not response["allowed"]:
        status = response.get("status")
        if (
            not isinstance(status, dict)
            or not isinstance(status.get("code"), int)
            or not status.get("message")
        ):
            raise BadAnswer(f"a denial without a status code and message: {response}")
    if not all(isinstance(w, str) for w in response.get("warnings", [])):
        raise BadAnswer(f"warnings are not strings: {response}")
    if not all(
        isinstance(k, str) and isinstance(v, str) for k, v in response.get("auditAnnotations", {}).items()
    ):
        raise BadAnswer(f"auditAnnotations are not strings: {response}")
    if "patch" in response:
        ops = json.loads(base64.b64decode(response["patch"], validate=True))
        if response.get("patchType") != "JSONPatch" or not isinstance(ops, list):
            raise BadAnswer(f"patch is not a JSONPatch: {response}")


# --- an in-process webhook that also sees every verdict ----------------------------------------


@dataclass
class Harness:
    """The flask app on the embedded fleet, counting answers and policy failures (a policy that
    raises is caught by the engine and logged; here it is a finding)."""

    statuses: dict[int, int] = field(default_factory=dict)
    policy_errors: list[str] = field(default_factory=list)
    policies_run: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        engine = self.engine = Engine(embedded_fleet_view())
        judge: Callable[..., Verdict] = engine.judge

        def watched(request: Any, endpoint: Any = "validate") -> Verdict:
            verdict = judge(request, endpoint)
            self.policy_errors += [d.policy for d in verdict.decisions if d.outcome == "error"]
            for decision in verdict.decisions:
                self.policies_run[decision.policy] = self.policies_run.get(decision.policy, 0) + 1
            return verdict

        engine.judge = watched  # type: ignore[method-assign]
        self.client = create_app(Runtime(engine)).test_client()

    def enabled_policies(self) -> set[str]:
        """Ids of the policies with actions in the default configuration (those that can run)."""
        return {p.id for p in REGISTRY if self.engine.config.settings(p.id).actions}

    def send(self, body: bytes, endpoint: str = "/validate") -> tuple[int, bytes]:
        """POST `body`, check the answer (raises BadAnswer) and the engine (no policy failed)."""
        errors_before = len(self.policy_errors)
        answer = self.client.post(endpoint, data=body, content_type="application/json")
        self.statuses[answer.status_code] = self.statuses.get(answer.status_code, 0) + 1
        check_answer(body, answer.status_code, answer.data)
        if len(self.policy_errors) > errors_before:
            raise BadAnswer(f"policy {self.policy_errors[-1]} raised on this body: {body[:300]!r}")
        return answer.status_code, answer.data
